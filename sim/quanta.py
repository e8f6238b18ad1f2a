"""The simulator quantum by quantum: strict or paired gang scheduling of a matrix policy, as the live master
runs it.

The fluid engine (sim/engine.py) gives a job in k of R rows the rate k / R. Paired
gang scheduling cannot be seen that way: which rows share a quantum depends on the
jobs' measured utilization, through the predictor, slot homogeneity and the matching
(Wiseman & Feitelson 2003, §2). Here time goes in quanta, and at each boundary the
code the master runs decides (master/core.py ``tick``):

1. each job that ran the whole quantum that ended is measured, as its nodes would
   report it (its CPU over the time it was runnable, against its processors' share),
   and its ``UtilizationPredictor`` observes that;
2. the quantum planner of policy/quantum.py (strict, paired with fair or best-fit
   matching, or local) chooses the rows, regrouping them by the predictions at a new
   round, and the jobs of alternate scheduling;
3. the jobs chosen run until the next boundary at the rates of the CPU model
   (sim/cpu.py): what the tasks sharing a core leave each other. A job's first
   ``startup_s`` seconds of work (an interpreter's start) use a whole core each,
   its other seconds its utilization.

Arrivals and departures are scheduling events at their own instants, as live: the
batch policy places jobs at once, but a job placed during a quantum runs from the next
boundary (its tasks start stopped unless the switch in force named it). A job that
ends frees its core for the others at once. Boundaries fall on multiples of the
quantum from time 0. Deterministic: jobs in id order, ties as in the fluid engine.
"""

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gangsched.policy.columns import Layout, column_list
from gangsched.policy.interface import LivePolicy
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.policy.quantum import Coordination, Matching, Pairing, PlanInput, planner
from gangsched.sim.cpu import Cores, job_rates
from gangsched.sim.engine import RunTotals
from gangsched.sim.sim_job import SimJob

_EPSILON = 1e-9


@dataclass(frozen=True)
class Quanta:
    """What the live master's settings of these names say, and where the columns run."""

    quantum_s: float
    pairing: Pairing = "paired"
    matching: Matching = "fair"
    coordination: Coordination = "gang"
    sharp_change: float | None = 20.0  # None: no sharp-change detection
    cores: Cores | None = None  # None: every column a core of its own

    def __post_init__(self) -> None:
        if self.quantum_s <= 0:
            raise ValueError(f"a quantum must be above 0 s, got {self.quantum_s}")


@dataclass
class _Started:
    job: SimJob
    columns: list[int]
    left: float  # seconds of work still to do
    predictor: UtilizationPredictor
    used_in_quantum: float = 0.0  # utilization × seconds of work, over the quantum so far


def simulate_quanta(jobs: list[SimJob], policy: LivePolicy, procs: int, quanta: Quanta,
                    progress: Callable[[int], None] | None = None) -> RunTotals:
    """Run ``jobs`` under ``policy`` (a matrix policy) quantum by quantum; fills in their start and end."""
    too_wide = [job.job_id for job in jobs if job.procs > procs]
    if too_wide:
        raise ValueError(f"jobs {too_wide[:5]} are wider than the {procs} processors")
    run = _QuantumRun(jobs, policy, procs, quanta, progress)
    run.until_done()
    return run.totals


