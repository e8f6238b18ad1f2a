"""S8: a debug tier over part of the machine beside a gang-scheduled batch partition, from the KTH
SP2 log, with and without preemption by suspension (docs/experiments.md, S8).

The log's first ``--jobs`` jobs (10,000 by default, four minutes here; the
whole log, ``--jobs 28489``, takes twenty: the run with preemption looks at
every suspended gang at every start and end of a debug job). The split, by what a user asks:
a job of at most ``S8_DEBUG_WIDTH`` processors with an estimate of at most
``S8_DEBUG_LIMIT_S`` is a debug job (Slurm sites give their debug partitions
such limits); every other job is a batch job.
The debug partition spans the first ``S8_DEBUG_NODES`` of the 100 nodes at
tier 2 under EASY; the batch partition spans all 100 at tier 1 under BGS. With
preemption, the batch partition's gangs are suspended where a debug job needs
their nodes (``preempt_mode = "suspend"``); without, debug jobs wait for the
nodes batch gangs hold (``off``). A third run puts every job in one partition
under BGS, as a site without a debug tier would. The partitions and their
rules are the master's (sim/partitioned.py over policy/tiers.py).
"""

import statistics
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from gangsched import traces
from gangsched.policy.catalog import Choice
from gangsched.policy.interface import Job
from gangsched.policy.partitions import Partition, PreemptMode
from gangsched.sim.baseline import write
from gangsched.sim.engine import simulate
from gangsched.sim.metrics import bounded_slowdown, wait
from gangsched.sim.partitioned import PartitionedPolicy
from gangsched.sim.plots import Panel, save_panels
from gangsched.sim.prepare import prepare
from gangsched.sim.report import Advance, Experiment, ExperimentOptions, markdown_table
from gangsched.sim.sim_job import SimJob
from gangsched.workload.swf import read_swf

S8_PROCS = 100
S8_DEBUG_NODES = 32
S8_DEBUG_WIDTH = 16
S8_DEBUG_LIMIT_S = 1800.0
S8_BATCH = Choice("bgs", mpl=3)
S8_DEBUG = Choice("easy")
S8_RUNS = ("preemption", "no preemption", "one partition")
NODES = {f"n{index:03d}": 1 for index in range(1, S8_PROCS + 1)}  # one processor each, as the log's


def is_debug(job: Job) -> bool:
    return job.procs <= S8_DEBUG_WIDTH and job.estimate <= S8_DEBUG_LIMIT_S


def partitions(run: str) -> list[tuple[Partition, Choice]]:
    if run == "one partition":
        return [(Partition("batch", None, default=True), S8_BATCH)]
    mode = PreemptMode.SUSPEND if run == "preemption" else PreemptMode.OFF
    return [(Partition("batch", None, default=True, priority_tier=1, preempt_mode=mode), S8_BATCH),
            (Partition("debug", frozenset(list(NODES)[:S8_DEBUG_NODES]), priority_tier=2), S8_DEBUG)]


def simulate_run(run: str, trace: Path, count: int) -> list[SimJob]:
    """One run of S8 over the trace's first ``count`` jobs: the jobs, with their start and end."""
    jobs = prepare(read_swf(trace).jobs[:count], S8_PROCS).jobs
    split: Callable[[Job], str] = (lambda job: "batch") if run == "one partition" else \
        (lambda job: "debug" if is_debug(job) else "batch")
    policy = PartitionedPolicy(partitions(run), NODES, max(job.estimate for job in jobs), split)
    simulate(jobs, policy)
    return jobs


def _figures(jobs: list[SimJob], keep: Callable[[SimJob], bool]) -> tuple[int, float, float]:
    kept = [job for job in jobs if keep(job)]
    return len(kept), statistics.fmean(wait(job) for job in kept), statistics.fmean(bounded_slowdown(job)
                                                                                      for job in kept)


def s8(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    trace = options.trace or traces.KTH_SP2
    with ProcessPoolExecutor(max_workers=options.workers) as pool:
        futures = {run: pool.submit(simulate_run, run, trace, options.jobs) for run in S8_RUNS}
        results = {}
        for run, future in futures.items():
            results[run] = future.result()
            advance(run)
    rows: list[dict[str, object]] = []
    table, slowdown_of = [], {}
    for run, jobs in results.items():
        for kind, keep in (("debug", is_debug), ("batch", lambda job: not is_debug(job))):
            count, mean_wait, slowdown = _figures(jobs, keep)
            slowdown_of[(run, kind)] = slowdown
            rows.append({"run": run, "jobs": kind, "count": count, "mean_wait_s": round(mean_wait, 1),
                         "mean_bounded_slowdown": round(slowdown, 2)})
            table.append([run, kind, f"{count:,}", f"{mean_wait:,.0f}", f"{slowdown:,.2f}"])
    write(out, "s8", rows)
    panels = [Panel(f"{kind} jobs", "run", "mean bounded slowdown", log_y=True) for kind in ("debug", "batch")]
    for panel, kind in zip(panels, ("debug", "batch"), strict=True):
        for index, run in enumerate(S8_RUNS):
            panel.add(run, index, slowdown_of[(run, kind)])
    save_panels(out / "s8.png", panels)
    gain = slowdown_of[("no preemption", "debug")] / slowdown_of[("preemption", "debug")]
    return "\n\n".join([
        f"The first {len(next(iter(results.values()))):,} jobs of {trace.name} ({S8_PROCS} nodes). Debug jobs: at most "
        f"{S8_DEBUG_WIDTH} processors and an estimate of at most "
        f"{S8_DEBUG_LIMIT_S / 60:g} minutes, on a tier-2 EASY partition over {S8_DEBUG_NODES} nodes; the rest on a "
        "tier-1 BGS partition (MPL 3) over all of them. Bounded slowdown with a 10 s bound.",
        markdown_table(["run", "jobs", "count", "mean wait (s)", "mean bounded slowdown"], table),
        f"Preemption divides the debug jobs' mean bounded slowdown by {gain:.1f} against no preemption.",
    ])


S8 = Experiment("S8", "a debug tier with and without preemption beside a BGS batch partition, on KTH",
                len(S8_RUNS), s8)
