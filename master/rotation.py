"""Which rows of one partition's matrix run each of its quanta: the quantum planner's choice, and
what runs until its next boundary.

Each matrix rotates at its own quantum; the switch that goes out at a boundary of
any of them names the rows every matrix runs then (master/broadcast.py).
"""

from gangsched.master.clock import Now
from gangsched.master.job_record import Job
from gangsched.master.settings import MasterSettings
from gangsched.policy.live_scheduler import LiveScheduler, Processor
from gangsched.policy.quantum import PlanInput, Selection, planner
from gangsched.protocol.messages import MatrixView


class SlotRotation:
    def __init__(self, settings: MasterSettings, scheduler: LiveScheduler, partition: str) -> None:
        self._settings = settings
        self._scheduler = scheduler
        self._partition = partition
        self._planner = planner(settings.pairing_used(), settings.matching, settings.coordination)
        self.quantum = 0  # this matrix's quanta so far
        self.selection = Selection(())
        self.ran: set[int] = set()  # the jobs the last switch ran, and those started running since
        self._occupied: dict[Processor, int] = {}  # the job whose task runs on each processor this quantum
        self._under_way = False  # whether a quantum runs the selection (between ``choose`` and its end)
        self._foreign: set[str] = set()  # nodes where gangs of other tiers run now (master/tiers.py)

    def shares_with_others(self, nodes: set[str]) -> None:
        """Gangs of other tiers run on ``nodes`` now: a start there waits for its row."""
        self._foreign = nodes

    def choose(self, running: list[Job], now: Now) -> None:
        """The rows (and alternates) of the matrix's next quantum among its ``running`` jobs."""
        self.quantum += 1
        scheduler = self._scheduler
        self.selection = self._planner.select(PlanInput(
            layout=scheduler.layout,
            predict=lambda: {job.job_id: job.predictor.predict() for job in running},
            exclusive_jobs={job.job_id for job in running if job.spec.exclusive},
            columns=(1 << len(scheduler.columns)) - 1,
            regroup=lambda predictions: scheduler.regroup(predictions, now.monotonic),
        ))
        self.ran = {job_id for row in self.selection.rows for job_id in scheduler.layout[row]}
        self.ran.update(self.selection.alternates)
        self._occupied = {processor: job_id for row in scheduler.rows for processor, job_id in row.items()
                          if job_id in self.ran}
        self._under_way = True

    def quantum_over(self) -> None:
        """The quantum under way is over: a job placed before the next choice waits for its switch."""
        self._under_way = False

    def starts_now(self, job_id: int, processors: list[Processor]) -> bool:
        """Whether a job the policy just placed starts running in the quantum under way: all its processors
        are free of the tasks this quantum runs (those of jobs that ended since are free), as an alternate
        runs in idle cells. A slot that a short job frees is used again at once, not after a turn of every
        row (docs/limits.md, "Throughput"); the next switch treats the job as any other of its row. It
        counts as run by this quantum. Rows are not compared: the policy may renumber them when one
        empties."""
        if not self._under_way or any(processor.node in self._foreign for processor in processors):
            return False
        occupied = self._occupied
        for processor in processors:
            occupant = occupied.get(processor)
            if occupant is not None and occupant != job_id and self._scheduler.processors_of(occupant):
                return False
        for processor in processors:
            occupied[processor] = job_id
        self.ran.add(job_id)
        return True

    def running(self, chosen_now: bool) -> tuple[list[int], list[int]]:
        """What runs until the matrix's next boundary, as a switch names it: at its boundary
        (``chosen_now``) the rows chosen and the alternates; between, every job that runs, by id, as
        alternates (the rows chosen then may since have been renumbered: the policy renumbers them
        when one empties), those started at once since the boundary among them (``starts_now``)."""
        if chosen_now:
            return list(self.selection.rows), list(self.selection.alternates)
        return [], sorted(self.ran)

    def processors_in_turn(self) -> dict[str, int]:
        """Per node, its processors in the row whose turn it is."""
        used: dict[str, int] = {}
        rows = self._scheduler.rows
        for row in self.selection.rows[:1]:
            for processor in rows[row] if row < len(rows) else ():
                used[processor.node] = used.get(processor.node, 0) + 1
        return used

    def matrix_view(self) -> MatrixView:
        scheduler = self._scheduler
        columns = scheduler.columns
        name = scheduler.name
        return MatrixView(
            partition=self._partition,
            quantum=self.quantum,
            quantum_ms=self._settings.quantum_ms,
            policy=name if self._planner.name == "strict" else f"{name}/{self._planner.name}",
            nodes=[processor.node for processor in columns],
            processors=[processor.number for processor in columns],
            rows=[[row.get(processor) for processor in columns] for row in scheduler.rows],
            running=list(self.selection.rows),
            alternates=list(self.selection.alternates),
        )
