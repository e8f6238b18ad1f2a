"""The node's decisions, event by event, on a fake clock: no sockets, no processes.

The core is fed what the loop would feed it and answers with messages (and their
routes) and orders for the tasks; these tests carry the orders out by hand, as
the loop does (noded/loop.py), and judge what the core says."""

import math
from collections import deque

from gangsched.noded.core import LOOKS_PER_WAKE, NodeCore, Route
from gangsched.noded.orders import (
    CatchNewProcesses,
    CheckDescheduled,
    Checkpoint,
    Connect,
    Kill,
    Launch,
    ReapStrays,
    Terminate,
)
from gangsched.noded.task_events import Escaped, Exited, ForMaster, Launched, NotStarted, StillForking
from gangsched.noded.task_record import MemoryReading, TaskKey
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import (
    CheckpointTask,
    ErrorReply,
    ExitAck,
    Heartbeat,
    KillTask,
    LaunchTask,
    NodeColumn,
    NodeHello,
    NodeWelcome,
    PmiFence,
    PmiFenceDone,
    QuantumReport,
    SlotSwitch,
    TaskExit,
)
from gangsched.protocol.records import PeerEndpoint, TaskSpec

HEARTBEAT_S = 1.0
GRACE_S = 5.0


def taken(answers: deque) -> list:
    """What the core answered since the last look, taken as the loop takes it."""
    found = list(answers)
    answers.clear()
    return found


def make_core(report_delay_ms: int = 0, forks: bool = True) -> NodeCore:
    hello = NodeHello(
        memory=1 << 30,
        host_memory=1 << 32,
        node="n1",
        cpu_share=1.0,
        pid=1,
        incarnation="first",
        peer=PeerEndpoint(transport="ipc", host="/t"),
    )
    return NodeCore(hello, kill_grace_s=GRACE_S, report_delay_ms=report_delay_ms, forks=forks)


def welcome(via: str | None = None) -> NodeWelcome:
    return NodeWelcome(node="n1", switch_endpoint="ipc:///s", report_endpoint="ipc:///r",
                       heartbeat_ms=int(HEARTBEAT_S * 1000), quantum_ms=100, via=via)


def registered(core: NodeCore, now: float = 0.0, via: str | None = None) -> NodeCore:
    core.timers(now)
    assert [type(message) for _, message in taken(core.outbox)] == [NodeHello]
    core.message(welcome(via), now)
    assert any(isinstance(order, Connect) for order in taken(core.orders))
    return core


def task_spec(job_id: int, rank: int = 0, argv: tuple[str, ...] = ("true",), step: int = 0) -> TaskSpec:
    return TaskSpec(job_id=job_id, step=step, rank=rank, size=rank + 1, user="u", argv=list(argv), cwd=None, env={},
                    barrier_addr="ipc:///b", barrier_bind="ipc:///b", io_addr=None, output=None)


def launch(core: NodeCore, job_id: int, rank: int = 0, now: float = 0.0, run_in: int | None = None,
           step: int = 0) -> Launch:
    spec = task_spec(job_id, rank, step=step)
    core.message(LaunchTask(task=spec, run_in=run_in), now)
    (order,) = taken(core.orders)
    assert isinstance(order, Launch)
    core.task_event(Launched(TaskKey(job_id, step, rank), order.runnable, started_ns=int(now * 1e9)), now)
    return order


def switch(core: NodeCore, quantum: int, rows: list[int], now: float, report_every: int = 1,
           cpu_ns: int = 0) -> tuple[list, list]:
    """A switch applied as the loop applies it, timers and all: each task that ran read ``cpu_ns``;
    the tasks stopped and continued."""
    message = SlotSwitch(quantum=quantum, sent_ns=0, rows={"batch": rows}, alternates=[], report_every=report_every)
    plan = core.switch(message, now)
    core.applied(message, plan, int(now * 1e9), [(cpu_ns, 0, 0) for _ in plan.ran], now)
    core.timers(now)
    return [task.key for task in plan.stop], [task.key for task in plan.resume]


def sent(core: NodeCore) -> list[tuple[Route, type]]:
    return [(route, type(message)) for route, message in taken(core.outbox)]


