"""A job as an allocation that runs steps (master/job_steps.py), on the master's core driven on a fake clock:
a step starts in a running job's processors, its tasks are the job's in every switch, a failed task ends its
step alone, and the job's end, its step 0's, ends the others. Nothing here starts a process."""

from gangsched.master.sqlite_store import SqliteStore
from gangsched.protocol.client_messages import Submit
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import (
    ErrorReply,
    Heartbeat,
    KillTask,
    LaunchTask,
    NodeColumn,
    PmiFence,
    PmiFenceDone,
    StartStep,
    StepStarted,
    TaskExit,
)
from gangsched.protocol.records import JobSpec, JobState, StepSpec
from tests.helpers.driven_master import driven_master
from tests.helpers.master_events import ENDPOINTS, SETTINGS, hello, infos, sent, submit


def two_nodes(tmp_path, clock):
    store = SqliteStore(tmp_path / "jobs.db")
    core = driven_master(SETTINGS, ENDPOINTS, store, clock)
    hello(core, "n1")
    hello(core, "n2")
    return core


def start(core, job: int, argv: list[str], slots: list[int] | None = None, user: str = "alice"):
    return core.step_starts.start(StartStep(job_id=job, user=user, step=StepSpec(argv=argv, slots=slots)))


def test_a_second_step_runs_on_its_allocation_s_processors_and_follows_the_job_through_the_switches(tmp_path, clock):
    core = two_nodes(tmp_path, clock)
    job = submit(core, nodes=2)
    first = {node: message.task for node, message in sent(core, LaunchTask)}
    started = start(core, job, ["hostname"], slots=[1])
    assert started == StepStarted(job_id=job, step_id=1)
    (node, launch), = sent(core, LaunchTask)
    task = launch.task
    assert (task.step, task.rank, task.size, task.argv) == (1, 0, 1, ["hostname"])
    assert (node, task.processors) == (core.table.jobs[job].node_names[1], first[node].processors), \
        "the step's rank 0 runs on the allocation's task 1: its node and processor"
    assert task.barrier_addr != first[core.table.jobs[job].node_names[0]].barrier_addr, "a barrier of its own"
    other = submit(core, nodes=2)  # a second row: the rows take turns
    for _ in range(4):
        clock.now += 0.1
        for name in ("n1", "n2"):
            core.node_reports.heartbeat(Heartbeat(node=name))
        core.tick()
    columns = [message for _, message in core.outbox if isinstance(message, NodeColumn)]
    rows = [row for column in columns for matrix in column.rows.values() for row in matrix]
    assert [job] in rows and [other] in rows, "a column names jobs, never steps: a switch runs all of a job's"
    assert core.table.jobs[job].live_tasks() == {(0, 0), (0, 1), (1, 0)}


def test_a_failed_task_ends_its_step_and_the_job_goes_on_until_its_step_0_ends_the_rest(tmp_path, clock):
    core = two_nodes(tmp_path, clock)
    job = submit(core, nodes=2)
    n1, n2 = core.table.jobs[job].node_names
    start(core, job, ["a"])
    start(core, job, ["b"], slots=[0])
    sent(core, LaunchTask)
    ack = core.task_ended(TaskExit(node=n1, job_id=job, step=1, rank=0, returncode=3))
    assert (ack.step, ack.rank) == (1, 0)
    assert sent(core, KillTask) == [(n2, KillTask(job_id=job, step=1, reason=f"rank 0 of step 1 on {n1} exited "
                                                                            "with status 3"))], "its step alone"
    assert core.table.jobs[job].steps[1].exit_code == 3 and core.table.jobs[job].ending is None
    core.task_ended(TaskExit(node=n2, job_id=job, step=1, rank=1, returncode=-15))
    core.task_ended(TaskExit(node=n1, job_id=job, step=0, rank=0, returncode=0))
    core.task_ended(TaskExit(node=n2, job_id=job, step=0, rank=1, returncode=0))
    kills = sent(core, KillTask)
    assert kills == [(n1, KillTask(job_id=job, reason=""))], "step 0's end ends the steps still running"
    (info,) = infos(core, [job])
    assert info.state is JobState.RUNNING, "it ends once their tasks have"
    clock.now += 5
    core.task_ended(TaskExit(node=n1, job_id=job, step=2, rank=0, returncode=-15))
    (info,) = infos(core, [job])
    assert (info.state, info.exit_code) == (JobState.COMPLETED, 0), info.reason
    steps = [(step.step_id, step.name, step.state, step.exit_code, step.tasks, step.nodes) for step in info.steps]
    assert steps == [(0, "true", JobState.COMPLETED, 0, 2, [n1, n2]), (1, "a", JobState.FAILED, 3, 2, [n1, n2]),
                     (2, "b", JobState.CANCELLED, -15, 1, [n1])], "a step killed as its job completes is cancelled"
    assert info.steps[0].start_time == info.start_time and info.steps[2].end_time == clock.now
    stored = SqliteStore(tmp_path / "jobs.db").get(job)
    assert stored is not None and stored.info().steps == info.steps, "sacct reads the steps from the store"


