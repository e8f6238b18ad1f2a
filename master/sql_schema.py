"""The store's tables, as both engines read them (master/sql_store.py): SQL that SQLite and PostgreSQL
take alike. ``"user"`` is quoted (PostgreSQL reserves the word); the types are PostgreSQL's, which
SQLite reads by their affinity (``BIGINT`` an integer, ``DOUBLE PRECISION`` a real)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id INTEGER PRIMARY KEY,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL,
    submit_time DOUBLE PRECISION NOT NULL,
    start_time DOUBLE PRECISION,
    end_time DOUBLE PRECISION,
    node_names TEXT NOT NULL,
    processors TEXT NOT NULL,
    exit_code INTEGER,
    requeues INTEGER NOT NULL,
    barriers BIGINT NOT NULL,
    cpu_ns BIGINT NOT NULL,
    ran_s DOUBLE PRECISION NOT NULL,
    migration_s TEXT NOT NULL,
    max_rss BIGINT,
    launched_to TEXT NOT NULL DEFAULT '{}',
    preemptions TEXT NOT NULL DEFAULT '[]',
    hold TEXT,
    steps TEXT NOT NULL DEFAULT '[]'
);
-- the jobs by state: a restart reads the pending and running ones, a watcher counts them by state,
-- without reading every job the store ever held
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state);
-- a client's token for each submission: a retry after a lost reply finds the job it made
CREATE TABLE IF NOT EXISTS submissions (
    "user" TEXT NOT NULL,
    token TEXT NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY ("user", token)
);
CREATE TABLE IF NOT EXISTS users (
    "user" TEXT PRIMARY KEY,
    political_priority DOUBLE PRECISION NOT NULL,
    quota_processor_s DOUBLE PRECISION,
    used_processor_s DOUBLE PRECISION NOT NULL,
    used_cpu_s DOUBLE PRECISION NOT NULL DEFAULT 0,
    used_memory_byte_s DOUBLE PRECISION NOT NULL DEFAULT 0
);
-- nodes an administrator drained or took down, with why, who and since when
CREATE TABLE IF NOT EXISTS node_marks (
    node TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    reason TEXT NOT NULL,
    "user" TEXT NOT NULL,
    time DOUBLE PRECISION NOT NULL
);
-- what each user may have at once, in every partition ('') or in one (gang admin limit)
CREATE TABLE IF NOT EXISTS user_limits (
    "user" TEXT NOT NULL,
    partition TEXT NOT NULL,
    limits TEXT NOT NULL,
    PRIMARY KEY ("user", partition)
);
-- nodes booked for a window of time (gang admin reservation)
CREATE TABLE IF NOT EXISTS reservations (
    name TEXT PRIMARY KEY,
    reservation TEXT NOT NULL
);
-- every administrative command, done or refused (gang admin log)
CREATE TABLE IF NOT EXISTS admin_log (
    number INTEGER PRIMARY KEY,
    time DOUBLE PRECISION NOT NULL,
    "user" TEXT NOT NULL,
    command TEXT NOT NULL,
    result TEXT NOT NULL,
    token TEXT
);
-- a client's token for each command: a retry after a lost reply finds the first one's record
CREATE INDEX IF NOT EXISTS admin_log_by_token ON admin_log ("user", token);
-- job records this gangsched would refuse (written by another version, or mended by hand), moved out of
-- jobs as the store read them, with why: the master leads without them
CREATE TABLE IF NOT EXISTS quarantined_jobs (
    job_id INTEGER PRIMARY KEY,
    record TEXT NOT NULL,
    reason TEXT NOT NULL,
    time DOUBLE PRECISION NOT NULL
);
"""

SCHEMA_VERSION = 16
# what version 13 added: the ranks of a job that have not ended (NULL in a job of an earlier version: every rank)
LIVE_RANKS_COLUMN = "ALTER TABLE jobs ADD COLUMN live_ranks TEXT"
# version 16: a job's steps (master/job_steps.py), a JSON list; a job placed before it ran one, step 0, whose
# ports and live ranks were the job row's ('live' null: every rank). Each engine builds the JSON its own way.
STEPS_COLUMN = "ALTER TABLE jobs ADD COLUMN steps TEXT NOT NULL DEFAULT '[]'"
STEP_COLUMNS_DROPPED = ["ALTER TABLE jobs DROP COLUMN barrier_port", "ALTER TABLE jobs DROP COLUMN rendezvous_port",
                        "ALTER TABLE jobs DROP COLUMN live_ranks"]


def statements(*tables: str) -> list[str]:
    """The statements of ``SCHEMA`` that make these tables (all of them, given none)."""
    every = [statement.strip() for statement in SCHEMA.split(";") if statement.strip()]
    return every if not tables else [statement for statement in every
                                     if any(f"EXISTS {table} (" in statement for table in tables)]


def upsert(table: str, columns: str, key: str) -> str:
    """A row written whole, over the one with the same ``key`` if there is one."""
    names = [name.strip() for name in columns.split(",")]
    keys = {name.strip() for name in key.split(",")}
    updates = ", ".join(f"{name} = excluded.{name}" for name in names if name not in keys)
    return f"INSERT INTO {table} ({columns}) VALUES ({','.join('?' * len(names))}) ON CONFLICT ({key}) DO UPDATE SET " \
        f"{updates}"


JOB_COLUMNS = (
    "job_id, spec, state, reason, submit_time, start_time, end_time,"
    " node_names, processors, exit_code, requeues, barriers, cpu_ns, ran_s,"
    " migration_s, max_rss, launched_to, preemptions, hold, steps"
)
ACTION_COLUMNS = 'number, time, "user", command, result, token'
JOB_UPSERT = upsert("jobs", JOB_COLUMNS, "job_id")
ACCOUNT_UPSERT = upsert("users", '"user", political_priority, quota_processor_s, used_processor_s, used_cpu_s, '
                        'used_memory_byte_s', '"user"')
# version 15: a user's use named for what it counts (processor-seconds, not node-seconds), and what else it
# accrues (CPU-seconds, memory byte-seconds)
USE_COLUMNS = ["ALTER TABLE users RENAME COLUMN quota_node_s TO quota_processor_s",
               "ALTER TABLE users RENAME COLUMN used_node_s TO used_processor_s",
               "ALTER TABLE users ADD COLUMN used_cpu_s DOUBLE PRECISION NOT NULL DEFAULT 0",
               "ALTER TABLE users ADD COLUMN used_memory_byte_s DOUBLE PRECISION NOT NULL DEFAULT 0"]
MARK_UPSERT = upsert("node_marks", 'node, state, reason, "user", time', "node")
LIMITS_UPSERT = upsert("user_limits", '"user", partition, limits', '"user", partition')
RESERVATION_UPSERT = upsert("reservations", "name, reservation", "name")
TOKEN_INSERT = 'INSERT INTO submissions ("user", token, job_id) VALUES (?, ?, ?)'
ACTION_INSERT = f"INSERT INTO admin_log ({ACTION_COLUMNS}) VALUES (?,?,?,?,?,?)"
QUARANTINE_INSERT = "INSERT INTO quarantined_jobs (job_id, record, reason, time) VALUES (?, ?, ?, ?)"
