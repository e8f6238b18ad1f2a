"""A live migration under MGS, on four nodes: the scheduler empties a row by moving a job.

Job A (one node) and job B (three nodes) fill row 0; C (two nodes) and D (one
node) go to row 1, C on A's node. C and D are not migratable, so FillMatrix-2
cannot push C aside to copy A into row 1. When B ends, row 0 holds A alone,
and A's node is C's in row 1: CollapseMatrix-2 moves A to the one free node of
row 1 (option 2: option 1 would move C), and row 0 disappears. A's tasks
checkpoint at a barrier and restart on the new node from their state.
"""

import time
from dataclasses import dataclass

from gangsched.bench.mix import job_spec, wait_until_running
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.master.client import MasterClient
from gangsched.protocol.messages import JobState

NODES = 4


@dataclass(frozen=True)
class MigrationRun:
    job: int
    moved_from: list[str]
    moved_to: list[str]
    barriers_before: int  # A's barriers just before B ended
    checkpointed_at: int  # the iterations A had passed when it saved its state
    barriers_after_restart: int  # A's barriers shortly after it restarted
    seconds_to_catch_up: float  # from the restart to the first barrier past the checkpoint
    cost_s: float  # checkpoint asked -> restarted, as the master measured it


def run_migration(client: MasterClient, short_iterations: int = 40,
                  run_ms: float = 100.0, timeout_s: float = 60.0) -> MigrationRun:
    forever = SyntheticJob("timed", iterations=0, run_ms=run_ms)
    short = SyntheticJob("timed", iterations=short_iterations, run_ms=run_ms)
    a = client.submit(job_spec(forever, 1))
    b = client.submit(job_spec(short, 3))
    c = client.submit(job_spec(forever, 2).model_copy(update={"migratable": False}))
    d = client.submit(job_spec(forever, 1).model_copy(update={"migratable": False}))
    try:
        (started,) = wait_until_running(client, [a], timeout_s)
        deadline = time.monotonic() + timeout_s
        before = started.barriers
        while client.job(b).state is not JobState.COMPLETED:
            before = client.job(a).barriers
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {b} did not complete within {timeout_s:g} s")
            time.sleep(0.05)
        while not (info := client.job(a)).migration_s:
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {a} did not migrate within {timeout_s:g} s")
            time.sleep(0.01)
        restarted = time.monotonic()
        saved = info.barriers  # rank 0's counter as it exited to migrate: the iterations it saved
        while (after := client.job(a)).barriers <= saved:
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {a} made no progress after its restart")
            time.sleep(0.01)
        return MigrationRun(a, started.node_names, info.node_names, before, saved, after.barriers,
                            time.monotonic() - restarted, info.migration_s[0])
    finally:
        for job_id in (a, b, c, d):
            if not client.job(job_id).state.is_final:
                client.cancel(job_id, client.job(job_id).spec.user)