def test_without_kill_on_bad_exit_a_failure_lets_the_others_run_on_and_the_worst_exit_ends_the_step(tmp_path,
                                                                                                     clock):
    """srun without -K, as Slurm's: the step's other tasks run on, and it ends with the worst exit, a signal's
    counted as 128 + its number; its record keeps the failure, and each task's, through the store."""
    core = two_nodes(tmp_path, clock)
    job = submit(core, nodes=2)
    n1, n2 = core.table.jobs[job].node_names
    core.step_starts.start(StartStep(job_id=job, user="alice", step=StepSpec(argv=["a"], kill_on_bad_exit=False)))
    sent(core, LaunchTask)
    core.task_ended(TaskExit(node=n1, job_id=job, step=1, rank=0, returncode=3))
    assert sent(core, KillTask) == [] and core.table.jobs[job].steps[1].end_time is None, "its rank 1 runs on"
    stored = SqliteStore(tmp_path / "jobs.db").get(job)
    assert stored is not None and stored.steps[1].failure == (JobState.FAILED, f"rank 0 of step 1 on {n1} exited "
                                                                               "with status 3", 3)
    core.task_ended(TaskExit(node=n2, job_id=job, step=1, rank=1, returncode=5))
    step = core.table.jobs[job].steps[1]
    assert (step.state, step.exit_code) == (JobState.FAILED, 5), "the worst of 3 and 5"
    stored = SqliteStore(tmp_path / "jobs.db").get(job)
    assert stored is not None and stored.steps[1].failed_tasks == {0: 3, 1: 5}, "each task's failure kept"
    (info,) = infos(core, [job])
    assert [(each.rank, each.node, each.exit_code) for each in info.steps[1].failed_tasks] == [(0, n1, 3), (1, n2, 5)]
    assert core.table.jobs[job].ending is None
    core.step_starts.start(StartStep(job_id=job, user="alice", step=StepSpec(argv=["b"], kill_on_bad_exit=False)))
    core.task_ended(TaskExit(node=n1, job_id=job, step=2, rank=0, returncode=-9))
    core.task_ended(TaskExit(node=n2, job_id=job, step=2, rank=1, returncode=100))
    assert core.table.jobs[job].steps[2].exit_code == -9, "killed by signal 9 is 137, worse than 100"


def test_a_job_whose_step_0_runs_on_after_a_failure_ends_failed_with_its_worst_exit(tmp_path, clock):
    core = two_nodes(tmp_path, clock)
    spec = JobSpec(name="j", user="alice", tasks=2, argv=["true"], kill_on_bad_exit=False)
    job = core.clients.submit(Submit(spec=spec)).job_id
    n1, n2 = core.table.jobs[job].node_names
    sent(core, LaunchTask)
    core.task_ended(TaskExit(node=n1, job_id=job, step=0, rank=0, returncode=4))
    assert sent(core, KillTask) == [] and core.table.jobs[job].ending is None, "its rank 1 runs on"
    core.task_ended(TaskExit(node=n2, job_id=job, step=0, rank=1, returncode=0))
    clock.now += 5
    core.tick()
    (info,) = infos(core, [job])
    assert (info.state, info.exit_code) == (JobState.FAILED, 4), info.reason


