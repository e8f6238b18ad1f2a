"""A task's files on its node, each made so that nothing a user planted is followed or handed over: the
user's own folder (outputs, counters, scripts), the progress counter, a batch step's script, and an
output another account left at a task's name."""

import contextlib
import os
import pwd
from pathlib import Path

from gangsched.noded.task_identity import LaunchError

PROGRESS_BYTES = 8


def user_folder(parent: Path, user: str, account: pwd.struct_passwd | None) -> Path:
    """``parent/user``, a folder only that user may enter (0700, theirs where the task runs as them);
    others may pass through ``parent`` but not list it (0711). Handed over by its descriptor: a link
    planted in its place is refused, never followed."""
    parent.mkdir(mode=0o711, parents=True, exist_ok=True)
    folder = parent / user
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        raise LaunchError(f"{folder} is not a folder ({error.strerror}): nothing is started in it") from None
    try:
        if account is not None:
            os.fchown(fd, account.pw_uid, account.pw_gid)
    finally:
        os.close(fd)
    return folder


def _new_file(path: Path, account: pwd.struct_passwd | None, mode: int) -> int:
    """A file of the task's made new and given to its user: a descriptor to it. Made with
    O_EXCL|O_NOFOLLOW, so that whatever a user left at its name (a link to a file of root's, above all) is
    removed, never opened, truncated or handed over."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:  # a leftover, or planted: its name goes, whatever it names
        path.unlink()
        fd = os.open(path, flags, mode)
    try:
        if account is not None:
            os.fchown(fd, account.pw_uid, account.pw_gid)
    except BaseException:
        os.close(fd)
        raise
    return fd


def new_progress_file(path: Path, account: pwd.struct_passwd | None) -> int:
    """The task's progress counter, made new (zero): a descriptor the daemon reads it through."""
    fd = _new_file(path, account, 0o600)
    try:
        os.ftruncate(fd, PROGRESS_BYTES)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_script(path: Path, text: str, account: pwd.struct_passwd | None) -> None:
    """A batch step's script, as its user submitted it, for it to run (readable and runnable by them alone)."""
    fd = _new_file(path, account, 0o700)
    with open(fd, "wb", closefd=True) as script:
        script.write(text.encode())


def drop_stale_output(path: Path, account: pwd.struct_passwd) -> None:
    """Remove ``path`` if another account owns it. The folder is the user's alone, so such a file
    is a leftover of an account since removed (or given another uid), from a cluster whose job
    numbers have started again: the task, opening it with the user's rights, would be refused
    its output. unlink removes the name only, whatever it points to."""
    try:
        if path.lstat().st_uid != account.pw_uid:
            path.unlink()
    except FileNotFoundError:
        pass
