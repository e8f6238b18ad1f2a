"""Who may say what to the master (docs/architecture.md, 'Trust model').

Without keys, whoever reaches the master's sockets is its own account, and
every message counts as sent. With keys, a message counts as sent by the user
its key belongs to, whatever it says: a submission is that user's, a cancel
is asked by that user, an administrator's word is that user's. Only the
nodes' key registers a node, reports or takes part in PMI (the report socket
takes only the nodes' key); the web view only reads.
"""

from typing import TypeGuard

from gangsched.daemon.curve import NODE_USER
from gangsched.protocol.codec import decode
from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.frames import refuse_large_request
from gangsched.protocol.messages import (
    AdminLogQuery,
    Cancel,
    ErrorReply,
    Heartbeat,
    JobControl,
    JobCountQuery,
    JobQuery,
    JobUpdate,
    MastersQuery,
    MatrixQuery,
    Message,
    NodeHello,
    NodeQuery,
    NodeUpdate,
    PmiFence,
    PmixModexReply,
    PmixModexRequest,
    QuantumReport,
    Reconfigure,
    ReservationCreate,
    ReservationDelete,
    ReservationQuery,
    ReservationUpdate,
    SetLimits,
    SetUser,
    SignalJob,
    StartStep,
    StatsQuery,
    Submit,
    SwitchStatsQuery,
    Takeover,
    TaskExit,
    UserQuery,
)

# what the web view may ask: it shows, it never changes
READ_ONLY = (JobQuery, JobCountQuery, NodeQuery, MatrixQuery, StatsQuery, SwitchStatsQuery, UserQuery, AdminLogQuery,
             ReservationQuery, MastersQuery)
# what nodes send over the report socket: their reports, and what their MPI interfaces send the master
NODE_REPORTS = (QuantumReport, Heartbeat, TaskExit, PmiFence, PmixModexRequest, PmixModexReply)


def request(frames: list[bytes], user: str | None) -> tuple[list[bytes], Message | None, ErrorReply | None]:
    """A message on the ROUTER: its envelope ([sender] from a DEALER, [sender, b""] from a REQ), and either
    the message as its key's ``user`` sent it or the error reply it gets (malformed, or not the sender's)."""
    envelope = frames[:2] if len(frames) > 2 and frames[1] == b"" else frames[:1]
    try:
        for frame in frames[len(envelope):]:
            refuse_large_request(frame)
        message = one_message(frames[len(envelope):])
    except ProtocolError as error:
        return envelope, None, ErrorReply(code=error.code, reason=error.reason)
    refusal = sender_refusal(message, user)
    return envelope, None if refusal else as_sender(message, user), refusal


def one_message(body: list[bytes]) -> Message:
    """The message a body of frames carries: exactly one frame, decoded; ProtocolError if not."""
    if len(body) != 1:
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"a message is one frame, got {len(body)}")
    return decode(body[0])


def sender_refusal(message: Message, user: str | None) -> ErrorReply | None:
    """Why the key's ``user`` (None: no keys) may not send a message on the ROUTER, if it may not."""
    if user is not None and isinstance(message, NodeHello) and user != NODE_USER:
        reason = f"{user}'s key is a user's: only a node's key registers a node"
        return ErrorReply(code=ErrorCode.PERMISSION_DENIED, reason=reason)
    return None


def as_sender(message: Message, user: str | None) -> Message:
    """A message on the ROUTER as its key's ``user`` sent it, whatever it says (None: no keys)."""
    if user is None:
        return message
    if isinstance(message, Submit):
        return message.model_copy(update={"spec": message.spec.model_copy(update={"user": user})})
    if isinstance(message, (Cancel, JobControl, JobUpdate, SignalJob, StartStep)):
        return message.model_copy(update={"user": user})
    if isinstance(message, JobQuery):
        return message.model_copy(update={"viewer": user})
    if isinstance(message, (SetUser, Reconfigure, NodeUpdate, SetLimits, ReservationCreate, ReservationUpdate,
                            ReservationDelete, Takeover)):
        return message.model_copy(update={"admin": user})
    return message


def is_node_report(message: Message, user: str | None) -> TypeGuard[
        QuantumReport | Heartbeat | TaskExit | PmiFence | PmixModexRequest | PmixModexReply]:
    """Whether a message on the report socket is a node's (a report, heartbeat, exit, or its MPI interfaces'),
    sent with the nodes' key where there are keys."""
    return isinstance(message, NODE_REPORTS) and user in (None, NODE_USER)


def viewer_refusal(message: Message) -> ErrorReply | None:
    if isinstance(message, READ_ONLY):
        return None
    return ErrorReply(code=ErrorCode.PERMISSION_DENIED, reason=f"the web view only reads: not {message.type}")
