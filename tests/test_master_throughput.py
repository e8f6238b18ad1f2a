"""The master's part in a flood of small jobs, event by event on a fake clock: a processor a job frees is
used again in the same quantum, never beside a task that still runs there."""

from pathlib import Path

from gangsched.master.settings import MasterSettings
from gangsched.master.sqlite_store import SqliteStore
from gangsched.protocol.messages import LaunchTask, Submit, TaskExit
from gangsched.protocol.records import JobSpec
from tests.conftest import driven_master
from tests.test_master_core import ENDPOINTS, hello, sent

SETTINGS = MasterSettings(quantum_ms=100, heartbeat_ms=100, heartbeat_misses=3, policy="gs", mpl=3,
                          state_dir=Path("/nonexistent"))


def submit_one(core, count: int = 1) -> list[int]:
    spec = JobSpec(name="j", user="alice", tasks=1, argv=["true"])
    return [core.clients.submit(Submit(spec=spec)).job_id for _ in range(count)]


def launched(core) -> dict[int, bool]:
    """job -> whether its launch says to run at once"""
    return {message.task.job_id: message.run_now for _, message in sent(core, LaunchTask)}


def test_a_processor_freed_in_the_quantum_is_used_again_at_once(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    first, second = submit_one(core, 2)  # one processor: two rows
    assert launched(core) == {first: False, second: False}  # placed before any switch: they wait for theirs
    core.tick()
    row_running = core.rotation.ran
    assert row_running in ({first}, {second})
    (ended,) = row_running
    core.node_events.task_exit(TaskExit(node="n1", job_id=ended, rank=0, returncode=0))
    (third,) = submit_one(core)
    assert launched(core) == {third: True}  # nothing else runs on its processor now
    assert third in core.rotation.ran


def test_a_job_placed_where_a_task_runs_this_quantum_waits_for_its_switch(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    first, second = submit_one(core, 2)
    sent(core, LaunchTask)
    core.tick()
    (running,) = core.rotation.ran
    waiting = second if running == first else first
    core.node_events.task_exit(TaskExit(node="n1", job_id=waiting, rank=0, returncode=0))  # ends while stopped
    (third,) = submit_one(core)
    assert launched(core) == {third: False}  # its processor is taken this quantum


def test_a_job_placed_at_a_quantum_boundary_starts_with_the_switch(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    (first,) = submit_one(core)
    sent(core, LaunchTask)
    core.tick()
    core.node_events.task_exit(TaskExit(node="n1", job_id=first, rank=0, returncode=0))
    core.rotation.quantum_over()  # as the boundary's tick does before its settle
    (second,) = submit_one(core)
    assert launched(core) == {second: False}
