"""S7: how memory caps the multiprogramming level of gang scheduling (docs/experiments.md, S7).

Batat & Feitelson (*Gang scheduling with memory considerations*, IPDPS 2000)
argue that a gang scheduler should admit a job only where its memory fits,
rather than time-slice more jobs than memory holds and page. Here every
policy does that (policy/memory.py), so the question is what it costs: with
memory scarce, a node holds fewer rows than the MPL allows.

The workload is the baseline of S1-S4 (the Zhang et al. 2000 model on 320
nodes, run times × 1.3). Each job asks, per processor, what a job of the LANL
CM-5 log asked (its requested memory, field 10): a sample of the log ships in
``traces/``, and a job takes the request of a log job drawn at random (seeded).
The CM-5's nodes had 32 MB, so a request is a fraction of such a node; the
simulated nodes have 1 to 5 of those (scarce to ample), or memory is not
counted at all. Every run is audited: after every scheduling event, no node
may be committed beyond its memory (sim/memory_audit.py).
"""

import random
from pathlib import Path

from gangsched import traces
from gangsched.policy.catalog import Choice
from gangsched.sim.baseline import NODES, baseline, run, write
from gangsched.sim.plots import AXES, Panel, save_panels
from gangsched.sim.report import Advance, Experiment, ExperimentOptions, markdown_table
from gangsched.sim.sweep import Point, Scenario, point_rows
from gangsched.workload.swf import SwfJob, read_swf

S7_FACTOR = 1.3  # the baseline's run times × this: an offered load of about 0.72
S7_POLICIES = ("gs", "bgs")
S7_MPLS = (1, 2, 3, 4, 5)
S7_MEMORY = (1.0, 1.5, 2.0, 3.0, 5.0, None)  # a node's memory, in CM-5 nodes; None: memory not counted


def with_lanl_memory(records: list[SwfJob], seed: int = 1) -> list[SwfJob]:
    """Each job asks what a job of the LANL CM-5 sample asked per processor (KB)."""
    requests = [job.req_memory for job in read_swf(traces.LANL_CM5_SAMPLE).jobs if job.req_memory > 0]
    rng = random.Random(seed)
    return [record._replace(req_memory=rng.choice(requests)) for record in records]


def _memory_label(nodes: float | None) -> str:
    return "not counted" if nodes is None else f"{nodes:g} × 32 MiB"


def s7(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    records = with_lanl_memory(baseline(options))
    grid = [(policy, memory, mpl) for policy in S7_POLICIES for memory in S7_MEMORY for mpl in S7_MPLS]
    bytes_per_node = traces.LANL_CM5_NODE_KB * 1024
    scenarios = [Scenario(Choice(policy, mpl=mpl, memory_per_node=None if memory is None
                                 else int(memory * bytes_per_node)), S7_FACTOR, "run-times", audit_memory=True)
                 for policy, memory, mpl in grid]
    points = run(records, NODES, scenarios, options, advance)
    write(out, "s7", [{**row, "node_memory": _memory_label(memory), "audited_events": point.outcome.memory_events,
                       "peak_committed": None if point.outcome.memory_peak is None
                       else round(point.outcome.memory_peak, 3)}
                      for row, point, (_, memory, _) in zip(point_rows(points), points, grid)])
    panels = {(policy, metric): Panel(f"{policy.upper()}: {metric}", "MPL", metric,
                                      log_y=metric == "bounded slowdown")
              for policy in S7_POLICIES for metric in ("bounded slowdown", "average slots")}
    cells: dict[tuple[str, float | None], list[str]] = {}
    for point, (policy, memory, mpl) in zip(points, grid):
        panels[(policy, "bounded slowdown")].add(_memory_label(memory), mpl, AXES["bounded_slowdown"](point))
        panels[(policy, "average slots")].add(_memory_label(memory), mpl, AXES["average_slots"](point))
        cells.setdefault((policy, memory), []).append(_cell(point))
    save_panels(out / "s7.png", list(panels.values()))
    rows = [[policy.upper(), _memory_label(memory), *row] for (policy, memory), row in cells.items()]
    audited = [point for point in points if point.outcome.memory_events is not None]
    events = sum(point.outcome.memory_events or 0 for point in audited)
    peak = max((point.outcome.memory_peak or 0.0 for point in audited), default=0.0)
    return "\n\n".join([
        f"The S1-S4 baseline (run times × {S7_FACTOR}) on {NODES} nodes; each job asks, per processor, a "
        "request of the LANL CM-5 log (32 MB nodes). Each cell: mean bounded slowdown / utilization / "
        "average slots in use (the effective MPL).",
        markdown_table(["policy", "node memory", *(f"MPL {mpl}" for mpl in S7_MPLS)], rows),
        f"Audit: {events:,} scheduling events checked over {len(audited)} runs with memory; no node was ever "
        f"committed beyond its memory (the most committed: {peak:.0%} of a node).",
        "Batat & Feitelson (IPDPS 2000) find admission by memory better than paging, but their figures "
        "were not found in what could be searched here: there is nothing of theirs to put beside these.",
    ])


def _cell(point: Point) -> str:
    return (f"{AXES['bounded_slowdown'](point):.1f} / {AXES['utilization'](point):.2f} / "
            f"{AXES['average_slots'](point):.2f}")


S7 = Experiment("S7", "memory caps the effective MPL of GS and BGS (Batat & Feitelson 2000)",
                len(S7_POLICIES) * len(S7_MEMORY) * len(S7_MPLS), s7)
