"""Migrations: a job's tasks checkpoint at their next barrier (``CheckpointTask``), exit with
CHECKPOINTED and start again on their new nodes from the saved state.

The time from the request until rank 0 passes a barrier beyond the saved ones
is the measured cost, fed back to the policy as its C.
"""

import logging
from collections import deque

from gangsched.master.clock import Now
from gangsched.master.job_record import Job
from gangsched.master.pending import Queues
from gangsched.master.placement import processors_of, where
from gangsched.master.stats import MIGRATION_BOUNDS_S, Timings
from gangsched.policy.live_scheduler import Processor
from gangsched.protocol.messages import CheckpointTask, KillTask, Message

log = logging.getLogger("gangsched.master")


class Migrations:
    def __init__(self, queues: Queues, outbox: deque[tuple[str, Message]]) -> None:
        self._queues = queues
        self._outbox = outbox
        self.costs = Timings(MIGRATION_BOUNDS_S)

    def migrate(self, job: Job, processors: list[Processor], now: Now) -> None:
        before = processors_of(job)
        if not job.migrating(processors, now.monotonic):  # moved again before it left
            return
        log.info("job %d migrates from %s to %s", job.job_id, where(before), where(processors))
        for step in job.steps.values():  # its first step moves; the others end (docs/architecture.md, 'Steps')
            nodes = sorted({step.node_of(rank, job.node_names) for rank in step.live_ranks})
            for node in nodes:
                self._outbox.append((node, CheckpointTask(job_id=job.job_id) if step.step_id == 0 else
                                     KillTask(job_id=job.job_id, step=step.step_id, reason="its job migrates")))

    def to_restart(self, job: Job) -> list[Processor] | None:
        """Every rank of a migrating job saved its state: where it starts again (its saved barriers noted)."""
        return job.restarting()

    def progressed(self, job: Job, progress: int, now: Now) -> None:
        """Rank 0 reported ``progress``: past the checkpoint, the migration is over and its cost known."""
        cost = job.migrated(progress, now.monotonic)
        if cost is None:
            return
        self.costs.observe(cost)
        for queue in self._queues:  # a measure of the machine, not of one partition
            queue.scheduler.set_migration_cost(self.costs.mean())
        log.info("job %d migrated in %.3f s", job.job_id, cost)
