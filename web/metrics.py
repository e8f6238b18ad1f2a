"""The metrics, as Prometheus names them (base units, ``_total`` counters, ``_seconds``), with prometheus-client.

A collector builds every family at scrape time from the master's answers,
asked fresh: the jobs counted by state, partition and reason (``JobCountQuery``),
the running ones, the nodes and the matrix, and the master's counters and
histograms (``StatsQuery``). docs/metrics.md lists them.
"""

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from gangsched.protocol.messages import Histogram, JobCount, MasterStats, MatrixView
from gangsched.protocol.records import JobInfo, JobState, NodeInfo, NodeState
from gangsched.protocol.reservation_messages import ReservationInfo

PENDING_REASONS = (
    "Resources",
    "Resources: memory",
    "Priority",
    "JobHeldUser",
    "JobHeldAdmin",
)  # any other reason (waiting for nodes, a dependency): "Other"


class MasterCollector(Collector):
    def __init__(self) -> None:
        self.reading: tuple[MasterStats, MatrixView, list[JobCount], list[JobInfo], list[NodeInfo],
                            list[ReservationInfo]] | None = None

    def collect(self) -> Iterator[Metric]:
        if self.reading is None:
            return
        stats, matrix, counts, running, nodes, reservations = self.reading
        yield from _counts(counts)
        yield from _jobs(running)
        yield from _nodes(nodes, matrix)
        yield from _reservations(reservations)
        yield from _master(stats)


def _counts(counts: list[JobCount]) -> Iterator[Metric]:
    """The jobs by state, by the reason they wait and by partition: counted by the master, not listed."""
    states = GaugeMetricFamily("gangsched_jobs", "Jobs pending, running and suspended", labels=["state"])
    for state in (JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED):
        states.add_metric([state.value], sum(count.count for count in counts if count.state is state))
    yield states
    reasons = GaugeMetricFamily("gangsched_queue_jobs", "Pending jobs by the reason they wait", labels=["reason"])
    pending = [count for count in counts if count.state is JobState.PENDING]
    for reason in (*PENDING_REASONS, "Other"):
        reasons.add_metric([reason], sum(count.count for count in pending if _reason(count.reason) == reason))
    yield reasons
    by_partition = GaugeMetricFamily("gangsched_partition_jobs", "Jobs pending, running and suspended, by partition",
                                     labels=["partition", "state"])
    jobs_by: dict[tuple[str, str], int] = {}
    for count in counts:
        where = (count.partition, count.state.value)
        jobs_by[where] = jobs_by.get(where, 0) + count.count
    for (partition, state_name), number in sorted(jobs_by.items()):
        by_partition.add_metric([partition, state_name], number)
    yield by_partition


def _jobs(running: list[JobInfo]) -> Iterator[Metric]:
    """A series for each running and suspended job: the machine bounds how many."""
    labels = ["job_id", "name", "user"]
    measured = GaugeMetricFamily("gangsched_job_utilization_ratio",
                                 "CPU used over runnable time in the job's last measured quantum", labels=labels)
    predicted = GaugeMetricFamily("gangsched_job_predicted_utilization_ratio",
                                  "What the paired scheduler's predictor expects of the job's next quantum",
                                  labels=labels)
    barriers = GaugeMetricFamily("gangsched_job_barriers_per_second", "Rank 0's progress over the last seconds",
                                 labels=labels)
    max_rss = GaugeMetricFamily("gangsched_job_max_rss_bytes",
                                "The largest peak resident memory of any task of the job so far (Slurm's MaxRSS)",
                                labels=labels)
    for job in running:
        key = [str(job.job_id), job.spec.name, job.spec.user]
        for family, value in ((measured, job.util_pct), (predicted, job.predicted_pct)):
            if value is not None:
                family.add_metric(key, value / 100)
        if job.barriers_per_s is not None:
            barriers.add_metric(key, job.barriers_per_s)
        if job.max_rss is not None:
            max_rss.add_metric(key, job.max_rss)
    yield from (measured, predicted, barriers, max_rss)


def _reason(reason: str) -> str:
    return reason if reason in PENDING_REASONS else "Other"


