"""Day-to-day operation in the master's core on a fake clock: nodes drained, resumed and taken down;
jobs held, released, suspended, resumed and requeued; every command recorded, done or refused; and
all of it kept across a master restart (docs/operations.md)."""


import pytest

from gangsched.protocol.admin_messages import (
    Dependency,
    JobAction,
    JobControl,
    JobsControlled,
    JobUpdate,
    JobUpdated,
    NodeAction,
    NodesUpdated,
    NodeUpdate,
    SetLimits,
)
from gangsched.protocol.messages import (
    ErrorReply,
    Heartbeat,
    KillTask,
    LaunchTask,
    Submit,
    TaskExit,
    UserList,
)
from gangsched.protocol.records import Hold, JobSpec, JobState, NodeState, TaskRef, UserLimits
from tests.helpers.driven_master import DrivenMaster
from tests.helpers.master_events import hello, sent
from tests.helpers.operations import GANGS, NODES, administer, info, make, restart


def nodes(core: DrivenMaster, names: str, action: NodeAction, reason: str | None = "fan", admin: str = "root"):
    return administer(core, NodeUpdate(admin=admin, nodes=names, action=action, reason=reason))


def jobs(core: DrivenMaster, action: JobAction, *job_ids: int, user: str = "root"):
    return administer(core, JobControl(user=user, action=action, job_ids=list(job_ids)))


def submit(core: DrivenMaster, tasks: int, user: str = "alice", hold: bool = False, requeue: bool = False) -> int:
    spec = JobSpec(name="j", user=user, tasks=tasks, argv=["true"], requeue=requeue)
    return core.clients.submit(Submit(spec=spec, hold=hold)).job_id


def state_of(core: DrivenMaster, node: str) -> NodeState:
    return {each.name: each.state for each in core.clients.query_nodes().nodes}[node]


def end(core: DrivenMaster, job: int) -> None:
    for rank, node in enumerate(info(core, job).node_names):
        core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=0))


def quantum(core: DrivenMaster) -> None:
    core.clock.now += 0.1
    for node in NODES:
        core.node_reports.heartbeat(Heartbeat(node=node))
    core.tick()


def test_a_drained_node_takes_no_new_job_runs_its_gangs_out_and_takes_jobs_again_once_resumed(tmp_path, clock):
    core = make(tmp_path, clock)
    gangs = [submit(core, 4) for _ in range(3)]  # three rows, each over every node
    assert all(info(core, job).state is JobState.RUNNING for job in gangs)
    assert isinstance(nodes(core, "n1", NodeAction.DRAIN, "fan"), NodesUpdated)
    sent(core, LaunchTask)
    assert state_of(core, "n1") is NodeState.DRAINING
    placed_later = []
    for index in range(120):  # a stream of small jobs and whole-machine jobs over 120 quanta
        placed_later.append(submit(core, 1 + index % 3))
        if index % 10 == 0:
            placed_later.append(submit(core, 4))  # wants n1 too: it waits
        quantum(core)
        assert not [message for node, message in sent(core, LaunchTask) if node == "n1"]
        finished = [job for job in placed_later if info(core, job).state is JobState.RUNNING]
        for job in finished:
            assert "n1" not in info(core, job).node_names
            end(core, job)
    assert all(info(core, job).state is JobState.RUNNING for job in gangs)  # they ran on in their rows
    wide = [job for job in placed_later if info(core, job).spec.tasks == 4]
    assert {info(core, job).state for job in wide} == {JobState.PENDING}
    for job in gangs:
        end(core, job)
    assert state_of(core, "n1") is NodeState.DRAINED
    assert isinstance(nodes(core, "n1", NodeAction.RESUME, None), NodesUpdated)
    assert state_of(core, "n1") is NodeState.UP
    assert info(core, wide[0]).state is JobState.RUNNING and "n1" in info(core, wide[0]).node_names


