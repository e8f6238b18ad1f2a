"""Which rows of the matrix run each quantum: the quantum planner's choice, the node columns
that go out before a switch, the switch itself, and the log of switches sent and reported.

A switch names rows, the same few bytes for every node; each node learns what those
rows mean on it from its column (master/node_columns.py), sent when a new layout
changed it and whenever the node says hello.
"""

from collections import deque

from gangsched.master.clock import Now
from gangsched.master.job_record import Job
from gangsched.master.node_columns import NodeColumns
from gangsched.master.scheduling import LiveScheduler, Processor
from gangsched.master.settings import MasterSettings
from gangsched.master.stats import STEP_BOUNDS_S, Timings
from gangsched.master.switches import SwitchLog
from gangsched.policy.quantum import PlanInput, Selection, planner
from gangsched.protocol.messages import MAX_REPORT_QUANTA, MatrixView, Message, NodeColumn, SlotSwitch


class SlotRotation:
    def __init__(self, settings: MasterSettings, scheduler: LiveScheduler, outbox: deque[tuple[str, Message]]) -> None:
        self._settings = settings
        self._scheduler = scheduler
        self._outbox = outbox
        self._planner = planner(settings.pairing_used(), settings.matching, settings.coordination)
        self.quantum = 0
        self._selection = Selection(())
        self.ran: set[int] = set()  # the jobs the last switch ran, and those started running since
        self._occupied: dict[Processor, int] = {}  # the job whose task runs on each processor this quantum
        self._under_way = False  # whether a quantum runs the selection (between ``choose`` and its end)
        self.columns = NodeColumns()  # each node's column of the matrix, as sent
        self.switch_log = SwitchLog()
        self.tick_time = Timings(STEP_BOUNDS_S)  # of each quantum boundary
        self._boundary_ns = 0  # when the quantum boundary being decided began

    def choose(self, running: list[Job], now: Now) -> None:
        """The rows (and alternates) of the next quantum among the ``running`` jobs; the node columns a new
        layout changed go in the outbox, before the switch (``switch``) that names rows of that layout."""
        self._boundary_ns = now.monotonic_ns
        self.quantum += 1
        scheduler = self._scheduler
        self._selection = self._planner.select(PlanInput(
            layout=scheduler.layout,
            predict=lambda: {job.job_id: job.predictor.predict() for job in running},
            exclusive_jobs={job.job_id for job in running if job.spec.exclusive},
            columns=(1 << len(scheduler.columns)) - 1,
            regroup=lambda predictions: scheduler.regroup(predictions, now.monotonic),
        ))
        self._outbox.extend(self.columns.update(scheduler.rows, scheduler.nodes, self.quantum))
        self.ran = {job_id for row in self._selection.rows for job_id in scheduler.layout[row]}
        self.ran.update(self._selection.alternates)
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
        if not self._under_way:
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

    def switch(self, sent_ns: int) -> SlotSwitch:
        """The switch of the rows ``choose`` chose, as it goes out at ``sent_ns`` (monotonic)."""
        nodes = len(self._scheduler.nodes)
        switch = SlotSwitch(quantum=self.quantum, sent_ns=sent_ns,
                            rows=list(self._selection.rows), alternates=list(self._selection.alternates),
                            report_every=self._report_every(nodes))
        self.switch_log.sent(switch, self._selection, nodes)
        self.tick_time.observe((sent_ns - self._boundary_ns) / 1e9)
        return switch

    def hello_column(self, node: str) -> NodeColumn:
        """The column of a node that (re)registers: it may hold none, or an old one."""
        return self.columns.hello(node, self.quantum)

    def processors_in_turn(self) -> dict[str, int]:
        """Per node, its processors in the row whose turn it is."""
        used: dict[str, int] = {}
        rows = self._scheduler.rows
        for row in self._selection.rows[:1]:
            for processor in rows[row] if row < len(rows) else ():
                used[processor.node] = used.get(processor.node, 0) + 1
        return used

    def matrix_view(self) -> MatrixView:
        scheduler = self._scheduler
        columns = scheduler.columns
        name = scheduler.name
        return MatrixView(
            quantum=self.quantum,
            quantum_ms=self._settings.quantum_ms,
            policy=name if self._planner.name == "strict" else f"{name}/{self._planner.name}",
            nodes=[processor.node for processor in columns],
            processors=[processor.number for processor in columns],
            rows=[[row.get(processor) for processor in columns] for row in scheduler.rows],
            running=list(self._selection.rows),
            alternates=list(self._selection.alternates),
        )

    def _report_every(self, nodes: int) -> int:
        """How many quanta's accounts a node sends in one report: those of ``report_interval_ms``, and
        on a large cluster enough that about ``reports_per_quantum`` reports arrive each quantum."""
        settings = self._settings
        return min(MAX_REPORT_QUANTA, max(1, settings.report_interval_ms // settings.quantum_ms,
                                          -(-nodes // settings.reports_per_quantum)))
