"""The models on the wire: a message is packed into a frame (``frames``) and a frame is
validated into one.

``decode`` turns any bad input into a ``ProtocolError``; it never raises
anything else, so a daemon can answer the sender and carry on.
"""

import functools
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.frames import pack, unpack
from gangsched.protocol.messages import Message


@functools.cache
def _message_adapter() -> TypeAdapter[Message]:
    # built on first use: its schema covers every model, which a client that expects one
    # reply never needs
    return TypeAdapter(Message)


def encode(message: Message) -> bytes:
    # Every field holds a plain value (str and its enums, numbers, lists, dicts, models), so
    # msgpack packs a model's own field dict: pydantic's serializer would first copy it whole,
    # which on the switch path costs as much again as the packing.
    return pack(vars(message), default=_fields)


def decode(frame: bytes, expect: Sequence[type[BaseModel]] = ()) -> Message:
    """The message in ``frame``; with ``expect``, one of those models and no other."""
    return validated(unpack(frame), expect)


def validated(payload: dict[str, Any], expect: Sequence[type[BaseModel]] = ()) -> Message:
    """The message a frame's fields make; with ``expect``, one of those models and no other."""
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
