"""The simple PMI wire protocol, version 1, as a node daemon serves it to MPI tasks.

MPI libraries (MPICH and those built on it) find their peers through a
process manager: each task gets a connected socket in ``PMI_FD`` and its rank
and size in ``PMI_RANK`` and ``PMI_SIZE``, and speaks lines of
``cmd=NAME key=value ...`` on it; the server answers each command once, and
answers ``barrier_in`` only when every rank of the job has entered the
barrier. The protocol is described in Flux's RFC 13, *Simple Process Manager
Interface v1* (docs/mpi.md says what we answer and why).

``Pmi1Job`` is the node's side of one job: plain code over the bytes its
ranks send, returning the replies and, for a job on several nodes, the fence to
send the master; the key-value space and the barrier are ``JobKvs``
(noded/process_managers/fences.py), which PMI-2 shares.

Bad input fails the job, never the daemon: a line that is not the protocol
gets an error reply and ``Failure``; so does ``abort``.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from gangsched.noded.process_managers.fences import (
    Failure,
    Outcome,
    PmiError,
    Reply,
    WireJobState,
    failure_reason,
)
from gangsched.noded.task_record import World

KVSNAME_MAX = 256
KEYLEN_MAX = 256
VALLEN_MAX = 1024
LINE_MAX = 4096  # a put of the longest key and value fits with room to spare


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


class Pmi1Job(WireJobState):
    """One job's PMI-1 service on this node: its local ranks' lines, answered."""

    def __init__(self, world: World, size: int, block: Sequence[int], node_index: int, kvsname: str = "") -> None:
        super().__init__(world, size, block, node_index, kvsname)
        self._lines: dict[int, LineReader] = {}

    def received(self, rank: int, data: bytes) -> list[Outcome]:
        """What rank ``rank`` sent next on its socket, answered line by line."""
        try:
            lines = self._lines.setdefault(rank, LineReader()).feed(data)
        except PmiError as error:
            return [Outcome(failure=Failure(rank, failure_reason(error, "PMI line")))]
        return [self.handle(rank, line) for line in lines]

    def handle(self, rank: int, line: bytes) -> Outcome:
        try:
            name, fields = parse(line)
            return self._command(rank, name, fields)
        except PmiError as error:
            return Outcome([Reply(rank, format_line("error", rc=-1, msg=_word(str(error))))],
                           failure=Failure(rank, failure_reason(error, "PMI line")))

    def fence_done(self, epoch: int, kvs: dict[str, str]) -> Outcome:
        """The master's answer to our fence: every node's puts; the barrier is over."""
        return self._barrier_out(self.kvs.done(epoch, kvs))

    def _command(self, rank: int, name: str, fields: dict[str, str]) -> Outcome:
        if name == "init":
            if fields.get("pmi_version") != "1":
                raise PmiError(f"this socket serves PMI version 1, not {fields.get('pmi_version')!r}")
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
            self.kvs.put(key, value)
            return _reply(rank, "put_result", rc=0)
        if name == "get":
            found = self.kvs.get(self._key(fields))
            if found is not None:
                return _reply(rank, "get_result", rc=0, value=found)
            return _reply(rank, "get_result", rc=-1, msg="key_not_found")
        if name == "barrier_in":
            released, fence = self.kvs.enter(rank)
            return Outcome(fence=fence) if fence is not None else self._barrier_out(released)
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

    @staticmethod
    def _barrier_out(ranks: list[int]) -> Outcome:
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
