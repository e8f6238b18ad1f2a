"""Administrative commands interleaved with submissions from several clients while the master is killed
(-9) and started again (docs/operations.md).

Each client submits its share of held one-task jobs of `true` and, after each submission, acts on the
job it made: renames it, lowers its time limit, holds it as root, or releases it (which runs it). Each
command carries a token, as each submission does, so a retry after a reply lost in the crash is answered
as the first try was. What must hold: every command recorded exactly once; every job in the state the
commands left it (renamed and held, limited and held, held by root, or completed); none lost or made
twice.
"""

import getpass
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass

from gangsched.bench.restarts import crash_halfway, wait_for_ends
from gangsched.client.master_client import MasterClient
from gangsched.deploy.local import LocalCluster
from gangsched.protocol.admin_messages import JobAction, JobControl, JobsControlled, JobUpdate, JobUpdated
from gangsched.protocol.records import Hold, JobInfo, JobSpec, JobState

_RETRY_S = 60.0
_LIMIT_S = 600.0


@dataclass(frozen=True)
class OperationsResult:
    submissions: int
    accepted: int
    commands: int  # commands the clients got an answer to
    recorded: int  # distinct commands in the master's record
    recorded_twice: int  # commands recorded more than once
    wrong_state: int  # jobs not as the commands left them
    lost: int  # accepted, and the master does not know the job
    seconds: float


def _expected(number: int, job: JobInfo) -> bool:
    """Whether job ``number`` of the run is as its command left it."""
    match number % 4:
        case 0:
            return job.state is JobState.PENDING and job.hold is Hold.USER and job.spec.name == f"renamed-{number}"
        case 1:
            return job.state is JobState.PENDING and job.hold is Hold.USER and job.spec.estimate_s == _LIMIT_S
        case 2:
            return job.state is JobState.PENDING and job.hold is Hold.ADMIN
    return job.state is JobState.COMPLETED


def run_operations_restart(cluster: LocalCluster, submissions: int, clients: int) -> OperationsResult:
    """``clients`` threads submit ``submissions`` held jobs, each followed by a command on it; when half
    the commands are answered, the master is killed with SIGKILL and started again. Root's: a hold by root
    is an administrator's."""
    user = getpass.getuser()
    if user != "root":
        raise PermissionError("the commands include root's hold: run it as root")
    state = cluster.state()
    assert state is not None
    accepted: dict[int, int] = {}  # job number -> id
    tokens: list[str] = []
    lock = threading.Lock()
    half = threading.Event()

    def share(index: int) -> None:
        with MasterClient(state.master, timeout_s=2.0) as client:
            for number in range(index, submissions, clients):
                job_id = client.submit_jobs(JobSpec(name=f"ops-{number}", user=user, tasks=1, argv=["true"]),
                                            None, retry_s=_RETRY_S, hold=True)[0]
                token = uuid.uuid4().hex
                command = _command(number, job_id, user, token)
                if isinstance(command, JobUpdate):
                    client.command(command, JobUpdated, retry_s=_RETRY_S)
                else:
                    client.command(command, JobsControlled, retry_s=_RETRY_S)
                with lock:
                    accepted[number] = job_id
                    tokens.append(token)
                    if len(tokens) >= submissions // 2:
                        half.set()

    start = time.monotonic()
    crash_halfway(cluster, share, clients, half)
    with MasterClient(state.master, timeout_s=10.0) as client:
        wait_for_ends(client, [job_id for number, job_id in accepted.items() if number % 4 == 3])  # the released
        seconds = time.monotonic() - start
        known = {job.job_id: job for job in client.jobs(sorted(accepted.values()))}
        times = Counter(action.token for action in client.admin_log() if action.token is not None)
    wrong = sum(1 for number, job_id in accepted.items() if job_id in known and not _expected(number, known[job_id]))
    return OperationsResult(submissions, len(accepted), len(tokens), sum(1 for token in tokens if times[token]),
                            sum(1 for token in tokens if times[token] > 1), wrong, len(accepted) - len(known), seconds)


def _command(number: int, job_id: int, user: str, token: str) -> JobControl | JobUpdate:
    match number % 4:
        case 0:
            return JobUpdate(user=user, job_id=job_id, name=f"renamed-{number}", token=token)
        case 1:
            return JobUpdate(user=user, job_id=job_id, time_limit_s=_LIMIT_S, token=token)
        case 2:
            return JobControl(user=user, action=JobAction.HOLD, job_ids=[job_id], token=token)
    return JobControl(user=user, action=JobAction.RELEASE, job_ids=[job_id], token=token)
