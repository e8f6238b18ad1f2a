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

PROTOCOL_VERSION = 23
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
# a JobList's page: a job's spec is at most MAX_COMMAND_BYTES plus two paths, and this many fit in a frame
JOBS_PER_REPLY = 100


def pack(fields: Mapping[str, Any], default: Callable[[Any], Any] | None = None) -> bytes:
    """``fields`` (with its "type") as a frame; ``default`` turns what msgpack cannot pack into what it can."""
    packed: bytes = msgpack.packb({"v": PROTOCOL_VERSION, **fields}, default=default, use_bin_type=True)
    return packed


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
