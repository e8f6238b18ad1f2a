"""The wire format against bytes: round trips, and every kind of bad input."""

import typing

import msgpack
import pytest
from pydantic import ValidationError

from gangsched.protocol.admin_messages import (
    AdminAction,
    AdminLog,
    AdminLogQuery,
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
from gangsched.protocol.codec import decode, encode
from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.frames import JOBS_PER_REPLY, MAX_MESSAGE_BYTES, PROTOCOL_VERSION
from gangsched.protocol.leadership_messages import (
    MasterInfo,
    MasterRole,
    MastersList,
    MastersQuery,
    NotLeader,
    Takeover,
    TakeoverRequested,
)
from gangsched.protocol.messages import (
    Cancel,
    Cancelled,
    CheckpointTask,
    ErrorReply,
    ExitAck,
    Heartbeat,
    Histogram,
    JobCount,
    JobCountQuery,
    JobCounts,
    JobList,
    JobQuery,
    KillTask,
    LaunchTask,
    MasterStats,
    MatrixQuery,
    MatrixView,
    Message,
    NodeColumn,
    NodeHello,
    NodeList,
    NodeQuery,
    NodeWelcome,
    PmiFence,
    PmiFenceDone,
    PmixModexReply,
    PmixModexRequest,
    QuantumAccount,
    QuantumReport,
    Reconfigure,
    Reconfigured,
    SetUser,
    SignalJob,
    Signalled,
    SignalTask,
    SlotSwitch,
    StatsQuery,
    Submit,
    Submitted,
    SwitchStats,
    SwitchStatsQuery,
    TaskExit,
    UserList,
    UserQuery,
)
from gangsched.protocol.records import (
    MAX_COMMAND_BYTES,
    Hold,
    JobInfo,
    JobSpec,
    JobState,
    MpiKind,
    NodeInfo,
    NodeState,
    PeerEndpoint,
    StepSpec,
    TaskRef,
    TaskSample,
    TaskSpec,
    UserInfo,
)
from gangsched.protocol.reservation_messages import (
    ReservationCreate,
    ReservationDelete,
    ReservationFlag,
    ReservationInfo,
    ReservationList,
    ReservationQuery,
    ReservationUpdate,
)
from gangsched.protocol.step_messages import StartStep, StepStarted

SPEC = JobSpec(name="j", user="u", tasks=4, nodes=2, tasks_per_node=2, mpi=MpiKind.PMI1, argv=["true"])

MESSAGES = [
    SlotSwitch(quantum=7, sent_ns=123, rows={"batch": [0, 2], "debug": [1]}, alternates=[5], report_every=4),
    NodeColumn(epoch=3, rows={"batch": [[1], [], [2, 4]], "debug": [[3]]}),
    QuantumReport(
        node="n1",
        accounts=[
            QuantumAccount(
                quantum=7,
                switch_sent_ns=1,
                switch_applied_ns=2,
                column_epoch=3,
                samples=[TaskSample(job_id=1, rank=0, cpu_ns=5, runnable_ns=9, progress=3)],
            ),
            QuantumAccount(quantum=8, switch_sent_ns=3, switch_applied_ns=4, column_epoch=3, samples=[]),
        ],
    ),
    NodeHello(
        memory=1 << 30,
        host_memory=1 << 32,
        node="n1",
        cpu_share=0.5,
        pid=42,
        incarnation="a1",
        peer=PeerEndpoint(transport="tcp", host="h", ports=(1, 9)),
        tasks=[TaskRef(job_id=1, rank=0)],
        exits=[TaskExit(node="n1", job_id=2, rank=1, returncode=-9)],
    ),
    NodeWelcome(node="n1", switch_endpoint="ipc:///s", report_endpoint="ipc:///r", heartbeat_ms=500, quantum_ms=100),
    Heartbeat(node="n1"),
    LaunchTask(
        task=TaskSpec(
            job_id=1,
            rank=0,
            size=2,
            user="alice",
            processors=[1, 2],
            block=[1, 1],
            mpi=MpiKind.PMI1,
            rendezvous="10.0.0.1:24000",
            argv=["true"],
            cwd=None,
            env={"A": "b"},
            barrier_addr="ipc:///b",
            barrier_bind="ipc:///b",
            io_addr=None,
            output="%j.out",
            checkpoint="/c",
            restore=True,
        )
    ),
    KillTask(job_id=1, reason="cancelled"),
    SignalTask(job_id=1, signal=10, steps=[1, 2], whole=False),
    CheckpointTask(job_id=1),
    PmiFence(node="n1", job_id=1, epoch=0, kvs={"-allgather-1-0": "segments=9"}),
    PmiFenceDone(job_id=1, epoch=0, kvs={"-allgather-1-0": "segments=9", "-allgather-1-1": "segments=9"}),
    PmiFence(node="n1", job_id=1, epoch=1, kvs={}, data=b"\x00blob\x00"),
    PmixModexRequest(node="n1", job_id=1, rank=3, request=7),
    PmixModexReply(node="n2", asker="n1", job_id=1, rank=3, request=7, status=0, data=b"\x00\x01"),
    TaskExit(node="n1", job_id=2, rank=1, returncode=None, error="no such file", cpu_ns=3),
    ExitAck(job_id=2, rank=1),
    Submit(spec=SPEC),
    Submit(spec=SPEC.model_copy(update={"after_ok": [1], "after_any": [2]}), token="t", array=[(0, 4, 2)],
           array_limit=2),
    Submitted(job_id=3, count=2),
    Cancel(job_id=3, user="u"),
    Cancelled(job_id=3, state=JobState.CANCELLED),
    SignalJob(job_id=3, user="alice", signal=12, batch=True),
    Signalled(job_id=3, nodes=["n1"]),
    JobQuery(job_ids=[1, 2], include_finished=True),
    JobQuery(include_finished=True, ended_after=1.5e9, after_id=7),
    JobList(
        jobs=[
            JobInfo(
                job_id=1,
                spec=SPEC,
                state=JobState.RUNNING,
                submit_time=1.5,
                node_names=["n1", "n2"],
                util_pct=97.5,
                migration_s=[0.25],
            )
        ]
    ),
    JobCountQuery(),
    JobCounts(counts=[JobCount(state=JobState.PENDING, partition="batch", reason="Priority", count=4)]),
    NodeQuery(),
    NodeList(nodes=[NodeInfo(name="n1", state=NodeState.UP, cpu_share=0.5, jobs=[1], seen_ago_s=0.1)]),
    MatrixQuery(),
    MatrixView(
        partition="batch",
        quantum=9,
        quantum_ms=100,
        policy="strict",
        nodes=["n1", "n2"],
        rows=[[1, None], [2, 2]],
        running=[0],
        alternates=[3],
    ),
    SwitchStatsQuery(last=10),
    SwitchStats(latencies_ns=[600_000], master_cpu_ns=5, quantum=9, partner_quanta=[1, 0]),
    StatsQuery(),
    MasterStats(
        start_time=1.0,
        quanta=9,
        busy_quanta=8,
        paired_quanta=2,
        scheduling_events=3,
        switch_latency=Histogram(bounds=[0.001], counts=[7, 1], total_s=0.009),
        scheduling=Histogram(bounds=[0.001], counts=[3, 0]),
        store_write=Histogram(bounds=[], counts=[0]),
        quantum_decision=Histogram(bounds=[0.001], counts=[9, 0]),
        report_drain=Histogram(bounds=[], counts=[4]),
        migrations=0,
        migration_cost=Histogram(bounds=[1.0], counts=[0, 0]),
        cpu_s=0.5,
        resident_bytes=1 << 25,
    ),
    SetUser(admin="root", user="u", political_priority=0.5, clear_quota=True),
    Reconfigure(admin="root"),
    Reconfigured(config="/etc/gangsched/gangsched.toml", partitions=["batch", "debug"],
                 changes=["partition debug added"]),
    UserQuery(),
    UserList(users=[UserInfo(user="u", political_priority=0.5, quota_processor_s=None, used_processor_s=2.0,
                             used_cpu_s=1.5, used_memory_byte_s=3e9, over_quota=False)]),
    NodeUpdate(admin="root", nodes="n[1-4]", action=NodeAction.DRAIN, reason="fan"),
    NodesUpdated(nodes=["n1", "n2", "n3", "n4"], action=NodeAction.DRAIN),
    JobControl(user="alice", action=JobAction.HOLD, job_ids=[7, 8]),
    JobsControlled(action=JobAction.HOLD, jobs=[JobInfo(job_id=7, spec=SPEC, state=JobState.PENDING,
                                                         submit_time=1.0, hold=Hold.USER, reason="JobHeldUser")]),
    JobUpdate(user="alice", job_id=7, time_limit_s=600.0, dependency=Dependency(after_ok=[5])),
    JobUpdated(job=JobInfo(job_id=7, spec=SPEC, state=JobState.PENDING, submit_time=1.0),
               changes=["TimeLimit 1-00:00:00 -> 10:00"]),
    SetLimits(admin="root", user="alice", partition="debug", max_jobs=4, max_memory=-1),
    ReservationCreate(admin="root", name="maint", nodes="n[3-4]", start="now+60", duration="2:00:00",
                      users=["alice"], flags=[ReservationFlag.MAINT]),
    ReservationUpdate(admin="root", name="maint", duration="3:00:00"),
    ReservationDelete(admin="root", name="maint"),
    ReservationQuery(),
    ReservationList(reservations=[ReservationInfo(name="maint", nodes=["n3", "n4"], start=60.0, end=7260.0,
                                                  users=["alice"], flags=[ReservationFlag.MAINT], jobs=[7])]),
    AdminLogQuery(after=3),
    AdminLog(actions=[AdminAction(number=4, time=2.0, user="root", command="admin suspend 7", result="done")]),
    MastersQuery(),
    MastersList(masters=[MasterInfo(endpoint="tcp://m1:7070", host="m1", pid=40, role=MasterRole.ACTIVE, epoch=3,
                                    seen_s=0.1)]),
    Takeover(admin="root", to="tcp://m2:7070"),
    StartStep(job_id=7, user="alice", step=StepSpec(argv=["hostname"], env={"A": "1"}, cwd="/tmp", slots=[1, 0])),
    StepStarted(job_id=7, step_id=1),
    TakeoverRequested(to="tcp://m2:7070", leader="tcp://m1:7070", epoch=3),
    NotLeader(master="tcp://m2:7070", leader="tcp://m1:7070"),
    ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason="no job 7"),
]