def test_a_node_says_hello_at_once_and_heartbeats_at_the_masters_period_once_welcomed():
    core = make_core()
    assert core.deadlines.first == 0.0
    core.timers(0.0)
    (route, hello), = taken(core.outbox)
    assert route is Route.MASTER and isinstance(hello, NodeHello) and hello.incarnation == "first"
    core.message(welcome(), 0.1)
    # the master counts silence from its welcome, at its period: the hello's next, due sooner, stands
    assert core.deadlines.first == 0.5
    core.timers(0.5)
    assert sent(core) == [(Route.REPORTS, Heartbeat)]
    core.timers(1.4)
    assert sent(core) == []
    core.timers(1.5)
    assert sent(core) == [(Route.REPORTS, Heartbeat)]
    assert isinstance(taken(core.orders)[-1], ReapStrays)  # what ended tasks left is swept at each heartbeat


def test_a_switch_that_arrives_before_its_column_runs_nothing_until_the_column_comes():
    core = registered(make_core())
    assert launch(core, 7).runnable is False  # no switch runs job 7 yet: it starts stopped
    assert switch(core, 1, rows=[0], now=1.0) == ([], [])  # row 0 is nothing to a node without its column
    (_, report), = taken(core.outbox)
    assert report.accounts[0].column_epoch == -1  # the master sees the column has not arrived
    core.message(NodeColumn(epoch=3, rows={"batch": [[7]]}), 1.05)
    assert switch(core, 2, rows=[0], now=1.1) == ([], [(7, 0, 0)])
    (_, report), = taken(core.outbox)
    assert report.accounts[0].column_epoch == 3
    assert switch(core, 3, rows=[1], now=1.2) == ([(7, 0, 0)], [])  # row 1 does not hold it: stopped


def test_every_step_of_a_job_is_stopped_and_resumed_with_it_and_each_ends_and_exits_on_its_own():
    """A second step started in a running allocation: the switches that stop and resume the job stop and resume
    both steps' tasks together; a kill of one step ends it alone; each task's exit names its step."""
    core = registered(make_core())
    core.message(NodeColumn(epoch=1, rows={"batch": [[7], [8]]}), 0.0)
    switch(core, 1, rows=[0], now=0.1)
    assert launch(core, 7, now=0.11).runnable is True
    assert launch(core, 7, now=0.15, step=1).runnable is True, "the job runs: so does its new step"
    assert launch(core, 8, now=0.16).runnable is False
    assert switch(core, 2, rows=[1], now=0.2) == ([(7, 0, 0), (7, 1, 0)], [(8, 0, 0)])
    taken(core.orders)
    assert switch(core, 3, rows=[0], now=0.3) == ([(8, 0, 0)], [(7, 0, 0), (7, 1, 0)])
    ran = {(sample.job_id, sample.step, sample.rank) for _, report in taken(core.outbox)
           if isinstance(report, QuantumReport) for account in report.accounts for sample in account.samples}
    assert {(7, 0, 0), (7, 1, 0)} <= ran, "both steps' tasks are sampled"
    taken(core.orders)  # the look at job 8's task, stopped
    core.message(KillTask(job_id=7, step=1, reason="its step failed"), 0.31)
    assert taken(core.orders) == [Terminate((7, 1, 0))], "a step's kill ends that step alone"
    core.task_event(Exited(TaskKey(7, 1, 0), -15, None, cpu_ns=1, progress=0, memory=MemoryReading(0, False)), 0.32)
    (_, exit_), = [each for each in taken(core.outbox) if isinstance(each[1], TaskExit)]
    assert (exit_.job_id, exit_.step, exit_.rank, exit_.returncode) == (7, 1, 0, -15)
    core.message(ExitAck(job_id=7, step=1, rank=0), 0.33)
    core.message(KillTask(job_id=7, reason="cancelled"), 0.34)
    assert taken(core.orders) == [Terminate((7, 0, 0))]


def test_a_launch_runs_at_once_only_in_the_idle_processors_of_the_switch_it_names():
    core = registered(make_core())
    core.message(NodeColumn(epoch=1, rows={"batch": [[7], [8, 9, 10]]}), 0.0)
    switch(core, 4, rows=[0], now=0.1)
    assert launch(core, 8, now=0.12, run_in=4).runnable is True  # placed where switch 4 leaves room
    # held back by the master while a later switch ran another row here: it waits for its own
    assert switch(core, 5, rows=[0], now=0.2) == ([(8, 0, 0)], [])
    taken(core.orders)  # the look at task 8, stopped
    assert launch(core, 9, now=0.22, run_in=4).runnable is False
    # placed in switch 6's idle processors, arrived before switch 6: that switch runs it, not the one in force
    assert launch(core, 10, now=0.25, run_in=6).runnable is False
    assert switch(core, 6, rows=[0], now=0.3) == ([], [(10, 0, 0)])  # job 9 still waits for row 1
    assert switch(core, 7, rows=[0], now=0.4) == ([(10, 0, 0)], [])  # then it waits for its row


