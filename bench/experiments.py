"""The live experiments of Wiseman & Feitelson 2003 (docs/experiments.md): each runs on fresh local clusters and
writes a CSV of what it measured, a PNG plot and a markdown table.

* L1 (Fig. 7 top): mixes of i I/O-bound and 4 - i compute-bound jobs, each on
  every node: barriers/s per job type, strict against paired.
* L2 (Fig. 7 bottom): four I/O-bound jobs: the fraction of quanta each slot
  ran as a partner, best-fit against fair matching.
* L3 (Figs. 8, 9): the mix of two I/O- and two compute-bound jobs on 2, 4 and
  8 nodes, then on 4 nodes with compute phases of 5 to 40 CPU ms.
* L4 (Figs. 10–12): a dynamic Lublin workload at two loads, strict against
  paired, homogeneous and heterogeneous jobs: response time and slowdown.
* L5 (Fig. 13): four phased jobs: measured and predicted utilization and
  pairing over time, with and without sharp-change detection.
"""

import statistics
import time
from pathlib import Path
from typing import Any

from gangsched.bench.dynamic import measure_l4_program, run_l4_case
from gangsched.bench.mix import run_mix, running
from gangsched.bench.mpi_experiment import L6
from gangsched.client.master_client import MasterClient
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import temporary_cluster
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.sim.plots import new_figure
from gangsched.sim.report import Advance, Experiment, ExperimentOptions, markdown_table, write_csv

NODES = 4


# ---------------------------------------------------------------- L1


