"""The first process of every task: it becomes the task, under the task's user.

The node daemon starts it as ``python -I -S launcher.py SPEC_FD STATUS_FD``
(standard library only, no site packages, no environment of the task's, so
nothing the user exports reaches a process of the daemon's rights). It reads
the launch from SPEC_FD (JSON), then, in this order:

1. joins the task's cgroup, where the node has one, and its memory cgroup
   where that is another (cgroup v1), so every process the task ever starts
   is in them before any code of the user's runs;
2. pins itself to the task's cores;
3. takes the user's groups, gid and uid (where it is another user's task);
4. asks the kernel to SIGKILL it when the daemon dies (after the change of
   user, which clears that wish), and gives up if the daemon is already gone;
5. enters the working folder and opens the output, with the user's rights;
6. execs the command, found on the task's PATH.

If a step fails, it writes why to STATUS_FD and exits 127; the daemon reads
that when the task exits and fails the job with it. STATUS_FD closes on exec,
so the daemon reads nothing from a task that started.
"""

import ctypes
import json
import os
import shutil
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1


def main() -> None:
    spec_fd, status_fd = int(sys.argv[1]), int(sys.argv[2])
    os.set_inheritable(status_fd, False)  # closes on exec
    try:
        with os.fdopen(spec_fd, "rb") as spec_file:
            spec = json.loads(spec_file.read())
        start(spec)
    except Exception as error:  # noqa: BLE001 - every failure is the task's reason not to start
        os.write(status_fd, str(error).encode()[:4000])
        os._exit(127)


def start(spec: dict[str, Any]) -> None:
    for group in (spec["cgroup"], spec["memory_cgroup"]):
        if group:
            with open(os.path.join(group, "cgroup.procs"), "w") as procs:
                procs.write("0")  # this process
    if spec["cores"]:
        os.sched_setaffinity(0, spec["cores"])
    user = spec["user"]
    if user is not None:
        os.setgroups(user["groups"])
        os.setresgid(user["gid"], user["gid"], user["gid"])
        os.setresuid(user["uid"], user["uid"], user["uid"])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != spec["daemon_pid"]:
        raise RuntimeError("the node daemon is gone")
    env = spec["env"]
    try:
        os.chdir(spec["cwd"])
    except OSError:
        os.chdir(spec["fallback_cwd"])  # the folder the job was submitted from is not on this node
    try:
        output = os.open(spec["output"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise RuntimeError(f"cannot open the output {spec['output']}: {error.strerror}") from None
    os.dup2(output, 1)
    os.dup2(output, 2)
    command = spec["argv"][0]
    found = command if "/" in command else shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None or not os.access(found, os.X_OK):
        raise RuntimeError(f"command not found on this node: {command}")
    try:
        os.execve(found, spec["argv"], env)
    except OSError as error:
        raise RuntimeError(f"cannot run {command}: {error.strerror}") from None


if __name__ == "__main__":
    main()
