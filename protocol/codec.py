"""msgpack framing of messages, with the protocol version and a size limit.

A frame is one msgpack map: ``{"v": PROTOCOL_VERSION, "type": ..., **fields}``.
``decode`` turns any bad input into a ``ProtocolError``; it never raises
anything else, so a daemon can answer the sender and carry on.
"""

import functools
from collections.abc import Sequence
from typing import Any

import msgpack
from pydantic import BaseModel, TypeAdapter, ValidationError

from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.messages import PROTOCOL_VERSION, Message

MAX_MESSAGE_BYTES = 8 * 1024 * 1024


@functools.cache
def _message_adapter() -> TypeAdapter[Message]:
    # built on first use: its schema covers every model, which a client that expects one
    # reply never needs (`gang queue` starts tens of milliseconds sooner without it)
    return TypeAdapter(Message)


def encode(message: Message) -> bytes:
    # Every field holds a plain value (str and its enums, numbers, lists, dicts, models), so
    # msgpack packs a model's own field dict: pydantic's serializer would first copy it whole,
    # which on the switch path costs as much again as the packing.
    return msgpack.packb({"v": PROTOCOL_VERSION, **vars(message)}, default=_fields, use_bin_type=True)


def decode(frame: bytes, expect: Sequence[type[BaseModel]] = ()) -> Message:
    """The message in ``frame``; with ``expect``, one of those models and no other."""
    if len(frame) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            ErrorCode.TOO_LARGE, f"{len(frame)} bytes, the limit is {MAX_MESSAGE_BYTES}"
        )
    payload = _unpack(frame)
    version = payload.pop("v", None)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            ErrorCode.VERSION_MISMATCH,
            f"peer speaks protocol version {version!r}, this side speaks {PROTOCOL_VERSION}",
        )
    try:
        if not expect:
            return _message_adapter().validate_python(payload)
        model = next((model for model in expect if model.model_fields["type"].default == payload.get("type")), None)
        if model is None:
            raise ProtocolError(ErrorCode.BAD_MESSAGE, f"expected {' or '.join(m.__name__ for m in expect)}, "
                                f"got type {payload.get('type')!r}")
        message: Message = model.model_validate(payload)  # type: ignore[assignment]
        return message
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "message"
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: {first['msg']}") from None


def _fields(value: object) -> dict[str, Any]:
    """What msgpack packs for a nested model."""
    if isinstance(value, BaseModel):
        return vars(value)
    raise TypeError(f"no wire form for {type(value).__name__}")


def _unpack(frame: bytes) -> dict[str, Any]:
    try:
        payload = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except Exception as error:  # msgpack raises several unrelated types on bad bytes
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"not msgpack ({type(error).__name__}: {error})") from None
    if not isinstance(payload, dict):
        raise ProtocolError(
            ErrorCode.BAD_MESSAGE, f"a message is a map, got {type(payload).__name__}"
        )
    return payload
