"""The simulated experiments S1-S7 (docs/experiments.md), each writing CSV, PNG and a markdown table
that puts our figures beside the paper's where the paper gives numbers.

S1-S4 use the setting of Zhang et al. 2000 (``sim/baseline.py``); S3, their
Table 1, is ``sim/table1.py``. S5 uses the Downey model on 128 processors as
Zhou & Brent 2001 do. S6 simulates the KTH SP2 trace month by month on 128
processors, as Talby & Feitelson 1999 did (the trace's header says 100). S7, memory, is
``sim/memory_experiment.py``.
"""

import functools
import statistics
import zoneinfo
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from gangsched.policy.catalog import Choice
from gangsched.policy.slack_settings import Heuristic, SlackSettings
from gangsched.sim.baseline import FACTORS, FEW_FACTORS, NODES, baseline, run, write
from gangsched.sim.memory_experiment import S7
from gangsched.sim.partitions_experiment import S8
from gangsched.sim.plots import AXES, Panel, save_panels
from gangsched.sim.report import Advance, Experiment, ExperimentOptions, markdown_table
from gangsched.sim.sim_job import SimJob
from gangsched.sim.sweep import Point, Scenario, point_rows, run_over_workloads
from gangsched.sim.table1 import S3_POLICIES, s3
from gangsched.workload.downey import DowneyParameters, downey_jobs
from gangsched.workload.swf import SwfJob, read_swf

ACCEPTABLE_SLOWDOWN = 20.0


def _highest_acceptable(points: Sequence[Point]) -> str:
    """The utilization at which mean bounded slowdown reaches the acceptable 20, interpolated."""
    curve = sorted((AXES["utilization"](point), AXES["bounded_slowdown"](point)) for point in points)
    previous: tuple[float, float] | None = None
    for utilization, slowdown in curve:
        if slowdown > ACCEPTABLE_SLOWDOWN:
            if previous is None:
                return f"< {utilization:.2f}"  # too slow already at the lightest load
            (low_u, low_s) = previous
            return f"{low_u + (utilization - low_u) * (ACCEPTABLE_SLOWDOWN - low_s) / (slowdown - low_s):.2f}"
        previous = (utilization, slowdown)
    return f"≥ {curve[-1][0]:.2f}"  # never too slow in the range


# ---------------------------------------------------------------- S1


S1_BETAS = [0.2, 0.4, 0.6, 0.8, 1.0]


