"""`gang bench`: start a fresh local cluster, measure, print the figures, tear it down."""

import getpass
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from gangsched.bench.mix import run_mix
from gangsched.bench.switch import measure_switch
from gangsched.cli.bench_failover import failover
from gangsched.cli.bench_mpi import alone, startup
from gangsched.cli.bench_operations import operations
from gangsched.cli.bench_output import console, print_figures, print_rows, write_rows_csv
from gangsched.cli.bench_pty import pty
from gangsched.cli.bench_slurm import slurm
from gangsched.cli.bench_throughput import throughput
from gangsched.cli.cluster import DOCKER
from gangsched.cli.options import cluster_config, cluster_options
from gangsched.cli.param_types import SIZE
from gangsched.client.master_client import MasterClient
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import temporary_cluster, temporary_local_cluster
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.protocol.sizes import format_size


@click.group()
def bench() -> None:
    """Benchmarks on a fresh local cluster; each prints its figures."""


bench.add_command(alone)
bench.add_command(startup)
bench.add_command(throughput)
bench.add_command(operations)
bench.add_command(failover)
bench.add_command(slurm)
bench.add_command(pty)


@bench.command()
@click.option("--io", "io_jobs", type=click.IntRange(min=0), default=2, show_default=True, help="I/O-bound jobs")
@click.option("--compute", "compute_jobs", type=click.IntRange(min=0), default=2, show_default=True,
              help="compute-bound jobs")
@click.option("--seconds", type=float, default=30.0, show_default=True, help="measurement window")
@click.option("--warmup", type=float, default=3.0, show_default=True, help="seconds before measuring")
@click.option("--compute-ms", type=float, default=10.0, show_default=True, help="CPU ms per compute iteration")
@click.option("--io-writes", type=int, default=20, show_default=True, help="writes per I/O iteration")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
@DOCKER
@cluster_options
def mix(io_jobs: int, compute_jobs: int, seconds: float, warmup: float, compute_ms: float,
        io_writes: int, csv_path: Path | None, docker: bool, **shape: Any) -> None:
    """Barriers/s per job for a mix of I/O- and compute-bound jobs, each on every node."""
    if io_jobs + compute_jobs == 0:
        raise click.UsageError("the mix needs at least one job")
    config = cluster_config(**shape)
    config = config.replace(mpl=max(config.mpl, io_jobs + compute_jobs))
    jobs = [SyntheticJob("io", io_writes=io_writes)] * io_jobs
    jobs += [SyntheticJob("compute", compute_ms=compute_ms)] * compute_jobs
    with _cluster(config, docker) as client:
        results = run_mix(client, jobs, config.nodes, seconds, warmup)
    table = Table(title=f"mix io={io_jobs} compute={compute_jobs}, {config.nodes} nodes, "
                        f"{config.policy}/{config.pairing}, quantum {config.quantum_ms} ms")
    for column in ("job", "kind", "barriers", "seconds", "barriers/s"):
        table.add_column(column, justify="right")
    for result in results:
        table.add_row(str(result.job), result.kind, str(result.barriers), f"{result.seconds:.1f}",
                      f"{result.barriers_per_s:.2f}")
    console.print(table)
    if csv_path:
        write_rows_csv(csv_path, [asdict(result) for result in results])


@bench.command()
@click.option("--switches", type=click.IntRange(min=10), default=1000, show_default=True)
@click.option("--baseline-s", type=float, default=20.0, show_default=True,
              help="seconds the tasks run unscheduled, before and after, for the overhead (against the median "
                   "of its 5 s segments)")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True,
              help="split the nodes into this many partitions of one tier, each with its own quantum (--quantum-ms "
                   "x 1, 1.25, 1.5, ...), two rows of spinning gangs in each")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
