"""``posix_spawn`` through the C library itself, which lets other threads run while it waits.

A spawn holds its caller until the child execs (vfork). CPython's
``os.posix_spawn`` keeps the interpreter's global lock all that time, so a
node daemon whose launches run in a thread of their own (noded/launch_thread.py)
would still apply no switch while a child is on its way to its exec; a call
through ``ctypes`` lets the lock go. What it asks of the child is what the
daemon asked of ``os.posix_spawn``: a session of its own, every signal at its
default and none blocked, the given descriptors opened and moved, and, where
``scheduler`` is given, that policy and priority until its exec.
"""

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
# glibc's flags (spawn.h)
_SETSIGDEF, _SETSIGMASK, _SETSCHEDULER, _SETSID = 0x04, 0x08, 0x20, 0x80
_OPAQUE_BYTES = 1024  # more than glibc's posix_spawnattr_t (336) and posix_spawn_file_actions_t (80)
_SIGSET_BYTES = 128

_EVERY_SIGNAL, _NO_SIGNAL = ctypes.create_string_buffer(_SIGSET_BYTES), ctypes.create_string_buffer(_SIGSET_BYTES)
_libc.sigfillset(_EVERY_SIGNAL)
_libc.sigemptyset(_NO_SIGNAL)

# a file action as os.posix_spawn takes them: (POSIX_SPAWN_OPEN, fd, path, flags, mode) or (POSIX_SPAWN_DUP2, fd, to)
FileAction = tuple[int, int, str, int, int] | tuple[int, int, int]


def spawn(argv: list[str], env: dict[str, str], actions: list[FileAction],
          scheduler: tuple[int, os.sched_param] | None = None) -> int:
    """The child's pid, once it exec'd ``argv[0]``; OSError if it could not."""
    attributes, file_actions = ctypes.create_string_buffer(_OPAQUE_BYTES), ctypes.create_string_buffer(_OPAQUE_BYTES)
    _checked(_libc.posix_spawnattr_init(attributes))
    try:
        _checked(_libc.posix_spawn_file_actions_init(file_actions))
        try:
            for action in actions:
                if action[0] == os.POSIX_SPAWN_OPEN:
                    _, fd, path, flags, mode = action  # type: ignore[misc]
                    _checked(_libc.posix_spawn_file_actions_addopen(file_actions, fd, os.fsencode(path), flags, mode))
                elif action[0] == os.POSIX_SPAWN_DUP2:
                    _checked(_libc.posix_spawn_file_actions_adddup2(file_actions, action[1], action[2]))
                else:
                    raise ValueError(f"not a file action this spawn takes: {action}")
            flags = _SETSID | _SETSIGDEF | _SETSIGMASK
            # KILL and STOP: left as they are
            _checked(_libc.posix_spawnattr_setsigdefault(attributes, _EVERY_SIGNAL))
            _checked(_libc.posix_spawnattr_setsigmask(attributes, _NO_SIGNAL))
            if scheduler is not None:
                flags |= _SETSCHEDULER
                policy, param = scheduler
                priority = ctypes.c_int(param.sched_priority)  # struct sched_param: one int
                _checked(_libc.posix_spawnattr_setschedpolicy(attributes, policy))
                _checked(_libc.posix_spawnattr_setschedparam(attributes, ctypes.byref(priority)))
            _checked(_libc.posix_spawnattr_setflags(attributes, ctypes.c_short(flags)))
            arguments = _strings([os.fsencode(argument) for argument in argv])
            environment = _strings([os.fsencode(f"{name}={value}") for name, value in env.items()])
            pid = ctypes.c_int()
            _checked(_libc.posix_spawn(ctypes.byref(pid), os.fsencode(argv[0]), file_actions, attributes,
                                       arguments, environment))
            return pid.value
        finally:
            _libc.posix_spawn_file_actions_destroy(file_actions)
    finally:
        _libc.posix_spawnattr_destroy(attributes)


def _strings(items: list[bytes]) -> "ctypes.Array[ctypes.c_char_p]":
    """A NULL-terminated array of C strings."""
    return (ctypes.c_char_p * (len(items) + 1))(*items, None)


def _checked(code: int) -> None:
    """These functions return an error number rather than set errno."""
    if code:
        raise OSError(code, os.strerror(code))