def test_a_step_is_refused_outside_its_allocation_and_to_anyone_but_its_owner(tmp_path, clock):
    core = two_nodes(tmp_path, clock)
    job = submit(core, nodes=2)
    sent(core, LaunchTask)
    refused = start(core, job, ["x"], slots=[2])
    assert isinstance(refused, ErrorReply) and refused.code is ErrorCode.INVALID_SPEC
    assert "has tasks 0-1, not 2" in refused.reason
    stranger = start(core, job, ["x"], user="mallory")
    assert isinstance(stranger, ErrorReply) and stranger.code is ErrorCode.PERMISSION_DENIED
    assert isinstance(start(core, job, ["x"], user="root"), StepStarted)
    submit(core, nodes=2)
    waiting = submit(core, nodes=2)  # two rows, both taken: it waits
    refused = start(core, waiting, ["x"])
    assert isinstance(refused, ErrorReply) and "a step starts in a running job's allocation" in refused.reason
    assert [launch.task.step for _, launch in sent(core, LaunchTask)] == [1, 1, 0, 0], \
        "root's step, then the second job: nothing of the refused ones"


def test_each_step_is_a_pmi_world_of_its_own(tmp_path, clock):
    """A step's PMI fence gathers its own nodes: step 1 on one of the job's two nodes is done when that node
    enters, while step 0's waits for both."""
    core = two_nodes(tmp_path, clock)
    job = submit(core, nodes=2)
    n1, n2 = core.table.jobs[job].node_names
    start(core, job, ["mpi-program"], slots=[0])
    core.outbox.clear()
    core.pmi_relay.pmi_fence(PmiFence(node=n1, job_id=job, step=0, epoch=0, kvs={"a": "0"}))
    assert sent(core, PmiFenceDone) == []
    core.pmi_relay.pmi_fence(PmiFence(node=n1, job_id=job, step=1, epoch=0, kvs={"b": "1"}))
    assert sent(core, PmiFenceDone) == [(n1, PmiFenceDone(job_id=job, step=1, epoch=0, kvs={"b": "1"}))]
    core.pmi_relay.pmi_fence(PmiFence(node=n2, job_id=job, step=0, epoch=0, kvs={"c": "2"}))
    assert sorted(node for node, _ in sent(core, PmiFenceDone)) == [n1, n2]


def test_an_allocation_s_step_0_holds_its_first_task_and_salloc_s_release_ends_it_as_its_command_did(tmp_path,
                                                                                                     clock):
    """salloc: its holder on the allocation's first task alone, the steps srun starts named from 0 after it
    (``extern``, then ``0``); its command's exit 3 ends the job FAILED with 3, whatever the holder's kill gives."""
    from gangsched.protocol.client_messages import Cancel, Cancelled
    from gangsched.protocol.slurm_environment import slurm_step

    core = two_nodes(tmp_path, clock)
    spec = JobSpec(name="interactive", user="alice", tasks=2, argv=["sleep", "infinity"], allocation=True)
    job = core.clients.submit(Submit(spec=spec)).job_id
    n1, _ = core.table.jobs[job].node_names
    assert [(node, launch.task.rank) for node, launch in sent(core, LaunchTask)] == [(n1, 0)], "the first task alone"
    assert [slurm_step(spec, step) for step in (0, 1, 2)] == ["extern", "0", "1"]
    released = core.clients.cancel(Cancel(job_id=job, user="alice", command_exit=3))
    assert isinstance(released, Cancelled) and released.state is JobState.FAILED and released.killed
    core.task_ended(TaskExit(node=n1, job_id=job, step=0, rank=0, returncode=-15))
    clock.now += 5
    core.tick()
    (info,) = infos(core, [job])
    assert (info.state, info.exit_code, info.reason) == (JobState.FAILED, 3, "salloc's command exited with status 3")