@DOCKER
@cluster_options
def switch(switches: int, baseline_s: float, partitions: int, csv_path: Path | None, docker: bool,
           **shape: Any) -> None:
    """Switch latency (master send -> last node applied), master CPU and overhead."""
    import tempfile

    from gangsched.bench.switch import split_into_partitions

    with tempfile.TemporaryDirectory() as folder:
        if partitions > 1:
            try:
                shape["config_file"] = split_into_partitions(Path(folder), shape["nodes"], partitions,
                                                             shape["quantum_ms"] or 100)
            except ValueError as error:
                raise click.UsageError(str(error)) from None
        config = cluster_config(**shape)
        result = measure_switch(_cluster(config, docker), config.nodes, switches, baseline_s)
    split = f"{partitions} partitions, " if partitions > 1 else ""
    table = Table(title=f"{result.switches} switches, {config.nodes} nodes, {split}quantum {config.quantum_ms} ms")
    for column in ("median_ms", "p99_ms", "cpu", "overhead_pct", "daemons_pct"):
        table.add_column(column, justify="right")
    table.add_row(f"{result.median_ms:.3f}", f"{result.p99_ms:.3f}", f"{result.cpu:.2f}",
                  f"{result.overhead_pct or 0.0:.2f}",
                  "-" if result.daemons_pct is None else f"{result.daemons_pct:.2f}")
    console.print(table)
    if csv_path:
        write_rows_csv(csv_path, [asdict(result)])


@bench.command()
@click.option("--policy", "policies", default="gs,bgs,mgs,mbgs", show_default=True,
              help="comma-separated matrix policies")
@click.option("--nodes", type=click.IntRange(min=2), default=320, show_default=True)
@click.option("--mpl", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--queued", type=click.IntRange(min=1), default=200, show_default=True, help="jobs waiting")
@click.option("--events", type=click.IntRange(min=10), default=300, show_default=True, help="events timed")
@click.option(
    "--memory",
    type=click.Choice(["none", "requests", "both"]),
    default="none",
    show_default=True,
    help="jobs asking 256 MiB to 2 GiB a task on nodes of --node-memory; both: each policy without, then with",
)
@click.option("--node-memory", type=SIZE, default="10G", show_default=True, metavar="SIZE",
              help="with --memory: each node's; 10G holds MPL 5 of the largest request (the schedule is the one "
              "without memory: the cost of counting it), less makes memory bind")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
def event(policies: str, nodes: int, mpl: int, queued: int, events: int, memory: str, node_memory: int,
          csv_path: Path | None) -> None:
    """Time one scheduling event (a departure, an arrival, the matrix rebuilt) on a full machine."""
    from gangsched.bench.event import measure_events
    from gangsched.policy.matrix_settings import MatrixPolicyKind

    kinds = []
    for name in (name.strip() for name in policies.split(",")):
        if name not in ("gs", "bgs", "mgs", "mbgs"):
            raise click.UsageError(f"--policy takes gs, bgs, mgs, mbgs, not {name!r}")
        kinds.append(MatrixPolicyKind(name))
    rows = []
    for kind in kinds:
        for with_memory in {"none": [False], "requests": [True], "both": [False, True]}[memory]:
            times = measure_events(kind, nodes, mpl, queued, events, node_memory=node_memory if with_memory else None)
            rows.append({"policy": kind.value, "memory": format_size(node_memory) if with_memory else "-",
                         "queued": times.queued,
                         "running": times.running, "rows": times.rows,
                         "median_ms": round(times.median_ms, 3), "p95_ms": round(times.p95_ms, 3),
                         "max_ms": round(times.max_ms, 3)})
    print_rows(f"one scheduling event: {nodes} nodes, MPL {mpl}, {queued} queued, {events} events", rows, csv_path)


@bench.command()
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="migrations to measure")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
def migrate(runs: int, csv_path: Path | None) -> None:
    """A live migration under MGS on 4 nodes: where the job went, its barriers, the measured cost."""
    from gangsched.bench.migration import NODES, run_migration

    rows = []
    for run in range(1, runs + 1):
        config = ClusterConfig(nodes=NODES, quantum_ms=100, policy="mgs")
        with temporary_cluster(config) as client:
            result = run_migration(client)
        rows.append({"run": run, "from": ",".join(result.moved_from), "to": ",".join(result.moved_to),
                     "barriers_before": result.barriers_before, "checkpointed_at": result.checkpointed_at,
                     "barriers_after": result.barriers_after, "cost_s": round(result.cost_s, 3)})
    print_rows(f"live migration under MGS, {NODES} nodes, quantum 100 ms", rows, csv_path)


