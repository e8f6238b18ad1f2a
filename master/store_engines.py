"""Which engine holds the master's store (``--store``): SQLite in its state folder by default, or a
PostgreSQL database that masters on several hosts share."""

from gangsched.master.settings import MasterSettings
from gangsched.master.sqlite_store import SqliteStore
from gangsched.master.store import JobStore


def open_store(settings: MasterSettings) -> JobStore:
    """The store ``settings`` name, open; ``StoreError`` with the reason if it cannot be."""
    if settings.store.startswith(("postgresql://", "postgres://")):
        from gangsched.master.postgres_store import PostgresStore

        return PostgresStore(settings.store)
    return SqliteStore(settings.state_dir / "jobs.db")