def s1(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    """Backfilling (BF) and BGS-5 under the β model of overestimation (Zhang et al. 2000, Figs. 5, 8)."""
    scenarios = [Scenario(Choice(policy, mpl=5), factor, "run-times", beta=beta)
                 for policy in ("conservative", "bgs") for beta in S1_BETAS for factor in FEW_FACTORS]
    points = run(baseline(options), NODES, scenarios, options, advance)
    write(out, "s1", [{**row, "beta": point.scenario.beta} for row, point in zip(point_rows(points), points)])
    panels = [Panel(f"{name}: {metric}", "utilization", metric, log_y=metric == "bounded slowdown")
              for name in ("BF", "BGS-5") for metric in ("bounded slowdown", "wait s")]
    for point in points:
        first = 0 if point.scenario.choice.policy == "conservative" else 2
        label = f"β = {point.scenario.beta}"
        panels[first].add(label, AXES["utilization"](point), AXES["bounded_slowdown"](point))
        panels[first + 1].add(label, AXES["utilization"](point), AXES["wait_s"](point))
    save_panels(out / "s1.png", panels)
    rows = []
    for policy, name in (("conservative", "BF"), ("bgs", "BGS-5")):
        for beta in S1_BETAS:
            chosen = [p for p in points if p.scenario.choice.policy == policy and p.scenario.beta == beta]
            rows.append([name, beta, *(f"{AXES['bounded_slowdown'](p):.1f} / {AXES['wait_s'](p):,.0f}"
                                       for p in chosen)])
    return ("Mean bounded slowdown / mean wait (s) by run-time factor. The paper (Figs. 5 and 8, numbers lost "
            "with the figures) finds overestimation matters little.\n\n"
            + markdown_table(["policy", "β", *(f"×{factor}" for factor in FEW_FACTORS)], rows))


# ---------------------------------------------------------------- S2


S2_CONTEXT_SWITCHES = [0.0, 0.01, 0.02, 0.05]
S2_POLICIES = [("conservative", 1), ("gs", 2), ("gs", 3), ("gs", 5), ("bgs", 2), ("bgs", 3), ("bgs", 5)]
S2_PAPER_HIGHEST = {"conservative": 0.76, "gs-5": 0.67, "bgs-2": 0.82, "bgs-5": 0.87}


def _s2_label(choice: Choice) -> str:
    return "BF" if choice.policy == "conservative" else choice.label().upper()


def s2(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    """BF, GS-2/3/5 and BGS-2/3/5 by utilization, at context-switch overheads 0-5 % (Zhang et al. 2000, Figs. 9-12)."""
    scenarios = [Scenario(Choice(policy, mpl=mpl, context_switch=cs), factor, "run-times", beta=0.2)
                 for cs in S2_CONTEXT_SWITCHES for policy, mpl in S2_POLICIES
                 if cs == 0.0 or policy != "conservative" for factor in FEW_FACTORS]
    points = run(baseline(options), NODES, scenarios, options, advance)
    write(out, "s2", [{**row, "cs": point.scenario.choice.context_switch}
                       for row, point in zip(point_rows(points), points)])
    for metric in ("bounded_slowdown", "wait_s", "loss_of_capacity"):
        panels = [Panel(f"CS {cs:.0%}", "utilization", metric.replace("_", " "), log_y=metric != "loss_of_capacity")
                  for cs in S2_CONTEXT_SWITCHES]
        for index, cs in enumerate(S2_CONTEXT_SWITCHES):
            for point in points:
                choice = point.scenario.choice
                if choice.context_switch == cs or choice.policy == "conservative":
                    panels[index].add(_s2_label(choice), AXES["utilization"](point), AXES[metric](point))
        save_panels(out / f"s2_{metric}.png", panels)
    rows = []
    for cs in S2_CONTEXT_SWITCHES:
        for policy, mpl in S2_POLICIES:
            if policy == "conservative" and cs > 0:
                continue
            chosen = [p for p in points if p.scenario.choice.policy == policy
                      and p.scenario.choice.mpl == mpl and p.scenario.choice.context_switch == cs]
            key = "conservative" if policy == "conservative" else f"{policy}-{mpl}"
            paper = S2_PAPER_HIGHEST.get(key) if cs == 0.0 else None
            rows.append([f"{cs:.0%}", _s2_label(chosen[0].scenario.choice), _highest_acceptable(chosen),
                         "" if paper is None else f"{paper:.2f}",
                         f"{statistics.fmean(AXES['loss_of_capacity'](p) for p in chosen):.3f}"])
    return ("The highest utilization with mean bounded slowdown ≤ 20 (interpolated), beside the paper's "
            "(§5.3, at CS 0), and the mean loss of capacity over the workloads.\n\n"
            + markdown_table(["CS", "policy", "utilization at slowdown 20", "paper", "loss of capacity"], rows))


# ---------------------------------------------------------------- S4


S4_QS = [0, 32, 64, 128, 256]
S4_COSTS = [0.0, 10.0, 20.0, 30.0]
S4_WORKLOADS = {2: 1.2, 5: 1.5}


def s4(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    """Slowdown and wait by Q, migration costs 0-30 s, workloads 2 and 5 (Zhang et al., Euro-Par 2000, Figs. 1, 2)."""
    scenarios = [Scenario(Choice(policy, mpl=5, migrate_per_slice=q, migration_cost_s=cost), factor,
                          "run-times", beta=0.2)
                 for factor in S4_WORKLOADS.values() for policy in ("mgs", "mbgs") for cost in S4_COSTS
                 for q in S4_QS]
    points = run(baseline(options), NODES, scenarios, options, advance)
    write(out, "s4", [{**row, "q": p.scenario.choice.migrate_per_slice, "c": p.scenario.choice.migration_cost_s}
                       for row, p in zip(point_rows(points), points)])
    panels = [Panel(f"workload {workload}: {metric.replace('_', ' ')}", "Q (tasks per slice)",
                    metric.replace("_", " "), log_y=True)
              for workload in S4_WORKLOADS for metric in ("bounded_slowdown", "wait_s")]
    rows = []
    for index, (workload, factor) in enumerate(S4_WORKLOADS.items()):
        for policy in ("mgs", "mbgs"):
            for cost in S4_COSTS:
                chosen = [p for p in points if p.load == factor and p.scenario.choice.policy == policy
                          and p.scenario.choice.migration_cost_s == cost]
                label = f"{policy.upper()} C={cost:.0f}"
                for point in chosen:
                    q = float(point.scenario.choice.migrate_per_slice or 0)
                    panels[2 * index].add(label, q, AXES["bounded_slowdown"](point))
                    panels[2 * index + 1].add(label, q, AXES["wait_s"](point))
                rows.append([workload, policy.upper(), f"{cost:.0f}",
                             *(f"{AXES['bounded_slowdown'](p):.1f}" for p in chosen)])
    save_panels(out / "s4.png", panels)
    return ("Mean bounded slowdown by Q (tasks migrated per 200 s slice; Q = 0 is no migration). The paper finds "
            "most of the benefit by Q = 64 and the benefit nearly invariant with C up to 30 s.\n\n"
            + markdown_table(["workload", "policy", "C (s)", *(f"Q={q}" for q in S4_QS)], rows))


# ---------------------------------------------------------------- S5


S5_ALPHAS = [0.0, 0.1, 0.2, 0.4, 0.7, 1.0]
S5_JMAX = [1, 2, 3]
S5_PROCS = 128


def _slowdown(jobs: Sequence[SimJob], keep: Callable[[SimJob], bool]) -> float | None:
    """Zhou & Brent 2001's plain slowdown, response over run time, over the jobs kept."""
    values = [((job.end or 0.0) - job.submit) / job.run_time for job in jobs if job.run_time > 0 and keep(job)]
    return statistics.fmean(values) if values else None


def _is_large(job: SimJob, limit: float) -> bool:
    return job.estimate > limit


def s5(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    """α and j_max sweeps of the queue for large jobs, FCFS and backfilled (Zhou & Brent 2001, Figs. 1-4)."""
    records = downey_jobs(options.jobs, 0.7, seed=1, p=DowneyParameters(procs=S5_PROCS))
    scenarios = [Scenario(Choice("gs-largeq", alpha=alpha, most_large=jmax, large_backfill=backfill),
                          keep_jobs=True)
                 for backfill in (False, True) for jmax in S5_JMAX for alpha in S5_ALPHAS]
    points = run(records, S5_PROCS, scenarios, options, advance)
    longest = max(job.req_time if job.req_time > 0 else job.run_time for job in records)
    panels = [Panel(f"{queue}: {metric}", "α", metric) for queue in ("FCFS queue", "backfilled queue")
              for metric in ("average slots", "slowdown, all jobs", "slowdown, large jobs")]
    rows, csv_rows = [], []
    for point in points:
        choice, jobs = point.scenario.choice, point.jobs or []
        large = _slowdown(jobs, functools.partial(_is_large, limit=choice.alpha * longest))
        every = _slowdown(jobs, lambda job: True)
        first = 3 if choice.large_backfill else 0
        label = f"j_max = {choice.most_large}"
        panels[first].add(label, choice.alpha, point.outcome.average_slots or 0.0)
        panels[first + 1].add(label, choice.alpha, every or 0.0)
        if large is not None:
            panels[first + 2].add(label, choice.alpha, large)
        queue = "backfilled" if choice.large_backfill else "FCFS"
        csv_rows.append(
            {
                "queue": queue,
                "jmax": choice.most_large,
                "alpha": choice.alpha,
                "average_slots": round(point.outcome.average_slots or 0.0, 3),
                "slowdown": round(every or 0.0, 3),
                "slowdown_large": None if large is None else round(large, 3),
                "wait_s": round(point.outcome.summary.wait.mean, 1),
            }
        )
        rows.append([queue, choice.most_large, choice.alpha, f"{point.outcome.average_slots or 0.0:.2f}",
                     f"{every or 0.0:.2f}", "" if large is None else f"{large:.2f}"])
    write(out, "s5", csv_rows)
    save_panels(out / "s5.png", panels, columns=3)
    return ("Downey workload, 128 processors, load 0.7. The paper's curves are lost; it finds α = 0 bounds the "
            "slots from below, α = 1 from above, and limiting large jobs lowers the slowdown of all jobs.\n\n"
            + markdown_table(["queue", "j_max", "α", "average slots", "slowdown", "slowdown of large jobs"], rows))


# ---------------------------------------------------------------- S6


S6_PROCS = 128
S6_SLACK_FACTORS = [1, 3, 5, 7, 9, 11]
S6_HEURISTICS = [Heuristic.AST, Heuristic.AAT, Heuristic.DP, Heuristic.DC, Heuristic.DU]
S6_GAPS = [0.0, 0.5, 1.0, 1.5, 2.0]
S6_MONTHS = ["Sept", "Oct", "Nov", "Dec", "Jan '97", "Feb", "March", "April", "May", "June", "July", "August"]
S6_PAPER_MONTHS = [(440.6, 440.6), (3062.7, 2504.3), (4887.0, 3774.6), (2157.2, 1904.2), (3302.3, 2531.9),
                   (2624.3, 2373.9), (2644.8, 2196.9), (2220.3, 1905.2), (2093.6, 1779.2), (1443.2, 1282.0),
                   (399.9, 354.1), (1941.5, 1670.8)]
S6_PAPER_AVERAGE = (2401.44, 2004.46)
S6_PAPER_SF = {1: 2156, 3: 2004, 5: 2027, 7: 1986, 9: 1939, 11: 1956}
S6_PAPER_HEURISTICS = {Heuristic.AST: 0.165, Heuristic.AAT: 0.13, Heuristic.DP: 0.117, Heuristic.DC: 0.092,
                       Heuristic.DU: 0.081}
S6_PAPER_GAPS = {0.0: 2004.46, 0.5: 2020.40, 1.0: 2044.39, 1.5: 2017.82, 2.0: 2226.17}
S6_EVERY = 5  # every fifth job is favoured in the differential runs
S6_PAPER_PRIORITIES = {"all": (2004.46, 2226.17), "fifth": (None, 1955.28), "others": (None, 2294.0)}


def _months(trace: Path) -> list[list[SwfJob]]:
    """The trace's jobs by calendar month of submission, in the site's time zone."""
    loaded = read_swf(trace)
    start = float(loaded.header.get("UnixStartTime", 0))
    zone = zoneinfo.ZoneInfo(loaded.header.get("TimeZoneString", "UTC"))
    months: dict[tuple[int, int], list[SwfJob]] = defaultdict(list)
    for job in loaded.jobs:
        moment = datetime.fromtimestamp(start + job.submit, zone)
        months[(moment.year, moment.month)].append(job)
    return [months[key] for key in sorted(months)]


def _monthly_waits(points: Sequence[Point]) -> tuple[list[float], float, dict[str, float]]:
    """Mean wait per month, over the year (total wait over total jobs), and for every fifth job
    against the others (the jobs that the differential runs favour, whatever this run did)."""
    per_month, waits, classes = [], [], defaultdict(list)
    for point in points:
        jobs = point.jobs or []
        month = [(job.start or 0.0) - job.submit for job in jobs]
        per_month.append(statistics.fmean(month) if month else 0.0)
        waits += month
        for index, wait in enumerate(month):
            classes["fifth" if index % S6_EVERY == S6_EVERY - 1 else "others"].append(wait)
    return per_month, statistics.fmean(waits), {name: statistics.fmean(values) for name, values in classes.items()}


def s6(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    """Conservative against slack-based backfilling on KTH, month by month (Talby & Feitelson 1999, Tables 1-5)."""
    trace = options.trace
    if trace is None or not trace.exists():
        raise FileNotFoundError("S6 needs the KTH SP2 trace (KTH-SP2-1996-2.1-cln.swf.gz): give --trace PATH")
    months = _months(trace)
    variants: dict[str, Scenario] = {"conservative": Scenario(Choice("conservative"), keep_jobs=True)}
    for factor in S6_SLACK_FACTORS:
        variants[f"sf {factor}"] = Scenario(Choice("slack", slack=SlackSettings(slack_factor=factor)), keep_jobs=True)
    for heuristic in S6_HEURISTICS[1:]:
        variants[heuristic.value] = Scenario(Choice("slack", slack=SlackSettings(heuristic=heuristic)), keep_jobs=True)
    for gap in S6_GAPS[1:]:
        variants[f"gap {gap}"] = Scenario(Choice("slack"), priority_every=S6_EVERY, priority=gap / 2,
                                          keep_jobs=True)
    results: dict[str, list[Point]] = defaultdict(list)
    for month_points in run_over_workloads(months, S6_PROCS, list(variants.values()), options.workers,
                                           done=lambda point: advance(point.label)):
        for name, point in zip(variants, month_points):
            results[name].append(point)
    summary = {name: _monthly_waits(points) for name, points in results.items()}
    csv_rows = [{"variant": name, "month": S6_MONTHS[index] if index < len(S6_MONTHS) else str(index),
                 "jobs": len(point.jobs or []), "awt_s": round(summary[name][0][index], 1)}
                for name, points in results.items() for index, point in enumerate(points)]
    write(out, "s6", csv_rows)
    conservative, slack = summary["conservative"], summary["sf 3"]
    table1 = [[S6_MONTHS[i] if i < len(S6_MONTHS) else i, len(results["conservative"][i].jobs or []),
               f"{conservative[0][i]:,.1f}", f"{slack[0][i]:,.1f}",
               f"{1 - slack[0][i] / conservative[0][i]:.1%}" if conservative[0][i] else "",
               *(f"{value:,.1f}" for value in (S6_PAPER_MONTHS[i] if i < len(S6_PAPER_MONTHS) else ()))]
              for i in range(len(months))]
    table1.append(["Average", sum(len(p.jobs or []) for p in results["conservative"]), f"{conservative[1]:,.1f}",
                   f"{slack[1]:,.1f}", f"{1 - slack[1] / conservative[1]:.1%}",
                   *(f"{value:,.2f}" for value in S6_PAPER_AVERAGE)])
    table2 = [[f"SF {factor}", f"{summary[f'sf {factor}'][1]:,.0f}", S6_PAPER_SF[factor]]
              for factor in S6_SLACK_FACTORS]
    heuristic_awt = {Heuristic.AST: slack[1], **{h: summary[h.value][1] for h in S6_HEURISTICS[1:]}}
    table5 = [[h.name, f"{heuristic_awt[h]:,.0f}", f"{1 - heuristic_awt[h] / conservative[1]:.1%}",
               f"{S6_PAPER_HEURISTICS[h]:.1%}"] for h in S6_HEURISTICS]
    gap_awt = {0.0: slack[1], **{gap: summary[f"gap {gap}"][1] for gap in S6_GAPS[1:]}}
    table4 = [[gap, f"{gap_awt[gap]:,.0f}", f"{S6_PAPER_GAPS[gap]:,.2f}"] for gap in S6_GAPS]
    equal, favoured = summary["sf 3"], summary["gap 2.0"]
    table3 = [[label, f"{equal[1] if key == 'all' else equal[2][key]:,.0f}",
               f"{favoured[1] if key == 'all' else favoured[2][key]:,.0f}",
               "" if S6_PAPER_PRIORITIES[key][0] is None else f"{S6_PAPER_PRIORITIES[key][0]:,.2f}",
               f"{S6_PAPER_PRIORITIES[key][1]:,.2f}"]
              for key, label in (("all", "all jobs"), ("fifth", "every fifth job"), ("others", "the others"))]
    panel = Panel("average wait by month", "month", "wait (s)")
    for index in range(len(months)):
        panel.add("conservative", index, conservative[0][index])
        panel.add("slack SF 3 AST", index, slack[0][index])
    sf_panel = Panel("slack factor", "SF", "average wait (s)")
    for factor in S6_SLACK_FACTORS:
        sf_panel.add("ours", factor, summary[f"sf {factor}"][1])
        sf_panel.add("paper", factor, S6_PAPER_SF[factor])
    save_panels(out / "s6.png", [panel, sf_panel])
    return "\n\n".join([
        "KTH SP2, each month simulated on its own on 128 processors; AWT 2401 s, weights 1, SF 3, AST unless "
        "said. Averages are total wait over total jobs, as in the paper.",
        "**Table 1**: average wait (s), conservative against slack-based backfilling\n\n"
        + markdown_table(["month", "jobs", "conservative", "slack", "better", "paper conservative", "paper slack"],
                         table1),
        "**Table 2**: the slack factor\n\n" + markdown_table(["", "AWT (s)", "paper"], table2),
        "**Table 3**: differential priorities: every fifth job gets UP = PP = 1, the others 0\n\n"
        + markdown_table(["jobs", "equal priorities", "every fifth favoured", "paper equal", "paper favoured"],
                         table3),
        "**Table 4**: the priority gap (UP + PP of the favoured jobs)\n\n"
        + markdown_table(["gap", "AWT (s)", "paper"], table4),
        "**Table 5**: the heuristics, improvement over conservative\n\n"
        + markdown_table(["heuristic", "AWT (s)", "better", "paper"], table5),
    ])


SIMULATED = {
    "S1": Experiment("S1", "backfilling and BGS under the β model (Zhang et al. 2000, Figs. 5, 8)",
                     2 * len(S1_BETAS) * len(FEW_FACTORS), s1),
    "S2": Experiment("S2", "BF, GS and BGS by utilization and context-switch cost (Zhang et al. 2000, Figs. 9-12)",
                     (6 * len(S2_CONTEXT_SWITCHES) + 1) * len(FEW_FACTORS), s2),
    "S3": Experiment("S3", "GS, BGS, MGS, MBGS over nine workloads (Zhang et al. 2000, Table 1)",
                     len(S3_POLICIES) * len(FACTORS), s3, seeds=3),
    "S4": Experiment("S4", "migration: Q and the cost C (Zhang et al., Euro-Par 2000, Figs. 1, 2)",
                     len(S4_WORKLOADS) * 2 * len(S4_COSTS) * len(S4_QS), s4),
    "S5": Experiment("S5", "the queue for large jobs: α and j_max (Zhou & Brent 2001, Figs. 1-4)",
                     2 * len(S5_JMAX) * len(S5_ALPHAS), s5),
    "S6": Experiment("S6", "slack-based priority backfilling on KTH (Talby & Feitelson 1999, Tables 1-5)",
                     12 * (1 + len(S6_SLACK_FACTORS) + len(S6_HEURISTICS) - 1 + len(S6_GAPS) - 1), s6),
    "S7": S7,
    "S8": S8,
}