def test_the_leader_epoch_is_stamped_on_what_goes_to_nodes_and_nothing_else():
    kill = decode(encode(KillTask(job_id=7, reason="cancelled"), leader_epoch=4))
    assert isinstance(kill, KillTask) and kill.leader_epoch == 4
    assert decode(encode(KillTask(job_id=7, reason="cancelled"))).leader_epoch == 0
    error = ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason="no job 7")
    assert decode(encode(error, leader_epoch=4)) == error  # not a message of the leader's: nothing added


def test_every_message_type_has_an_example():
    union = typing.get_args(typing.get_args(Message)[0])
    assert {model.__name__ for model in union} == {type(message).__name__ for message in MESSAGES}


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.type)
def test_every_message_survives_a_round_trip(message):
    assert decode(encode(message)) == message


@pytest.mark.parametrize(
    "frame, code",
    [
        (b"", ErrorCode.BAD_MESSAGE),
        (b"\xc1", ErrorCode.BAD_MESSAGE),  # a byte msgpack never uses
        (encode(Cancel(job_id=1, user="u"))[:-2], ErrorCode.BAD_MESSAGE),  # truncated
        (msgpack.packb([1, 2, 3]), ErrorCode.BAD_MESSAGE),  # not a map
        (msgpack.packb({"v": PROTOCOL_VERSION, "type": "no_such"}), ErrorCode.BAD_MESSAGE),
        (msgpack.packb({"v": PROTOCOL_VERSION, "type": "cancel", "job_id": "x", "user": "u"}),
         ErrorCode.BAD_MESSAGE),
        (msgpack.packb({"v": PROTOCOL_VERSION + 1, "type": "cancel", "job_id": 1, "user": "u"}),
         ErrorCode.VERSION_MISMATCH),
        (msgpack.packb({"type": "cancel", "job_id": 1, "user": "u"}), ErrorCode.VERSION_MISMATCH),
        (b"\x00" * (MAX_MESSAGE_BYTES + 1), ErrorCode.TOO_LARGE),
        # accounts and samples are arrays: one short of a field, or with a word for a number
        (msgpack.packb({"v": PROTOCOL_VERSION, "type": "quantum_report", "node": "n",
                        "accounts": [[1, 2, 3, 4, [[1, 0, 5, 9]]]]}), ErrorCode.BAD_MESSAGE),
        (msgpack.packb({"v": PROTOCOL_VERSION, "type": "quantum_report", "node": "n",
                        "accounts": [[1, 2, 3, "four", []]]}), ErrorCode.BAD_MESSAGE),
        (msgpack.packb({"v": PROTOCOL_VERSION, "type": "quantum_report", "node": "n", "accounts": []}),
         ErrorCode.BAD_MESSAGE),
    ],
    ids=["empty", "invalid-byte", "truncated", "list", "unknown-type", "wrong-field-type",
         "newer-version", "no-version", "too-large", "short-sample", "word-for-number", "no-accounts"],
)
def test_bad_bytes_give_one_typed_error(frame, code):
    with pytest.raises(ProtocolError) as raised:
        decode(frame)
    assert raised.value.code is code
    assert raised.value.reason


