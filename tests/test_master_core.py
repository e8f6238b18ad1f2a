"""The master's decisions, event by event, with a fake clock and a real SQLite store."""

from pathlib import Path

import pytest

from gangsched.master.accounts import OVER_QUOTA, Account, Use
from gangsched.master.settings import MasterSettings
from gangsched.master.sqlite_store import SqliteStore
from gangsched.protocol.codec import encode
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import (
    Cancel,
    ErrorReply,
    ExitAck,
    Heartbeat,
    KillTask,
    LaunchTask,
    MatrixQuery,
    NodeColumn,
    NodeHello,
    NodeWelcome,
    PmiFence,
    PmiFenceDone,
    PmixModexReply,
    PmixModexRequest,
    QuantumAccount,
    QuantumReport,
    SetUser,
    StartStep,
    Submit,
    TaskExit,
)
from gangsched.protocol.records import JobSpec, JobState, MpiKind, PeerEndpoint, StepSpec, TaskRef, TaskSample
from tests.helpers.driven_master import DrivenMaster, FakeClock, driven_master
from tests.helpers.master_events import ENDPOINTS, SETTINGS, hello, infos, sent, submit


def make_core(tmp_path: Path, clock: FakeClock, nodes: int = 4, settings: MasterSettings = SETTINGS) -> DrivenMaster:
    core = driven_master(settings, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    for index in range(1, nodes + 1):
        hello(core, f"n{index}")
    return core


def test_a_job_launches_one_task_per_node_and_completes(tmp_path, clock):
    core = make_core(tmp_path, clock)
    job = submit(core)
    launches = sent(core, LaunchTask)
    assert sorted(node for node, _ in launches) == ["n1", "n2", "n3", "n4"]
    assert sorted(m.task.rank for _, m in launches) == [0, 1, 2, 3]
    for rank, node in enumerate(["n1", "n2", "n3", "n4"]):
        core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=0))
    (info,) = infos(core, [job])
    assert info.state is JobState.COMPLETED and info.exit_code == 0


def report_of(node: str, quantum: int, column_epoch: int, samples: list[TaskSample] | None = None,
              sent_ns: int = 0, applied_ns: int = 0) -> QuantumReport:
    return QuantumReport(node=node, accounts=[QuantumAccount(
        quantum=quantum, switch_sent_ns=sent_ns, switch_applied_ns=applied_ns, column_epoch=column_epoch,
        samples=samples or [])])


def test_a_switch_names_rows_and_each_node_gets_its_column_when_it_changes(tmp_path, clock):
    core = make_core(tmp_path, clock)
    columns = {node: column for node, column in sent(core, NodeColumn)}  # the hellos': empty
    assert set(columns) == {"n1", "n2", "n3", "n4"} and all(not c.rows for c in columns.values())
    wide, narrow = submit(core, nodes=4), submit(core, nodes=2)  # GS, MPL 2: rows 0 and 1
    switch = core.tick()
    columns = {node: column for node, column in sent(core, NodeColumn)}
    assert columns["n1"].rows == {"batch": [[wide], [narrow]]} and columns["n4"].rows == {"batch": [[wide]]}
    assert (switch.rows, switch.alternates) == ({"batch": [0]}, [])
    assert core.tick().rows == {"batch": [1]} and not sent(core, NodeColumn)  # the same layout: nothing to send

    for rank, node in enumerate(["n1", "n2"]):
        core.task_ended(TaskExit(node=node, job_id=narrow, rank=rank, returncode=0))
    core.tick()
    changed = {node: column for node, column in sent(core, NodeColumn)}
    assert set(changed) == {"n1", "n2"} and changed["n1"].rows == {"batch": [[wide]]}  # the others' columns stand
    assert changed["n1"].epoch > columns["n1"].epoch