def test_only_tasks_that_ran_are_sampled_each_against_its_own_runnable_time():
    core = registered(make_core())
    core.message(NodeColumn(epoch=1, rows={"batch": [[7], [8]]}), 0.0)
    switch(core, 1, rows=[0], now=0.0)
    launch(core, 7, now=0.0)
    launch(core, 8, now=0.0)
    taken(core.outbox)
    switch(core, 2, rows=[1], now=0.1, cpu_ns=90_000_000)
    (_, report), = taken(core.outbox)
    (sample,) = report.accounts[0].samples
    assert (sample.job_id, sample.cpu_ns, sample.runnable_ns) == (7, 90_000_000, 100_000_000)


def test_accounts_go_every_report_every_quanta_and_after_the_report_delay():
    core = registered(make_core(report_delay_ms=5))
    for quantum in (1, 2):
        switch(core, quantum, rows=[0], now=quantum * 0.1, report_every=3)
    assert sent(core) == []
    switch(core, 3, rows=[0], now=0.3, report_every=3)
    assert sent(core) == [] and math.isclose(core.deadlines.first, 0.305)  # after the others switched
    core.timers(0.305)
    (route, report), = taken(core.outbox)
    assert route is Route.REPORTS and [account.quantum for account in report.accounts] == [1, 2, 3]


def test_a_report_batch_across_a_relays_loss_loses_no_held_account_and_the_hello_names_the_relay():
    core = registered(make_core(), now=0.0, via="n9")
    launch(core, 7)
    switch(core, 1, rows=[0], now=0.1, report_every=4)
    switch(core, 2, rows=[0], now=0.2, report_every=4)
    assert sent(core) == []
    core.timers(0.5)
    assert sent(core) == [(Route.REPORTS, Heartbeat)]
    # no switch through the relay for two quanta or a heartbeat period (1 s): it is taken for lost;
    # its timer, set at the welcome, finds the switches since and waits for the silence after the last
    assert core.deadlines.first == 1.0
    core.timers(1.0)
    assert sent(core) == [] and math.isclose(core.deadlines.first, 1.2)
    core.timers(1.2)
    (route, hello), = taken(core.outbox)
    assert route is Route.MASTER and isinstance(hello, NodeHello)
    assert hello.left_relay == "n9" and [(t.job_id, t.step, t.rank) for t in hello.tasks] == [(7, 0, 0)]
    switch(core, 3, rows=[0], now=1.25, report_every=4)  # from the master, before its welcome: not counted
    core.message(welcome(), 1.3)
    assert isinstance(taken(core.orders)[-1], Connect)
    switch(core, 4, rows=[0], now=1.4, report_every=2)
    (_, report), = taken(core.outbox)
    assert [account.quantum for account in report.accounts] == [1, 2, 4]


def test_a_heartbeat_refused_while_the_master_restarts_brings_a_hello_at_once_with_the_unacknowledged_exits():
    core = registered(make_core())
    launch(core, 7)
    launch(core, 8)
    core.task_event(Exited(TaskKey(8, 0, 0), 0, None, cpu_ns=5, progress=0, memory=MemoryReading(0, False)), 0.05)
    assert sent(core) == [(Route.REPORTS, TaskExit)]
    core.timers(1.05)
    assert sent(core) == [(Route.REPORTS, Heartbeat)]  # the master is gone: nobody answers
    core.timers(2.05)
    assert sent(core) == [(Route.REPORTS, Heartbeat)]
    # the restarted master does not know this node
    core.message(ErrorReply(code=ErrorCode.UNKNOWN_NODE, reason="register first"), 2.45)
    assert not core.registered and core.deadlines.first == 2.45
    core.timers(2.45)
    (route, hello), = taken(core.outbox)
    assert route is Route.MASTER and [(t.job_id, t.step, t.rank) for t in hello.tasks] == [(7, 0, 0)]
    assert hello.welcomed == 1  # the master knows a hello sent before its welcome came by this
    assert [(e.job_id, e.returncode) for e in hello.exits] == [(8, 0)]  # until the master acknowledges it
    core.message(ExitAck(job_id=8, rank=0), 2.5)
    core.message(ErrorReply(code=ErrorCode.UNKNOWN_NODE, reason="register first"), 2.5)
    core.timers(2.5)
    (_, hello), = taken(core.outbox)
    assert hello.exits == []


