"""What the process-manager interfaces share: a job's key-value space on this node, its fence, and
what serving a message comes to (``Outcome``).

PMI-1's ``barrier_in`` and PMI-2's ``kvs-fence`` are the same collective: every
rank of the job enters, and each leaves once all have, seeing every put made
before. ``JobKvs`` is one job's side of it on this node. A job on one node
completes the fence here; a job on several sends a ``Fence`` with its ranks'
puts since the last one (through the master, or a relay), and the master
answers every node with all of them (``done``). PMIx fences carry the
library's own blob instead of puts, on the same path (noded/process_managers/pmix.py).
A rank stopped by the gang scheduler simply does not enter, so a fence waits for
its whole gang.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from gangsched.noded.task_record import World

PROCESS_MAPPING = "PMI_process_mapping"
# What one job's ranks on one node may put in its key-value space (keys and values, over every fence), and
# what one node's side of a fence may carry: a node's memory is not a job's to fill, and a fence's answer
# (every node's side) must fit in a message (the master fails a job whose nodes' sides together do not)
KVS_MAX_BYTES = 4 << 20


class PmiError(Exception):
    """Input that is not the protocol; the reason is one line of words."""


class PmiLimit(PmiError):
    """Input of the protocol beyond a bound the node keeps; the reason is the whole sentence."""


def failure_reason(error: PmiError, what: str) -> str:
    """Why ``error`` fails a job, whose ranks sent ``what`` (a PMI line, a PMI-2 command)."""
    return str(error) if isinstance(error, PmiLimit) else f"sent a malformed {what}: {error}"


@dataclass(frozen=True)
class Reply:
    rank: int
    line: bytes


@dataclass(frozen=True)
class Fence:
    """Every local rank entered fence ``epoch``; ``kvs``: what they put since the last one; ``data``:
    the PMIx library's blob for this node."""

    epoch: int
    kvs: dict[str, str]
    data: bytes = b""


@dataclass(frozen=True)
class Failure:
    rank: int
    reason: str


@dataclass
class Outcome:
    replies: list[Reply] = field(default_factory=list)
    fence: Fence | None = None
    failure: Failure | None = None


def process_mapping(block: Sequence[int]) -> str:
    """MPICH's ``(vector,(first node,node count,ranks per node),...)`` for ranks laid out node by node."""
    segments: list[tuple[int, int, int]] = []
    for node, ranks in enumerate(block):
        if segments and segments[-1][2] == ranks:
            first, count, _ = segments[-1]
            segments[-1] = (first, count + 1, ranks)
        else:
            segments.append((node, 1, ranks))
    return "(vector," + ",".join(f"({first},{count},{ranks})" for first, count, ranks in segments) + ")"


def local_ranks(block: Sequence[int], node_index: int) -> range:
    """The ranks a block layout puts on the job's ``node_index``-th node."""
    first = sum(block[:node_index])
    return range(first, first + block[node_index])


def kvs_name(job_id: int, given: str | None) -> str:
    """The name of a job's key-value space: the master's (unique for each start), else one from its id."""
    return given or f"gang-{job_id}"


class WireJobState:
    """What PMI-1 and PMI-2 keep of one job on this node alike: its size, its key-value space and
    its name, and which local ranks spoke the protocol's init and finalize."""

    def __init__(self, world: World, size: int, block: Sequence[int], node_index: int, kvsname: str = "") -> None:
        self.world = world
        self.size = size
        self.kvsname = kvs_name(world.job_id, kvsname)
        self.kvs = JobKvs(block, node_index)
        self.initialized: set[int] = set()
        self.finalized: set[int] = set()


class JobKvs:
    """One job's key-value space and fence on this node."""

    def __init__(self, block: Sequence[int], node_index: int) -> None:
        self.local_ranks = set(local_ranks(block, node_index))
        self.spans_nodes = len(block) > 1
        self.epoch = 0
        self._kvs: dict[str, str] = {PROCESS_MAPPING: process_mapping(block)}
        self._puts: dict[str, str] = {}  # since the last fence, to send with the next
        self._entered: set[int] = set()
        self._fence_sent: Fence | None = None  # until the master answers it
        self._put_bytes = 0  # what the ranks here put, all fences (a key put again counts once)

    def put(self, key: str, value: str) -> None:
        self.charge(len(key) + len(value) - (len(key) + len(self._kvs[key]) if key in self._kvs else 0))
        self._kvs[key] = self._puts[key] = value

    def charge(self, size: int) -> None:
        """``size`` more bytes this job's ranks hold here; PmiLimit past KVS_MAX_BYTES."""
        if self._put_bytes + size > KVS_MAX_BYTES:
            raise PmiLimit(f"put more than {KVS_MAX_BYTES} bytes in its PMI key-value space on one node")
        self._put_bytes += size

    def get(self, key: str) -> str | None:
        return self._kvs.get(key)

    def enter(self, rank: int) -> tuple[list[int], Fence | None]:
        """Rank ``rank`` entered the fence: the ranks it releases now (all, once the last one of a job
        on this node alone entered), or the fence to send the master."""
        if rank in self._entered:
            raise PmiError("entered a fence twice without leaving it")
        self._entered.add(rank)
        if self._entered != self.local_ranks:
            return [], None
        if not self.spans_nodes:
            self._puts = {}
            return self._leave(), None
        self._fence_sent = Fence(self.epoch, self._puts)
        self._puts = {}
        return [], self._fence_sent

    def done(self, epoch: int, kvs: dict[str, str]) -> list[int]:
        """The master's answer to our fence: every node's puts; the ranks it releases (none where it
        answers no fence of ours: an answer twice is taken once)."""
        if self._fence_sent is None or epoch != self._fence_sent.epoch:
            return []
        self._fence_sent = None
        self._kvs.update(kvs)
        return self._leave()

    def _leave(self) -> list[int]:
        self.epoch += 1
        ranks, self._entered = sorted(self._entered), set()
        return ranks
