"""A job as the simulator sees it."""

from dataclasses import dataclass

from gangsched.policy.memory import NO_MEMORY, MemoryRequest


@dataclass
class SimJob:
    job_id: int
    submit: float
    run_time: float  # dedicated run time: the work to do
    estimate: float  # what the user asked for; never below run_time after preparation
    procs: int
    user_priority: float = 0.0  # Talby & Feitelson 1999's UP and PP, in [0, 1]; PP -1 marks a user over quota
    political_priority: float = 0.0
    migratable: bool = True
    nodes: int | None = None  # the simulated machines have one processor per node: no shapes
    tasks_per_node: int | None = None
    cpus_per_task: int = 1
    utilization: float = 100.0  # % of its processors' CPU it uses running alone (sim/cpu.py): paired gang scheduling
    memory: MemoryRequest = NO_MEMORY  # per task (the SWF's requested memory, or a model's): S7
    startup_s: float = 0.0  # the first seconds of run_time: a CPU-bound start on a whole core (sim/quanta.py)
    user: str = ""  # the log's user id ("" where it has none, -1)
    group: str = ""  # the log's group id, likewise
    account: str = ""  # the association it is charged to (sim/fair_share.py); "" before one is given
    nice: int = 0
    priority: float = 0.0  # written by the simulator's priorities only (policy/priority_order.py)
    start: float | None = None
    end: float | None = None

    def __post_init__(self) -> None:
        if self.estimate <= 0:
            raise ValueError(f"job {self.job_id}: an estimate must be above 0, got {self.estimate}")
        if not 0 <= self.startup_s <= max(self.run_time, 0.0):
            raise ValueError(f"job {self.job_id}: its start-up must be within its run time, got {self.startup_s} s")

    def __copy__(self) -> "SimJob":
        # copy.copy's own way, through __reduce_ex__, took 3 µs a job: half a second per 100,000 jobs
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        return twin