def test_a_node_taken_down_ends_its_jobs_as_a_lost_node_does_and_kills_their_tasks_there(tmp_path, clock):
    core = make(tmp_path, clock)
    failing, requeued, elsewhere = submit(core, 2), submit(core, 2, requeue=True), submit(core, 1)
    assert info(core, elsewhere).node_names == ["n1"]
    on_n1 = [job for job in (failing, requeued, elsewhere) if "n1" in info(core, job).node_names]
    sent(core, LaunchTask)
    nodes(core, "n1", NodeAction.DOWN, "power supply")
    killed = {message.job_id for node, message in sent(core, KillTask) if node == "n1"}
    assert killed == set(on_n1)
    assert state_of(core, "n1") is NodeState.DOWN
    listed = {each.name: each for each in core.clients.query_nodes().nodes}
    assert listed["n1"].reason.text == "power supply" and listed["n1"].reason.user == "root"
    for job in on_n1:
        assert info(core, job).state in (JobState.NODE_FAIL, JobState.RUNNING, JobState.PENDING)
    hello(core, "n1")  # its daemon registering again does not put it back in service
    assert state_of(core, "n1") is NodeState.DOWN
    again = submit(core, 4)
    assert info(core, again).state is JobState.PENDING


def test_node_marks_and_holds_survive_a_master_restart(tmp_path, clock):
    core = make(tmp_path, clock)
    nodes(core, "n[1-2]", NodeAction.DRAIN, "cables")
    nodes(core, "n3", NodeAction.DOWN, "fan")
    held = submit(core, 1, hold=True)
    assert info(core, held).hold is Hold.USER and info(core, held).reason == "JobHeldUser"
    core = restart(core, tmp_path, clock)
    for node in NODES:
        hello(core, node)
    states = {each.name: each.state for each in core.clients.query_nodes().nodes}
    assert states == {"n1": NodeState.DRAINED, "n2": NodeState.DRAINED, "n3": NodeState.DOWN, "n4": NodeState.UP}
    assert info(core, held).state is JobState.PENDING and info(core, held).hold is Hold.USER
    assert isinstance(jobs(core, JobAction.RELEASE, held, user="alice"), JobsControlled)
    assert info(core, held).node_names == ["n4"]  # the only node in service


def test_a_node_lost_without_word_returns_to_service_unless_the_setting_says_otherwise(tmp_path, clock):
    for return_to_service, back in ((1, NodeState.UP), (0, NodeState.DOWN)):
        folder = tmp_path / str(return_to_service)
        folder.mkdir()
        core = make(folder, clock, GANGS.model_copy(update={"return_to_service": return_to_service}))
        for _ in range(5):  # n4 says nothing for five quanta
            clock.now += 0.1
            for node in NODES[:3]:
                core.node_reports.heartbeat(Heartbeat(node=node))
            core.tick()
        assert state_of(core, "n4") is NodeState.DOWN
        hello(core, "n4")
        assert state_of(core, "n4") is back
        if back is NodeState.DOWN:
            (n4,) = [each for each in core.clients.query_nodes().nodes if each.name == "n4"]
            assert (n4.reason.text, n4.reason.user) == ("Not responding", "gangsched")
            nodes(core, "n4", NodeAction.RESUME, None)
            assert state_of(core, "n4") is NodeState.UP


@pytest.mark.parametrize("update, refusal", [
    (NodeUpdate(admin="alice", nodes="n1", action=NodeAction.DRAIN, reason="x"), "only root"),
    (NodeUpdate(admin="root", nodes="n9", action=NodeAction.DRAIN, reason="x"), "no node n9"),
    (NodeUpdate(admin="root", nodes="n[1-", action=NodeAction.DRAIN, reason="x"), "is not a hostlist"),
    (NodeUpdate(admin="root", nodes="n1", action=NodeAction.DRAIN), "needs a reason"),
    (NodeUpdate(admin="root", nodes="n[1-2]", action=NodeAction.RESUME), "n1 is not drained or down"),
])
def test_a_bad_node_command_is_refused_with_one_line_changes_nothing_and_is_recorded(tmp_path, clock, update,
                                                                                      refusal):
    core = make(tmp_path, clock)
    reply = administer(core, update)
    assert isinstance(reply, ErrorReply) and refusal in reply.reason and "\n" not in reply.reason
    assert {each.state for each in core.clients.query_nodes().nodes} == {NodeState.UP}
    (record,) = core.store.admin_log(0, 10)
    assert record.user == update.admin and record.result.startswith("refused: ") and refusal in record.result


