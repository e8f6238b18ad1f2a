"""Starting the jobs the policy placed: their barrier ports, the launches to their nodes (and which
of those are still on their way), and the starts the store could not write.

A job's start is one write: one the store cannot take does not happen (no task
is sent). The job waits out of the policy, "start postponed", until the store
is tried again (master/closing.py), and is then placed again as any other.
"""

import logging
import secrets
from collections import deque

from gangsched.master.barriers import BarrierEndpoints, NoFreePort
from gangsched.master.broadcast import Broadcast
from gangsched.master.clock import Now
from gangsched.master.closing import StoreRetry
from gangsched.master.job_record import Job
from gangsched.master.job_steps import Step, task_slots
from gangsched.master.job_table import JobTable
from gangsched.master.nodes import NodeRegistry
from gangsched.master.pending import Queues
from gangsched.master.placement import Rendezvous, launches
from gangsched.master.settings import MasterSettings
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.policy.live_scheduler import Processor
from gangsched.protocol.job_tokens import io_token
from gangsched.protocol.messages import LaunchTask, Message
from gangsched.protocol.records import StepSpec, step_name

log = logging.getLogger("gangsched.master")


class CannotStart(Exception):
    """A job placed that cannot start (no port for its barrier, ...): its job fails, with the reason."""