def test_a_tcp_peer_needs_a_port_range():
    frame = msgpack.packb({
        "v": PROTOCOL_VERSION, "type": "node_hello", "node": "n", "cpu_share": 1.0, "pid": 1, "incarnation": "i",
        "peer": {"transport": "tcp", "host": "h"},
    })
    with pytest.raises(ProtocolError, match="port range"):
        decode(frame)


def test_a_spec_with_no_command_is_refused():
    frame = msgpack.packb({"v": PROTOCOL_VERSION, "type": "submit",
                           "spec": {"name": "j", "user": "u", "tasks": 1, "argv": []}})
    with pytest.raises(ProtocolError) as raised:
        decode(frame)
    assert "argv" in raised.value.reason


@pytest.mark.parametrize(("shape", "words"), [
    ({"tasks": 2, "nodes": 3}, "cannot span 3 nodes"),
    ({"tasks": 5, "nodes": 2, "tasks_per_node": 2}, "hold 4 tasks, not 5"),
])
def test_a_placement_no_cluster_can_give_is_refused_at_submit(shape, words):
    with pytest.raises(ValueError, match=words):
        JobSpec(name="j", user="u", argv=["true"], **shape)


@pytest.mark.parametrize(("change", "words"), [
    ({"argv": ["echo", "a\0b"]}, "NUL byte"),
    ({"argv": [""]}, "the command is empty"),
    ({"env": {"A=B": "c"}}, "names must be letters, digits and _: 'A=B'"),
    ({"env": {"A": "b\0"}}, "NUL byte"),
    ({"cwd": "/tmp/\0x"}, "NUL byte"),
    ({"output": "out\0%j"}, "NUL byte"),
    ({"user": "../root"}, "not a Unix user name"),
    ({"name": "job\nname"}, "control character"),
    ({"argv": ["echo", "x" * MAX_COMMAND_BYTES]}, f"over {MAX_COMMAND_BYTES}"),
    ({"env": {f"V{i}": "x" * 1000 for i in range(70)}}, f"over {MAX_COMMAND_BYTES}"),
], ids=["nul-arg", "empty-command", "equals-in-key", "nul-value", "nul-cwd", "nul-output", "user", "name",
        "long-arg", "big-env"])
def test_a_command_that_could_not_start_is_refused_at_submit_with_its_reason(change, words):
    spec = {"name": "j", "user": "u", "tasks": 1, "argv": ["true"], **change}
    with pytest.raises(ProtocolError) as raised:
        decode(msgpack.packb({"v": PROTOCOL_VERSION, "type": "submit", "spec": spec}))
    assert raised.value.code is ErrorCode.BAD_MESSAGE and words in raised.value.reason, raised.value.reason


def test_a_job_query_names_each_job_once_and_at_most_a_page_of_them():
    assert JobQuery(job_ids=[7] * 50 + [3, 7]).job_ids == [7, 3]
    with pytest.raises(ValidationError):
        JobQuery(job_ids=list(range(JOBS_PER_REPLY + 1)))