def test_a_node_that_lost_its_column_gets_it_again_and_one_that_says_hello_gets_it_at_once(tmp_path, clock):
    core = make_core(tmp_path, clock, nodes=2)
    job = submit(core, nodes=2)
    first = core.tick()
    column = dict(sent(core, NodeColumn))["n1"]
    core.node_reports.report(report_of("n1", first.quantum, column.epoch - 1))  # the column may still be on its way
    assert not sent(core, NodeColumn)
    later = core.tick()
    core.node_reports.report(report_of("n1", later.quantum, column.epoch - 1))  # a switch later: it was lost
    assert sent(core, NodeColumn) == [("n1", column)]
    core.node_reports.report(report_of("n2", later.quantum, column.epoch))
    assert not sent(core, NodeColumn)

    hello(core, "n2", tasks=[TaskRef(job_id=job, rank=1)], incarnation="restarted")
    assert dict(sent(core, NodeColumn))["n2"].rows == {"batch": [[job]]}


def test_the_switch_does_not_grow_with_the_cluster(tmp_path, clock):
    sizes = []
    for nodes in (4, 64):
        core = make_core(tmp_path / str(nodes), clock, nodes=nodes)
        for _ in range(3):
            submit(core, nodes=nodes)
        sizes.append(len(encode(core.tick())))
    assert sizes[0] == sizes[1] < 120


def test_a_failing_rank_fails_the_job_and_kills_the_others(tmp_path, clock):
    core = make_core(tmp_path, clock)
    job = submit(core)
    sent(core, LaunchTask)
    core.task_ended(TaskExit(node="n2", job_id=job, rank=1, returncode=3))
    kills = sent(core, KillTask)
    assert sorted(node for node, _ in kills) == ["n1", "n3", "n4"]
    for rank, node in [(0, "n1"), (2, "n3"), (3, "n4")]:
        core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=-15))
    (info,) = infos(core, [job])
    assert info.state is JobState.FAILED and info.exit_code == 3 and "rank 1 on n2" in info.reason


def test_a_record_the_store_cannot_hold_fails_its_job_alone_and_the_ends_behind_it_are_written(tmp_path, clock):
    core = make_core(tmp_path, clock)
    first, second = submit(core, nodes=2), submit(core, nodes=2)
    sent(core, LaunchTask)
    core.table.jobs[first].barriers = 2**64  # past SQLite's INTEGER: what no bound let in, had one missed it
    for job in (first, second):
        for rank, node in enumerate(core.table.jobs[job].node_names):
            core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=0))
    bad, good = infos(core, [first, second])
    assert bad.state is JobState.FAILED and "could not be stored" in bad.reason and bad.barriers == 0
    assert good.state is JobState.COMPLETED
    alone = submit(core, nodes=1)  # a job of one rank: its record goes with its close
    sent(core, LaunchTask)
    core.table.jobs[alone].cpu_ns = 2**64
    core.task_ended(TaskExit(node=core.table.jobs[alone].node_names[0], job_id=alone, rank=0, returncode=0))
    (info,) = infos(core, [alone])
    assert info.state is JobState.FAILED and "could not be stored" in info.reason


def test_a_silent_node_is_marked_down_and_its_jobs_fail_or_requeue(tmp_path, clock):
    core = make_core(tmp_path, clock)
    kept, lost = submit(core, requeue=True), submit(core)
    core.outbox.clear()
    clock.now += 0.25
    for node in ["n1", "n2", "n3"]:
        core.node_reports.heartbeat(Heartbeat(node=node))
    clock.now += 0.1  # n4 silent for 0.35 s > 3 heartbeats
    core.tick()
    assert [n.state for n in core.clients.query_nodes().nodes] == ["up", "up", "up", "down"]
    for job in (kept, lost):
        for rank, node in enumerate(["n1", "n2", "n3"]):
            core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=-15))
    requeued, failed = infos(core, [kept, lost])
    assert requeued.state is JobState.PENDING and requeued.requeues == 1
    assert failed.state is JobState.NODE_FAIL


def test_the_running_jobs_are_those_started_and_neither_requeued_nor_ended_since(tmp_path, clock):
    core = make_core(tmp_path, clock)
    kept, lost = submit(core, requeue=True), submit(core)
    assert [job.job_id for job in core.table.running()] == [kept, lost]
    clock.now += 0.35  # n4 silent for more than 3 heartbeats: both jobs end, one to be requeued
    for node in ["n1", "n2", "n3"]:
        core.node_reports.heartbeat(Heartbeat(node=node))
    core.tick()
    for job in (kept, lost):
        for rank, node in enumerate(["n1", "n2", "n3"]):
            core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=-15))
    assert [info.state for info in infos(core, [kept, lost])] == [JobState.PENDING, JobState.NODE_FAIL]
    assert core.table.running() == []
    hello(core, "n4")  # back: the requeued job starts again
    core.tick()
    assert [job.job_id for job in core.table.running()] == [kept]