@bench.command()
@click.option("--flood", "flood_frames", type=click.IntRange(min=1), default=30_000, show_default=True,
              help="junk frames one client sends as fast as it can")
@click.option("--submission-flood", "flood_submissions", type=click.IntRange(min=1), default=3000,
              show_default=True, help="then single submissions (one-task jobs) one client sends as fast as it can")
@click.option("--frames", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="fuzzed frames per socket: client, report, PMI channel")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--load-s", type=click.FloatRange(min=1), default=10.0, show_default=True,
              help="each attack that is load (large messages, PMI floods, barrier floods) and the quiet window "
                   "beside them: how long")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
@cluster_options
def hostile(flood_frames: int, flood_submissions: int, frames: int, seed: int, load_s: float, csv_path: Path | None,
            **shape: Any) -> None:
    """Floods of junk frames and of submissions, fuzzed frames on every socket, and attacks that are load: the
    switch's beat, another client's queries, and the cluster after."""
    from gangsched.bench.hostile import drained, flood, fuzz_master, fuzz_pmi
    from gangsched.bench.hostile_load import ATTACKS, run_attack
    from gangsched.protocol.records import MpiKind

    config = cluster_config(**shape)
    with temporary_local_cluster(config) as cluster:
        loads = [run_attack(cluster, attack, load_s, config.quantum_ms) for attack in ATTACKS]
        floods = [flood(cluster, flood_frames, config.quantum_ms, seed),
                  flood(cluster, flood_submissions, config.quantum_ms, seed, submissions=True)]
        drained(cluster)  # the submissions' jobs, before the fuzzing
        fuzzed = [fuzz_master(cluster, "client", frames, seed), fuzz_master(cluster, "report", frames, seed),
                  fuzz_pmi(cluster, frames, seed=seed), fuzz_pmi(cluster, frames, seed=seed, kind=MpiKind.PMI2)]
    table = Table(title=f"one client's flood, {config.nodes} nodes, quantum {config.quantum_ms} ms")
    for column in ("flood", "frames", "seconds", "switches", "longest_gap_ms", "longest_gap_quanta"):
        table.add_column(column, justify="right")
    for flooded in floods:
        table.add_row(flooded.kind, str(flooded.frames), f"{flooded.seconds:.2f}", str(flooded.switches),
                      f"{flooded.longest_gap_ms:.1f}", f"{flooded.longest_gap_quanta:.2f}")
    console.print(table)
    table = Table(title="fuzzed frames per socket, then: daemons alive? the queue answers? a new job?")
    for column in ("socket", "frames", "seconds", "daemons_exited", "queue_answers", "new_job"):
        table.add_column(column, justify="right")
    for result in fuzzed:
        table.add_row(result.socket, str(result.frames), f"{result.seconds:.1f}",
                      ",".join(result.daemons_exited) or "0", str(result.queue_answers), result.new_job.value)
    console.print(table)
    for pmi in fuzzed[2:]:
        console.print(f"the {pmi.socket} fuzz jobs ended: {pmi.fuzz_jobs}; for example: {pmi.reason}")
    quiet = loads[0]
    print_rows(f"attacks that are load, {load_s:g} s each, {config.nodes} nodes, quantum {config.quantum_ms} ms", [
        {"attack": load.attack, "sent": load.sent, "switch_p50_ms": load.switch_p50_ms,
         "switch_p99_ms": load.switch_p99_ms, "switch_p99_vs_idle": _ratio(load.switch_p99_ms, quiet.switch_p99_ms),
         "query_p50_ms": load.query_p50_ms, "query_p99_ms": load.query_p99_ms,
         "query_p99_vs_idle": _ratio(load.query_p99_ms, quiet.query_p99_ms),
         "attack_jobs": ",".join(f"{state}:{count}" for state, count in load.attack_jobs.items()) or "-",
         "beside_it": load.victim or "-"} for load in loads],
        None if csv_path is None else csv_path.with_name(f"{csv_path.stem}-load{csv_path.suffix}"))
    if csv_path:
        rows: list[dict[str, Any]] = [
            {"socket": f"flood of {flooded.kind}", "frames": flooded.frames, "seconds": round(flooded.seconds, 3),
             "switches": flooded.switches, "longest_gap_ms": round(flooded.longest_gap_ms, 1)} for flooded in floods]
        rows += [{"socket": result.socket, "frames": result.frames, "seconds": round(result.seconds, 3),
                  "daemons_exited": len(result.daemons_exited), "queue_answers": result.queue_answers,
                  "new_job": result.new_job.value} for result in fuzzed]
        write_rows_csv(csv_path, rows)


