"""A task of several processors (Slurm's ``-c/--cpus-per-task``), on the master's core driven on a fake clock:
it holds all of them on one node, in the matrix and in its node's launch; memory per cpu, the accounting and
Slurm's variables count them; a step of the allocation's task runs on that task's processors; a task no node
can hold is refused at submission. Nothing here starts a process."""

import pytest

from gangsched.client.connection import RequestRefused
from gangsched.master.sqlite_store import SqliteStore
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import ErrorReply, LaunchTask, StartStep, Submit
from gangsched.protocol.records import JobSpec, StepSpec
from gangsched.slurm.sbatch import refusal
from tests.helpers.driven_master import driven_master
from tests.helpers.master_events import ENDPOINTS, SETTINGS, hello, sent

MEGABYTE = 1024 * 1024


@pytest.fixture
def core(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1", processors=2)
    hello(core, "n2", processors=2)
    sent(core, LaunchTask)
    return core


def submitted(core, **fields) -> int | ErrorReply:
    spec = JobSpec(name="j", user="alice", argv=["true"], **fields)
    reply = core.clients.submit(Submit(spec=spec))
    return reply if isinstance(reply, ErrorReply) else reply.job_id


def test_each_task_holds_its_processors_on_one_node_and_slurm_s_variables_say_so(core):
    job = submitted(core, tasks=2, cpus_per_task=2, mem_per_cpu=100 * MEGABYTE)
    launched = sent(core, LaunchTask)
    assert sorted((node, message.task.rank, message.task.processors) for node, message in launched) == \
        [("n1", 0, [0, 1]), ("n2", 1, [0, 1])]
    assert core.table.jobs[job].node_names == ["n1", "n1", "n2", "n2"], "four of the matrix's columns"
    task = launched[0][1].task
    assert {name: task.env[name] for name in ("SLURM_CPUS_PER_TASK", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE",
                                              "SLURM_JOB_CPUS_PER_NODE", "SLURM_CPUS_ON_NODE")} == \
        {"SLURM_CPUS_PER_TASK": "2", "SLURM_NTASKS": "2", "SLURM_TASKS_PER_NODE": "1(x2)",
         "SLURM_JOB_CPUS_PER_NODE": "2(x2)", "SLURM_CPUS_ON_NODE": "2"}
    assert task.memory_limit == 200 * MEGABYTE, "--mem-per-cpu for each of the task's processors"
    assert core.table.jobs[job].ran(1.0).processor_s == 4.0, "charged for every processor it holds"


def test_a_job_of_one_task_of_two_waits_for_a_row_with_a_whole_node_free(core):
    first = submitted(core, tasks=3)  # n1's two processors and one of n2's: n2's last holds no task of two
    sent(core, LaunchTask)
    second = submitted(core, tasks=1, cpus_per_task=2)
    (node, launch), = sent(core, LaunchTask)
    assert launch.task.processors == [0, 1]
    placed = core.table.jobs[second].node_names
    assert placed == [node, node]
    assert core.table.jobs[first].node_names == ["n1", "n1", "n2"]


def test_a_batch_script_runs_once_on_its_task_s_processors(core):
    submitted(core, tasks=2, cpus_per_task=2, script="#!/bin/sh\ntrue\n")
    (node, launch), = sent(core, LaunchTask)
    assert (node, launch.task.processors, launch.task.size) == ("n1", [0, 1], 1)


def test_a_step_on_the_allocation_s_second_task_runs_on_that_task_s_processors(core):
    job = submitted(core, tasks=2, cpus_per_task=2)
    sent(core, LaunchTask)
    core.step_starts.start(StartStep(job_id=job, user="alice", step=StepSpec(argv=["hostname"], slots=[1])))
    (node, launch), = sent(core, LaunchTask)
    assert (node, launch.task.processors, launch.task.rank) == ("n2", [0, 1], 0)
    refused = core.step_starts.start(StartStep(job_id=job, user="alice", step=StepSpec(argv=["id"], slots=[2])))
    assert isinstance(refused, ErrorReply) and "tasks 0-1, not 2" in refused.reason


def test_a_task_wider_than_every_node_is_refused_at_submission_as_slurm_refuses_it(core):
    refused = submitted(core, tasks=1, cpus_per_task=3)
    assert isinstance(refused, ErrorReply) and refused.code is ErrorCode.NEVER_FITS
    assert refused.reason == "needs 1 task of 3 processors, the cluster has 4 processors on 2 nodes"
    assert refusal(RequestRefused(refused.code, refused.reason)) == \
        "sbatch: error: needs 1 task of 3 processors, the cluster has 4 processors on 2 nodes\n" \
        "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    assert not core.table.jobs, "nothing of it kept"