def test_a_launch_in_flight_is_sent_again_to_the_same_daemon_only(tmp_path, clock):
    """A daemon restarted in its container may have its old pid: the incarnation tells them apart."""
    core = make_core(tmp_path, clock)
    job = submit(core)
    sent(core, LaunchTask)
    hello(core, "n1")  # the same daemon: its hello crossed the launch
    assert [node for node, _ in sent(core, LaunchTask)] == ["n1"]
    hello(core, "n2", incarnation="second")  # a new daemon, with none of the tasks
    assert sorted(node for node, _ in sent(core, KillTask)) == ["n1", "n3", "n4"]
    for rank, node in [(0, "n1"), (2, "n3"), (3, "n4")]:
        core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=-15))
    (info,) = infos(core, [job])
    assert info.state is JobState.NODE_FAIL and "rank 1 vanished from node n2" in info.reason


def test_a_hello_sent_before_its_welcome_arrived_takes_only_its_exits(tmp_path, clock):
    """A daemon repeats its hello until welcomed, and its reports take another socket: a hello it sent before
    the welcome and the launch after it arrived can come after the report that showed the task running
    (found by the thousand-node test under load, which failed the job as 'rank vanished')."""
    core = make_core(tmp_path, clock, nodes=2)  # each welcomed once
    job = submit(core, nodes=2)
    sent(core, LaunchTask)
    for rank, node in enumerate(["n1", "n2"]):
        sample = TaskSample(job_id=job, rank=rank, cpu_ns=10**6, runnable_ns=10**8, progress=0)
        core.node_reports.report(report_of(node, 1, 0, [sample]))
    assert hello(core, "n1", welcomed=0) is None  # no task: older news than the report
    assert not sent(core, LaunchTask) and [info.state for info in infos(core, [job])] == [JobState.RUNNING]
    end = TaskExit(node="n2", job_id=job, rank=1, returncode=0)
    assert hello(core, "n2", welcomed=0, exits=[end]) is None
    assert sent(core, ExitAck) == [("n2", ExitAck(job_id=job, rank=1))]  # an exit is a fact, whenever it comes
    # nothing reported for two heartbeats: the welcome went astray, this hello is answered
    clock.now += 2 * SETTINGS.heartbeat_ms / 1000 + 0.01
    assert isinstance(hello(core, "n1", welcomed=0), NodeWelcome)
    (info,) = infos(core, [job])
    assert info.state is JobState.NODE_FAIL and "rank 0 vanished from node n1" in info.reason
    assert isinstance(hello(core, "n2", welcomed=1), NodeWelcome)  # sent once its welcome had come: answered


def test_an_order_its_daemon_left_the_socket_before_waits_for_the_same_daemon_s_next_hello(tmp_path, clock):
    """With several masters a daemon whose hello a new leader answered late has gone to another master:
    the node is not lost for that, and what could not reach it goes with its next hello."""
    core = make_core(tmp_path, clock, nodes=2)
    job = submit(core, nodes=2)
    (_, launch), _ = sent(core, LaunchTask)
    for node in ("n1", "n2"):
        core.pmi_relay.pmi_fence(PmiFence(node=node, job_id=job, epoch=0, kvs={}))
    (to_n1, done), (to_n2, _) = sent(core, PmiFenceDone)
    assert (to_n1, to_n2) == ("n1", "n2")
    core.node_events.undelivered("n1", launch)
    core.node_events.undelivered("n1", done)
    core.node_events.undelivered("n2", done)
    core.tick()
    assert [node.state for node in core.clients.query_nodes().nodes] == ["up", "up"]
    hello(core, "n1")  # the same daemon: the barrier it waits on completes, its launch goes once
    assert [node for node, message in core.outbox if isinstance(message, LaunchTask)] == ["n1"]
    assert sent(core, PmiFenceDone) == [("n1", done)]
    hello(core, "n2", incarnation="second")  # another daemon: the old one's orders mean nothing to it
    assert sent(core, PmiFenceDone) == []