def _nodes(nodes: list[NodeInfo], matrix: MatrixView) -> Iterator[Metric]:
    states = GaugeMetricFamily("gangsched_nodes", "Nodes by state", labels=["state"])
    for state in NodeState:
        states.add_metric([state.value], sum(node.state is state for node in nodes))
    yield states
    up = [node for node in nodes if node.state in (NodeState.UP, NodeState.DRAINING, NodeState.DRAINED)]
    processors = GaugeMetricFamily("gangsched_processors",
                                   "Processors of the nodes up: all, and used by the slot whose turn it is",
                                   labels=["state"])
    processors.add_metric(["total"], sum(node.processors for node in up))
    processors.add_metric(["used"], sum(node.processors_used for node in up))
    yield processors
    slots = GaugeMetricFamily("gangsched_slots", "Rows (time slots) of the Ousterhout matrix")
    slots.add_metric([], len(matrix.rows))
    yield slots
    utilization = GaugeMetricFamily("gangsched_node_utilization_ratio",
                                    "CPU of the node's tasks over its CPU share in the last quantum it reported",
                                    labels=["node"])
    memory = GaugeMetricFamily("gangsched_node_memory_bytes", "Memory the node's jobs may commit", labels=["node"])
    committed = GaugeMetricFamily("gangsched_node_memory_committed_bytes",
                                  "Memory the jobs placed on the node commit, in all its rows", labels=["node"])
    for node in up:
        if node.util_pct is not None:
            utilization.add_metric([node.name], node.util_pct / 100)
        memory.add_metric([node.name], node.memory)
        committed.add_metric([node.name], node.memory_committed)
    yield from (utilization, memory, committed)
    partitions = GaugeMetricFamily("gangsched_partition_nodes", "Nodes of each partition, by state",
                                   labels=["partition", "state"])
    counts: dict[tuple[str, str], int] = {}
    for node in nodes:
        for partition in node.partitions:
            counts[(partition, node.state.value)] = counts.get((partition, node.state.value), 0) + 1
    for (partition, shown), count in sorted(counts.items()):
        partitions.add_metric([partition, shown], count)
    yield partitions


def _reservations(reservations: list[ReservationInfo]) -> Iterator[Metric]:
    nodes = GaugeMetricFamily("gangsched_reservation_nodes", "Nodes each reservation holds", labels=["reservation"])
    start = GaugeMetricFamily("gangsched_reservation_start_time_seconds", "When each reservation opens, Unix seconds",
                              labels=["reservation"])
    end = GaugeMetricFamily("gangsched_reservation_end_time_seconds", "When each reservation ends, Unix seconds",
                            labels=["reservation"])
    jobs = GaugeMetricFamily("gangsched_reservation_jobs", "Each reservation's jobs pending or running",
                             labels=["reservation"])
    for each in reservations:
        nodes.add_metric([each.name], len(each.nodes))
        start.add_metric([each.name], each.start)
        end.add_metric([each.name], each.end)
        jobs.add_metric([each.name], len(each.jobs))
    yield from (nodes, start, end, jobs)


def _master(stats: MasterStats) -> Iterator[Metric]:
    for name, help_, value in (
        ("gangsched_quanta", "Slot switches the master sent", stats.quanta),
        ("gangsched_busy_quanta", "Quanta in which some row ran", stats.busy_quanta),
        ("gangsched_paired_quanta", "Quanta in which a partner row ran beside the row whose turn it was",
         stats.paired_quanta),
        ("gangsched_scheduling_events", "Scheduling events the policy decided on", stats.scheduling_events),
        ("gangsched_store_write_failures", "Writes the job store failed, each tried again", stats.store_failures),
        ("gangsched_master_cpu_seconds", "CPU time of the master process", stats.cpu_s),
    ):
        counter = CounterMetricFamily(name, help_)
        counter.add_metric([], value)
        yield counter
    for name, help_, histogram in (
        ("gangsched_switch_latency_seconds", "A switch's send to the last node having applied it",
         stats.switch_latency),
        ("gangsched_scheduling_event_seconds", "The policy's decisions at one scheduling event", stats.scheduling),
        ("gangsched_quantum_decision_seconds", "One quantum boundary: the rows to run, the node columns, the switch",
         stats.quantum_decision),
        ("gangsched_report_drain_seconds", "One read of the node messages waiting (reports, heartbeats, exits)",
         stats.report_drain),
        ("gangsched_store_write_seconds", "One synced commit of the job store (a turn of the loop)", stats.store_write),
        ("gangsched_migration_seconds", "A migration: checkpoint asked to the job progressing on its new nodes",
         stats.migration_cost),
    ):
        yield _histogram(name, help_, histogram)
    memory = GaugeMetricFamily("gangsched_master_resident_memory_bytes", "Resident memory of the master process")
    memory.add_metric([], stats.resident_bytes)
    started = GaugeMetricFamily("gangsched_master_start_time_seconds", "When the master started, Unix seconds")
    started.add_metric([], stats.start_time)
    yield from (memory, started)


def _histogram(name: str, help_: str, histogram: Histogram) -> HistogramMetricFamily:
    buckets, running = [], 0
    for bound, count in zip([*map(str, histogram.bounds), "+Inf"], histogram.counts, strict=True):
        running += count
        buckets.append((bound, running))
    family = HistogramMetricFamily(name, help_)
    family.add_metric([], buckets, histogram.total_s)
    return family
