"""Which engine holds the master's store (``--store``): SQLite in its state folder by default, or a
PostgreSQL database that masters on several hosts share, one leading, the others standing by."""

from gangsched.master.leadership import Lead, LeaseLead, SoleLead
from gangsched.master.settings import MasterSettings
from gangsched.master.sqlite_store import SqliteStore
from gangsched.master.store import JobStore


def open_lead(settings: MasterSettings, endpoint: str) -> Lead:
    """How the master at ``endpoint`` comes to lead: at once and alone with SQLite, by the lease in the
    shared PostgreSQL store otherwise; ``StoreError`` if that store cannot be reached."""
    if _is_postgres(settings):
        return LeaseLead(settings.store, endpoint, settings.lease_s, renew_every_s=settings.quantum_ms / 1000)
    return SoleLead(endpoint)


def open_store(settings: MasterSettings) -> JobStore:
    """The store ``settings`` name, open; ``StoreError`` with the reason if it cannot be."""
    if _is_postgres(settings):
        from gangsched.master.postgres_store import PostgresStore

        return PostgresStore(settings.store)
    return SqliteStore(settings.state_dir / "jobs.db")


def _is_postgres(settings: MasterSettings) -> bool:
    return settings.store.startswith(("postgresql://", "postgres://"))
