"""The wire format against bytes: round trips, and every kind of bad input."""

import msgpack
import pytest

from gangsched.protocol import MAX_MESSAGE_BYTES, ErrorCode, ProtocolError, decode, encode
from gangsched.protocol.messages import (
    PROTOCOL_VERSION,
    Cancel,
    JobSpec,
    NodeHello,
    PeerEndpoint,
    QuantumReport,
    SlotSwitch,
    Submit,
    TaskExit,
    TaskRef,
    TaskSample,
)

SPEC = JobSpec(name="j", user="u", nodes=2, argv=["true"])

MESSAGES = [
    SlotSwitch(quantum=7, sent_ns=123, run={"n1": [1, 2], "n2": []}),
    QuantumReport(node="n1", quantum=7, switch_sent_ns=1, switch_applied_ns=2,
                  samples=[TaskSample(job_id=1, cpu_ns=5, runnable_ns=9, progress=3)]),
    NodeHello(node="n1", cpus=0.5, pid=42, peer=PeerEndpoint(transport="tcp", host="h", ports=(1, 9)),
              tasks=[TaskRef(job_id=1, rank=0)],
              exits=[TaskExit(node="n1", job_id=2, rank=1, returncode=-9)]),
    Submit(spec=SPEC),
    Cancel(job_id=3, user="u"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.type)
def test_every_message_survives_a_round_trip(message):
    assert decode(encode(message)) == message


@pytest.mark.parametrize(
    "frame, code",
    [
        (b"", ErrorCode.BAD_MESSAGE),
        (b"\xc1", ErrorCode.BAD_MESSAGE),  # a byte msgpack never uses
        (encode(Cancel(job_id=1, user="u"))[:-2], ErrorCode.BAD_MESSAGE),  # truncated
        (msgpack.packb([1, 2, 3]), ErrorCode.BAD_MESSAGE),  # not a map
        (msgpack.packb({"v": PROTOCOL_VERSION, "type": "no_such"}), ErrorCode.BAD_MESSAGE),
        (msgpack.packb({"v": PROTOCOL_VERSION, "type": "cancel", "job_id": "x", "user": "u"}),
         ErrorCode.BAD_MESSAGE),
        (msgpack.packb({"v": PROTOCOL_VERSION + 1, "type": "cancel", "job_id": 1, "user": "u"}),
         ErrorCode.VERSION_MISMATCH),
        (msgpack.packb({"type": "cancel", "job_id": 1, "user": "u"}), ErrorCode.VERSION_MISMATCH),
        (b"\x00" * (MAX_MESSAGE_BYTES + 1), ErrorCode.TOO_LARGE),
    ],
    ids=["empty", "invalid-byte", "truncated", "list", "unknown-type", "wrong-field-type",
         "newer-version", "no-version", "too-large"],
)
def test_bad_bytes_give_one_typed_error(frame, code):
    with pytest.raises(ProtocolError) as raised:
        decode(frame)
    assert raised.value.code is code
    assert raised.value.reason


def test_a_tcp_peer_needs_a_port_range():
    frame = msgpack.packb({
        "v": PROTOCOL_VERSION, "type": "node_hello", "node": "n", "cpus": 1.0, "pid": 1,
        "peer": {"transport": "tcp", "host": "h"},
    })
    with pytest.raises(ProtocolError, match="port range"):
        decode(frame)


def test_a_spec_with_no_command_is_refused():
    frame = msgpack.packb({"v": PROTOCOL_VERSION, "type": "submit",
                           "spec": {"name": "j", "user": "u", "nodes": 1, "argv": []}})
    with pytest.raises(ProtocolError) as raised:
        decode(frame)
    assert "argv" in raised.value.reason