def test_a_daemon_that_missed_a_launch_and_still_reports_is_asked_for_the_hello_that_brings_it(tmp_path, clock):
    """Its socket to the master came back without its knowing (no hello of its own would come): a launch
    lost on the way must not leave its job running forever."""
    core = make_core(tmp_path, clock, nodes=1)
    job = submit(core, nodes=1)
    ((_, launch),) = sent(core, LaunchTask)
    core.node_events.undelivered("n1", launch)
    reply = core.node_reports.heartbeat(Heartbeat(node="n1"))
    assert isinstance(reply, ErrorReply) and reply.code is ErrorCode.UNKNOWN_NODE
    assert isinstance(core.node_reports.report(report_of("n1", 1, 0)), ErrorReply)
    hello(core, "n1", welcomed=1)
    assert sent(core, LaunchTask) == [("n1", launch)] and infos(core, [job])[0].state is JobState.RUNNING
    assert core.node_reports.heartbeat(Heartbeat(node="n1")) is None  # owed nothing more


def test_a_node_that_was_down_must_say_hello_again(tmp_path, clock):
    core = make_core(tmp_path, clock)
    clock.now += 1.0
    core.tick()
    reply = core.node_reports.heartbeat(Heartbeat(node="n1"))
    assert isinstance(reply, ErrorReply) and reply.code is ErrorCode.UNKNOWN_NODE
    assert isinstance(core.node_reports.report(report_of("n1", 1, 0)), ErrorReply)


def test_nodes_report_every_few_quanta_as_the_cluster_grows_and_each_quantum_counts(tmp_path, clock):
    """A switch asks each node for its accounts every ``report_interval_ms``, and above
    ``reports_per_quantum`` nodes every few quanta more; a report of several quanta counts
    each as one report of it would."""
    every_quantum = SETTINGS.model_copy(update={"report_interval_ms": 0})
    core = make_core(tmp_path, clock, nodes=4, settings=every_quantum.model_copy(update={"reports_per_quantum": 3}))
    job = submit(core, nodes=2)
    switches = [core.tick() for _ in range(2)]
    assert [switch.report_every for switch in switches] == [2, 2]  # ceil(4 / 3)
    assert make_core(tmp_path / "small", clock, settings=every_quantum).tick().report_every == 1
    interval = SETTINGS.model_copy(update={"report_interval_ms": 350})  # 3 quanta of 100 ms, and part of one
    assert make_core(tmp_path / "interval", clock, settings=interval).tick().report_every == 3
    for node, cpu_ms in (("n1", 90), ("n2", 70)):
        core.node_reports.report(QuantumReport(node=node, accounts=[
            QuantumAccount(quantum=switch.quantum, switch_sent_ns=switch.sent_ns,
                           switch_applied_ns=switch.sent_ns + 1000 * (index + 1), column_epoch=1,
                           samples=[TaskSample(job_id=job, rank=int(node[1]) - 1, cpu_ns=cpu_ms * 10**6,
                                               runnable_ns=200 * 10**6, progress=index)])
            for index, switch in enumerate(switches)]))
    for node in ("n3", "n4"):
        core.node_reports.report(QuantumReport(node=node, accounts=[
            QuantumAccount(quantum=switch.quantum, switch_sent_ns=switch.sent_ns,
                           switch_applied_ns=switch.sent_ns, column_epoch=0, samples=[]) for switch in switches]))
    assert core.switch_stats(10, 0).latencies_ns == [1000, 2000]  # both quanta, every node's
    (info,) = infos(core, [job])
    assert info.util_pct == pytest.approx(80.0)  # (90 + 70) / 2 ms of 200 ms at a 0.5 share
    assert info.barriers == 1


def test_a_job_wider_than_the_cluster_is_refused(tmp_path, clock):
    core = make_core(tmp_path, clock)
    reply = core.clients.submit(Submit(spec=JobSpec(name="j", user="u", tasks=5, argv=["true"])))
    assert isinstance(reply, ErrorReply) and reply.code is ErrorCode.NEVER_FITS


def test_only_the_owner_may_cancel(tmp_path, clock):
    core = make_core(tmp_path, clock)
    job = submit(core)
    reply = core.clients.cancel(Cancel(job_id=job, user="mallory"))
    assert isinstance(reply, ErrorReply) and reply.code is ErrorCode.PERMISSION_DENIED
    assert core.clients.cancel(Cancel(job_id=job, user="alice")).state is JobState.CANCELLED
    assert isinstance(core.clients.cancel(Cancel(job_id=99, user="alice")), ErrorReply)


