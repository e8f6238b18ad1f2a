"""Reservations in the master's core on a fake clock, and in the policies' own terms: a window of time
on some nodes for some jobs, which every other job keeps off by its time limit, and whose jobs start
within a quantum of its opening; refusals, updates, the end and a restart (docs/operations.md)."""

import random

import pytest

from gangsched.policy.topology import Topology
from gangsched.policy.windows import Window, Windows
from gangsched.protocol.messages import ErrorReply, Heartbeat, JobQuery, Submit, TaskExit
from gangsched.protocol.records import JobSpec, JobState
from gangsched.protocol.reservation_messages import (
    ReservationCreate,
    ReservationDelete,
    ReservationFlag,
    ReservationList,
    ReservationUpdate,
)
from tests.helpers.master_events import hello
from tests.helpers.operations import GANGS, NODES, administer, info, make, restart

BGS = GANGS.model_copy(update={"policy": "bgs", "mpl": 2})
pytestmark = pytest.mark.usefixtures("alice_and_bob")  # the reservations name them as their users


class _Job:
    def __init__(self, job_id: int, procs: int, estimate: float) -> None:
        self.job_id, self.procs, self.estimate, self.nodes, self.tasks_per_node = job_id, procs, estimate, None, None
        self.cpus_per_task = 1


def test_a_window_holds_its_columns_against_jobs_that_would_still_run_when_it_opens():
    windows = Windows((Window("maint", 0b1100, start=100.0, end=200.0),), stretch=2.0, grace_s=2.0, now=50.0)
    topology = Topology((1, 2, 4, 8), windows=windows)
    every = 0b1111
    assert topology.open_to(_Job(1, 1, 20.0), every) == every  # 50 + 2 x 20 + 2 < 100: gone before it opens
    assert topology.open_to(_Job(2, 1, 30.0), every) == 0b0011  # 50 + 60 + 2 > 100
    assert windows.open_window("maint", 50.0) is None
    windows.now = 150.0
    assert topology.open_to(_Job(1, 1, 1.0), every) == 0b0011  # open: none of them for the others
    assert windows.open_window("maint", 150.0) is not None
    windows.now = 200.0
    assert topology.open_to(_Job(1, 1, 1000.0), every) == every and windows.open_window("maint", 200.0) is None
    assert windows.next_change(50.0) == 100.0 and windows.next_change(100.0) == 200.0


def quanta(core, seconds: float) -> None:
    """A boundary ``seconds`` on, the nodes heard from."""
    core.clock.now += seconds
    for node in NODES:
        core.node_reports.heartbeat(Heartbeat(node=node))
    core.tick()


def reserve(core, name="maint", nodes="n[3-4]", start="now+60", duration="2:00", users=("alice",),
            flags=(), admin="root"):
    return administer(core, ReservationCreate(admin=admin, name=name, nodes=nodes, start=start, duration=duration,
                                              users=list(users), flags=list(flags)))


def submit(core, tasks: int, estimate: float, user: str = "alice", reservation: str | None = None) -> int:
    spec = JobSpec(name="j", user=user, tasks=tasks, argv=["true"], estimate_s=estimate, reservation=reservation)
    reply = core.clients.submit(Submit(spec=spec))
    assert not isinstance(reply, ErrorReply), reply.reason
    return reply.job_id


def test_no_other_job_runs_on_a_reservations_nodes_in_its_window_and_its_job_starts_within_a_quantum(tmp_path,
                                                                                                    clock):
    core = make(tmp_path, clock, BGS)
    opens = clock.now + 60
    assert isinstance(reserve(core), ReservationList)
    generator = random.Random(7)
    runs = {}
    for _ in range(50):  # mixed estimates; each runs for most of its estimate
        estimate = generator.choice([5.0, 10.0, 20.0, 40.0, 120.0, 600.0])
        job = submit(core, generator.choice([1, 1, 2, 4]), estimate)
        runs[job] = estimate * generator.uniform(0.3, 0.9)
    mine = submit(core, 2, 60.0, reservation="maint")
    assert info(core, mine).state is JobState.PENDING
    started_in_window = None
    while clock.now < opens + 120:
        quanta(core, 0.1)
        for job in core.clients.query_jobs(JobQuery(states=[JobState.RUNNING])).jobs:
            if job.job_id == mine:
                started_in_window = started_in_window or job.start_time
                continue
            if opens <= clock.now < opens + 120 - 1e-6 and {"n3", "n4"} & set(job.node_names):
                pytest.fail(f"job {job.job_id} runs on {job.node_names} inside the window at {clock.now - opens:.1f} s")
            if job.ran_s >= runs[job.job_id]:
                for rank, node in enumerate(job.node_names):
                    core.task_ended(TaskExit(node=node, job_id=job.job_id, rank=rank, returncode=0))
        if clock.now < opens - 1:
            reason = info(core, mine).reason
            assert reason == "Reservation: maint has not begun", reason
    assert started_in_window is not None and opens - 1e-6 <= started_in_window <= opens + 0.1 + 1e-6
    assert sorted(info(core, mine).node_names) == ["n3", "n4"]
    # jobs ran on the reserved nodes before the window: backfilling planned around it, not just off it
    assert any({"n3", "n4"} & set(job.node_names) and job.end_time is not None and job.end_time <= opens
               for job in core.clients.query_jobs(JobQuery(include_finished=True)).jobs if job.job_id != mine)


