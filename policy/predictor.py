"""The utilization predictor of paired gang scheduling (Wiseman & Feitelson 2003, §2.2, eq. 1).

    pred(n) = sum_{i=1..4} w_i * u(n - i),   w = (0.4, 0.3, 0.2, 0.1)

where u(k) is the job's CPU utilization in its k-th quantum, averaged over
its tasks. With fewer than four measured quanta, their weights are renormalized
(reconstructed). A new job is predicted at 100 %, so its first
quantum runs alone and is measured cleanly.

A measured utilization more than ``sharp_change`` points from the previous one is a
phase change (§4.2.3): the history restarts from it, since the older ones
describe the job's previous phase. After a sharp *increase* the job is also
predicted at 100 % for one quantum, to run alone "so its real characteristics
can be observed" (§2.2 speaks of "a sharp increase"). A decrease does not
force that quantum: a job measures lower whenever it is paired or disturbed,
and a too-low guess that lasts one quantum costs little, while a missed
increase pairs two CPU-bound jobs. (Reconstructed; the paper's text says "moves".)
"""

from collections import deque
from dataclasses import dataclass, field

WEIGHTS = (0.4, 0.3, 0.2, 0.1)
ALONE = 100.0


@dataclass
class UtilizationPredictor:
    sharp_change: float | None = 20.0  # None: no sharp-change detection
    history: deque[float] = field(default_factory=lambda: deque(maxlen=len(WEIGHTS)))
    speculative: bool = True  # predict ALONE next: a new job, or one that just changed

    def observe(self, utilization: float) -> None:
        """The job's measured utilization in its latest quantum."""
        jump = utilization - self.history[0] if self.history else 0.0
        changed = self.sharp_change is not None and abs(jump) > self.sharp_change
        if changed:
            self.history.clear()
        self.history.appendleft(utilization)
        self.speculative = changed and jump > 0

    def predict(self) -> float:
        if self.speculative or not self.history:
            return ALONE
        weights = WEIGHTS[: len(self.history)]
        return sum(w * u for w, u in zip(weights, self.history)) / sum(weights)