def test_utilization_is_cpu_over_runnable_time_and_node_share(tmp_path, clock):
    core = make_core(tmp_path, clock, nodes=2)
    job = submit(core, nodes=2)
    switch = core.tick()
    for rank, (node, cpu_ms) in enumerate([("n1", 90), ("n2", 80)]):
        sample = TaskSample(job_id=job, rank=rank, cpu_ns=cpu_ms * 10**6, runnable_ns=200 * 10**6, progress=5)
        core.node_reports.report(report_of(node, switch.quantum, 1, [sample], switch.sent_ns, switch.sent_ns + 1000))
    (info,) = infos(core, [job])
    assert info.util_pct == pytest.approx(85.0)  # (90 + 80) / 2 ms of 200 ms at a 0.5 share
    assert info.barriers == 5
    assert core.switch_stats(10, 0).latencies_ns == [1000]
    # at a 0.5 share the nodes share cores by design: a wait for one is the other node's turn, not a want
    switch = core.tick()
    for rank, node in enumerate(["n1", "n2"]):
        sample = TaskSample(job_id=job, rank=rank, cpu_ns=20 * 10**6, runnable_ns=200 * 10**6, progress=7,
                            waited_ns=60 * 10**6)
        core.node_reports.report(report_of(node, switch.quantum, 1, [sample], switch.sent_ns, switch.sent_ns + 1000))
    (info,) = infos(core, [job])
    assert info.util_pct == pytest.approx(20.0)


def test_a_wait_for_a_core_another_process_held_is_wanted_where_a_processor_has_a_core(tmp_path, clock):
    """A busy-polling rank whose core an outside process took part of the quantum is not half idle."""
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    for node in ("n1", "n2"):
        core.node_events.hello(node.encode(), NodeHello(memory=1 << 30, host_memory=1 << 32,
                                                        node=node, cpu_share=1.0, pid=1, incarnation="first",
                                                        peer=PeerEndpoint(transport="ipc", host="/tmp")))
    job = submit(core, nodes=2)
    switch = core.tick()
    for rank, (node, cpu_ms, waited_ms) in enumerate([("n1", 40, 50), ("n2", 90, 90)]):
        sample = TaskSample(job_id=job, rank=rank, cpu_ns=cpu_ms * 10**6, runnable_ns=100 * 10**6, progress=1,
                            waited_ns=waited_ms * 10**6)
        core.node_reports.report(report_of(node, switch.quantum, 1, [sample], switch.sent_ns, switch.sent_ns + 1000))
    (info,) = infos(core, [job])
    assert info.util_pct == pytest.approx((90.0 + 100.0) / 2)  # and never over 100 %


def test_a_restarted_master_keeps_queued_and_running_jobs(tmp_path, clock):
    core = make_core(tmp_path, clock)
    first, second, queued = submit(core), submit(core), submit(core)  # mpl 2: the third waits
    core2 = make_core(tmp_path, clock, nodes=0)
    restored = infos(core2, [first, second, queued])
    assert [i.state for i in restored] == [JobState.RUNNING, JobState.RUNNING, JobState.PENDING]
    assert core2.clients.query_matrix(MatrixQuery()).rows == []  # running jobs wait for their nodes to say hello
    # n1..n3 come back with their tasks; n4 lost its own and runs one nobody knows
    for rank, node in enumerate(["n1", "n2", "n3"]):
        hello(core2, node, [TaskRef(job_id=first, rank=rank), TaskRef(job_id=second, rank=rank)])
    hello(core2, "n4", [TaskRef(job_id=77, rank=0)])
    kills = sent(core2, KillTask)
    assert ("n4", KillTask(job_id=77, step=0, reason="orphaned task")) in kills
    assert {m.job_id for _, m in kills} == {77, first, second}


