"""What must hold after a chaos run (bench/chaos.py), checked from the master's answers, the node
daemons' logs and the processes left."""

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from gangsched.bench.chaos_mix import Accepted
from gangsched.protocol.records import JobInfo, JobState, UserInfo

# what must hold: each names a list of Invariants, the cases where it does not
INVARIANTS = ("not_ended", "without_reason", "not_started", "lost", "started_twice", "left_processes",
              "left_shared_memory", "dependents_wrong", "accounts_wrong")


@dataclass
class Invariants:
    jobs: int = 0  # accepted
    states: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)  # "state: reason" of the jobs not COMPLETED, numbers as N
    not_ended: list[str] = field(default_factory=list)  # not in a final state when the run ended: why
    without_reason: list[int] = field(default_factory=list)  # ended otherwise than COMPLETED, with no reason
    not_started: list[str] = field(default_factory=list)  # a rank could not start: every program of the mix can
    lost: list[int] = field(default_factory=list)  # accepted, and the master does not know them
    started_twice: list[str] = field(default_factory=list)  # a rank started more often than once (and requeues)
    left_processes: list[str] = field(default_factory=list)  # of any job, running or stopped, after the run
    left_shared_memory: list[str] = field(default_factory=list)  # files in /dev/shm made during the run, left
    dependents_wrong: list[str] = field(default_factory=list)
    accounts_wrong: list[str] = field(default_factory=list)

    def violations(self) -> list[str]:
        """Each invariant that does not hold, in words."""
        found = []
        for name in INVARIANTS:
            items = getattr(self, name)
            if items:
                found.append(f"{name.replace('_', ' ')}: {len(items)}, e.g. {', '.join(map(str, items[:5]))}")
        return found


def check(accepted: dict[int, Accepted], jobs: dict[int, JobInfo], users: list[UserInfo],
          left: list[str], left_files: list[str], home: Path) -> Invariants:
    found = Invariants(jobs=len(accepted), left_processes=left, left_shared_memory=left_files)
    found.states = Counter(info.state.value for info in jobs.values())
    found.reasons = Counter(f"{info.state.value}: {re.sub(r'[0-9]+', 'N', info.reason or '-')}"
                            for info in jobs.values() if info.state.is_final and info.state is not JobState.COMPLETED)
    found.lost = sorted(set(accepted) - set(jobs))
    found.not_started = [f"job {job_id} ({info.reason})" for job_id, info in sorted(jobs.items())
                         if "could not start" in (info.reason or "")]
    found.not_ended = [f"job {job_id} {info.state.value} ({info.reason})" for job_id, info in sorted(jobs.items())
                       if not info.state.is_final]
    found.without_reason = sorted(job_id for job_id, info in jobs.items()
                                  if info.state.is_final and info.state is not JobState.COMPLETED and not info.reason)
    for (job_id, rank), count in sorted(started_tasks(home).items()):
        info = jobs.get(job_id)
        if info is not None and count > 1 + info.requeues:
            found.started_twice.append(f"job {job_id} rank {rank} started {count} times")
    for job_id, info in sorted(jobs.items()):
        for target in info.spec.after_ok + info.spec.after_any:
            wrong = _dependent_wrong(info, jobs.get(target), target in info.spec.after_ok)
            if wrong:
                found.dependents_wrong.append(f"job {job_id} after job {target}: {wrong}")
    found.accounts_wrong = _accounts_wrong(jobs, users)
    return found


def _dependent_wrong(dependent: JobInfo, target: JobInfo | None, needs_success: bool) -> str | None:
    if target is None or not target.state.is_final or not dependent.state.is_final:
        return None  # not decided yet: counted as not ended
    if needs_success and target.state is not JobState.COMPLETED:
        if dependent.state is not JobState.CANCELLED or dependent.start_time is not None:
            return f"its target ended {target.state.value}, yet it is {dependent.state.value}"
        return None
    if dependent.start_time is None:
        return f"its target ended {target.state.value}, yet it never started ({dependent.reason})"
    if target.end_time is not None and dependent.start_time < target.end_time - 1e-3:
        return f"it started {target.end_time - dependent.start_time:.3f} s before its target ended"
    return None


def _accounts_wrong(jobs: dict[int, JobInfo], users: list[UserInfo]) -> list[str]:
    """No user is charged fewer processor-seconds than their ended jobs' records say they ran (the cluster is
    fresh: nothing else ran). Use is charged as it accrues and written with every write of a job, so a crash
    loses no more of it than of the jobs' own time run; a requeued job's earlier runs, and what ran again
    after a restart, count on top."""
    ran: dict[str, float] = {}
    for info in jobs.values():
        if info.state.is_final:
            ran[info.spec.user] = ran.get(info.spec.user, 0.0) + info.ran_s * info.spec.tasks
    counted = {user.user: user.used_processor_s for user in users}
    return [f"{name}: {counted.get(name, 0.0):.3f} processor-s counted, {held:.3f} in the jobs"
            for name, held in sorted(ran.items()) if counted.get(name, 0.0) < held * (1 - 1e-6) - 1e-6]


def started_tasks(home: Path) -> Counter[tuple[int, int]]:
    """How many times each (job, rank) was started, from every node daemon's log (rotated ones too)."""
    starts: Counter[tuple[int, int]] = Counter()
    pattern = re.compile(r"job (\d+) rank (\d+) started as pid")
    for log in (home / "logs").glob("node*.log*"):
        for match in pattern.finditer(log.read_text(errors="replace")):
            starts[int(match.group(1)), int(match.group(2))] += 1
    return starts
