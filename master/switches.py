"""What the master remembers of the switches it sent: each one's latency (from its send to
the last node having applied it, as the nodes' reports say) and how often each row ran as
a partner, for `gang bench switch` and experiment L2."""

from collections import deque
from dataclasses import dataclass

from gangsched.master.stats import SWITCH_BOUNDS_S, Timings
from gangsched.policy.quantum import Selection
from gangsched.protocol.messages import QuantumAccount, SlotSwitch, SwitchStats

SWITCHES_KEPT = 100_000  # about 3 hours at 100 ms


@dataclass
class _Switch:
    sent_ns: int
    expected: int  # reports
    reported: int = 0
    last_applied_ns: int = 0


class SwitchLog:
    def __init__(self) -> None:
        self._switches: dict[int, _Switch] = {}
        self._order: deque[int] = deque()
        self._busy_quanta = 0
        self._paired_quanta = 0
        self._partner_quanta: list[int] = []
        self.latency = Timings(SWITCH_BOUNDS_S)  # of every switch all its nodes reported

    def sent(self, switch: SlotSwitch, chosen: list[Selection], expected: int) -> None:
        """``switch`` went out at a boundary where matrices chose ``chosen`` (their rows run from now);
        ``expected`` nodes will report it. Busy: some matrix chose a row; paired: some chose a partner
        (each partner counted by its row's number, whatever its matrix: experiments run one)."""
        if any(selection.rows for selection in chosen):
            self._busy_quanta += 1
        if any(len(selection.rows) > 1 for selection in chosen):
            self._paired_quanta += 1
        for partner in (row for selection in chosen for row in selection.rows[1:]):
            self._partner_quanta += [0] * (partner + 1 - len(self._partner_quanta))
            self._partner_quanta[partner] += 1
        self._switches[switch.quantum] = _Switch(switch.sent_ns, expected)
        self._order.append(switch.quantum)
        if len(self._order) > SWITCHES_KEPT:
            del self._switches[self._order.popleft()]

    def reported(self, account: QuantumAccount) -> None:
        switch = self._switches.get(account.quantum)
        if switch is not None:
            switch.reported += 1
            switch.last_applied_ns = max(switch.last_applied_ns, account.switch_applied_ns)
            if switch.reported == switch.expected:
                self.latency.observe((switch.last_applied_ns - switch.sent_ns) / 1e9)

    def stats(self, last: int, quantum: int, master_cpu_ns: int) -> SwitchStats:
        """The latencies of the last ``last`` switches every node reported."""
        complete = [
            switch.last_applied_ns - switch.sent_ns
            for switch in (self._switches[q] for q in self._order)
            if switch.expected and switch.reported >= switch.expected
        ]
        return SwitchStats(latencies_ns=complete[-last:], master_cpu_ns=master_cpu_ns, quantum=quantum,
                           busy_quanta=self._busy_quanta, partner_quanta=list(self._partner_quanta))

    @property
    def busy_quanta(self) -> int:
        return self._busy_quanta

    @property
    def paired_quanta(self) -> int:
        return self._paired_quanta
