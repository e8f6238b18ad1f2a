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

from gangsched.client.master_client import MasterClient
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.protocol.records import JobInfo, JobState

NODES = 4


@dataclass(frozen=True)
class MigrationRun:
    job: int
    moved_from: list[str]
    moved_to: list[str]
    barriers_before: int  # A's barriers just before B ended
    checkpointed_at: int  # the barriers A had passed when it saved its state and left
    barriers_after: int  # A's barriers once the master saw it progress on its new node
    cost_s: float  # checkpoint asked -> a barrier past the checkpoint, as the master measured it


def run_migration(client: MasterClient, short_iterations: int = 40,
                  run_ms: float = 100.0, timeout_s: float = 60.0) -> MigrationRun:
    forever = SyntheticJob("timed", iterations=0, run_ms=run_ms)
    short = SyntheticJob("timed", iterations=short_iterations, run_ms=run_ms)
    a = client.submit(job_spec(forever, 1))
    b = client.submit(job_spec(short, 3))
    c = client.submit(job_spec(forever, 2).model_copy(update={"migratable": False}))
    d = client.submit(job_spec(forever, 1).model_copy(update={"migratable": False}))
    deadline = time.monotonic() + timeout_s

    def poll(what: str) -> JobInfo:
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.01)
        return client.job(a)

    try:
        (started,) = client.wait_until_running([a], timeout_s)
        before = started.barriers
        while not (ended := client.job(b)).state.is_final:
            before = poll(f"job {b} to complete").barriers
        if ended.state is not JobState.COMPLETED:
            raise RuntimeError(f"job {b} ended {ended.state.value}: {ended.reason}")
        while (moved := poll(f"job {a} to restart elsewhere")).node_names == started.node_names:
            pass
        while not (after := poll(f"job {a} to progress after its restart")).migration_s:
            pass
        return MigrationRun(a, started.node_names, moved.node_names, before, moved.barriers, after.barriers,
                            after.migration_s[0])
    finally:
        for job_id in (a, b, c, d):
            if not client.job(job_id).state.is_final:
                client.cancel(job_id, client.job(job_id).spec.user)