def test_a_restarted_master_gives_the_nodes_of_running_jobs_time_to_come_back(tmp_path, clock):
    job = submit(make_core(tmp_path, clock))
    restarted = make_core(tmp_path, clock, nodes=0)
    for rank, node in enumerate(["n1", "n2", "n3"]):
        hello(restarted, node, [TaskRef(job_id=job, rank=rank)])

    def after(seconds: float) -> list[str]:
        clock.now += seconds
        for node in ["n1", "n2", "n3"]:
            restarted.node_reports.heartbeat(Heartbeat(node=node))
        restarted.tick()
        return [n.state for n in restarted.clients.query_nodes().nodes]

    assert after(1.0) == ["up"] * 4  # n4 is past 3 heartbeats, but its reconnect may take that long
    assert not sent(restarted, KillTask)
    assert after(SETTINGS.rejoin_s) == ["up", "up", "up", "down"]
    assert {node for node, _ in sent(restarted, KillTask)} == {"n1", "n2", "n3"}
    assert "n4 did not come back" in infos(restarted, [job])[0].reason


def test_the_cpu_a_report_brings_is_its_job_s_and_step_s_at_once_and_its_user_s_at_the_next_boundary(tmp_path,
                                                                                                       clock):
    core = make_core(tmp_path, clock, nodes=1)
    job = submit(core, nodes=1)
    core.step_starts.start(StartStep(job_id=job, user="alice", step=StepSpec(argv=["x"])))
    core.tick()  # its row runs
    core.node_reports.report(report_of("n1", 1, 0, [TaskSample(job, 0, 30_000_000, 1, 0),
                                                   TaskSample(job, 0, 20_000_000, 1, 0, step=1)]))
    record = core.table.jobs[job]
    assert (record.cpu_ns, record.steps[0].cpu_ns, record.steps[1].cpu_ns) == (50_000_000, 30_000_000, 20_000_000)
    assert core.users.query_users().users[0].used_cpu_s == 0, "a report charges no account itself"
    clock.now += 0.1
    core.tick()
    assert core.users.query_users().users[0].used_cpu_s == pytest.approx(0.05)
    core.task_ended(TaskExit(node="n1", job_id=job, step=1, rank=0, returncode=0, cpu_ns=5_000_000))
    assert core.users.query_users().users[0].used_cpu_s == pytest.approx(0.055), "an exit's, at once"


def test_only_root_sets_users_and_use_counts_against_the_quota(tmp_path, clock):
    core = make_core(tmp_path, clock)
    refused = core.users.set_user(SetUser(admin="alice", user="alice", political_priority=1.0))
    assert isinstance(refused, ErrorReply) and refused.code is ErrorCode.PERMISSION_DENIED
    core.users.set_user(SetUser(admin="root", user="alice", political_priority=0.5, quota_processor_s=2.0))
    job = submit(core, nodes=2)
    core.tick()
    clock.now += 0.25
    core.tick()  # job ran 0.25 s on 2 processors: half a processor-second
    for rank, node in enumerate(["n1", "n2"]):
        core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=0, cpu_ns=100_000_000))
    (alice,) = core.users.query_users().users
    assert alice.used_processor_s == pytest.approx(0.5) and not alice.over_quota
    assert alice.used_cpu_s == pytest.approx(0.2)
    assert Account("alice", 0.5, 2.0, Use(alice.used_processor_s)).priority_for_policy == 0.5
    assert Account("alice", 0.5, 2.0, Use(2.0)).priority_for_policy == OVER_QUOTA
    restarted = make_core(tmp_path, clock, nodes=0)
    assert restarted.users.query_users().users == [alice]  # the store keeps it


def test_use_is_charged_to_its_user_quantum_by_quantum_as_it_accrues(tmp_path, clock):
    """Each quantum a job runs in charges its user the processors and the memory it held in it, and each report
    the CPU time its tasks used: a user over quota is so while their job still runs, not once it ends."""
    core = make_core(tmp_path, clock)
    core.users.set_user(SetUser(admin="root", user="alice", political_priority=0.5, quota_processor_s=0.3))
    spec = JobSpec(name="j", user="alice", tasks=2, argv=["true"], mem_per_cpu=1 << 20)
    job = core.clients.submit(Submit(spec=spec)).job_id
    core.tick()
    used = []
    for _ in range(2):  # within the nodes' heartbeats
        clock.now += 0.1
        core.tick()
        used.append(core.users.query_users().users[0])
    assert [each.used_processor_s for each in used] == pytest.approx([0.2, 0.4])
    assert [each.used_memory_byte_s for each in used] == pytest.approx([0.1 * 2 * (1 << 20) * n for n in (1, 2)])
    assert [each.over_quota for each in used] == [False, True]
    assert infos(core, [job])[0].state is JobState.RUNNING