def l1(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    seconds = options.seconds
    rows: list[dict[str, Any]] = []
    for io in range(NODES + 1):
        for policy in ("strict", "paired"):
            jobs = [SyntheticJob("io")] * io + [SyntheticJob("compute")] * (NODES - io)
            with temporary_cluster(ClusterConfig(nodes=NODES, quantum_ms=1000, pairing=policy)) as client:
                results = run_mix(client, jobs, NODES, seconds, warmup_s=3.0)
            rows += [{"io_jobs": io, "policy": policy, "job": r.job, "kind": r.kind,
                      "barriers_per_s": round(r.barriers_per_s, 3)} for r in results]
            advance(f"L1 mix {io} {policy}")
    write_csv(out / "l1.csv", rows)

    def mean(io: int, policy: str, kind: str) -> float | None:
        found = [r["barriers_per_s"] for r in rows
                 if r["io_jobs"] == io and r["policy"] == policy and r["kind"] == kind]
        return statistics.mean(found) if found else None

    figure = new_figure(figsize=(8, 4), layout="constrained")
    axis = figure.subplots()
    width = 0.2
    for offset, (kind, policy) in enumerate([("compute", "strict"), ("compute", "paired"),
                                             ("io", "strict"), ("io", "paired")]):
        values = [mean(io, policy, kind) or 0.0 for io in range(NODES + 1)]
        axis.bar([io + (offset - 1.5) * width for io in range(NODES + 1)], values, width,
                 label=f"{kind}, {policy}")
    axis.set(xlabel="I/O-bound jobs in the mix of 4", ylabel="barriers/s per job",
             title="L1: barriers per second, strict vs paired gang scheduling")
    axis.legend()
    figure.savefig(out / "l1.png", dpi=120)

    table = []
    for io in range(NODES + 1):
        for kind in ("io", "compute"):
            strict, paired = mean(io, "strict", kind), mean(io, "paired", kind)
            if strict is not None and paired is not None:
                table.append([io, kind, f"{strict:.2f}", f"{paired:.2f}", f"{paired / strict:.2f}"])
    totals = []
    for io in range(NODES + 1):
        strict = sum(r["barriers_per_s"] for r in rows if r["io_jobs"] == io and r["policy"] == "strict")
        paired = sum(r["barriers_per_s"] for r in rows if r["io_jobs"] == io and r["policy"] == "paired")
        totals.append([io, f"{strict:.2f}", f"{paired:.2f}", f"{paired / strict:.2f}"])
    return (
        "Mean barriers/s per job, by kind:\n\n"
        + markdown_table(["I/O jobs", "kind", "strict", "paired", "paired/strict"], table)
        + "\n\nTotal barriers/s of the mix:\n\n"
        + markdown_table(["I/O jobs", "strict", "paired", "paired/strict"], totals)
    )


# ---------------------------------------------------------------- L2


def l2(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    seconds = options.seconds
    rows: list[dict[str, Any]] = []
    for matching in ("best-fit", "fair"):
        config = ClusterConfig(nodes=NODES, quantum_ms=500, pairing="paired", matching=matching)
        with temporary_cluster(config) as client:
            specs = [job_spec(SyntheticJob("io"), NODES) for _ in range(4)]
            with running(client, specs, warmup_s=3.0):
                before = client.switch_stats(1)
                time.sleep(seconds)
                after = client.switch_stats(1)
        busy = after.busy_quanta - before.busy_quanta
        for slot in range(4):
            served = _count(after.partner_quanta, slot) - _count(before.partner_quanta, slot)
            rows.append({"matching": matching, "slot": slot, "partner_fraction": round(served / busy, 4)})
        advance(f"L2 {matching}")
    write_csv(out / "l2.csv", rows)

    figure = new_figure(figsize=(8, 3.5), layout="constrained")
    axes = figure.subplots(1, 2, sharey=True)
    for axis, matching in zip(axes, ("best-fit", "fair")):
        fractions = [r["partner_fraction"] for r in rows if r["matching"] == matching]
        axis.bar(range(4), [100 * f for f in fractions])
        axis.set(title=f"{matching} matching", xlabel="slot", xticks=range(4))
    axes[0].set_ylabel("% of quanta as partner")
    figure.suptitle("L2: how often each slot of four I/O-bound jobs was a partner")
    figure.savefig(out / "l2.png", dpi=120)
    table = [[r["matching"], r["slot"], f"{100 * r['partner_fraction']:.1f} %"] for r in rows]
    return markdown_table(["matching", "slot", "quanta as partner"], table)


def _count(counts: list[int], slot: int) -> int:
    return counts[slot] if slot < len(counts) else 0


# ---------------------------------------------------------------- L3

SIZES = (2, 4, 8)
GRANULARITIES_MS = (5.0, 10.0, 20.0, 40.0)


def l3(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    seconds = options.seconds
    rows: list[dict[str, Any]] = []
    sweeps = [("nodes", float(nodes), nodes, 10.0) for nodes in SIZES]
    sweeps += [("compute_ms", compute_ms, NODES, compute_ms) for compute_ms in GRANULARITIES_MS]
    for sweep, value, nodes, compute_ms in sweeps:
        for policy in ("strict", "paired"):
            jobs = [SyntheticJob("io")] * 2 + [SyntheticJob("compute", compute_ms=compute_ms)] * 2
            config = ClusterConfig(nodes=nodes, quantum_ms=1000, pairing=policy)
            with temporary_cluster(config) as client:
                results = run_mix(client, jobs, nodes, seconds, warmup_s=3.0)
            for kind in ("io", "compute"):
                rates = [r.barriers_per_s for r in results if r.kind == kind]
                rows.append({"sweep": sweep, "value": value, "policy": policy, "kind": kind,
                             "barriers_per_s": round(statistics.mean(rates), 3)})
            advance(f"L3 {sweep}={value:g} {policy}")
    write_csv(out / "l3.csv", rows)

    figure = new_figure(figsize=(10, 4), layout="constrained")
    for axis, sweep, label in zip(figure.subplots(1, 2), ("nodes", "compute_ms"),
                                  ("nodes in the cluster", "compute CPU ms per iteration")):
        for kind in ("compute", "io"):
            for policy, style in (("strict", "--"), ("paired", "-")):
                series = [r for r in rows if r["sweep"] == sweep and r["kind"] == kind and r["policy"] == policy]
                axis.plot([r["value"] for r in series], [r["barriers_per_s"] for r in series], style,
                          marker="o", label=f"{kind}, {policy}")
        axis.set(xlabel=label, ylabel="barriers/s per job")
    figure.axes[0].legend(fontsize=8)
    figure.suptitle("L3: 2 I/O- and 2 compute-bound jobs by cluster size and granularity")
    figure.savefig(out / "l3.png", dpi=120)

    def rate(sweep: str, value: float, policy: str, kind: str) -> float:
        return float(next(r["barriers_per_s"] for r in rows
                          if (r["sweep"], r["value"], r["policy"], r["kind"]) == (sweep, value, policy, kind)))

    table = [
        [sweep, f"{value:g}", kind, f"{rate(sweep, value, 'strict', kind):.2f}",
         f"{rate(sweep, value, 'paired', kind):.2f}",
         f"{rate(sweep, value, 'paired', kind) / rate(sweep, value, 'strict', kind):.2f}"]
        for sweep, value, _, _ in sweeps for kind in ("io", "compute")
    ]
    return markdown_table(["sweep", "value", "kind", "strict", "paired", "paired/strict"], table)


# ---------------------------------------------------------------- L4

LOADS = (0.5, 0.8)
L4_JOBS = 16


def l4(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    seconds = options.seconds
    rows: list[dict[str, Any]] = []
    cost = measure_l4_program()
    for mix in ("homogeneous", "heterogeneous"):
        for load in LOADS:
            for policy in ("strict", "paired"):
                live, simulated = run_l4_case(policy, load, mix == "heterogeneous", L4_JOBS, 10 * seconds, cost)
                rows += [{"mix": mix, "load": load, "policy": policy, "job": index,
                          "response_s": round(r.response_s, 2), "slowdown": round(r.slowdown, 2),
                          "finished": int(r.finished), "simulated_response_s": round(twin.response_s, 2)}
                         for index, (r, twin) in enumerate(zip(live, simulated))]
                advance(f"L4 {mix} load {load} {policy}")
    write_csv(out / "l4.csv", rows)

    def mean(mix: str, load: float, policy: str, metric: str) -> float:
        return float(statistics.mean(r[metric] for r in rows
                                     if (r["mix"], r["load"], r["policy"]) == (mix, load, policy)))

    figure = new_figure(figsize=(10, 4), layout="constrained")
    for axis, metric, label in zip(figure.subplots(1, 2), ("response_s", "slowdown"),
                                   ("mean response time (s)", "mean slowdown")):
        for mix in ("homogeneous", "heterogeneous"):
            for policy, style in (("strict", "--"), ("paired", "-")):
                axis.plot(LOADS, [mean(mix, load, policy, metric) for load in LOADS], style,
                          marker="o", label=f"{policy}, {mix}")
        axis.set(xlabel="offered load", ylabel=label)
    figure.axes[0].legend(fontsize=8)
    figure.suptitle(f"L4: {L4_JOBS} Lublin jobs on 4 nodes")
    figure.savefig(out / "l4.png", dpi=120)

    table = []
    for mix in ("homogeneous", "heterogeneous"):
        for load in LOADS:
            measured = [mean(mix, load, p, "response_s") for p in ("strict", "paired")]
            twin = [mean(mix, load, p, "simulated_response_s") for p in ("strict", "paired")]
            table.append(
                [
                    mix,
                    load,
                    f"{measured[0]:.1f}",
                    f"{measured[1]:.1f}",
                    f"{measured[0] / measured[1]:.2f}",
                    f"{mean(mix, load, 'strict', 'slowdown'):.2f}",
                    f"{mean(mix, load, 'paired', 'slowdown'):.2f}",
                    f"{twin[0]:.1f} ({_off(measured[0], twin[0])})",
                    f"{twin[1]:.1f} ({_off(measured[1], twin[1])})",
                    sum(1 - r["finished"] for r in rows if (r["mix"], r["load"]) == (mix, load)),
                ]
            )
    costs = f"The twin's program cost, measured alone: {cost}."
    return costs + "\n\n" + markdown_table(
        ["jobs", "load", "response strict (s)", "response paired (s)", "strict/paired", "slowdown strict",
         "slowdown paired", "simulated strict (s)", "simulated paired (s)", "unfinished"], table)


def _off(live: float, simulated: float) -> str:
    """How far the simulation is from the live run, as a share of the live figure."""
    return f"{(simulated - live) / live:+.0%}"


# ---------------------------------------------------------------- L5


def l5(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    seconds = options.seconds
    rows: list[dict[str, Any]] = []
    quantum_ms = 500
    for sharp in (20.0, 0.0):
        config = ClusterConfig(nodes=NODES, quantum_ms=quantum_ms, pairing="paired", sharp_change=sharp)
        phased = SyntheticJob("phased", compute_ms=10.0, phases=12, phase_iterations=60)
        with temporary_cluster(config) as client:
            with running(client, [job_spec(phased, NODES) for _ in range(4)], warmup_s=0.0) as job_ids:
                rows += _sample_quanta(client, job_ids, seconds, quantum_ms, "on" if sharp else "off")
        advance(f"L5 sharp-change {'on' if sharp else 'off'}")
    write_csv(out / "l5.csv", rows)

    figure = new_figure(figsize=(14, 5), layout="constrained")
    axes = figure.subplots(2, 4, sharex=True, sharey=True)
    for axis_row, detection in zip(axes, ("on", "off")):
        jobs = sorted({r["job"] for r in rows if r["detection"] == detection})
        for axis, job in zip(axis_row, jobs):
            series = [r for r in rows if r["detection"] == detection and r["job"] == job]
            axis.plot([r["t"] for r in series], [r["util_pct"] for r in series], label="measured")
            axis.plot([r["t"] for r in series], [r["predicted_pct"] for r in series], "--", label="predicted")
            paired = [r["t"] for r in series if r["paired"]]
            axis.plot(paired, [-5] * len(paired), "|", color="green", label="paired")
            axis.set_title(f"job {job}, sharp-change {detection}", fontsize=9)
    axes[0][0].legend(fontsize=7)
    figure.supxlabel("seconds")
    figure.supylabel("CPU utilization %")
    figure.savefig(out / "l5.png", dpi=110)

    table = []
    for detection in ("on", "off"):
        series = [r for r in rows if r["detection"] == detection]
        lags = _detection_lags(series)
        paired = sum(r["paired"] for r in series) / max(1, len(series))
        table.append([detection, len(lags), statistics.median(lags) if lags else "-",
                      max(lags) if lags else "-", f"{100 * paired:.0f} %"])
    return (
        "A phase change is a measured jump of more than 40 points; it is noticed when the\n"
        "prediction is within 20 points of the new phase or the job runs alone to be measured\n"
        "(lag counted in the job's own measured quanta).\n\n"
        + markdown_table(["sharp-change detection", "phase changes", "median lag", "max lag",
                     "job-quanta paired"], table)
    )


def _sample_quanta(
    client: MasterClient, job_ids: list[int], seconds: float, quantum_ms: int, detection: str
) -> list[dict[str, Any]]:
    """One row per job per measured quantum: utilization, prediction, whether it ran paired."""
    rows: list[dict[str, Any]] = []
    seen: dict[int, float | None] = {}
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        view = client.matrix()
        for job in client.jobs(job_ids):
            if job.util_pct is None or seen.get(job.job_id) == job.util_pct:
                continue  # no new measurement since the last look
            seen[job.job_id] = job.util_pct
            row = next((i for i, cells in enumerate(view.rows) if job.job_id in cells), None)
            rows.append({
                "detection": detection, "t": round(time.monotonic() - start, 2), "quantum": view.quantum,
                "job": job.job_id, "util_pct": round(job.util_pct, 1),
                "predicted_pct": round(job.predicted_pct or 0.0, 1),
                "paired": int(row in view.running and len(view.running) == 2),
            })
        time.sleep(quantum_ms / 4000)
    return rows


def _detection_lags(series: list[dict[str, Any]]) -> list[int]:
    lags = []
    for job in sorted({r["job"] for r in series}):
        measured = [r for r in series if r["job"] == job]
        for index in range(1, len(measured)):
            if abs(measured[index]["util_pct"] - measured[index - 1]["util_pct"]) <= 40:
                continue
            new_phase = measured[index]["util_pct"]
            lag = next(
                (k for k, r in enumerate(measured[index:])
                 if abs(r["predicted_pct"] - new_phase) <= 20 or r["predicted_pct"] == 100.0),
                None,
            )
            if lag is not None:
                lags.append(lag)
    return lags


LIVE = {
    "L1": Experiment("L1", "barriers/s of job mixes, strict vs paired (Wiseman & Feitelson, Fig. 7 top)", 10, l1),
    "L2": Experiment("L2", "partner fractions, best-fit vs fair matching (Fig. 7 bottom)", 2, l2),
    "L3": Experiment("L3", "cluster size and compute granularity (Figs. 8, 9)",
                     2 * (len(SIZES) + len(GRANULARITIES_MS)), l3),
    "L4": Experiment("L4", "a dynamic Lublin workload, strict vs paired (Figs. 10-12)",
                     2 * len(LOADS) * 2, l4),
    "L5": Experiment("L5", "phased jobs with and without sharp-change detection (Fig. 13)", 2, l5),
    "L6": L6,
}
