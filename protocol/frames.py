"""A frame on the wire: one msgpack map ``{"v": PROTOCOL_VERSION, "type": ..., **fields}`` of at
most MAX_MESSAGE_BYTES.

Without pydantic: the list commands (`gang queue`, `gang nodes`) read their replies as
plain maps, and pydantic's import alone would take most of their start-up.
``gangsched.protocol.codec`` adds the models' validation on top.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgpack

from gangsched.protocol.errors import ErrorCode, ProtocolError

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any

PROTOCOL_VERSION = 35
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
# What a client's request may take on the master's ROUTER: twice the largest command a job may carry
# (records.MAX_COMMAND_BYTES), with its paths. A request is refused at this size before it is decoded: a
# message of millions of small items took the master's loop a second to decode, for nothing.
MAX_REQUEST_BYTES = 128 * 1024
# What any message on the ROUTER may take, a node's hello with every task it runs and the first of its
# exits included (what the nodes' MPI interfaces send, of megabytes, goes over the report socket). libzmq
# closes the connection of a peer that sends more, without reading it: a flood of large frames had the
# master's real-time I/O thread read gigabytes a second, and every other client waited.
MAX_ROUTER_BYTES = 2 * 1024 * 1024
# what may take more than MAX_REQUEST_BYTES on the ROUTER
LARGE_TYPES = frozenset({"node_hello"})
_PEEKED_BYTES = 64  # the version and the type, which every frame begins with
# a JobList's page: a job's spec is at most MAX_COMMAND_BYTES plus two paths, and this many fit in a frame
JOBS_PER_REPLY = 100


def pack(fields: Mapping[str, Any], default: Callable[[Any], Any] | None = None) -> bytes:
    """``fields`` (with its "type") as a frame; ``default`` turns what msgpack cannot pack into what it can."""
    packed: bytes = msgpack.packb({"v": PROTOCOL_VERSION, **fields}, default=default, use_bin_type=True)
    return packed


def refuse_large_request(frame: bytes) -> None:
    """ProtocolError (TOO_LARGE) for a frame over MAX_REQUEST_BYTES that is not of LARGE_TYPES, told from
    its first bytes alone: nothing else of it is read."""
    if len(frame) <= MAX_REQUEST_BYTES:
        return
    peek = msgpack.Unpacker(raw=False, max_buffer_size=_PEEKED_BYTES)
    peek.feed(frame[:_PEEKED_BYTES])
    kind = None
    try:
        for _ in range(min(peek.read_map_header(), 2)):
            key, value = peek.unpack(), peek.unpack()
            if key == "type":
                kind = value
    except Exception:  # cut short, or not a map: not a message that may be large
        pass
    if kind not in LARGE_TYPES:
        raise ProtocolError(ErrorCode.TOO_LARGE, f"{len(frame)} bytes: a request takes at most {MAX_REQUEST_BYTES}")


def unpack(frame: bytes) -> dict[str, Any]:
    """The fields of ``frame``, its version checked and removed; ProtocolError on any bad input."""
    if len(frame) > MAX_MESSAGE_BYTES:
        raise ProtocolError(ErrorCode.TOO_LARGE, f"{len(frame)} bytes, the limit is {MAX_MESSAGE_BYTES}")
    try:
        payload = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except Exception as error:  # msgpack raises several unrelated types on bad bytes
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"not msgpack ({type(error).__name__}: {error})") from None
    if not isinstance(payload, dict):
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"a message is a map, got {type(payload).__name__}")
    version = payload.pop("v", None)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            ErrorCode.VERSION_MISMATCH,
            f"peer speaks protocol version {version!r}, this side speaks {PROTOCOL_VERSION}",
        )
    return payload