def test_a_dependent_job_waits_out_a_master_restart_and_starts_when_its_dependency_completes(tmp_path, clock):
    core = make_core(tmp_path, clock)
    first = submit(core)
    sent(core, LaunchTask)
    spec = JobSpec(name="after", user="alice", tasks=4, argv=["true"], after_ok=[first])
    dependent = core.clients.submit(Submit(spec=spec)).job_id
    core2 = make_core(tmp_path, clock, nodes=0)
    for rank, node in enumerate(["n1", "n2", "n3", "n4"]):
        hello(core2, node, [TaskRef(job_id=first, rank=rank)])
    (waiting,) = infos(core2, [dependent])
    assert waiting.state is JobState.PENDING and waiting.reason == f"Dependency: waits for {first}"
    assert not [m for _, m in sent(core2, LaunchTask) if m.task.job_id == dependent]
    for rank, node in enumerate(["n1", "n2", "n3", "n4"]):
        core2.task_ended(TaskExit(node=node, job_id=first, rank=rank, returncode=0))
    assert {m.task.job_id for _, m in sent(core2, LaunchTask)} == {dependent}
    assert infos(core2, [dependent])[0].state is JobState.RUNNING


def test_pmix_fences_concatenate_every_nodes_blob_and_modex_requests_go_to_the_ranks_node(tmp_path, clock):
    core = make_core(tmp_path, clock, nodes=2)
    for node in ("n1", "n2"):  # nodes that serve PMIx
        hello(core, node, mpi=(MpiKind.PMI1, MpiKind.PMIX))
    spec = JobSpec(name="j", user="alice", tasks=2, argv=["true"], mpi=MpiKind.PMIX)
    job = core.clients.submit(Submit(spec=spec)).job_id
    launches = sent(core, LaunchTask)
    assert {message.task.nodes[0] for _, message in launches} == {"n1"}  # the node map: the job's nodes
    assert core.pmi_relay.pmi_fence(PmiFence(node="n2", job_id=job, epoch=0, kvs={}, data=b"\x00two")) is None
    assert sent(core, PmiFenceDone) == []
    core.pmi_relay.pmi_fence(PmiFence(node="n1", job_id=job, epoch=0, kvs={}, data=b"one\x00"))
    done = sent(core, PmiFenceDone)
    assert [node for node, _ in done] == ["n1", "n2"] and {m.data for _, m in done} == {b"one\x00\x00two"}
    core.pmi_relay.pmix_modex_request(PmixModexRequest(node="n1", job_id=job, rank=1, request=5))
    assert [node for node, _ in sent(core, PmixModexRequest)] == ["n2"]
    core.pmi_relay.pmix_modex_reply(PmixModexReply(node="n2", asker="n1", job_id=job, rank=1, request=5, status=0,
                                                     data=b"x"))
    assert [node for node, _ in sent(core, PmixModexReply)] == ["n1"]
    wrong = core.pmi_relay.pmix_modex_reply(PmixModexReply(node="n1", asker="n2", job_id=job, rank=1, request=5,
                                                             status=0))
    assert isinstance(wrong, ErrorReply)  # rank 1 is not n1's


def test_an_interface_no_node_serves_is_refused_and_a_job_naming_none_gets_the_default(tmp_path, clock):
    core = make_core(tmp_path, clock, settings=SETTINGS.model_copy(update={"mpi_default": MpiKind.PMI1}))
    refused = core.clients.submit(Submit(spec=JobSpec(name="j", user="u", tasks=1, argv=["true"], mpi=MpiKind.PMIX)))
    assert isinstance(refused, ErrorReply) and "no node serves --mpi pmix" in refused.reason
    hello(core, "n1", mpi=(MpiKind.PMI1, MpiKind.PMI2))
    job = core.clients.submit(Submit(spec=JobSpec(name="j", user="u", tasks=1, argv=["true"]))).job_id
    (info,) = infos(core, [job])
    assert info.spec.mpi is MpiKind.PMI1
