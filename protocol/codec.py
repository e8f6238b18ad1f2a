"""The models on the wire: a message is packed into a frame (``frames``) and a frame is
validated into one.

``decode`` turns any bad input into a ``ProtocolError``; it never raises
anything else, so a daemon can answer the sender and carry on.
"""

import functools
from collections.abc import Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.frames import pack, unpack
from gangsched.protocol.messages import Message


@functools.cache
def _models() -> dict[str, type[BaseModel]]:
    """Each message's model by its "type". Looking it up here and validating that model costs
    a third less than pydantic's own dispatch over the union: at a thousand nodes the master
    decodes 256 reports a quantum."""
    union = get_args(Message)[0]
    return {model.model_fields["type"].default: model for model in get_args(union)}


def encode(message: Message, leader_epoch: int | None = None) -> bytes:
    """``leader_epoch``: the master's, stamped on a message of the leader to nodes (``FromLeader``) as
    it goes out: the core that makes the messages knows nothing of leadership."""
    # Every field holds a plain value (str and its enums, numbers, lists, dicts, models), so
    # msgpack packs a model's own field dict: pydantic's serializer would first copy it whole,
    # which on the switch path costs as much again as the packing.
    fields = vars(message)
    if leader_epoch is not None and "leader_epoch" in fields:
        fields = {**fields, "leader_epoch": leader_epoch}
    return pack(fields, default=_fields)


def decode(frame: bytes, expect: Sequence[type[BaseModel]] = ()) -> Message:
    """The message in ``frame``; with ``expect``, one of those models and no other."""
    return validated(unpack(frame), expect)


def validated(payload: dict[str, Any], expect: Sequence[type[BaseModel]] = ()) -> Message:
    """The message a frame's fields make; with ``expect``, one of those models and no other."""
    kind = payload.get("type")
    model = _models().get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"no message has type {kind!r}")
    if expect and model not in expect:
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"expected {' or '.join(m.__name__ for m in expect)}, "
                            f"got type {kind!r}")
    try:
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
