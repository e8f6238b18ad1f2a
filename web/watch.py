"""What the web view shows, read from the master and kept for the page.

While a page is open (an event stream is connected) the master is read every
half quantum, so the page follows each quantum; with no page open, every
``IDLE_PERIOD_S``, so that an unwatched view costs the master and the jobs'
cores next to nothing (at every half quantum it took some 2 % of a core in this
process and as much again in the master). One thread asks the master (the
client is a ZeroMQ socket, used by one thread only); the HTTP side reads the
last snapshot and waits for the next. Each job's measured and predicted
utilization is kept for the last few minutes for the page's charts: the master
keeps no history of it.
"""

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from gangsched.client.master_client import MasterClient, MasterUnreachable, RequestRefused
from gangsched.protocol.array_ranges import shown_job_id
from gangsched.protocol.messages import MatrixView, NodeList
from gangsched.protocol.records import JobInfo, JobState
from gangsched.protocol.reservation_messages import ReservationInfo

log = logging.getLogger("gangsched.web")

HISTORY_S = 300.0  # how far back the page's utilization charts go
IDLE_PERIOD_S = 5.0  # how often the master is read while no page is open
WAITING_SHOWN = 100  # waiting jobs the page lists, each array's as one (the rest: `gang queue`)
T = TypeVar("T")


class ClusterWatch:
    def __init__(self, master: str, quantum_ms: int) -> None:
        self._client = MasterClient(master, timeout_s=5.0)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="master-client")
        self.period_s = min(1.0, max(0.05, quantum_ms / 2000))
        self.snapshot: dict[str, Any] = {"quantum": None}
        self.version = 0
        self._changed = asyncio.Condition()
        self._history: dict[int, deque[tuple[float, float | None, float | None]]] = {}
        self._last_quantum: int | None = None
        self._watchers = 0
        self._watched = asyncio.Event()  # a page opened: read at once

    async def ask(self, question: Callable[[MasterClient], T]) -> T:
        """Run ``question`` with the master's client in the one thread that uses it."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, question, self._client)

    async def follow(self) -> None:
        """Read the master every period; wake the page's streams when the quantum changed."""
        while True:
            try:
                listing, jobs, matrices, reservations = await self.ask(_read)
            except (MasterUnreachable, RequestRefused) as error:
                log.warning("%s", error)
            else:
                quanta = sum(matrix.quantum for matrix in matrices)  # any partition's matrix turned
                if quanta != self._last_quantum:
                    self._last_quantum = quanta
                    self._record(jobs)
                    self.snapshot = self._view(matrices, jobs, listing, reservations)
                    async with self._changed:
                        self.version += 1
                        self._changed.notify_all()
            self._watched.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._watched.wait(), self.period_s if self._watchers else IDLE_PERIOD_S)

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """While a page follows the snapshots: the master is read every half quantum."""
        self._watchers += 1
        self._watched.set()
        try:
            yield
        finally:
            self._watchers -= 1

    async def next_after(self, version: int) -> int:
        """Wait until the snapshot is newer than ``version``; its version."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.version > version)
            return self.version

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._client.close()

    def _record(self, jobs: list[JobInfo]) -> None:
        now = time.time()
        running = {job.job_id for job in jobs if job.state is JobState.RUNNING}
        for job in jobs:
            if job.job_id in running:
                kept = self._history.setdefault(job.job_id, deque())
                kept.append((now, job.util_pct, job.predicted_pct))
                while kept and kept[0][0] < now - HISTORY_S:
                    kept.popleft()
        for job_id in [job_id for job_id, kept in self._history.items()
                       if job_id not in running and (not kept or kept[-1][0] < now - HISTORY_S)]:
            del self._history[job_id]

    def _view(self, matrices: list[MatrixView], jobs: list[JobInfo], listing: NodeList,
              reservations: list[ReservationInfo]) -> dict[str, Any]:
        """The snapshot the page draws: every partition's matrix (the default partition's first)."""
        return {
            "time": time.time(),
            "matrix": matrices[0].model_dump(mode="json"),
            "matrices": [matrix.model_dump(mode="json") for matrix in matrices],
            "jobs": [_job(job) for job in jobs],
            "nodes": [node.model_dump(mode="json") for node in listing.nodes],
            "reservations": [reservation.model_dump(mode="json") for reservation in reservations],
            "history": {str(job_id): list(kept) for job_id, kept in self._history.items()},
            "history_s": HISTORY_S,
        }


def _read(client: MasterClient) -> tuple[NodeList, list[JobInfo], list[MatrixView], list[ReservationInfo]]:
    """The nodes and partitions, the jobs (running ones, and the first waiting ones: ``active_jobs``), each
    partition's matrix (the default partition's first), and the reservations."""
    listing = client.node_list()
    names = sorted(listing.partitions, key=lambda partition: not partition.default)  # stable: the rest in order
    matrices = [client.matrix(partition.name) for partition in names] or [client.matrix()]
    return listing, active_jobs(client), matrices, client.reservations()


def active_jobs(client: MasterClient) -> list[JobInfo]:
    """The running and suspended jobs, and the first ``WAITING_SHOWN`` waiting ones (each array's as one),
    in job order: a listing of every waiting job, 100,000 deep, at each read, was most of a master's work
    in a flood (docs/limits.md, "The web view at depth")."""
    placed = client.jobs(states=[JobState.RUNNING, JobState.SUSPENDED])
    waiting = client.jobs(states=[JobState.PENDING], arrays=True, most=WAITING_SHOWN)
    return sorted(placed + waiting, key=lambda job: job.job_id)


def _job(job: JobInfo) -> dict[str, Any]:
    return {
        "job_id": job.job_id, "shown_id": shown_job_id(job.job_id, job.spec.array_job_id, job.array_pending),
        "name": job.spec.name, "user": job.spec.user,
        "state": job.state.value, "partition": job.spec.partition,
        "tasks": job.spec.tasks, "reason": job.reason, "util_pct": job.util_pct, "predicted_pct": job.predicted_pct,
        "barriers_per_s": job.barriers_per_s, "submit_time": job.submit_time, "start_time": job.start_time,
        "end_time": job.end_time, "nodes": sorted(set(job.node_names)),
    }

