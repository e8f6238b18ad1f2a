"""The simple PMI wire protocol, version 1, as a node daemon serves it to MPI tasks.

MPI libraries (MPICH and those built on it) find their peers through a
process manager: each task gets a connected socket in ``PMI_FD`` and its rank
and size in ``PMI_RANK`` and ``PMI_SIZE``, and speaks lines of
``cmd=NAME key=value ...`` on it; the server answers each command once, and
answers ``barrier_in`` only when every rank of the job has entered the
barrier. The protocol is described in Flux's RFC 13, *Simple Process Manager
Interface v1* (docs/mpi.md says what we answer and why).

``PmiJob`` is the node's side of one job: its local ranks' puts, the key-value
space they can get from, and the barrier. It is plain code over lines: it
returns the replies to send and, when the last local rank enters a barrier of
a job that spans several nodes, the ``Fence`` the node sends to the master,
which answers with every node's puts (``fence_done``). A barrier of a job on
one node completes here. A task that is stopped by the gang scheduler simply
does not enter, so a barrier waits for its whole gang.

Bad input fails the job, never the daemon: a line that is not the protocol
gets an error reply and ``Failure``; so does ``abort``.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

KVSNAME_MAX = 256
KEYLEN_MAX = 256
VALLEN_MAX = 1024
LINE_MAX = 4096  # a put of the longest key and value fits with room to spare
PROCESS_MAPPING = "PMI_process_mapping"


class PmiError(Exception):
    """A line that is not the protocol; the reason is one line of words."""


@dataclass(frozen=True)
class Reply:
    rank: int
    line: bytes


@dataclass(frozen=True)
class Fence:
    """Every local rank entered barrier ``epoch``; ``kvs``: what they put since the last one."""

    epoch: int
    kvs: dict[str, str]


@dataclass(frozen=True)
class Failure:
    rank: int
    reason: str


@dataclass
class Outcome:
    replies: list[Reply] = field(default_factory=list)
    fence: Fence | None = None
    failure: Failure | None = None


def parse(line: bytes) -> tuple[str, dict[str, str]]:
    """``cmd=NAME k=v ...`` -> (NAME, {k: v}). ``abort`` keeps its message whole: it may hold spaces."""
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise PmiError("a PMI line is ASCII") from None
    if not text.startswith("cmd="):
        raise PmiError(f"a PMI line starts with cmd=, not {text[:40]!r}")
    if text.startswith("cmd=abort"):
        head, _, message = text.partition(" error_msg=") if " error_msg=" in text else text.partition(" message=")
        name, fields = _fields(head)
        fields["message"] = message
        return name, fields
    return _fields(text)


def _fields(text: str) -> tuple[str, dict[str, str]]:
    fields: dict[str, str] = {}
    for token in text.split():
        key, equals, value = token.partition("=")
        if not equals or not key:
            raise PmiError(f"{token[:40]!r} is not key=value")
        fields[key] = value
    return fields.pop("cmd"), fields


def format_line(cmd: str, **fields: object) -> bytes:
    return " ".join([f"cmd={cmd}", *(f"{key}={value}" for key, value in fields.items())]).encode() + b"\n"


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


class PmiJob:
    """One job's PMI service on this node: its local ranks, their puts, the key-value space, the barrier."""

    def __init__(self, job_id: int, size: int, block: Sequence[int], node_index: int, kvsname: str = "") -> None:
        self.job_id = job_id
        self.size = size
        self.kvsname = kvsname or f"gang-{job_id}"
        first = sum(block[:node_index])
        self.local_ranks = set(range(first, first + block[node_index]))
        self.spans_nodes = len(block) > 1
        self.epoch = 0
        self._kvs: dict[str, str] = {PROCESS_MAPPING: process_mapping(block)}
        self._puts: dict[str, str] = {}  # since the last barrier, to send with the fence
        self._entered: set[int] = set()
        self._fence_sent: Fence | None = None  # until the master answers it
        self.initialized: set[int] = set()
        self.finalized: set[int] = set()

    def handle(self, rank: int, line: bytes) -> Outcome:
        try:
            name, fields = parse(line)
            return self._command(rank, name, fields)
        except PmiError as error:
            reason = f"sent a malformed PMI line: {error}"
            return Outcome([Reply(rank, format_line("error", rc=-1, msg=_word(str(error))))],
                           failure=Failure(rank, reason))

    def fence_done(self, epoch: int, kvs: dict[str, str]) -> Outcome:
        """The master's answer to our fence: every node's puts; the barrier is over."""
        if self._fence_sent is None or epoch != self._fence_sent.epoch:
            return Outcome()
        self._fence_sent = None
        self._kvs.update(kvs)
        return self._barrier_out()

    def _command(self, rank: int, name: str, fields: dict[str, str]) -> Outcome:
        if name == "init":
            if fields.get("pmi_version") != "1":
                raise PmiError(f"only PMI version 1 is served, not {fields.get('pmi_version')!r}")
            self.initialized.add(rank)
            return _reply(rank, "response_to_init", pmi_version=1, pmi_subversion=1, rc=0)
        if name == "get_maxes":
            return _reply(rank, "maxes", kvsname_max=KVSNAME_MAX, keylen_max=KEYLEN_MAX, vallen_max=VALLEN_MAX, rc=0)
        if name == "get_appnum":
            return _reply(rank, "appnum", appnum=0, rc=0)
        if name == "get_my_kvsname":
            return _reply(rank, "my_kvsname", kvsname=self.kvsname, rc=0)
        if name == "get_universe_size":
            return _reply(rank, "universe_size", size=self.size, rc=0)
        if name == "put":
            key, value = self._key(fields), fields.get("value", "")
            if len(value) > VALLEN_MAX:
                raise PmiError(f"a value is at most {VALLEN_MAX} characters, got {len(value)}")
            self._kvs[key] = self._puts[key] = value
            return _reply(rank, "put_result", rc=0)
        if name == "get":
            key = self._key(fields)
            if key in self._kvs:
                return _reply(rank, "get_result", rc=0, value=self._kvs[key])
            return _reply(rank, "get_result", rc=-1, msg="key_not_found")
        if name == "barrier_in":
            return self._barrier_in(rank)
        if name == "finalize":
            self.finalized.add(rank)
            return _reply(rank, "finalize_ack", rc=0)
        if name == "abort":
            code, message = fields.get("exitcode", "?"), fields.get("message", "").strip()
            reason = f"called PMI abort with exit code {code}" + (f": {message[:200]}" if message else "")
            return Outcome(failure=Failure(rank, reason))
        raise PmiError(f"no PMI-1 command {name[:40]!r}")

    def _key(self, fields: dict[str, str]) -> str:
        if fields.get("kvsname") != self.kvsname:
            raise PmiError(f"no key-value space {fields.get('kvsname', '')[:40]!r}: this job's is {self.kvsname}")
        key = fields.get("key", "")
        if not key or len(key) > KEYLEN_MAX:
            raise PmiError(f"a key has 1 to {KEYLEN_MAX} characters, got {len(key)}")
        return key

    def _barrier_in(self, rank: int) -> Outcome:
        if rank in self._entered:
            raise PmiError("barrier_in twice without barrier_out")
        self._entered.add(rank)
        if self._entered != self.local_ranks:
            return Outcome()
        if not self.spans_nodes:
            self._puts = {}
            return self._barrier_out()
        self._fence_sent = Fence(self.epoch, self._puts)
        self._puts = {}
        return Outcome(fence=self._fence_sent)

    def _barrier_out(self) -> Outcome:
        self.epoch += 1
        ranks, self._entered = sorted(self._entered), set()
        return Outcome([Reply(rank, format_line("barrier_out", rc=0)) for rank in ranks])


def _reply(rank: int, cmd: str, **fields: object) -> Outcome:
    return Outcome([Reply(rank, format_line(cmd, **fields))])


def _word(text: str) -> str:
    """A message as one token of the wire: no spaces, no line ends."""
    return "_".join(text.split())[:200]


@dataclass
class LineReader:
    """Whole lines out of a stream socket's bytes; too long a line is an error."""

    buffer: bytes = b""

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        if len(self.buffer) > LINE_MAX:
            raise PmiError(f"a PMI line is at most {LINE_MAX} bytes")
        return [line for line in lines if line.strip()]