def test_a_task_that_exits_between_switches_sends_its_last_accounts_first_and_never_starts_twice():
    core = registered(make_core())
    launch(core, 7)
    core.message(NodeColumn(epoch=1, rows={"batch": [[7]]}), 0.0)
    switch(core, 1, rows=[0], now=0.1, report_every=5, cpu_ns=1)
    core.task_event(Exited(TaskKey(7, 0, 0), 0, None, cpu_ns=2, progress=3, memory=MemoryReading(0, False)), 0.15)
    (_, report), (_, exit_) = taken(core.outbox)
    assert isinstance(report, QuantumReport) and isinstance(exit_, TaskExit)  # in this order, on one socket
    assert (exit_.cpu_ns, exit_.progress) == (2, 3) and core.tasks == {}
    core.message(LaunchTask(task=task_spec(7)), 0.2)  # sent again by a master whose hello crossed the exit
    assert taken(core.orders) == []


def test_a_task_that_cannot_start_fails_with_its_reason():
    core = registered(make_core())
    core.message(LaunchTask(task=task_spec(7, argv=("nope",))), 0.0)
    taken(core.orders)
    core.task_event(NotStarted(TaskKey(7, 0, 0), "could not start: command not found"), 0.0)
    (_, exit_), = taken(core.outbox)
    assert exit_.returncode is None and exit_.error == "could not start: command not found"


def test_a_killed_job_gets_sigterm_then_sigkill_after_the_grace_and_keeps_running_meanwhile():
    core = registered(make_core())
    core.message(NodeColumn(epoch=1, rows={"batch": [[7], [8]]}), 0.0)
    launch(core, 7)
    launch(core, 8)
    core.message(KillTask(job_id=7, reason="cancelled"), 1.0)
    core.message(KillTask(job_id=7, reason="cancelled again"), 1.1)
    assert taken(core.orders) == [Terminate((7, 0, 0))]  # once
    assert switch(core, 1, rows=[1], now=1.2) == ([], [(8, 0, 0)])  # an ending task is not stopped
    assert core.deadlines.first <= 1.0 + GRACE_S
    core.timers(1.0 + GRACE_S)
    assert Kill((7, 0, 0)) in taken(core.orders)


def test_a_checkpointing_task_runs_until_it_exits():
    core = registered(make_core())
    core.message(NodeColumn(epoch=1, rows={"batch": [[7], [8]]}), 0.0)
    switch(core, 1, rows=[1], now=0.0)
    launch(core, 7)
    core.message(CheckpointTask(job_id=7), 0.1)
    assert taken(core.orders) == [Checkpoint((7, 0, 0))]
    assert switch(core, 2, rows=[1], now=0.2) == ([], [])  # not its row, but it runs to its barrier


def test_a_stopped_task_is_looked_at_after_the_switch_and_again_while_it_keeps_forking():
    core = registered(make_core(report_delay_ms=2))
    core.message(NodeColumn(epoch=1, rows={"batch": [[7], [8]]}), 0.0)
    switch(core, 1, rows=[0], now=0.0)
    launch(core, 7)
    taken(core.orders)
    switch(core, 2, rows=[1], now=0.1)  # stops job 7; the look waits as a report does
    assert taken(core.orders) == []
    core.timers(0.11)
    assert taken(core.orders) == [CatchNewProcesses((7, 0, 0), LOOKS_PER_WAKE)]
    core.task_event(StillForking(TaskKey(7, 0, 0)), 0.0)  # each look found new processes: again after the next switch
    core.timers(0.15)
    assert [order for order in taken(core.orders) if isinstance(order, CatchNewProcesses)] == []
    switch(core, 3, rows=[1], now=0.2)
    core.timers(0.21)
    assert taken(core.orders) == [CatchNewProcesses((7, 0, 0), LOOKS_PER_WAKE)]


def test_tasks_that_are_no_processes_are_never_looked_at():
    core = registered(make_core(forks=False))
    core.message(NodeColumn(epoch=1, rows={"batch": [[7], [8]]}), 0.0)
    switch(core, 1, rows=[0], now=0.0)
    launch(core, 7)
    switch(core, 2, rows=[1], now=0.1)
    core.timers(0.1)
    assert not any(isinstance(order, CatchNewProcesses) for order in taken(core.orders))