class Starts:
    def __init__(self, settings: MasterSettings, store: JobStore, nodes: NodeRegistry, table: JobTable,
                 queues: Queues, retry: StoreRetry, outbox: deque[tuple[str, Message]], broadcast: Broadcast,
                 io_key: bytes | None = None) -> None:
        """``broadcast``: the number of the switch in force, which a launch that runs at once names; ``io_key``:
        the I/O server's, which each job's token for it is made with."""
        self._settings = settings
        self._io_key = io_key
        self._store = store
        self._nodes = nodes
        self._table = table
        self._queues = queues
        self._retry = retry
        self._outbox = outbox
        self._broadcast = broadcast
        self._barriers = BarrierEndpoints()
        # launches no hello, report or exit has shown to arrive yet, with the incarnation of the node
        # daemon they went to: a repeated hello of that daemon may have crossed them on the way
        self._launching: dict[tuple[int, int, int], tuple[str, LaunchTask]] = {}  # by job, step and rank

    def restored(self, job: Job) -> None:
        """A job running before a restart keeps its steps' ports."""
        for step in job.steps.values():
            if step.live_ranks:
                for port in (step.barrier_port, step.rendezvous_port):
                    if port is not None:
                        self._barriers.reserve(step.node_of(0, job.node_names), port)

    def launch(self, job: Job, processors: list[Processor], restore: bool, now: Now, run_now: bool = False) -> bool:
        """Send the job's tasks (its step 0) to ``processors``, running at once if ``run_now``: in the processors
        the switch in force leaves idle (a launch that reaches its node only after the next switch waits for its
        row); False if the store could not write the start (the job waits: postponed). Raises ``CannotStart``,
        the job out of the policy, if it cannot start at all."""
        first = processors[0].node
        try:
            address, bind, port, rendezvous = self._endpoints(job, 0, first)
        except NoFreePort as error:
            job.unplaced()
            self._queues.of(job).left_the_policy(job, now)
            raise CannotStart(f"could not start: {error}") from None
        names = dict.fromkeys(processor.node for processor in processors)
        job.placed(processors, {name: node.incarnation for name in names if (node := self._nodes.get(name))}, port,
                   None if rendezvous is None else rendezvous[1])
        try:
            self._store.save(job)
        except StoreWriteError as error:
            if restore:
                raise
            self._postpone(job, first, [port, None if rendezvous is None else rendezvous[1]], error, now)
            return False
        self._send(job, job.steps[0], Rendezvous(address, bind, None if rendezvous is None else rendezvous[0],
                                                 secrets.token_hex(16)), restore, run_now)
        return True

    def start_step(self, job: Job, spec: StepSpec, wall: float) -> Step | str:
        """Start ``spec`` as the running job's next step, its tasks sent to their nodes to run or wait as the
        switch in force says of the job: the step, or why it did not start (nothing of it was done)."""
        first = job.node_names[task_slots(job.spec, len(job.node_names), spec.slots)[0]]
        try:
            address, bind, port, rendezvous = self._endpoints(job, job.next_step_id, first)
        except NoFreePort as error:
            return f"could not start the step: {error}"
        ports = [port, None if rendezvous is None else rendezvous[1]]
        step = job.step_started(spec, ports[0], ports[1], wall)
        if step is None:
            self._release(first, ports)
            return f"job {job.job_id} cannot start a step while it ends or moves"
        try:
            self._store.save(job)
        except StoreWriteError as error:
            job.step_unstarted(step.step_id)
            self._release(first, ports)
            return f"the job store cannot write the step's start ({error}): it did not start"
        self._send(job, step, Rendezvous(address, bind, None if rendezvous is None else rendezvous[0],
                                         secrets.token_hex(16)), restore=False, run_now=False)
        return step

    def _endpoints(self, job: Job, step_id: int, first: str) -> tuple[str, str, int | None, tuple[str, int] | None]:
        """A step's barrier (the address its ranks connect to, what its rank 0 binds, its port) and MASTER_ADDR
        with its port, on its rank 0's node ``first``; NoFreePort if that node has none left."""
        rank0 = self._nodes.get(first)
        if rank0 is None or rank0.peer is None:
            raise NoFreePort(f"node {first} has not said where tasks may bind")
        address, bind, port = self._barriers.allocate(step_name(job.job_id, step_id), first, rank0.peer, job.spec.user)
        try:
            return address, bind, port, self._barriers.rendezvous(first, rank0.peer)
        except NoFreePort:
            self._barriers.release(first, port)
            raise

    def _send(self, job: Job, step: Step, meet: Rendezvous, restore: bool, run_now: bool) -> None:
        # MPICH names its shared memory after the key-value space, and a killed job leaves its
        # segments behind: a name never used before keeps a later job from opening them
        kvsname = f"gang-{job.job_id}-{secrets.token_hex(6)}"
        io_addr, key = self._settings.io_addr, self._io_key
        io = None if io_addr is None else (io_addr, None if key is None else io_token(key, job.job_id))
        for node_name, launch in launches(job, step, meet, kvsname, io, self._settings.checkpoint_dir, restore,
                                          self._broadcast.quantum if run_now else None, self._settings.cluster_name):
            node = self._nodes.get(node_name)
            self._launching[(job.job_id, step.step_id, launch.task.rank)] = (node.incarnation if node else "", launch)
            self._outbox.append((node_name, launch))

    def _release(self, first: str, ports: list[int | None]) -> None:
        for port in ports:
            self._barriers.release(first, port)

    def _postpone(self, job: Job, first: str, ports: list[int | None], error: StoreWriteError, now: Now) -> None:
        """The store cannot write the job's start: the start does not happen (memory follows the store),
        and the job waits out of the policy until the store is tried again."""
        self._release(first, ports)
        delay = self._retry.failed(now.monotonic)
        log.error("the job store cannot write job %d's start (%s): it waits, tried again in %.1f s",
                  job.job_id, error, delay)
        job.start_postponed()
        self._retry.postpone(job.job_id)
        # the policy's layout without it; it is not in the policy, so it is not placed again
        self._queues.of(job).left_the_policy(job, now)

    def arrived(self, job_id: int, step: int, rank: int) -> None:
        """A hello, report or exit showed the task's launch arrived (or the task is gone)."""
        if self._launching:  # asked for every sample of every report: most often none is on its way
            self._launching.pop((job_id, step, rank), None)

    def in_flight(self, job_id: int, step: int, rank: int, incarnation: str) -> LaunchTask | None:
        """The launch of a task on its way to the node daemon ``incarnation``, if one is."""
        in_flight = self._launching.get((job_id, step, rank))
        return in_flight[1] if in_flight is not None and in_flight[0] == incarnation else None

    def release_ports(self, job: Job, step: Step) -> None:
        """Every rank of the step is gone: its ports are free."""
        self._release(step.node_of(0, job.node_names), [step.barrier_port, step.rendezvous_port])
