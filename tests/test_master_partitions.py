"""Partitions in the master's core, on a fake clock: each a matrix of its own over its own nodes,
with its own policy and quantum; one switch names what each runs; a submission goes to the partition
it names (or the first of several that takes it), and is refused with one line where none will."""

from pathlib import Path

from gangsched.master.config_file import master_settings, partition_plan
from gangsched.master.sqlite_store import SqliteStore
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import (
    ErrorReply,
    JobQuery,
    KillTask,
    LaunchTask,
    MatrixQuery,
    NodeColumn,
    Reconfigured,
    Submit,
)
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.driven_master import DrivenMaster, FakeClock, driven_master
from tests.helpers.master_events import ENDPOINTS, hello, sent

CONFIG = """\
[master]
quantum_ms = 200
mpl = 2

[[nodes]]
names = "n[1-5]"

[[partitions]]
name = "batch"
nodes = "n[1-2]"
default = true

[[partitions]]
name = "debug"
nodes = "n[3-4]"
quantum_ms = 100
max_time = "10:00"
allow_users = ["alice"]

[[partitions]]
name = "closed"
nodes = "n5"
priority_tier = 2
state = "inactive"
"""


def make(tmp_path: Path, clock: FakeClock, text: str = CONFIG) -> DrivenMaster:
    path = tmp_path / "gangsched.toml"
    path.write_text(text)
    settings = master_settings({"config": path, "heartbeat_ms": 100, "state_dir": tmp_path})
    core = driven_master(settings, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock, partition_plan(settings))
    for node in ("n1", "n2", "n3", "n4"):
        hello(core, node)
    return core


def submit(core: DrivenMaster, partition: str | None = None, tasks: int = 2, user: str = "alice",
           estimate_s: float | None = None) -> int | ErrorReply:
    spec = JobSpec(name="j", user=user, tasks=tasks, argv=["true"], partition=partition, estimate_s=estimate_s)
    reply = core.clients.submit(Submit(spec=spec))
    return reply if isinstance(reply, ErrorReply) else reply.job_id


def test_a_job_runs_on_its_partitions_nodes_and_one_switch_names_each_matrix(tmp_path, clock):
    core = make(tmp_path, clock)
    batch, debug = submit(core), submit(core, "debug")
    launched = {message.task.job_id: set() for _, message in core.outbox if isinstance(message, LaunchTask)}
    for node, message in sent(core, LaunchTask):
        launched[message.task.job_id].add(node)
    assert launched == {batch: {"n1", "n2"}, debug: {"n3", "n4"}}
    (first, second) = core.clients.query_jobs(JobQuery(job_ids=[batch, debug])).jobs
    assert (first.spec.partition, second.spec.partition) == ("batch", "debug")
    assert second.spec.estimate_s == 600.0  # no limit given: the partition's MaxTime, below the default
    switch = core.tick()
    assert switch.rows == {"batch": [0], "debug": [0], "closed": []}
    columns = dict(sent(core, NodeColumn))
    assert columns["n1"].rows == {"batch": [[batch]]} and columns["n3"].rows == {"debug": [[debug]]}
    view = core.clients.query_matrix(MatrixQuery(partition="debug"))
    assert (view.partition, view.nodes, view.quantum_ms) == ("debug", ["n3", "n4"], 100)
    assert core.clients.query_matrix(MatrixQuery()).partition == "batch"
    assert core.clients.query_matrix(MatrixQuery(partition="nope")).reason.startswith("no partition 'nope'")


def test_each_matrix_turns_at_its_own_quantum(tmp_path, clock):
    core = make(tmp_path, clock)
    batch = [submit(core) for _ in range(2)]  # MPL 2: two rows of batch
    for _ in range(2):
        submit(core, "debug")
    sent(core, LaunchTask)
    chosen = []
    for _ in range(4):  # 100 ms apart: every boundary of debug, every other of batch
        switch = core.tick()
        chosen.append((switch.rows["batch"], switch.rows["debug"], switch.alternates))
        clock.now += 0.1
    (b0, d0, alt0), (b1, d1, alt1), (b2, d2, alt2), (b3, d3, alt3) = chosen
    assert len(b0) == len(d0) == len(b2) == len(d1) == 1 and d0 != d1 and b0 != b2
    # between batch's boundaries its rows are named by the jobs they run, which may have been renumbered
    assert b1 == b3 == [] and len(alt1) == len(alt3) == 1 and set(alt1) <= set(batch)
    assert core.clients.query_matrix(MatrixQuery(partition="batch")).quantum == 2
    assert core.clients.query_matrix(MatrixQuery(partition="debug")).quantum == 4


