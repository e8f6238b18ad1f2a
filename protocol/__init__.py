"""The wire protocol: every message between master, node daemons and clients.

One pydantic model per message (``messages``), a msgpack codec that checks the
protocol version and the size (``codec``), and the named error codes that
replies carry (``errors``).
"""

from gangsched.protocol.codec import MAX_MESSAGE_BYTES, decode, encode
from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.messages import PROTOCOL_VERSION, Message

__all__ = [
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSION",
    "ErrorCode",
    "Message",
    "ProtocolError",
    "decode",
    "encode",
]
