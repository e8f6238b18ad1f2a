"""The chaos run's look at every task's cgroup (bench/chaos.py): does a descheduled task run?

Every ``SAMPLE_S`` it reads each task's cgroup v2 group (found from the task processes once a
second) and holds two things against what it read:

* a group frozen at two looks in a row, with the same processes, whose CPU time grew in between ran
  while frozen, if it still lists them at the next look and none of them is exiting. (A task frozen
  as it exits, killed or at its end, runs its exit, 1-4 ms here, which counts in the group, and then
  leaves it: a look in the middle of that exit saw its processes still listed, twice in a 20-minute
  run; on a slow day, once even at the look after, a process exiting.) A look reads the group's
  freezer state before and after its CPU time: the watch may wait for a core between its reads, and
  a switch that thawed the group meanwhile had let it run, in its slot.
* under strict gang scheduling a node runs at most one task a processor (paired, two): a node with
  more unfrozen groups that have a running process than that, at every look for longer than the
  node's own sampling interval (``WATCH_INTERVAL_S``: what a task that resumes itself may run where
  it is watched, not frozen), ran a task outside its slot. (A switch thaws the next row before the
  last one is frozen: a fraction of a millisecond.)
"""

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from gangsched.deploy.local import task_processes
from gangsched.noded.cgroups import cgroup2_mount, cgroup_of
from gangsched.noded.holding import WATCH_INTERVAL_S

SAMPLE_S = 0.02
_RAN_NS = 1_000_000  # CPU a frozen group may show between two looks (none, but for rounding)


@dataclass
class SlotFindings:
    frozen_looks: int = 0  # two looks in a row at a frozen task's group
    ran_while_frozen: list[str] = field(default_factory=list)
    node_looks: int = 0  # looks at a node's groups
    outside_slot: list[str] = field(default_factory=list)  # a node ran more tasks than it may, too long


@dataclass
class _Group:
    task: str  # job and rank, in words
    node: str  # its node daemon's folder


class SlotWatch(threading.Thread):
    def __init__(self, home: Path, most_running: int | None) -> None:
        """``most_running``: the tasks a node may run at once (None: any, as under local scheduling)."""
        super().__init__(daemon=True)
        self._home, self._most = home, most_running
        self.findings = SlotFindings()
        self.stopping = threading.Event()
        self._cgroups = cgroup2_mount() is not None

    def run(self) -> None:
        groups: dict[Path, _Group] = {}
        frozen_before: dict[Path, tuple[str, int]] = {}  # processes and CPU at the last look, where frozen
        suspects: dict[Path, tuple[str, str]] = {}  # frozen groups whose CPU grew: their processes, the finding
        overfull_since: dict[str, float] = {}  # nodes running more tasks than they may: since when
        reported: set[str] = set()  # those of them found so already
        refreshed = 0.0
        while self._cgroups and not self.stopping.wait(SAMPLE_S):
            if time.monotonic() - refreshed > 1.0:  # new tasks, read from their processes now and then
                groups, refreshed = self._groups(), time.monotonic()
            running: Counter[str] = Counter()
            names: dict[str, list[str]] = {}
            for path, group in groups.items():
                try:
                    # frozen before and after its CPU is read: the three reads are not one, and this thread
                    # may wait for a core between them while a switch thaws the group
                    frozen = _frozen(path)
                    usage = _usage_ns(path)
                    processes = (path / "cgroup.procs").read_text()
                    frozen = frozen and _frozen(path)
                except (OSError, ValueError):
                    continue
                before = frozen_before.pop(path, None)
                suspect = suspects.pop(path, None)
                if suspect is not None and suspect[0] == processes and not any(
                        _exiting(int(pid)) for pid in processes.split()):  # not an exit: it ran while frozen
                    self.findings.ran_while_frozen.append(suspect[1])
                if not processes:
                    continue
                if not frozen:
                    if any(_running(int(pid)) for pid in processes.split()):
                        running[group.node] += 1
                        names.setdefault(group.node, []).append(group.task)
                    continue
                if before is not None and before[0] == processes:
                    self.findings.frozen_looks += 1
                    if usage - before[1] > _RAN_NS:
                        # when, to be found in the daemons' logs (kept where an invariant breaks)
                        at = time.strftime("%H:%M:%S", time.localtime()) + f".{int(time.time() * 1000) % 1000:03d}"
                        suspects[path] = processes, f"{group.task}: {(usage - before[1]) / 1e6:.1f} ms by {at}"
                frozen_before[path] = processes, usage
            self.findings.node_looks += len({group.node for group in groups.values()})
            now = time.monotonic()
            overfull = {node for node, count in running.items() if self._most is not None and count > self._most}
            overfull_since = {node: overfull_since.get(node, now) for node in overfull}
            reported &= overfull
            for node, since in overfull_since.items():
                if now - since > WATCH_INTERVAL_S and node not in reported:  # once an episode
                    reported.add(node)
                    self.findings.outside_slot.append(f"{node}: {', '.join(sorted(names[node]))} running at once "
                                                      f"for {(now - since) * 1000:.0f} ms")

    def _groups(self) -> dict[Path, _Group]:
        found = {}
        for process in task_processes(self._home):
            path = cgroup_of(str(process.pid))
            try:
                environment = process.environ()
            except psutil.Error:
                continue
            if path is not None and (path / "cgroup.freeze").exists():
                found[path] = _Group(f"job {environment.get('GANG_JOB_ID')} rank {environment.get('GANG_RANK')}",
                                     path.parent.name)
        return found


def _frozen(group: Path) -> bool:
    return "frozen 1" in (group / "cgroup.events").read_text().splitlines()


def _usage_ns(group: Path) -> int:
    for line in (group / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) * 1000
    raise ValueError("no usage_usec")


_PF_EXITING = 0x4  # a process's flags (/proc/PID/stat): it is in its exit, which no freezer stops


def _running(pid: int) -> bool:
    """Whether the process is running or waits for a core (state R)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] == b"R"


def _exiting(pid: int) -> bool:
    """Whether the process runs its exit (or has gone)."""
    fields = _stat_fields(pid)
    return not fields or bool(int(fields[6]) & _PF_EXITING)


def _stat_fields(pid: int) -> list[bytes]:
    """The fields of /proc/PID/stat after the command's name, from the state on; none if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []
