"""Why a pending job waits, as a typed value; the text users read is rendered from it.

The kinds are Slurm's pending reasons where Slurm has one (``Resources``,
``Priority``, ``Dependency``), and the master's own otherwise. Decisions test
the kind, never the text.
"""

from dataclasses import dataclass
from enum import Enum


class WaitKind(Enum):
    RESOURCES = "Resources"  # the first job in line: what it needs is not free yet
    RESOURCES_MEMORY = "Resources: memory"  # Slurm's word, and which resource
    PRIORITY = "Priority"  # a job ahead of it waits for resources
    DEPENDENCY = "Dependency"  # the jobs it names have not ended as it asks
    BEGIN_TIME = "BeginTime"  # its --begin has not come yet
    NODES = "Nodes"  # wider than the nodes up
    REQUEUED = "Requeued"  # back in the queue after a lost node (the detail: why)
    START_POSTPONED = "StartPostponed"  # placed, but the store could not write its start
    ARRAY_LIMIT = "JobArrayTaskLimit"  # its array runs as many at once as its throttle (%N) allows
    HELD_USER = "JobHeldUser"  # held by its owner (gang hold, gang submit --hold)
    HELD_ADMIN = "JobHeldAdmin"  # held by root: only root releases it
    RESERVATION = "Reservation"  # its reservation's window has not opened
    RESERVED = "ReqNodeNotAvail"  # the nodes it could have are reserved (the detail: by which reservation)
    USER_JOBS = "QOSMaxJobsPerUserLimit"  # its user runs as many jobs as their limit allows
    USER_CPUS = "QOSMaxCpuPerUserLimit"  # ... as many processors
    USER_MEMORY = "QOSMaxMemoryPerUser"  # ... as much memory


@dataclass(frozen=True, slots=True)
class Wait:
    kind: WaitKind
    detail: str = ""

    def text(self) -> str:
        match self.kind:
            case WaitKind.DEPENDENCY:
                return f"Dependency: waits for {self.detail}"
            case WaitKind.BEGIN_TIME:
                return f"BeginTime: eligible at {self.detail}"
            case WaitKind.NODES:
                return f"needs {self.detail}"
            case WaitKind.REQUEUED:
                return f"requeued: {self.detail}"
            case WaitKind.RESERVATION:
                return f"Reservation: {self.detail} has not begun"
            case WaitKind.RESERVED:
                return f"ReqNodeNotAvail, Reserved for {self.detail}"
            case WaitKind.START_POSTPONED:
                return "start postponed: the job store cannot write"
            case _:
                return str(self.kind.value)

    def word(self) -> str:
        """Slurm's one word for it (squeue's %r), where a tool reads one: what the kind names, or the nearest."""
        return _SLURM_WORDS.get(self.kind, self.kind.value)

    @property
    def holds_back(self) -> bool:
        """A reason that keeps the job out of the policy's queue (not its place in line there)."""
        return self.kind in _HOLDING_BACK

    @property
    def keeps_its_turn(self) -> bool:
        """A reason that stays while the job waits in the policy's queue, rather than its place in line."""
        return self.kind in (WaitKind.REQUEUED, WaitKind.START_POSTPONED)


_HOLDING_BACK = {WaitKind.HELD_USER, WaitKind.HELD_ADMIN, WaitKind.DEPENDENCY, WaitKind.BEGIN_TIME,
                 WaitKind.ARRAY_LIMIT, WaitKind.USER_JOBS, WaitKind.USER_CPUS, WaitKind.USER_MEMORY}
# the kinds whose own name is not a word of Slurm's list (squeue(1), JOB REASON CODES)
_SLURM_WORDS = {
    WaitKind.RESOURCES_MEMORY: "Resources",
    WaitKind.NODES: "ReqNodeNotAvail",  # wider than the nodes up: Slurm's word for nodes down or drained
    WaitKind.REQUEUED: "None",  # waits again as a new job does: not yet looked at
    WaitKind.START_POSTPONED: "None",
}
