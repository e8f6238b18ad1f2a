"""Kills what a node daemon leaves behind when it dies, even by ``kill -9``.

The daemon starts it as ``python -I -S watchdog.py KIND TARGET`` with a pipe
on its standard input whose other end only the daemon holds. When the pipe
closes (the daemon exited, however), it kills every process of the node's
tasks and ends:

* ``cgroup``: TARGET is the node's cgroup folder; ``cgroup.kill`` of each
  task's group, then the emptied groups are removed;
* ``process-tree``: TARGET is the daemon's session mark; every process whose
  environment carries it is killed, until none is left.

Further arguments name the node's cgroup v1 folders, where it has them (its
memory groups, noded/memory.py; its pids groups, noded/pids.py): their task
groups, empty once the tasks are killed, and the folders themselves are
removed.

Standard library only, so it starts in milliseconds and holds no sockets. A
node daemon that starts calls the same two functions on what an earlier
daemon of its node left.
"""

import os
import signal
import sys
import time

SESSION_VARIABLE = "GANG_NODE_SESSION"  # "NODE-ID:INSTANCE", in the environment of every task a daemon starts
ROUNDS = 50  # 10 ms apart: a process forking as it is killed is caught on the next round


def main() -> None:
    kind, target = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the daemon
    while sys.stdin.buffer.read(65536):
        pass
    if kind == "cgroup":
        kill_cgroups(target)
    else:
        kill_marked(target)
    for v1_folder in sys.argv[3:]:
        remove_groups(v1_folder)


def kill_cgroups(root: str) -> int:
    """Kill every process of the task groups in ``root`` and remove them, and ``root``; how many there were
    (none where ``root`` is gone: the node's next daemon swept it first)."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return 0
    groups = [os.path.join(root, name) for name in names if os.path.isdir(os.path.join(root, name))]
    killed = 0
    for group in groups:
        with open(os.path.join(group, "cgroup.procs")) as procs:
            killed += len(procs.read().split())
        with open(os.path.join(group, "cgroup.kill"), "w") as kill:
            kill.write("1")
    remove_groups(root, groups)
    return killed


def remove_groups(root: str, groups: list[str] | None = None) -> None:
    """Remove the (emptying) task groups in ``root``, and ``root``."""
    if groups is None:
        groups = [os.path.join(root, name) for name in os.listdir(root) if os.path.isdir(os.path.join(root, name))]
    for _ in range(ROUNDS):
        for group in list(groups):
            try:
                os.rmdir(group)
                groups.remove(group)
            except FileNotFoundError:
                groups.remove(group)
            except OSError:
                pass  # not empty yet
        if not groups:
            break
        time.sleep(0.01)
    try:
        os.rmdir(root)
    except OSError:
        pass  # a group is still dying; the node's next daemon removes it


def kill_marked(session: str) -> int:
    """Kill every process whose session mark starts with ``session`` (a daemon's, or ``NODE-ID:`` for all
    of a node's), until none is left; how many were killed."""
    mark = f"{SESSION_VARIABLE}={session}".encode()
    killed = 0
    for _ in range(ROUNDS):
        found = 0
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as environ:
                    marked = any(entry.startswith(mark) for entry in environ.read().split(b"\0"))
                if marked:
                    os.kill(int(name), signal.SIGKILL)
                    found += 1
            except OSError:
                continue
        killed += found
        if not found:
            break
        time.sleep(0.01)
    return killed


if __name__ == "__main__":
    main()