class _QuantumRun:
    def __init__(self, jobs: list[SimJob], policy: LivePolicy, procs: int, quanta: Quanta,
                 progress: Callable[[int], None] | None) -> None:
        self.pending = sorted(jobs, key=lambda job: (job.submit, job.job_id))
        self.by_id = {job.job_id: job for job in jobs}
        self.policy, self.quanta, self.progress = policy, quanta, progress
        self.cores = quanta.cores or Cores.dedicated(procs)
        if len(self.cores.of_column) < procs:
            raise ValueError(f"the cores name {len(self.cores.of_column)} columns, not {procs}")
        self.columns = (1 << procs) - 1
        self.planner = planner(quanta.pairing, quanta.matching, quanta.coordination)
        self.started: dict[int, _Started] = {}
        self.waiting = 0
        self.next_arrival = 0
        self.wake_at = math.inf
        self.totals = RunTotals()

    def until_done(self) -> None:
        quantum = self.quanta.quantum_s
        now = 0.0
        measured: list[int] = []  # the jobs that run this quantum
        while self.next_arrival < len(self.pending) or self.started or self.wake_at < math.inf:
            if not self.started:  # an idle machine: on to the next event, then to its quantum's end
                now = max(now, min(self._arrival_time(), self.wake_at))
                self._events(now)
                boundary = math.ceil(now / quantum - _EPSILON) * quantum  # events at a boundary come first
                if boundary > now:
                    self._advance(now, boundary, [])
                now, measured = boundary, []
                continue
            self._observe(measured)
            measured = self._select(now)
            boundary = now + quantum
            self._advance(now, boundary, measured)
            now = boundary

    def _arrival_time(self) -> float:
        return self.pending[self.next_arrival].submit if self.next_arrival < len(self.pending) else math.inf

    def _observe(self, ran: list[int]) -> None:
        """Step 1: what each job's nodes report of the quantum that ended."""
        quantum = self.quanta.quantum_s
        for job_id in ran:
            state = self.started.get(job_id)
            if state is not None:
                state.predictor.observe(state.used_in_quantum / quantum)
        for state in self.started.values():
            state.used_in_quantum = 0.0

    def _select(self, now: float) -> list[int]:
        """Step 2: the jobs that run the coming quantum."""
        policy = self.policy

        def regroup(predictions: Mapping[int, float]) -> Layout:
            policy.homogenize(predictions, now)
            return policy.layout()

        selection = self.planner.select(PlanInput(
            layout=policy.layout(),
            predict=lambda: {job_id: state.predictor.predict() for job_id, state in self.started.items()},
            exclusive_jobs=(), columns=self.columns, regroup=regroup,
        ))
        layout = policy.layout()
        chosen = {job_id for row in selection.rows for job_id in layout[row]}
        chosen.update(selection.alternates)
        return sorted(job_id for job_id in chosen if job_id in self.started)

    def _advance(self, now: float, boundary: float, runnable: list[int]) -> None:
        """Step 3: the quantum [now, boundary), with the events that fall in it."""
        running = list(runnable)
        whole_core = 100.0 / self.cores.share
        while True:
            phases = {job_id: self._phase(self.started[job_id], whole_core) for job_id in running}
            rates = job_rates({job_id: (phases[job_id][0], self.started[job_id].columns) for job_id in running},
                              self.cores)
            ends = {job_id: now + phases[job_id][1] / rates[job_id] for job_id in running}
            last_phase = {job_id for job_id in running if phases[job_id][1] == self.started[job_id].left}
            until = min([boundary, self._arrival_time(), self.wake_at, *ends.values()])
            busy = sum(rates[job_id] * self.started[job_id].job.procs for job_id in running)
            if self.waiting:
                self.totals.waiting_seconds += until - now
                self.totals.busy_while_waiting += busy * (until - now)
            for job_id in running:
                state = self.started[job_id]
                state.left -= rates[job_id] * (until - now)
                state.used_in_quantum += phases[job_id][0] * rates[job_id] * (until - now)
            now = until
            finished = [job_id for job_id in running if job_id in last_phase and ends[job_id] <= now + _EPSILON]
            for job_id in finished:
                state = self.started.pop(job_id)
                state.job.end = now
                running.remove(job_id)
                self.policy.finish(state.job, now)
                if self.progress:
                    self.progress(1)
            if finished or now >= self._arrival_time() or now >= self.wake_at:
                self._events(now, scheduled=bool(finished))
            if now >= boundary - _EPSILON:
                return

    @staticmethod
    def _phase(state: _Started, whole_core: float) -> tuple[float, float]:
        """The utilization a job runs at now, and its seconds of work until that changes."""
        starting = state.left - (state.job.run_time - state.job.startup_s)
        return (whole_core, starting) if starting > _EPSILON else (state.job.utilization, state.left)

    def _events(self, now: float, scheduled: bool = False) -> None:
        """Arrivals at ``now`` and the policy's decision; the jobs it places start (stopped)."""
        while self.next_arrival < len(self.pending) and self.pending[self.next_arrival].submit <= now + _EPSILON:
            self.policy.submit(self.pending[self.next_arrival], now)
            self.next_arrival += 1
            self.waiting += 1
            scheduled = True
        if not scheduled and now < self.wake_at:
            return
        decision = self.policy.schedule(now)
        self.wake_at = math.inf if decision.wake_at is None else max(decision.wake_at, now + _EPSILON)
        for row in self.policy.layout():
            for job_id, columns in row.items():
                state = self.started.get(job_id)
                if state is None:
                    job = self.by_id[job_id]
                    job.start = now
                    self.waiting -= 1
                    state = self.started[job_id] = _Started(
                        job, column_list(columns), job.run_time, UtilizationPredictor(self.quanta.sharp_change))
                state.columns = column_list(columns)
        for job_id, seconds in decision.extra_work.items():
            if job_id in self.started:
                self.started[job_id].left += seconds
