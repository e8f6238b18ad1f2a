"""What goes to every node at a quantum boundary of any partition's matrix: each node's column
of every matrix it is in, sent before the switch when a layout changed it, then the switch, the
same few bytes for every node, naming what every matrix runs; and the log of the switches sent
and reported.

A switch names rows; each node learns what those rows mean on it from its
column (master/node_columns.py), sent when a new layout changed it and
whenever the node says hello.
"""

from collections import deque
from collections.abc import Iterable, Mapping

from gangsched.master.clock import Now
from gangsched.master.node_columns import NodeColumns, Rows
from gangsched.master.settings import MasterSettings
from gangsched.master.stats import STEP_BOUNDS_S, Timings
from gangsched.master.switches import SwitchLog
from gangsched.policy.quantum import Selection
from gangsched.protocol.messages import MAX_REPORT_QUANTA, Message, NodeColumn, SlotSwitch


class Broadcast:
    def __init__(self, settings: MasterSettings, outbox: deque[tuple[str, Message]]) -> None:
        self._settings = settings
        self._outbox = outbox
        self.quantum = 0  # switches sent
        self.columns = NodeColumns()  # each node's column of each matrix, as sent
        self.switch_log = SwitchLog()
        self.tick_time = Timings(STEP_BOUNDS_S)  # of each quantum boundary: the decisions, the columns, the switch
        self._boundary_ns = 0  # when the boundary being decided began
        self._running: dict[str, tuple[list[int], list[int]]] = {}
        self._chosen: list[Selection] = []
        self._nodes = 0  # up, to apply and report the switch
        self._report_every = 1

    def boundary(self, now: Now) -> None:
        self._boundary_ns = now.monotonic_ns
        self.quantum += 1

    def columns_of(self, layouts: Mapping[str, tuple[Rows, Iterable[str]]]) -> None:
        """The columns the matrices' layouts (partition -> its rows and its nodes) changed go in the outbox,
        before the switch (``switch``) that names rows of those layouts."""
        self._outbox.extend(self.columns.update(layouts, self.quantum))

    def runs(self, running: dict[str, tuple[list[int], list[int]]], chosen: list[Selection], nodes: int,
             quantum_ms: int) -> None:
        """What each matrix runs (its rows, its alternates) from this boundary; ``chosen``: the selections
        the matrices whose boundary it is made; ``nodes``: how many are up to apply the switch;
        ``quantum_ms``: the shortest quantum of any matrix, about how often switches go out. Decided
        here, at the tick, not between the switch's stamp and its send."""
        self._running, self._chosen, self._nodes = running, chosen, nodes
        self._report_every = self._reports_every(nodes, quantum_ms)

    def switch(self, sent_ns: int) -> SlotSwitch:
        """The switch of this boundary, as it goes out at ``sent_ns`` (monotonic)."""
        switch = SlotSwitch(quantum=self.quantum, sent_ns=sent_ns,
                            rows={partition: rows for partition, (rows, _) in self._running.items()},
                            alternates=sorted({job for _, alternates in self._running.values() for job in alternates}),
                            report_every=self._report_every)
        self.switch_log.sent(switch, self._chosen, self._nodes)
        self.tick_time.observe((sent_ns - self._boundary_ns) / 1e9)
        return switch

    def hello_column(self, node: str) -> NodeColumn:
        """The column of a node that (re)registers: it may hold none, or an old one."""
        return self.columns.hello(node, self.quantum)

    def _reports_every(self, nodes: int, quantum_ms: int) -> int:
        """How many switches' accounts a node sends in one report: those of ``report_interval_ms``, and on
        a large cluster enough that about ``reports_per_quantum`` reports arrive each quantum."""
        settings = self._settings
        return min(MAX_REPORT_QUANTA, max(1, settings.report_interval_ms // quantum_ms,
                                          -(-nodes // settings.reports_per_quantum)))