def test_a_users_hold_and_roots_hold(tmp_path, clock):
    core = make(tmp_path, clock, GANGS.model_copy(update={"mpl": 1}), nodes=("n1",))
    running = submit(core, 1)
    mine, theirs = submit(core, 1), submit(core, 1, user="bob")
    assert "only they and root" in jobs(core, JobAction.HOLD, theirs, user="alice").reason
    assert "is running" in jobs(core, JobAction.HOLD, running, user="alice").reason
    jobs(core, JobAction.HOLD, mine, user="alice")
    jobs(core, JobAction.HOLD, theirs, user="root")
    assert (info(core, mine).reason, info(core, theirs).reason) == ("JobHeldUser", "JobHeldAdmin")
    end(core, running)
    assert {info(core, job).state for job in (mine, theirs)} == {JobState.PENDING}  # held: nothing starts
    assert "only root releases it" in jobs(core, JobAction.RELEASE, theirs, user="bob").reason
    refused = jobs(core, JobAction.RELEASE, mine, theirs, user="alice")  # one may not be: none is
    assert isinstance(refused, ErrorReply) and info(core, mine).hold is Hold.USER
    jobs(core, JobAction.RELEASE, mine, user="alice")
    assert info(core, mine).state is JobState.RUNNING
    assert "is not held" in jobs(core, JobAction.RELEASE, mine, user="alice").reason


def test_an_administrators_suspension_freezes_the_gang_until_root_resumes_it(tmp_path, clock):
    core = make(tmp_path, clock)
    gang = submit(core, 4)
    quantum(core)
    assert "only root" in jobs(core, JobAction.SUSPEND, gang, user="alice").reason
    done = jobs(core, JobAction.SUSPEND, gang)
    assert isinstance(done, JobsControlled) and done.jobs[0].state is JobState.SUSPENDED
    assert info(core, gang).reason == "Suspended by root"
    quantum(core)
    ran = info(core, gang).ran_s
    other = submit(core, 4)  # its processors are free in the matrix meanwhile
    scheduler = core.matrices.default.queue.scheduler
    for _ in range(5):
        quantum(core)
        assert gang not in {job for row in scheduler.layout for job in row}  # out of every row
    assert info(core, gang).ran_s == ran and info(core, other).state is JobState.RUNNING
    assert isinstance(jobs(core, JobAction.RESUME, gang), JobsControlled)
    assert gang in {job for row in scheduler.layout for job in row}
    resumed = info(core, gang)
    assert resumed.state is JobState.RUNNING and resumed.preemptions[-1].end is not None
    assert resumed.preemptions[-1].by_user == "root"
    assert "is not suspended" in jobs(core, JobAction.RESUME, gang).reason
    for _ in range(3):
        quantum(core)
    assert info(core, gang).ran_s > ran


def test_a_requeued_job_is_killed_and_waits_again(tmp_path, clock):
    core = make(tmp_path, clock)
    job = submit(core, 2)
    sent(core, LaunchTask)
    jobs(core, JobAction.REQUEUE, job, user="alice")
    for rank, node in enumerate(info(core, job).node_names):
        core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=-15))
    again = info(core, job)
    assert again.requeues == 1 and again.state is JobState.RUNNING  # queued again, and started again
    assert "is not running" in jobs(core, JobAction.REQUEUE, submit(core, 4, hold=True), user="alice").reason


def test_every_command_is_recorded_once_and_the_record_survives_a_restart(tmp_path, clock):
    core = make(tmp_path, clock)
    job = submit(core, 1)
    nodes(core, "n2", NodeAction.DRAIN, "disk")
    jobs(core, JobAction.SUSPEND, job, user="alice")
    jobs(core, JobAction.SUSPEND, job)
    core = restart(core, tmp_path, clock)
    records = core.store.admin_log(0, 10)
    assert [(each.number, each.user, each.command, each.result.split(":")[0]) for each in records] == [
        (1, "root", "admin node drain n2 --reason 'disk'", "done"),
        (2, "alice", f"admin suspend {job}", "refused"),
        (3, "root", f"admin suspend {job}", "done"),
    ]
    for node in NODES:
        hello(core, node, tasks=[TaskRef(job_id=job, rank=0)] if node == "n1" else [])
    assert info(core, job).state is JobState.SUSPENDED
    jobs(core, JobAction.RESUME, job)
    assert info(core, job).state is JobState.RUNNING