def test_a_pmi_fence_is_sent_again_to_a_master_that_welcomes_the_node_anew_until_answered():
    core = registered(make_core())
    launch(core, 7)
    fence = PmiFence(node="n1", job_id=7, epoch=0, kvs={"k": "v"})
    core.task_event(ForMaster(fence), 0.0)
    assert taken(core.outbox) == [(Route.REPORTS, fence)]  # a fence of megabytes: not the master's ROUTER
    core.message(welcome(), 1.0)  # a restarted master may never have heard of it
    (connect,) = taken(core.orders)
    assert isinstance(connect, Connect) and connect.then == (fence,)  # once the report socket is followed
    core.message(PmiFenceDone(job_id=7, epoch=0, kvs={"k": "v"}), 1.1)
    assert [type(order).__name__ for order in taken(core.orders)] == ["ToProcessManager"]
    core.message(welcome(), 2.0)
    (connect,) = taken(core.orders)
    assert isinstance(connect, Connect) and connect.then == ()  # answered: not sent again
    core.message(welcome(), 2.0)
    assert taken(core.outbox) == []


def test_a_watched_task_found_running_while_descheduled_in_three_stretches_is_ended():
    """Where descheduled tasks are watched (process tree), not frozen: noded/enforcement.py."""
    hello = NodeHello(memory=1 << 30, host_memory=1 << 32, node="n1", cpu_share=1.0, pid=1, incarnation="first",
                      peer=PeerEndpoint(transport="ipc", host="/t"))
    core = registered(NodeCore(hello, kill_grace_s=GRACE_S, report_delay_ms=0, forks=True, watch_interval_s=0.05))
    core.message(NodeColumn(epoch=1, rows={"batch": [[7], [8]]}), 0.0)
    for job_id in (7, 8):
        launch(core, job_id)
    now = 0.0
    for stretch in range(1, 4):
        switch(core, 2 * stretch, rows=[0], now=now)  # job 7 runs, job 8 is descheduled
        taken(core.orders)
        core.timers(now + 0.05)
        watched = [order for order in taken(core.orders) if isinstance(order, CheckDescheduled)]
        assert watched == [CheckDescheduled(frozenset({(8, 0, 0)}))]  # only the descheduled task is looked at
        core.task_event(Escaped(TaskKey(8, 0, 0)), now + 0.05)  # the loop found it running and stopped it again
        ended = [order for order in taken(core.orders) if isinstance(order, Kill)]
        assert ended == ([Kill((8, 0, 0))] if stretch == 3 else [])
        switch(core, 2 * stretch + 1, rows=[1], now=now + 0.1)  # job 8's turn
        now += 0.2
    core.task_event(Exited(TaskKey(8, 0, 0), -9, None, cpu_ns=0, progress=0, memory=MemoryReading(0, False)), now)
    exits = [message for _, message in taken(core.outbox) if isinstance(message, TaskExit)]
    assert "kept running while its gang was descheduled" in (exits[0].error or "")


def test_a_single_escape_is_only_undone_and_a_frozen_node_looks_at_nothing():
    watched = make_core()  # frozen: no interval, no looks
    registered(watched)
    watched.message(NodeColumn(epoch=1, rows={"batch": [[7], [8]]}), 0.0)
    for job_id in (7, 8):
        launch(watched, job_id)
    switch(watched, 1, rows=[0], now=0.0)
    watched.timers(1.0)
    assert not [order for order in taken(watched.orders) if isinstance(order, CheckDescheduled)]
    watched.task_event(Escaped(TaskKey(8, 0, 0)), 1.0)
    assert not [order for order in taken(watched.orders) if isinstance(order, Kill)]


def test_a_message_of_an_older_leader_is_refused_counted_and_told_in_the_heartbeat():
    core = registered(make_core())
    core.message(welcome().model_copy(update={"leader_epoch": 2}), 0.0)  # a new leader welcomed it
    taken(core.orders)
    core.message(LaunchTask(task=task_spec(7), leader_epoch=1), 0.1)  # the old one, continued after a stop
    assert not taken(core.orders), "a launch of an older leader was carried out"
    assert core.masters.stale_refused == 1
    launch_now = LaunchTask(task=task_spec(7), leader_epoch=2)
    core.message(launch_now, 0.2)
    assert [type(order) for order in taken(core.orders)] == [Launch]
    core.timers(HEARTBEAT_S + 0.3)
    beats = [message for _, message in taken(core.outbox) if isinstance(message, Heartbeat)]
    assert beats and beats[-1].stale_refused == 1
