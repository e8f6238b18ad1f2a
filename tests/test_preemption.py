"""Preemption between partitions of different tiers over the same nodes, in the master's core on a
fake clock: a higher-tier job displaces the lower-tier gangs on its nodes (suspended whole, requeued
or cancelled, as their partition says), chosen to be the fewest and smallest; suspended gangs keep
their memory and their time limit stops; they resume once no higher-tier job runs on their nodes,
also across a master restart."""

from pathlib import Path

from gangsched.master.config_file import master_settings, partition_plan
from gangsched.master.sqlite_store import SqliteStore
from gangsched.policy.live_scheduler import NodeShape
from gangsched.policy.partitions import PreemptMode, preemption_order
from gangsched.policy.tiers import Gang, GivingWay, giving_way, on_nodes, seen_nodes
from gangsched.protocol.messages import (
    Heartbeat,
    JobQuery,
    KillTask,
    LaunchTask,
    NodeColumn,
    NodeHello,
    Submit,
    TaskExit,
)
from gangsched.protocol.records import JobInfo, JobSpec, JobState, PeerEndpoint, TaskRef
from tests.helpers.driven_master import DrivenMaster, FakeClock, driven_master
from tests.helpers.master_events import ENDPOINTS, sent

MIB = 1 << 20


def config(batch_mode: str = "suspend", debug_nodes: str = "n[1-4]") -> str:
    return f"""\
[master]
quantum_ms = 100
mpl = 2

[[nodes]]
names = "n[1-4]"

[[partitions]]
name = "batch"
default = true
preempt_mode = "{batch_mode}"

[[partitions]]
name = "debug"
nodes = "{debug_nodes}"
priority_tier = 2
quantum_ms = 50
"""


def hello(core: DrivenMaster, node: str, memory: int = 1 << 40, tasks: list[TaskRef] = ()) -> None:
    core.node_events.hello(node.encode(), NodeHello(node=node, cpu_share=1.0, pid=1, incarnation="first",
                                                    tasks=list(tasks), peer=PeerEndpoint(transport="ipc", host="/tmp"),
                                                    memory=memory, host_memory=memory))


def make(tmp_path: Path, clock: FakeClock, text: str, memory: int = 1 << 40) -> DrivenMaster:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "gangsched.toml").write_text(text)
    core = start(tmp_path, clock)
    for node in ("n1", "n2", "n3", "n4"):
        hello(core, node, memory)
    return core


def start(tmp_path: Path, clock: FakeClock) -> DrivenMaster:
    """A master on the store and configuration file in ``tmp_path``."""
    settings = master_settings({"config": tmp_path / "gangsched.toml", "heartbeat_ms": 100, "state_dir": tmp_path})
    return driven_master(settings, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock, partition_plan(settings))


def submit(core: DrivenMaster, tasks: int, partition: str = "batch", mem_per_cpu: int | None = None) -> int:
    spec = JobSpec(name="j", user="alice", tasks=tasks, argv=["true"], partition=partition, mem_per_cpu=mem_per_cpu)
    return core.clients.submit(Submit(spec=spec)).job_id


def info(core: DrivenMaster, job: int) -> JobInfo:
    (found,) = core.clients.query_jobs(JobQuery(job_ids=[job])).jobs
    return found


def end(core: DrivenMaster, job: int) -> None:
    for rank, node in enumerate(info(core, job).node_names):
        core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=0))


def running_in(core: DrivenMaster, node: str) -> set[int]:
    """The jobs the switch just sent runs on ``node``, by the columns sent so far."""
    columns = {name: column for name, column in core.outbox_columns.items()}
    switch = core.last_switch
    column = columns[node].rows
    return {job for partition, rows in switch.rows.items() for row in rows
            for job in (column.get(partition, [])[row] if row < len(column.get(partition, [])) else [])} | \
        {job for job in switch.alternates if any(job in row for rows in column.values() for row in rows)}


def tick(core: DrivenMaster) -> None:
    """A boundary 50 ms on, the nodes having been heard from."""
    core.last_switch = core.tick()
    for node, column in sent(core, NodeColumn):
        core.outbox_columns[node] = column
    core.clock.now += 0.05
    for node in ("n1", "n2", "n3", "n4"):
        core.node_reports.heartbeat(Heartbeat(node=node))


def test_a_higher_tier_job_suspends_the_gang_on_its_nodes_which_resumes_when_it_ends(tmp_path, clock):
    core = make(tmp_path, clock, config())
    core.outbox_columns = {}
    wide = submit(core, 4)
    tick(core)
    assert running_in(core, "n1") == running_in(core, "n4") == {wide}
    debug = submit(core, 2, "debug")
    launches = {message.task.job_id: message.run_in for _, message in sent(core, LaunchTask)}
    assert launches == {debug: None}  # it starts with the switch that stops the gang it displaces
    suspended = info(core, wide)
    assert suspended.state is JobState.SUSPENDED and suspended.reason == f"Preempted by job {debug}"
    assert [(p.by_job, p.end) for p in suspended.preemptions] == [(debug, None)]
    tick(core)
    # the whole gang leaves the rotation, on every node, the two its displacer does not use too
    assert running_in(core, "n1") == {debug} and running_in(core, "n4") == set()
    ran_before = info(core, wide).ran_s
    for _ in range(4):
        tick(core)
    assert info(core, wide).ran_s == ran_before  # its time does not count while it is suspended

    end(core, debug)
    resumed = info(core, wide)
    assert resumed.state is JobState.RUNNING and resumed.preemptions[0].end is not None
    tick(core)
    tick(core)
    assert running_in(core, "n1") == running_in(core, "n4") == {wide}


