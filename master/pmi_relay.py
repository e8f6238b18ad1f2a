"""What the nodes' MPI process-manager interfaces exchange through the master: each step's PMI fences,
gathered across its nodes, and the PMIx direct-modex requests and replies passed between two nodes."""

import logging
from collections import deque

from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_table import JobTable
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.frames import MAX_MESSAGE_BYTES
from gangsched.protocol.messages import ErrorReply, Message, PmiFence, PmiFenceDone, PmixModexReply, PmixModexRequest
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")

# what a fence's answer (every node's puts and blobs) may hold: a message, less the room its fields take
MAX_FENCE_BYTES = MAX_MESSAGE_BYTES - 64 * 1024
_PACKED_ENTRY_BYTES = 10  # what msgpack adds to a key and its value, at most, in the answer's map


class PmiRelay:
    def __init__(self, table: JobTable, endings: Endings, outbox: deque[tuple[str, Message]]) -> None:
        self._table = table
        self._endings = endings
        self._outbox = outbox

    def pmi_fence(self, fence: PmiFence, now: Now) -> ErrorReply | None:
        """A node's ranks of a job entered a PMI barrier: when every node of the job has, all get every put,
        if it fits in a message (else the job fails: its nodes' ranks put more than a fence carries)."""
        job = self._table.running_on(fence.job_id, fence.node)
        if job is None:
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no running job {fence.job_id} on {fence.node}")
        entered = job.fence_entered(fence)  # in the job's node order
        if entered is None:
            return None
        size = sum(len(each.data) + sum(len(key) + len(value) + _PACKED_ENTRY_BYTES for key, value in each.kvs.items())
                   for each in entered)
        if size > MAX_FENCE_BYTES:
            reason = f"its nodes' PMI key-value spaces together hold {size} bytes at fence {fence.epoch}, more " \
                f"than a fence carries ({MAX_FENCE_BYTES})"
            self._endings.decide_end(job, JobState.FAILED, reason, now)
            return None
        done = PmiFenceDone(job_id=job.job_id, step=fence.step, epoch=fence.epoch,
                            kvs={key: value for each in entered for key, value in each.kvs.items()},
                            data=b"".join(each.data for each in entered))
        for node in sorted(each.node for each in entered):
            self._outbox.append((node, done))
        return None

    def pmix_modex_request(self, request: PmixModexRequest) -> ErrorReply | None:
        """A node's PMIx library asks for a rank's data: the rank's node is asked."""
        job = self._table.running_on(request.job_id, request.node)
        step = None if job is None else job.steps.get(request.step)
        if job is None or step is None or request.rank >= len(step.slots):
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no rank {request.rank} of step {request.step} of "
                              f"a running job {request.job_id} on {request.node}")
        self._outbox.append((step.node_of(request.rank, job.node_names), request))
        return None

    def pmix_modex_reply(self, reply: PmixModexReply) -> ErrorReply | None:
        """A rank's node answers a direct-modex request: the node that asked gets the data."""
        job = self._table.running_on(reply.job_id, reply.asker)
        step = None if job is None else job.steps.get(reply.step)
        if job is None or step is None or reply.rank >= len(step.slots) \
                or step.node_of(reply.rank, job.node_names) != reply.node:
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no rank {reply.rank} of step {reply.step} of a "
                              f"running job {reply.job_id} on {reply.node}")
        self._outbox.append((reply.asker, reply))
        return None
