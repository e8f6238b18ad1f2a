"""A driven master of four nodes and four gangs, restarted on its store, administered as root."""

from pathlib import Path

from gangsched.master.sqlite_store import SqliteStore
from gangsched.protocol.admin_messages import (
    JobControl,
    NodeUpdate,
)
from gangsched.protocol.messages import (
    JobQuery,
)
from gangsched.protocol.records import JobInfo
from tests.helpers.driven_master import DrivenMaster, FakeClock, OnClock, driven_master
from tests.helpers.master_events import ENDPOINTS, SETTINGS, hello

NODES = ("n1", "n2", "n3", "n4")


GANGS = SETTINGS.model_copy(update={"mpl": 4})


def make(tmp_path: Path, clock: FakeClock, settings=GANGS, nodes=NODES) -> DrivenMaster:
    core = driven_master(settings, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    for node in nodes:
        hello(core, node)
    return core


def restart(core: DrivenMaster, tmp_path: Path, clock: FakeClock, settings=GANGS) -> DrivenMaster:
    core.store.close()
    return driven_master(settings, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)


def administer(core: DrivenMaster, message: NodeUpdate | JobControl):
    return OnClock(core.core, core.clock, core.store, core.core).administer(message)


def info(core: DrivenMaster, job: int) -> JobInfo:
    (found,) = core.clients.query_jobs(JobQuery(job_ids=[job])).jobs
    return found
