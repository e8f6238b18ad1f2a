"""`gang sim run --config FILE` and `--reservation`: a trace over the partitions of a configuration file,
with the master's tier rules, and around maintenance windows (sim/partitioned.py)."""

from pathlib import Path

import click

from gangsched.master.config_file import ConfigError, read_config
from gangsched.policy.catalog import Choice
from gangsched.policy.interface import Job
from gangsched.policy.partitions import Partition
from gangsched.policy.windows import Reservation
from gangsched.protocol.durations import parse_duration
from gangsched.protocol.hostlists import expand_hostlist
from gangsched.sim.engine import simulate
from gangsched.sim.metrics import summarize
from gangsched.sim.partitioned import PartitionedPolicy
from gangsched.sim.runner import Outcome
from gangsched.sim.sim_job import SimJob
from gangsched.workload.swf import SwfJob


def partitioned_run(config_file: Path | None, records: list[SwfJob], jobs: list[SimJob], procs: int,
                    choice: Choice, reservations: tuple[str, ...] = ()) -> tuple[Outcome, list[SimJob]]:
    """``jobs`` scheduled over the file's partitions (none: one, of ``choice``): a job goes to the partition
    its SWF record's partition field numbers (1: the file's first), else to the default. The machine is the
    file's nodes, else ``procs`` nodes of one processor named node1, node2, ... as the local cluster's.
    ``reservations``: maintenance windows, each ``NAME=NODELIST@START+DURATION``, START after the first
    submission, both in Slurm's time format."""
    try:
        checked = read_config(config_file) if config_file is not None else None
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    nodes = {name: group.processors for group in (checked.nodes if checked else []) for name in group.expanded()} \
        or {f"node{index}": 1 for index in range(1, procs + 1)}
    plan: list[tuple[Partition, Choice]] = [(Partition("batch", None, default=True), choice)]
    if checked is not None:
        master = checked.master_settings({})
        plan = [(partition.partition(list(nodes)), checked.partition_settings(master, partition).choice())
                for partition in checked.partitions] or [(Partition("batch", None, default=True), master.choice())]
    names = [partition.name for partition, _ in plan]
    default = next((partition.name for partition, _ in plan if partition.default), names[0])
    numbered = {record.job_id: record.partition for record in records}

    def partition_of(job: Job) -> str:
        number = numbered.get(job.job_id, 0)
        return names[number - 1] if 1 <= number <= len(names) else default

    try:
        first = min((job.submit for job in jobs), default=0.0)
        windows = tuple(_window(text, first, set(nodes)) for text in reservations)
        policy = PartitionedPolicy(plan, nodes, max((job.estimate for job in jobs), default=1.0), partition_of,
                                   windows)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    totals = simulate(jobs, policy)
    return Outcome(plan[0][1], summarize(jobs, sum(nodes.values()), totals)), jobs



def _window(text: str, first: float, nodes: set[str]) -> Reservation:
    """``NAME=NODELIST@START+DURATION`` as a reservation on the simulated clock."""
    name, _, rest = text.partition("=")
    hostlist, _, times = rest.partition("@")
    start, _, duration = times.partition("+")
    if not (name and hostlist and start and duration):
        raise ValueError(f"--reservation {text!r}: give NAME=NODELIST@START+DURATION, e.g. "
                         "maint=node[1-8]@1-00:00:00+4:00:00")
    names = expand_hostlist(hostlist)
    unknown = [node for node in names if node not in nodes]
    if unknown:
        raise ValueError(f"--reservation {text!r}: no node {unknown[0]} in the simulated machine")
    offset, length = parse_duration(start), parse_duration(duration)
    if offset is None or length is None:
        raise ValueError(f"--reservation {text!r}: a reservation starts and ends: not UNLIMITED")
    return Reservation(name, frozenset(names), first + offset, first + offset + length)
