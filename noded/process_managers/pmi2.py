"""The PMI-2 wire protocol, as a node daemon serves it to MPI tasks on ``PMI_FD``.

A PMI-2 client (Intel MPI with ``I_MPI_PMI=pmi2`` and a PMI-2 client library
such as Debian's ``libpmi2``; MPICH builds with PMI-2) first sends one PMI-1
line, ``cmd=init pmi_version=2 pmi_subversion=0``, then commands each framed by
its length in 6 characters (decimal, space padded) and made of ``key=value;``
fields, ``cmd`` first, a ``;`` inside a value doubled. Every command gets one
``<cmd>-response`` with ``rc``, but ``kvs-fence`` is answered only once every
rank of the job entered it, and ``info-getnodeattr`` with ``wait=TRUE`` only
once the key exists. The protocol is MPICH's *PMI v2 API* and the wire format
of its simple PMI-2 client (docs/mpi.md says what we answer and why).

``Pmi2Job`` is plain code over bytes, as ``Pmi1Job`` is: the replies to send,
and the fence of a job on several nodes, which goes through the master on
PMI-1's path (``JobKvs``). Node attributes are the node's own: no fence
carries them. Bad input fails the job, never the daemon. ``Pmi2OrPmi1Job`` is
what ``--mpi pmi2`` is served: PMI-2, or PMI-1 to a client that asks for it.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from gangsched.noded.process_managers.fences import (
    PROCESS_MAPPING,
    Failure,
    Outcome,
    PmiError,
    Reply,
    WireJobState,
    failure_reason,
)
from gangsched.noded.process_managers.pmi1 import Pmi1Job
from gangsched.noded.task_record import World

LENGTH_DIGITS = 6
FRAME_MAX = 16384  # a put of MPICH's longest key (64) and value (1024) fits many times over
INIT_LINE_MAX = 256
_UNSERVED = {"spawn", "name-publish", "name-unpublish", "name-lookup", "job-connect", "job-disconnect"}


def parse(frame: bytes) -> tuple[str, dict[str, str]]:
    """``cmd=NAME;k=v;...;`` (``;;`` is a ``;`` inside a value) -> (NAME, {k: v})."""
    try:
        text = frame.decode("ascii")
    except UnicodeDecodeError:
        raise PmiError("a PMI-2 command is ASCII") from None
    fields: dict[str, str] = {}
    position = 0
    while position < len(text):
        equals = text.find("=", position)
        if equals <= position:
            raise PmiError(f"{text[position:position + 40]!r} is not key=value;")
        key, value, position = text[position:equals], [], equals + 1
        while True:
            end = text.find(";", position)
            if end < 0:
                raise PmiError(f"the value of {key[:40]!r} does not end with ';'")
            value.append(text[position:end])
            if text.startswith(";;", end):  # an escaped ';' within the value
                value.append(";")
                position = end + 2
            else:
                position = end + 1
                break
        fields[key] = "".join(value)
    if "cmd" not in fields:
        raise PmiError("a PMI-2 command starts with cmd=")
    return fields.pop("cmd"), fields


def frame(cmd: str, **fields: object) -> bytes:
    """A command's bytes on the wire, its length in front."""
    pairs = "".join(f"{key.replace('_', '-')}={str(value).replace(';', ';;')};" for key, value in fields.items())
    body = f"cmd={cmd};{pairs}".encode()
    return f"{len(body):<{LENGTH_DIGITS}}".encode() + body


class FrameReader:
    """A rank's commands out of its socket's bytes: the one PMI-1 ``init`` line, then framed commands."""

    def __init__(self) -> None:
        self.buffer = b""
        self.initialized = False  # its init line came

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        found = []
        if not self.initialized:
            line, newline, rest = self.buffer.partition(b"\n")
            if not newline:
                if len(self.buffer) > INIT_LINE_MAX:
                    raise PmiError("a PMI-2 client begins with one init line")
                return []
            self.initialized, self.buffer = True, rest
            found.append(line)
        while len(self.buffer) >= LENGTH_DIGITS:
            digits = self.buffer[:LENGTH_DIGITS].strip()
            if not digits.isdigit() or not 0 < int(digits) <= FRAME_MAX:
                raise PmiError(f"a PMI-2 command's length is 1 to {FRAME_MAX}, "
                               f"not {self.buffer[:LENGTH_DIGITS]!r}")
            end = LENGTH_DIGITS + int(digits)
            if len(self.buffer) < end:
                break
            found.append(self.buffer[LENGTH_DIGITS:end])
            self.buffer = self.buffer[end:]
        return found


