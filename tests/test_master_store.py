"""The master's store failing under it (a full file system, as the chaos run makes one): nothing is
lost, nothing is half written, and the jobs go on once it writes again. The store is a real SQLite
store whose writes fail on demand."""

import sqlite3
from pathlib import Path

import pytest

from gangsched.master.accounts import Account
from gangsched.master.job_record import Job
from gangsched.master.sqlite_store import SqliteStore
from gangsched.protocol.messages import ErrorReply, Heartbeat, LaunchTask, Submit, TaskExit
from gangsched.protocol.records import JobSpec, JobState
from tests.conftest import DrivenMaster, FakeClock, driven_master
from tests.test_master_core import ENDPOINTS, SETTINGS, hello, infos, sent, submit


class FailingStore(SqliteStore):
    """A real SQLite store whose writes fail while ``full`` is set, as a full file system makes them fail
    (the chaos run, gang bench chaos, fills a real one)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.path, self.full = path, False

    def _write(self, job: Job) -> None:
        self._refuse()
        super()._write(job)

    def _write_account(self, account: Account) -> None:
        self._refuse()
        super()._write_account(account)

    def _refuse(self) -> None:
        if self.full:
            raise sqlite3.OperationalError("database or disk is full")


@pytest.fixture
def failing_store(tmp_path) -> FailingStore:
    return FailingStore(tmp_path / "jobs.db")


def quantum(core: DrivenMaster, clock: FakeClock, nodes: tuple[str, ...]) -> None:
    """A quantum goes by, the nodes heard from."""
    clock.now += 0.1
    for node in nodes:
        core.node_events.heartbeat(Heartbeat(node=node))
    core.tick()


def test_a_store_that_cannot_write_a_jobs_end_loses_nothing_and_releases_its_dependent_after(failing_store, clock):
    settings = SETTINGS.model_copy(update={"quantum_ms": 100})
    core = driven_master(settings, ENDPOINTS, failing_store, clock)
    for index in (1, 2):
        hello(core, f"n{index}")
    job = submit(core, nodes=2)
    dependent = core.clients.submit(Submit(spec=JobSpec(name="after", user="alice", tasks=2, argv=["true"],
                                                        after_ok=[job]))).job_id
    sent(core, LaunchTask)
    quantum(core, clock, ("n1", "n2"))  # the job runs a quantum: its user's use is counted at its end
    core.outbox.clear()
    failing_store.full = True
    for rank, node in enumerate(["n1", "n2"]):
        core.node_events.task_exit(TaskExit(node=node, job_id=job, rank=rank, returncode=0))
    first, waiting = infos(core, [job, dependent])
    assert first.state is JobState.RUNNING and waiting.state is JobState.PENDING  # memory follows the store
    assert SqliteStore(failing_store.path).get(job).state is JobState.RUNNING
    for _ in range(4):  # it stays so while the store cannot write, each try counted
        quantum(core, clock, ("n1", "n2"))
    assert core.store_retry.failures >= 2
    assert sent(core, LaunchTask) == []
    failing_store.full = False  # room again: within 2 quanta the end is written and the dependent starts
    for _ in range(2):
        quantum(core, clock, ("n1", "n2"))
    first, started = infos(core, [job, dependent])
    assert first.state is JobState.COMPLETED and started.state is JobState.RUNNING
    assert sorted(node for node, _ in sent(core, LaunchTask)) == ["n1", "n2"]
    assert SqliteStore(failing_store.path).get(job).state is JobState.COMPLETED
    assert core.clients.query_users().users[0].used_node_s > 0


def test_a_start_the_store_cannot_write_does_not_happen_and_the_job_starts_once_it_can(failing_store, clock):
    settings = SETTINGS.model_copy(update={"quantum_ms": 100})
    core = driven_master(settings, ENDPOINTS, failing_store, clock)
    for index in (1, 2):
        hello(core, f"n{index}")
    core.node_events.lose_node("n2", "n2 stopped")
    job = submit(core, nodes=2)  # one node up: it waits, written
    failing_store.full = True
    hello(core, "n2", incarnation="second")  # the policy places it; the store cannot write its start
    (info,) = infos(core, [job])
    assert info.state is JobState.PENDING and info.reason.startswith("start postponed"), info.reason
    assert sent(core, LaunchTask) == []  # memory follows the store: no task went out
    assert SqliteStore(failing_store.path).get(job).state is JobState.PENDING
    for _ in range(3):
        quantum(core, clock, ("n1", "n2"))
    assert core.store_retry.failures >= 2 and sent(core, LaunchTask) == []
    failing_store.full = False
    for _ in range(2):  # room again: within 2 quanta it starts
        quantum(core, clock, ("n1", "n2"))
    (info,) = infos(core, [job])
    assert info.state is JobState.RUNNING
    assert sorted(node for node, _ in sent(core, LaunchTask)) == ["n1", "n2"]
    assert SqliteStore(failing_store.path).get(job).state is JobState.RUNNING


def test_a_postponed_start_is_not_forgotten_when_a_later_write_goes_through_first(failing_store, clock):
    """The store has room again and another job's end is written before the retry is due: the
    postponed start is still tried, within 2 quanta (a chaos run found it waiting for ever)."""
    settings = SETTINGS.model_copy(update={"quantum_ms": 100})
    core = driven_master(settings, ENDPOINTS, failing_store, clock)
    for index in (1, 2):
        hello(core, f"n{index}")
    core.node_events.lose_node("n2", "n2 stopped")
    short = submit(core, nodes=1)  # runs on n1
    wide = submit(core, nodes=2)  # one node up: it waits, written
    failing_store.full = True
    hello(core, "n2", incarnation="second")  # placed; the store cannot write its start
    (waiting,) = infos(core, [wide])
    assert waiting.reason.startswith("start postponed"), waiting.reason
    late = core.clients.submit(Submit(spec=JobSpec(name="late", user="alice", tasks=1, argv=["true"])))
    assert isinstance(late, ErrorReply) and "the job store cannot write" in late.reason  # refused whole
    failing_store.full = False
    core.node_events.task_exit(TaskExit(node="n1", job_id=short, rank=0, returncode=0))  # written at once
    for _ in range(2):
        quantum(core, clock, ("n1", "n2"))
    first, started = infos(core, [short, wide])
    assert first.state is JobState.COMPLETED and started.state is JobState.RUNNING, started.reason