def update(core: DrivenMaster, job: int, user: str = "alice", **fields):
    return administer(core, JobUpdate.model_validate({"user": user, "job_id": job, **fields}))


def test_a_pending_job_is_updated_by_its_owner_within_their_rights_and_by_root_beyond(tmp_path, clock):
    core = make(tmp_path, clock, GANGS.model_copy(update={"mpl": 1}), nodes=("n1",))
    running = submit(core, 1)
    pending = submit(core, 1)
    assert info(core, pending).spec.estimate_s == 86_400
    done = update(core, pending, time_limit_s=600.0, name="shorter")
    assert isinstance(done, JobUpdated) and done.changes == ["TimeLimit 1-00:00:00 -> 10:00", "Name j -> shorter"]
    assert (info(core, pending).spec.estimate_s, info(core, pending).spec.name) == (600, "shorter")
    assert "only root raises a time limit" in update(core, pending, time_limit_s=700.0).reason
    assert "only root sets a job's priority" in update(core, pending, priority=0.5).reason
    assert isinstance(update(core, pending, user="root", time_limit_s=7200.0, priority=0.5), JobUpdated)
    assert "only they and root" in update(core, pending, user="bob", name="mine").reason
    assert "no partition 'nope'" in update(core, pending, partition="nope").reason
    assert "no job 999 to depend on" in update(core, pending, dependency=Dependency(after_ok=[999])).reason
    assert isinstance(update(core, pending, dependency=Dependency(after_ok=[running])), JobUpdated)
    assert info(core, pending).reason == f"Dependency: waits for {running}"
    assert "running: only its name and time limit change, not partition" in update(core, running,
                                                                                   partition="batch").reason
    assert isinstance(update(core, running, time_limit_s=60.0), JobUpdated)
    end(core, running)
    assert info(core, pending).state is JobState.RUNNING  # its dependency done
    assert "an ended job does not change" in update(core, running, name="late").reason
    refused = [each for each in core.store.admin_log(0, 100) if each.result.startswith("refused")]
    assert len(refused) == 7 and refused[0].command == f"update {pending} TimeLimit=11:40"


def test_an_update_is_checked_whole_as_a_submission_is_and_a_record_refused_since_is_quarantined(tmp_path, clock):
    core = make(tmp_path, clock, GANGS.model_copy(update={"mpl": 1}), nodes=("n1",))
    running, pending = submit(core, 1), submit(core, 1)
    for changes in ({"name": "\x1b[31mforged\nline"}, {"dependency": {"after_ok": list(range(1, 101))}}):
        refused = update(core, pending, **changes)
        assert isinstance(refused, ErrorReply) and refused.reason.startswith(("name", "after_ok")), refused.reason
        assert info(core, pending).spec.name == "j" and info(core, pending).spec.after_ok == []
    # a record mended by hand, or written by another version, that this gangsched would refuse
    core.store.commit()
    with core.store._db.batch():  # the store's own connection: what a hand at the database does
        core.store._db.execute("UPDATE jobs SET spec = ? WHERE job_id = ?",
                               (info(core, pending).spec.model_dump_json().replace('"j"', '"\\u001b[2J"'), pending))
    again = restart(core, tmp_path, clock)
    hello(again, "n1", tasks=[TaskRef(job_id=running, rank=0)])
    again.store.commit()
    assert [job_id for job_id, _ in again.store.quarantined()] == [pending]
    assert "control character" in again.store.quarantined()[0][1]
    assert info(again, running).state is JobState.RUNNING  # the master leads without it
    assert submit(again, 1) == pending + 1  # its number is not given again


def limit(core: DrivenMaster, user: str = "alice", admin: str = "root", **limits):
    return administer(core, SetLimits(admin=admin, user=user, **limits))