def test_a_submission_goes_to_the_first_partition_that_takes_it_or_is_refused_with_one_line(tmp_path, clock):
    core = make(tmp_path, clock)
    assert submit(core, "nope").reason == "no partition 'nope': the partitions are batch, debug, closed"
    refused = submit(core, "debug", estimate_s=3600)
    assert refused.code is ErrorCode.INVALID_SPEC and refused.reason == \
        "a time limit of 1:00:00 is past partition debug's MaxTime of 10:00"
    assert submit(core, "debug", user="bob").reason == "user bob may not use partition debug"
    assert submit(core, "closed").reason == "partition closed is inactive: it takes no job"
    assert submit(core, "batch", tasks=3).reason == "needs 3 processors, partition batch has 2 processors on 2 nodes"
    job = submit(core, "debug,batch", user="bob")  # debug will not have bob: batch takes the job
    (info,) = core.clients.query_jobs(JobQuery(job_ids=[job])).jobs
    assert info.spec.partition == "batch"
    both = submit(core, "closed,debug", user="bob")
    assert both.reason == "closed: partition closed is inactive: it takes no job; " \
        "debug: user bob may not use partition debug"
    assert [job.job_id for job in core.clients.query_jobs(JobQuery(partition="batch")).jobs] == [job]
    assert core.clients.query_jobs(JobQuery(partition="debug")).jobs == []


def test_after_a_restart_a_job_of_a_partition_gone_goes_where_it_can_or_is_cancelled(tmp_path, clock):
    core = make(tmp_path, clock)
    running = [submit(core, "debug") for _ in range(2)]  # MPL 2: both run, on n3 and n4
    waiting = submit(core, "debug")
    on_all = submit(core, "batch")
    core.store.close()
    # debug is gone: no partition holds both its nodes
    core = make(tmp_path, clock, '[[nodes]]\nnames = "n[1-4]"\n[[partitions]]\nname = "batch"\nnodes = "n[1-3]"\n'
                                 '[[partitions]]\nname = "short"\nnodes = "n4"\n')
    asked = JobQuery(job_ids=[*running, waiting, on_all])
    infos = {info.job_id: info for info in core.clients.query_jobs(asked).jobs}
    for job in running:
        assert infos[job].state is JobState.CANCELLED
        assert infos[job].reason == "no partition of the configuration holds its nodes (debug is gone)"
    assert infos[waiting].spec.partition == "batch" and infos[on_all].spec.partition == "batch"
    assert waiting in {message.task.job_id for _, message in sent(core, LaunchTask)}  # batch has room now


def reconfigured(core: DrivenMaster, tmp_path: Path, text: str, admin: str = "root") -> Reconfigured | ErrorReply:
    """The master reads its file again, now ``text``."""
    path = tmp_path / "gangsched.toml"
    path.write_text(text)
    settings = master_settings({"config": path, "heartbeat_ms": 100, "state_dir": tmp_path})
    return core.core.reconfigure(admin, str(path), partition_plan(settings), core.clock.read(), [])


def test_a_reconfiguration_adds_and_changes_partitions_without_touching_a_job(tmp_path, clock):
    core = make(tmp_path, clock)
    batch, debug = submit(core), submit(core, "debug")
    waiting = [submit(core, "debug") for _ in range(2)]  # MPL 2: one more runs, one waits
    sent(core, LaunchTask)
    core.tick()
    more = CONFIG.replace("quantum_ms = 100", "quantum_ms = 50") + '\n[[partitions]]\nname = "gpu"\nnodes = "n5"\n'
    done = reconfigured(core, tmp_path, more)
    assert done.partitions == ["batch", "debug", "closed", "gpu"]
    assert done.changes == ["partition debug changed", "partition gpu added"]
    assert not sent(core, KillTask) and not sent(core, LaunchTask)  # nothing restarted
    states = {info.job_id: info.state for info in core.clients.query_jobs(JobQuery()).jobs}
    assert states[batch] is states[debug] is JobState.RUNNING and sorted(states[job] for job in waiting) == \
        [JobState.PENDING, JobState.RUNNING]
    view = core.clients.query_matrix(MatrixQuery(partition="debug"))
    assert view.quantum_ms == 50 and sorted(job for row in view.rows for job in row if job) == \
        sorted([debug, *(job for job in waiting if states[job] is JobState.RUNNING)] * 2)
    assert core.tick().rows.keys() == {"batch", "debug", "closed", "gpu"}


def test_a_reconfiguration_that_removes_a_partition_with_jobs_or_comes_from_a_user_changes_nothing(tmp_path, clock):
    core = make(tmp_path, clock)
    job = submit(core, "debug")
    without = CONFIG.replace('name = "debug"\nnodes = "n[3-4]"\nquantum_ms = 100\nmax_time = "10:00"\n'
                             'allow_users = ["alice"]\n', 'name = "spare"\nnodes = "n[3-4]"\n')
    refused = reconfigured(core, tmp_path, without)
    assert refused.reason.endswith(f"partition debug is removed but still has jobs {job}: nothing changed")
    assert reconfigured(core, tmp_path, CONFIG, admin="alice").reason == "only root reconfigures the master, not alice"
    assert [matrix.name for matrix in core.matrices] == ["batch", "debug", "closed"]
    assert core.clients.query_jobs(JobQuery(job_ids=[job])).jobs[0].state is JobState.RUNNING