@dataclass
class _Waiting:
    rank: int
    key: str


class Pmi2Job(WireJobState):
    """One job's PMI-2 service on this node: its local ranks' commands, answered."""

    def __init__(self, world: World, size: int, block: Sequence[int], node_index: int, kvsname: str = "") -> None:
        super().__init__(world, size, block, node_index, kvsname)
        self._readers: dict[int, FrameReader] = {}
        self._node_attributes: dict[str, str] = {}
        self._waiting: list[_Waiting] = []  # info-getnodeattr with wait=TRUE, until the key is put

    def received(self, rank: int, data: bytes) -> list[Outcome]:
        """What rank ``rank`` sent next on its socket, answered command by command."""
        reader = self._readers.setdefault(rank, FrameReader())
        try:
            first = not reader.initialized
            commands = reader.feed(data)
        except PmiError as error:
            return [Outcome(failure=Failure(rank, failure_reason(error, "PMI-2 command")))]
        outcomes = []
        for index, command in enumerate(commands):
            outcomes.append(self._init(rank, command) if first and index == 0 else self.handle(rank, command))
        return outcomes

    def handle(self, rank: int, command: bytes) -> Outcome:
        try:
            name, fields = parse(command)
            return self._command(rank, name, fields)
        except PmiError as error:
            return Outcome([Reply(rank, frame("error", rc=-1, errmsg=str(error)[:200]))],
                           failure=Failure(rank, failure_reason(error, "PMI-2 command")))

    def fence_done(self, epoch: int, kvs: dict[str, str]) -> Outcome:
        return self._fence_out(self.kvs.done(epoch, kvs))

    def _init(self, rank: int, line: bytes) -> Outcome:
        """The PMI-1 line a PMI-2 client opens with; its answer says which version this socket speaks."""
        fields = dict(token.partition("=")[::2] for token in line.decode("ascii", "replace").split())
        if fields.get("cmd") != "init" or fields.get("pmi_version") != "2":
            return Outcome(failure=Failure(rank, f"this socket serves PMI-2, and it sent {line[:60]!r}"))
        return Outcome([Reply(rank, b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n")])

    def _command(self, rank: int, name: str, fields: dict[str, str]) -> Outcome:
        if name == "fullinit":
            if fields.get("pmirank", str(rank)) != str(rank):
                raise PmiError(f"rank {rank} said it is rank {fields['pmirank'][:20]}")
            self.initialized.add(rank)
            return _reply(rank, "fullinit-response", rc=0, pmi_version=2, pmi_subversion=0, rank=rank,
                          size=self.size, appnum=0, debugged="FALSE", pmiverbose="FALSE")
        if name == "job-getid":
            return _reply(rank, "job-getid-response", rc=0, jobid=self.kvsname)
        if name == "info-getjobattr":
            value = self.kvs.get(PROCESS_MAPPING) if _key(fields) == PROCESS_MAPPING else None
            return _found(rank, "info-getjobattr-response", value)
        if name == "info-putnodeattr":
            key, value = _key(fields), _value(fields)
            self.kvs.charge(len(key) + len(value))
            self._node_attributes[key] = value
            replies = [Reply(rank, frame("info-putnodeattr-response", rc=0))]
            for waiting in [waiting for waiting in self._waiting if waiting.key == key]:
                self._waiting.remove(waiting)
                replies += _found(waiting.rank, "info-getnodeattr-response", self._node_attributes[key]).replies
            return Outcome(replies)
        if name == "info-getnodeattr":
            key = _key(fields)
            if key not in self._node_attributes and fields.get("wait") == "TRUE":
                self._waiting.append(_Waiting(rank, key))
                return Outcome()
            return _found(rank, "info-getnodeattr-response", self._node_attributes.get(key))
        if name == "kvs-put":
            self.kvs.put(_key(fields), _value(fields))
            return _reply(rank, "kvs-put-response", rc=0)
        if name == "kvs-get":
            return _found(rank, "kvs-get-response", self.kvs.get(_key(fields)))
        if name == "kvs-fence":
            released, fence = self.kvs.enter(rank)
            return Outcome(fence=fence) if fence is not None else self._fence_out(released)
        if name == "finalize":
            self.finalized.add(rank)
            return _reply(rank, "finalize-response", rc=0)
        if name == "abort":
            message = fields.get("msg", "").strip()
            return Outcome(failure=Failure(rank, "called PMI-2 abort" + (f": {message[:200]}" if message else "")))
        if name in _UNSERVED:  # a program may go on without them: it is told, not failed
            return _reply(rank, f"{name}-response", rc=-1, errmsg=f"{name} is not served by gangsched")
        raise PmiError(f"no PMI-2 command {name[:40]!r}")

    @staticmethod
    def _fence_out(ranks: list[int]) -> Outcome:
        return Outcome([Reply(rank, frame("kvs-fence-response", rc=0)) for rank in ranks])


def _key(fields: dict[str, str]) -> str:
    key = fields.get("key", "")
    if not key or len(key) > 256:
        raise PmiError(f"a key has 1 to 256 characters, got {len(key)}")
    return key


def _value(fields: dict[str, str]) -> str:
    if "value" not in fields:
        raise PmiError("a put needs value=")
    return fields["value"]


def _reply(to: int, cmd: str, **fields: object) -> Outcome:
    return Outcome([Reply(to, frame(cmd, **fields))])


def _found(to: int, cmd: str, value: str | None) -> Outcome:
    if value is None:
        return _reply(to, cmd, rc=0, found="FALSE")
    return _reply(to, cmd, rc=0, found="TRUE", value=value)


class Pmi2OrPmi1Job:
    """What a node serves a job of ``--mpi pmi2``: PMI-2, and PMI-1 to clients whose first line asks for
    version 1 (MPICH's simple PMI client does unless told otherwise), as Slurm's pmi2 plug-in serves both.
    Every rank's first line (``cmd=init pmi_version=N ...``) is held until one is whole; the job's ranks then
    speak that wire, and what every rank sent so far goes to it."""

    def __init__(self, world: World, size: int, block: Sequence[int], node_index: int, kvsname: str = "") -> None:
        self.world = world
        self._shape = (size, block, node_index, kvsname)
        self._job: Pmi1Job | Pmi2Job | None = None
        self._heads: dict[int, bytes] = {}  # what each rank sent before the wire was known
        self.initialized: set[int] = set()  # the wire's own, once it is known
        self.finalized: set[int] = set()

    def received(self, rank: int, data: bytes) -> list[Outcome]:
        if self._job is not None:
            return self._job.received(rank, data)
        head = self._heads.get(rank, b"") + data
        line, newline, _ = head.partition(b"\n")
        if not newline:
            if len(head) > INIT_LINE_MAX:
                return [Outcome(failure=Failure(rank, f"sent {len(head)} bytes without the init line of PMI"))]
            self._heads[rank] = head
            return []
        self._heads[rank] = head
        wire = Pmi1Job if b"pmi_version=1" in line.split() else Pmi2Job
        self._job = wire(self.world, *self._shape)
        self.initialized, self.finalized = self._job.initialized, self._job.finalized
        heads, self._heads = self._heads, {}
        return [outcome for sender, sent in heads.items() for outcome in self._job.received(sender, sent)]

    def fence_done(self, epoch: int, kvs: dict[str, str]) -> Outcome:
        assert self._job is not None, "a fence is entered by ranks that spoke a wire"
        return self._job.fence_done(epoch, kvs)