def test_a_users_limits_refuse_submissions_past_them_and_hold_back_jobs_past_the_running_ones(
        tmp_path, clock, alice_and_bob):
    core = make(tmp_path, clock)
    assert isinstance(limit(core, max_submit_jobs=4, max_jobs=2, max_cpus=3), UserList)
    first, second, third = submit(core, 1), submit(core, 1), submit(core, 1)
    assert [info(core, job).state for job in (first, second)] == [JobState.RUNNING] * 2
    assert (info(core, third).state, info(core, third).reason) == (JobState.PENDING, "QOSMaxJobsPerUserLimit")
    refused = core.clients.submit(Submit(spec=JobSpec(name="j", user="alice", tasks=1, argv=["true"]),
                                         array=[(0, 1, 1)]))
    assert "has 3 jobs pending or running: 2 more would pass MaxSubmitJobs 4: nothing submitted" in refused.reason
    assert "needs 4 processors, user alice's MaxCPUs is 3" in core.clients.submit(
        Submit(spec=JobSpec(name="j", user="alice", tasks=4, argv=["true"]))).reason
    theirs = [submit(core, 1, user="bob") for _ in range(2)]  # another user's are not held back
    assert {info(core, job).state for job in theirs} == {JobState.RUNNING}
    end(core, first)
    assert info(core, third).state is JobState.RUNNING  # it goes in as one ends
    limit(core, max_jobs=3)
    wide = submit(core, 2)  # 1 + 1 + 2 processors would pass MaxCPUs 3
    assert info(core, wide).reason == "QOSMaxCpuPerUserLimit"
    limit(core, max_cpus=-1, max_jobs=-1)
    assert info(core, wide).state is JobState.RUNNING  # lifted: in at once
    (alice,) = [user for user in core.users.query_users().users if user.user == "alice"]
    assert alice.limits == [UserLimits(max_submit_jobs=4)]


def test_a_limit_in_one_partition_and_the_refusals(tmp_path, clock, alice_and_bob):
    core = make(tmp_path, clock)
    limit(core, partition="batch", max_jobs=1)  # the implicit partition over every node
    held_back = [submit(core, 1) for _ in range(2)]
    assert info(core, held_back[1]).reason == "QOSMaxJobsPerUserLimit"
    for refusal, message in (
            ("only root sets users' limits", SetLimits(admin="alice", user="alice", max_jobs=3)),
            ("no user nobody-here", SetLimits(admin="root", user="nobody-here", max_jobs=3)),
            ("no partition 'debug'", SetLimits(admin="root", user="alice", partition="debug", max_jobs=3)),
            ("no limit given", SetLimits(admin="root", user="alice"))):
        reply = administer(core, message)
        assert isinstance(reply, ErrorReply) and refusal in reply.reason and reply.reason.endswith("nothing changed")
    core = restart(core, tmp_path, clock)
    for node in NODES:
        hello(core, node, tasks=[TaskRef(job_id=held_back[0], rank=0)] if node == "n1" else [])
    assert info(core, held_back[1]).reason == "QOSMaxJobsPerUserLimit"  # the running one still counts
    end(core, held_back[0])
    assert info(core, held_back[1]).state is JobState.RUNNING


def test_a_command_sent_again_with_its_token_is_answered_as_before_and_done_and_recorded_once(tmp_path, clock):
    core = make(tmp_path, clock, GANGS.model_copy(update={"mpl": 1}), nodes=("n1",))
    submit(core, 1)
    pending = submit(core, 1)
    hold = JobControl(user="alice", action=JobAction.HOLD, job_ids=[pending], token="t-1")
    first = administer(core, hold)
    core = restart(core, tmp_path, clock, GANGS.model_copy(update={"mpl": 1}))  # its reply lost in the crash
    again = administer(core, hold)
    assert isinstance(first, JobsControlled) and isinstance(again, JobsControlled)
    assert again.jobs[0].hold is Hold.USER and again.jobs[0].job_id == pending
    refused = JobControl(user="alice", action=JobAction.RELEASE, job_ids=[999], token="t-2")
    assert administer(core, refused).reason == administer(core, refused).reason
    renamed = JobUpdate(user="alice", job_id=pending, name="again", token="t-3")
    administer(core, renamed)
    assert administer(core, renamed).changes == [f"as asked before (update {pending} Name=again)"]
    records = core.store.admin_log(0, 100)
    assert [(each.token, each.result.split(":")[0]) for each in records] == [
        ("t-1", "done"), ("t-2", "refused"), ("t-3", "done")]
