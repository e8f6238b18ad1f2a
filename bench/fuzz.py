"""Fuzzed input for the daemons: random frames, and valid messages or PMI lines mutated.

Plain generators over a seeded ``random.Random``, so a run that found something
runs again the same. The valid messages are harmless if they pass: a job of
``true``, queries, a cancel of a job that does not exist, reports of a node
that does not exist.
"""

import random
from collections.abc import Callable

import msgpack

from gangsched.protocol.codec import encode
from gangsched.protocol.frames import PROTOCOL_VERSION
from gangsched.protocol.messages import (
    Cancel,
    Heartbeat,
    JobQuery,
    MatrixQuery,
    Message,
    NodeQuery,
    QuantumAccount,
    QuantumReport,
    Submit,
    SwitchStatsQuery,
    TaskExit,
    UserQuery,
)
from gangsched.protocol.records import JobSpec, TaskSample

NO_JOB = 10**9  # a job id no cluster of a benchmark reaches


def client_messages(user: str) -> list[Message]:
    return [
        Submit(spec=JobSpec(name="fuzz", user=user, tasks=1, argv=["true"])),
        Cancel(job_id=NO_JOB, user=user), JobQuery(), JobQuery(job_ids=[NO_JOB]), NodeQuery(), MatrixQuery(),
        SwitchStatsQuery(last=5), UserQuery(),
    ]


def node_messages() -> list[Message]:
    sample = TaskSample(job_id=NO_JOB, rank=0, cpu_ns=1, runnable_ns=2, progress=3)
    return [
        Heartbeat(node="fuzz-node"),
        QuantumReport(node="fuzz-node", accounts=[
            QuantumAccount(quantum=1, switch_sent_ns=1, switch_applied_ns=2, column_epoch=0, samples=[sample])]),
        TaskExit(node="fuzz-node", job_id=NO_JOB, rank=0, returncode=1, error="fuzz"),
    ]


def frames(rng: random.Random, valid: list[bytes], count: int) -> list[bytes]:
    """``count`` frames: a third random bytes, a third valid ones with bytes changed, a third
    valid ones with a field changed, dropped or added at the msgpack level."""
    makers: list[Callable[[], bytes]] = [
        lambda: rng.randbytes(rng.randrange(0, 200)),
        lambda: mutate_bytes(rng, rng.choice(valid)),
        lambda: mutate_fields(rng, rng.choice(valid)),
    ]
    return [makers[index % 3]() for index in range(count)]


def valid_frames(messages: list[Message]) -> list[bytes]:
    return [encode(message) for message in messages]


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    mutable = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        kind = rng.randrange(4)
        where = rng.randrange(len(mutable) + 1)
        if kind == 0 and mutable:
            mutable[min(where, len(mutable) - 1)] ^= 1 << rng.randrange(8)
        elif kind == 1:
            mutable.insert(where, rng.randrange(256))
        elif kind == 2 and mutable:
            del mutable[min(where, len(mutable) - 1)]
        else:
            del mutable[where:]
    return bytes(mutable)


def _odd_value(rng: random.Random) -> object:
    return rng.choice([
        None, True, -1, 2**63 - 1, -(2**63), 1e308, float("nan"), "", "x" * rng.randrange(1, 5000), "\0",
        [], [rng.randrange(-5, 5)] * rng.randrange(0, 50), {}, {"v": {}}, b"\xff\x00", PROTOCOL_VERSION + 1,
    ])


def mutate_fields(rng: random.Random, data: bytes) -> bytes:
    payload = msgpack.unpackb(data)
    targets = [payload, *(value for value in payload.values() if isinstance(value, dict))]
    target = rng.choice(targets)
    key = rng.choice(list(target))
    kind = rng.randrange(3)
    if kind == 0:
        target[key] = _odd_value(rng)
    elif kind == 1:
        del target[key]
    else:
        target[rng.choice(["extra", "type", "v", key + "x"])] = _odd_value(rng)
    return bytes(msgpack.packb(payload))


# ------------------------------------------------------------------ PMI lines

PMI_LINES = [
    b"cmd=init pmi_version=1 pmi_subversion=1", b"cmd=get_maxes", b"cmd=get_appnum", b"cmd=get_my_kvsname",
    b"cmd=get_universe_size", b"cmd=put kvsname=KVS key=k value=v", b"cmd=get kvsname=KVS key=k",
    b"cmd=get kvsname=KVS key=PMI_process_mapping", b"cmd=barrier_in",
]


def pmi_lines(rng: random.Random, count: int) -> list[bytes]:
    """``count`` lines, newline-terminated: valid ones, mutated ones and random bytes; the last
    is random bytes, so a task that sends them is sure to have spoken malformed PMI."""
    makers: list[Callable[[], bytes]] = [
        lambda: rng.choice(PMI_LINES),
        lambda: mutate_bytes(rng, rng.choice(PMI_LINES)).replace(b"\n", b""),
        lambda: rng.choice(PMI_LINES) + b" value=" + b"v" * rng.choice([10, 1100, 5000]),
        lambda: rng.randbytes(rng.randrange(0, 100)).replace(b"\n", b""),
    ]
    lines = [makers[rng.randrange(len(makers))]() for _ in range(count - 1)]
    return [line + b"\n" for line in [*lines, b"\xff" + rng.randbytes(10).replace(b"\n", b"")]]


PMI2_COMMANDS = [
    b"cmd=fullinit;pmirank=0;threaded=FALSE;", b"cmd=job-getid;", b"cmd=info-getjobattr;key=PMI_process_mapping;",
    b"cmd=kvs-put;key=k;value=v;;w;", b"cmd=kvs-get;jobid=KVS;srcid=-1;key=k;", b"cmd=kvs-fence;",
    b"cmd=info-putnodeattr;key=n;value=v;", b"cmd=info-getnodeattr;key=n;wait=FALSE;",
]


def pmi2_commands(rng: random.Random, count: int) -> list[bytes]:
    """The PMI-2 init line, then ``count`` commands, each framed by a length: valid ones, mutated
    ones, random bytes, lengths that lie (too short, too long, not a number); the last is random
    bytes under a length, so a task that sends them is sure to have spoken malformed PMI-2."""
    def framed(body: bytes) -> bytes:
        return f"{len(body):<6}".encode() + body

    makers: list[Callable[[], bytes]] = [
        lambda: framed(rng.choice(PMI2_COMMANDS)),
        lambda: framed(mutate_bytes(rng, rng.choice(PMI2_COMMANDS))),
        lambda: framed(rng.choice(PMI2_COMMANDS) + b"value=" + b"v" * rng.choice([10, 1100, 20000]) + b";"),
        lambda: mutate_bytes(rng, framed(rng.choice(PMI2_COMMANDS))),
        lambda: rng.randbytes(rng.randrange(0, 100)),
    ]
    commands = [makers[rng.randrange(len(makers))]() for _ in range(count - 1)]
    return [b"cmd=init pmi_version=2 pmi_subversion=0\n", *commands, framed(b"\xff" + rng.randbytes(10))]
