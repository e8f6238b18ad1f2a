"""Stores as earlier versions of gangsched made them, for the tests of their migration: SQL both engines take."""

from collections.abc import Callable
from typing import Any

from gangsched.protocol.records import JobSpec

# the jobs table of versions 13 to 15: a job's one launch, its ports and live ranks in its row
JOBS_OF_VERSION_15 = """CREATE TABLE jobs (
    job_id INTEGER PRIMARY KEY, spec TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL,
    submit_time DOUBLE PRECISION NOT NULL, start_time DOUBLE PRECISION, end_time DOUBLE PRECISION,
    node_names TEXT NOT NULL, processors TEXT NOT NULL, exit_code INTEGER, requeues INTEGER NOT NULL,
    barrier_port INTEGER, rendezvous_port INTEGER, barriers BIGINT NOT NULL, cpu_ns BIGINT NOT NULL,
    ran_s DOUBLE PRECISION NOT NULL, migration_s TEXT NOT NULL, max_rss BIGINT,
    launched_to TEXT NOT NULL DEFAULT '{}', preemptions TEXT NOT NULL DEFAULT '[]', hold TEXT, live_ranks TEXT)"""
RUNNING_SPEC = JobSpec(name="j", user="alice", tasks=2, argv=["true"]).model_dump_json()


def jobs_as_version_15(execute: Callable[..., Any]) -> None:
    """Replace a new store's jobs table by version 15's (empty)."""
    execute("DROP TABLE jobs")
    execute(JOBS_OF_VERSION_15)
    execute("CREATE INDEX jobs_by_state ON jobs (state)")


def running_jobs_of_version_15(execute: Callable[..., Any]) -> None:
    """Two jobs running on n1 and n2 as version 15 stored them: job 1 with rank 1 left, its barrier's port
    and MASTER_PORT; job 2 of a store before version 13 (no live ranks: every rank)."""
    for job_id, live in ((1, "[1]"), (2, None)):
        execute("INSERT INTO jobs (job_id, spec, state, reason, submit_time, start_time, node_names, processors,"
                " requeues, barrier_port, rendezvous_port, barriers, cpu_ns, ran_s, migration_s, live_ranks)"
                " VALUES (?, ?, 'running', '', 0, 1, '[\"n1\", \"n2\"]', '[0, 0]', 0, 5000, 29500, 0, 0, 0, '[]', ?)",
                (job_id, RUNNING_SPEC, live))