def test_the_victims_are_the_fewest_and_smallest_gangs(tmp_path, clock):
    core = make(tmp_path, clock, config())
    core.outbox_columns = {}
    small = submit(core, 1)  # n1
    big = submit(core, 2)  # n2, n3
    tick(core)
    first = submit(core, 1, "debug")  # n4 is free: nothing is preempted
    assert info(core, first).node_names == ["n4"]
    assert {info(core, job).state for job in (small, big)} == {JobState.RUNNING}
    second = submit(core, 1, "debug")  # n4 is taken: the smallest gang gives way
    assert info(core, second).node_names == ["n1"]
    assert info(core, small).state is JobState.SUSPENDED and info(core, big).state is JobState.RUNNING


def test_a_suspended_gang_keeps_its_memory(tmp_path, clock):
    core = make(tmp_path, clock, config(debug_nodes="n[1-2]"), memory=512 * MIB)
    hog = submit(core, 2, mem_per_cpu=400 * MIB)  # n1, n2
    assert info(core, hog).node_names == ["n1", "n2"]
    refused_room = submit(core, 2, "debug", mem_per_cpu=200 * MIB)  # would not fit beside the hog's 400M
    assert info(core, refused_room).state is JobState.PENDING and info(core, hog).state is JobState.RUNNING
    fits = submit(core, 1, "debug", mem_per_cpu=100 * MIB)
    assert info(core, fits).state is JobState.RUNNING and info(core, hog).state is JobState.SUSPENDED


def test_a_gang_that_may_not_be_preempted_keeps_its_nodes(tmp_path, clock):
    core = make(tmp_path, clock, config(batch_mode="off", debug_nodes="n[1-2]"))
    kept = submit(core, 2)
    waits = submit(core, 1, "debug")
    assert info(core, waits).state is JobState.PENDING and info(core, kept).state is JobState.RUNNING
    end(core, kept)
    assert info(core, waits).state is JobState.RUNNING


def test_requeued_and_cancelled_gangs_give_their_nodes_back(tmp_path, clock):
    for mode, final in (("requeue", JobState.PENDING), ("cancel", JobState.CANCELLED)):
        core = make(tmp_path / mode, clock, config(batch_mode=mode, debug_nodes="n[1-2]"))
        victim = submit(core, 2)
        sent(core, LaunchTask)
        debug = submit(core, 2, "debug")
        assert {node for node, message in sent(core, KillTask) if message.job_id == victim} == {"n1", "n2"}
        for rank, node in enumerate(["n1", "n2"]):
            core.task_ended(TaskExit(node=node, job_id=victim, rank=rank, returncode=-15))
        after = info(core, victim)
        if final is JobState.PENDING:  # queued again, it starts where debug is not
            assert (after.requeues, after.state, after.node_names) == (1, JobState.RUNNING, ["n3", "n4"])
        else:
            assert (after.state, after.reason) == (JobState.CANCELLED, f"Preempted by job {debug}")
        assert info(core, debug).state is JobState.RUNNING


def test_a_restart_in_the_middle_of_a_preemption_keeps_the_gang_suspended_until_it_may_resume(tmp_path, clock):
    core = make(tmp_path, clock, config())
    wide = submit(core, 4)
    debug = submit(core, 2, "debug")
    assert info(core, wide).state is JobState.SUSPENDED
    core.store.close()
    core = start(tmp_path, clock)
    for node in ("n1", "n2", "n3", "n4"):
        tasks = [TaskRef(job_id=wide, rank=int(node[1]) - 1)] + \
            ([TaskRef(job_id=debug, rank=int(node[1]) - 1)] if node in ("n1", "n2") else [])
        hello(core, node, tasks=tasks)
    assert info(core, wide).state is JobState.SUSPENDED and info(core, debug).state is JobState.RUNNING
    end(core, debug)
    assert info(core, wide).state is JobState.RUNNING


def gang(job_id: int, tier: int, nodes: dict[str, int], mode: str = "suspend", suspended: bool = False) -> Gang:
    return Gang(job_id, tier, PreemptMode(mode), suspended, nodes, tasks=len(nodes))


def test_the_rules_the_master_and_the_simulator_share():
    low, other, high = gang(1, 1, {"a": 100, "b": 100}), gang(2, 1, {"c": 50}), gang(3, 2, {"b": 10})
    assert giving_way([low, other, high]) == GivingWay(preempted={1: 3})  # a gang gives way whole
    resting = gang(1, 1, {"a": 100, "b": 100}, suspended=True)
    assert giving_way([resting, other]) == GivingWay(resumed=[1])
    assert giving_way([resting, other, high]) == GivingWay()  # still displaced: stays suspended
    nodes = {name: NodeShape(1, 1000) for name in ("a", "b", "c", "d")}
    placed = on_nodes([low, other, gang(4, 1, {"d": 0}, mode="off")])
    seen = seen_nodes(2, nodes, placed)
    assert list(seen) == ["c", "a", "b"]  # d's gang may not be preempted; c's the smallest to preempt
    assert seen["a"] == NodeShape(1, 900) and seen["c"] == NodeShape(1, 950)  # what suspended gangs would keep
    assert list(seen_nodes(1, nodes, on_nodes([high]))) == ["a", "c", "d"]  # a lower tier does not see b
    # a matrix's own suspended gang is out of its policy, but its memory is not out of its nodes
    assert seen_nodes(1, nodes, on_nodes([resting, high]))["a"] == NodeShape(1, 900)
    assert preemption_order({"x": [4], "y": [], "z": [1, 1], "w": [2]}) == ["y", "w", "x", "z"]
