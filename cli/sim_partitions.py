"""`gang sim run --config FILE`: a trace over the partitions of a configuration file, with the
master's tier rules (sim/partitioned.py)."""

from pathlib import Path

import click

from gangsched.master.config_file import ConfigError, read_config
from gangsched.policy.catalog import Choice
from gangsched.policy.interface import Job
from gangsched.policy.partitions import Partition
from gangsched.sim.engine import simulate
from gangsched.sim.metrics import summarize
from gangsched.sim.partitioned import PartitionedPolicy
from gangsched.sim.runner import Outcome
from gangsched.sim.sim_job import SimJob
from gangsched.workload.swf import SwfJob


def partitioned_run(config_file: Path, records: list[SwfJob], jobs: list[SimJob],
                    procs: int) -> tuple[Outcome, list[SimJob]]:
    """``jobs`` scheduled over the file's partitions: a job goes to the partition its SWF record's
    partition field numbers (1: the file's first), else to the default. The machine is the file's
    nodes, else ``procs`` nodes of one processor named node1, node2, ... as the local cluster's."""
    try:
        checked = read_config(config_file)
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    nodes = {name: group.processors for group in checked.nodes for name in group.expanded()} or \
        {f"node{index}": 1 for index in range(1, procs + 1)}
    master = checked.master_settings({})
    plan: list[tuple[Partition, Choice]] = [
        (partition.partition(list(nodes)), checked.partition_settings(master, partition).choice())
        for partition in checked.partitions] or [(Partition("batch", None, default=True), master.choice())]
    names = [partition.name for partition, _ in plan]
    default = next((partition.name for partition, _ in plan if partition.default), names[0])
    numbered = {record.job_id: record.partition for record in records}

    def partition_of(job: Job) -> str:
        number = numbered.get(job.job_id, 0)
        return names[number - 1] if 1 <= number <= len(names) else default

    try:
        policy = PartitionedPolicy(plan, nodes, max((job.estimate for job in jobs), default=1.0), partition_of)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    totals = simulate(jobs, policy)
    return Outcome(plan[0][1], summarize(jobs, sum(nodes.values()), totals)), jobs