@pytest.mark.parametrize("booking, refusal", [
    ({"admin": "alice"}, "only root books reservations"),
    ({"nodes": "n9"}, "no node n9"),
    ({"start": "2001-01-01"}, "is in the past"),
    ({"start": "yesterday"}, "is not a time"),
    ({"duration": "UNLIMITED"}, "a reservation ends"),
    ({"start": "now+90"}, "reservation maint holds n[3-4]"),
    ({"name": "maint"}, "a reservation maint exists"),
    ({"users": ("nobody-here",)}, "no user nobody-here on the master's host"),
])
def test_a_bad_reservation_is_refused_with_one_line_and_changes_nothing(tmp_path, clock, booking, refusal):
    clock.now = 1.8e9  # 2027: 2001 is past
    core = make(tmp_path, clock, BGS)
    reserve(core)
    reply = reserve(core, **{"name": "other", **booking})
    assert isinstance(reply, ErrorReply) and refusal in reply.reason and reply.reason.endswith("nothing changed")
    assert [each.name for each in core.reservation_book.query().reservations] == ["maint"]
    assert core.store.admin_log(0, 10)[-1].result.startswith("refused: ")


def test_running_jobs_that_would_still_run_refuse_a_booking_unless_it_ignores_them(tmp_path, clock):
    core = make(tmp_path, clock, BGS)
    long = submit(core, 4, 3600.0)
    refused = reserve(core)
    assert f"job {long} may still run on n[1-4] when it opens" in refused.reason
    assert isinstance(reserve(core, flags=[ReservationFlag.IGNORE_JOBS]), ReservationList)


def test_a_reservations_jobs_its_users_its_update_its_end_and_a_restart(tmp_path, clock):
    core = make(tmp_path, clock, BGS)
    reserve(core, start="now+10", duration="1:00")
    assert "user bob may not use reservation maint" in core.clients.submit(Submit(spec=JobSpec(
        name="j", user="bob", tasks=1, argv=["true"], reservation="maint"))).reason
    assert "needs 3 processors, reservation maint has 2" in core.clients.submit(Submit(spec=JobSpec(
        name="j", user="alice", tasks=3, argv=["true"], reservation="maint"))).reason
    assert "no reservation other" in core.clients.submit(Submit(spec=JobSpec(
        name="j", user="alice", tasks=1, argv=["true"], reservation="other"))).reason
    waiting = submit(core, 1, 30.0, reservation="maint")
    assert "has jobs" in administer(core, ReservationDelete(admin="root", name="maint")).reason
    moved = administer(core, ReservationUpdate(admin="root", name="maint", start="now+20", nodes="n1"))
    assert isinstance(moved, ReservationList) and moved.reservations[0].nodes == ["n1"]
    assert moved.reservations[0].end - moved.reservations[0].start == 60
    core = restart(core, tmp_path, clock, BGS)
    for node in NODES:
        hello(core, node)
    (kept,) = core.reservation_book.query().reservations
    assert (kept.name, kept.nodes, kept.jobs) == ("maint", ["n1"], [waiting])
    for _ in range(100):  # 20 s to the window: it starts in it
        quanta(core, 0.2)
    assert info(core, waiting).state is JobState.RUNNING and info(core, waiting).node_names == ["n1"]
    held = core.clients.submit(Submit(spec=JobSpec(name="j", user="alice", tasks=1, argv=["true"],
                                                   reservation="maint"), hold=True)).job_id
    for _ in range(305):  # the window is over: its job still waiting is cancelled, the one running runs on
        quanta(core, 0.2)
    assert (info(core, held).state, info(core, held).reason) == (JobState.CANCELLED, "its reservation maint ended")
    assert info(core, waiting).state is JobState.RUNNING
    assert core.reservation_book.query().reservations == []
