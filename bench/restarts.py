"""Submissions from several clients while the master is killed (-9) and restarted.

What must hold: every submission a client made is one job (a retry after a lost
reply carries the same token), and every job COMPLETED: none lost, none failed
by the restart, none made twice.
"""

import getpass
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from gangsched.client.master_client import MasterClient
from gangsched.deploy.local import LocalCluster
from gangsched.protocol.records import JobSpec, JobState

_RETRY_S = 60.0
_WAIT_S = 300.0


@dataclass(frozen=True)
class RestartResult:
    submissions: int
    accepted: int  # submissions that got a job id
    completed: int
    wrongly_failed: int  # ended otherwise than COMPLETED
    lost: int  # accepted, and the master does not know the job
    duplicates: int  # jobs no submission got the id of
    seconds: float  # from the first submission until every job ended
    states: dict[str, int]


def crash_halfway(cluster: LocalCluster, work: Callable[[int], None], clients: int, half: threading.Event) -> None:
    """``clients`` threads do their ``work`` (given their index); once ``half`` is set, the master is killed
    with SIGKILL and started again; then every thread is waited for."""
    threads = [threading.Thread(target=work, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    half.wait(_WAIT_S)
    cluster.restart("master", crash=True)
    for thread in threads:
        thread.join(_WAIT_S)


def wait_for_ends(client: MasterClient, ids: list[int]) -> None:
    """Until every one of these jobs ended (or the deadline passed)."""
    deadline = time.monotonic() + _WAIT_S
    while not all(job.state.is_final for job in client.jobs(ids)) and time.monotonic() < deadline:
        time.sleep(0.2)


def run_restart(cluster: LocalCluster, submissions: int, clients: int) -> RestartResult:
    """``clients`` threads submit ``submissions`` one-task jobs of `true`; when half are in, the
    master is killed with SIGKILL and started again."""
    state = cluster.state()
    assert state is not None
    accepted: dict[str, int] = {}
    lock = threading.Lock()
    half = threading.Event()
    user = getpass.getuser()

    def submit_share(index: int) -> None:
        with MasterClient(state.master, timeout_s=2.0) as client:
            for number in range(index, submissions, clients):
                name = f"restart-{number}"
                job_id = client.submit(JobSpec(name=name, user=user, tasks=1, argv=["true"]), retry_s=_RETRY_S)
                with lock:
                    accepted[name] = job_id
                    if len(accepted) >= submissions // 2:
                        half.set()

    start = time.monotonic()
    crash_halfway(cluster, submit_share, clients, half)
    with MasterClient(state.master, timeout_s=10.0) as client:
        ids = sorted(accepted.values())
        wait_for_ends(client, ids)
        seconds = time.monotonic() - start
        known = {job.job_id: job for job in client.jobs(ids)}
        # every id the store has, up to well past the last one given out: any other is a second job
        extra = [job for job in client.jobs(list(range(1, max(ids) + 100))) if job.job_id not in set(ids)]
    states = Counter(job.state.value for job in known.values())
    completed = states.get(JobState.COMPLETED.value, 0)
    return RestartResult(submissions, len(accepted), completed, len(known) - completed, len(ids) - len(known),
                         len(extra), seconds, dict(states))