def _ratio(value: float, quiet: float) -> str:
    return f"{value / quiet:.2f}" if quiet else "-"


@bench.command()
@click.option("--submissions", type=click.IntRange(min=2), default=1000, show_default=True)
@click.option("--clients", type=click.IntRange(min=1), default=8, show_default=True, help="submitting in parallel")
@click.option("--runs", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
@cluster_options
def restart(submissions: int, clients: int, runs: int, csv_path: Path | None, **shape: Any) -> None:
    """Submissions from parallel clients with the master killed (-9) and restarted halfway."""
    from gangsched.bench.restarts import run_restart

    config = cluster_config(**shape)
    rows = []
    for run in range(1, runs + 1):
        with temporary_local_cluster(config) as cluster:
            result = run_restart(cluster, submissions, clients)
        rows.append({"run": run, "accepted": result.accepted, "completed": result.completed,
                     "wrongly_failed": result.wrongly_failed, "lost": result.lost, "duplicates": result.duplicates,
                     "seconds": round(result.seconds, 1)})
        if result.wrongly_failed:
            console.print(f"run {run}: {result.states}")
    print_rows(f"{submissions} submissions from {clients} clients, master killed -9 halfway", rows, csv_path)


@bench.command()
@click.option("--minutes", type=click.FloatRange(min=0.1), default=20.0, show_default=True,
              help="how long faults are injected; then every job is waited for")
@click.option("--seed", type=int, default=1, show_default=True,
              help="the mix's and the faults' choices: a failing run is replayed with its seed")
@click.option("--mpi/--no-mpi", default=True, show_default=True,
              help="MPICH jobs in the mix (its environment is installed where it is missing)")
@click.option("--masters", type=click.IntRange(1, 3), default=1, show_default=True,
              help="masters on a PostgreSQL server of the run's own: the leader is killed, stopped and asked "
              "to hand over, and for root the first master's link is cut (the store is not filled)")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the figures here")
@cluster_options
def chaos(minutes: float, seed: int, mpi: bool, masters: int, csv_path: Path | None, **shape: Any) -> None:
    """A steady mix of jobs while daemons are killed and stopped and the store fills; every invariant
    checked after (docs/limits.md). Exit status 1 if one does not hold."""
    from gangsched.bench.chaos import ChaosRun
    from gangsched.bench.chaos_checks import INVARIANTS

    result = ChaosRun(cluster_config(**shape).replace(masters=masters), minutes, seed, mpi).run()
    found = result.invariants
    rows: list[dict[str, Any]] = [{"figure": f"jobs submitted: {kind}", "count": count}
                                  for kind, count in sorted(result.submitted.items())]
    rows += [{"figure": "submissions refused or unanswered", "count": sum(result.refused.values())}]
    rows += [{"figure": f"refused: {reason}", "count": count} for reason, count in result.refused.most_common()]
    rows += [{"figure": f"jobs ended {state}", "count": count} for state, count in sorted(found.states.items())]
    rows += [{"figure": f"why: {reason}", "count": count} for reason, count in found.reasons.most_common()]
    rows += [{"figure": f"faults injected: {fault}", "count": count} for fault, count in sorted(result.faults.items())]
    rows += [{"figure": f"recoveries: {fault}", "count": count} for fault, count in sorted(result.recoveries.items())]
    slots = result.slots
    rows += [{"figure": "looks at a frozen task, twice in a row", "count": slots.frozen_looks},
             {"figure": "frozen tasks that ran", "count": len(slots.ran_while_frozen)},
             {"figure": "looks at a node's tasks", "count": slots.node_looks},
             {"figure": "nodes that ran more tasks than their slots hold, for over 50 ms",
              "count": len(slots.outside_slot)},
             {"figure": "descheduled tasks found running and stopped again", "count": result.escapes_stopped}]
    rows += [{"figure": f"invariant broken: {name.replace('_', ' ')}", "count": len(getattr(found, name))}
             for name in INVARIANTS]
    print_rows(f"chaos for {minutes:g} min, seed {seed}: {found.jobs} jobs in {result.seconds:.0f} s", rows,
                csv_path)
    violations = result.violations()
    for violation in violations:
        console.print(f"[red]{violation}[/red]")
    if violations:
        console.print(f"the daemons' logs are kept in {result.kept_logs}")
        raise SystemExit(1)
    console.print("every invariant holds")


@bench.command()
@click.option("--processes", default="1,2,4,8,16", show_default=True,
              help="signals: how many spinning processes are stopped and continued at once")
@click.option("--rounds", type=click.IntRange(min=10), default=200, show_default=True, help="signals: rounds each")
@click.option("--subscribers", default="1,4,8,16", show_default=True, help="ZeroMQ: subscriber processes")
@click.option("--messages", type=click.IntRange(min=10), default=500, show_default=True, help="ZeroMQ: messages each")
@click.option("--quanta-ms", default="10,50,100", show_default=True,
              help="quanta at which the job CPU lost is measured (none: \"\")")
@click.option("--seconds", type=float, default=10.0, show_default=True, help="quantum: seconds scheduled at each")
@click.option("--baseline-s", type=float, default=5.0, show_default=True,
              help="quantum: seconds unscheduled, before and after")
@click.option("--nodes", type=click.IntRange(min=1), default=4, show_default=True, help="quantum: nodes")
@click.option("--spawn-s", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
              help="processes started and commits: seconds each")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
def floor(processes: str, rounds: int, subscribers: str, messages: int, quanta_ms: str, seconds: float,
          baseline_s: float, nodes: int, spawn_s: float, csv_path: Path | None) -> None:
    """The machine's limits the design rests on: signals, CPU clocks, ZeroMQ, processes, commits, the quantum."""
    from gangsched.bench import floor as measure
    from gangsched.bench.spawn_floor import floor_rows

    tables = {"signals and CPU clocks (µs)":
              measure.signal_round_trips(_counts(processes), rounds) + measure.cpu_clock_steps(1.0)}
    conditions = [(False, False), (True, False)] + ([(True, True)] if measure.fifo_allowed() else [])
    tables["ZeroMQ over loopback TCP (µs)"] = [
        row for busy, fifo in conditions for row in measure.pub_sub_latency(_counts(subscribers), messages, busy, fifo)
    ]
    tables["processes started and waited for, and commits, a second"] = floor_rows(spawn_s)
    if quanta_ms:
        tables["job CPU lost to gang scheduling"] = measure.quantum_costs(_counts(quanta_ms), seconds, baseline_s,
                                                                          nodes)
    for title, rows in tables.items():
        print_rows(title, rows, None)
    if csv_path:
        write_rows_csv(csv_path, [row for rows in tables.values() for row in rows])


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of whole numbers") from None
    if any(count < 1 for count in counts):
        raise click.BadParameter(f"{text!r}: every count must be at least 1")
    return counts


@bench.command()
@click.option("--runs", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="each run's figures here")
def preempt(runs: int, csv_path: Path | None) -> None:
    """A debug job preempting a spinning batch gang on a fresh cluster: how soon each acts, and the
    gang's CPU while suspended."""
    from gangsched.bench.preempt import BATCH_QUANTUM_MS, DEBUG_QUANTUM_MS, measure_preempt, summary

    results = measure_preempt(runs)
    print_figures(f"{runs} preemptions: debug quantum {DEBUG_QUANTUM_MS} ms, batch quantum {BATCH_QUANTUM_MS} ms",
                  {name: round(value, 1) for name, value in summary(results).items()}, None)
    if csv_path:
        write_rows_csv(csv_path, [asdict(result) for result in results])


@bench.command("cli")
@click.option("--runs", type=click.IntRange(min=1), default=10, show_default=True, help="runs of each command")
@click.option("--jobs", "job_count", type=click.IntRange(min=0), default=20, show_default=True,
              help="jobs in the queue while `gang queue` is timed")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
def cli_latency(runs: int, job_count: int, csv_path: Path | None) -> None:
    """How long `gang --help`, `gang queue` and friends take as whole processes."""
    from gangsched.bench.cli_latency import command_latencies, parallel_submissions
    from gangsched.protocol.records import JobSpec

    with temporary_cluster(ClusterConfig(nodes=2, quantum_ms=100)) as client:
        for _ in range(job_count):
            client.submit(JobSpec(name="sleep", user=getpass.getuser(), tasks=1, argv=["sleep", "600"]))
        rows = command_latencies(client.endpoint, runs)
        parallel = parallel_submissions(client.endpoint, clients=8, each=max(5, runs))
    print_rows(f"whole-process latency, median of {runs}", rows, csv_path)
    print_rows("parallel clients of single submissions, and of the interpreter alone", parallel, None)


def _cluster(config: ClusterConfig, docker: bool) -> AbstractContextManager[MasterClient]:
    """A fresh cluster for one benchmark: local processes, or compose containers with --docker."""
    if docker:
        from gangsched.deploy.compose import temporary_docker_cluster

        return temporary_docker_cluster(config)
    return temporary_cluster(config)


@bench.command("scale")
@click.option("--nodes", "node_counts", default="16,64,256,1024", show_default=True,
              help="emulated node counts, comma-separated: one run each")
@click.option("--quantum-ms", type=click.IntRange(min=10), default=100, show_default=True)
@click.option("--seconds", type=click.FloatRange(min=1), default=10.0, show_default=True,
              help="measurement window per run")
@click.option("--relay-fanout", type=click.IntRange(min=0), default=None,
              help="the master's --relay-fanout (0: no relays) [the master's default]")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None,
              help="write the rows here, and their plot beside it (.png)")
def scale(node_counts: str, quantum_ms: int, seconds: float, relay_fanout: int | None, csv_path: Path | None) -> None:
    """A real master and N emulated node daemons: switch bytes, master CPU and memory, switch latency."""
    from gangsched.bench.scale import measure_scale, write_plot

    rows = []
    for nodes in _counts(node_counts):
        rows.append(measure_scale(nodes, quantum_ms, seconds, relay_fanout))
        console.print(f"{nodes} nodes measured")
    print_rows(f"scale, quantum {quantum_ms} ms, MPL 5, {seconds:g} s each", [asdict(row) for row in rows], csv_path)
    if csv_path is not None:
        write_plot(rows, csv_path.with_suffix(".png"))
        console.print(f"wrote {csv_path.with_suffix('.png')}")
