"""Named error codes carried by error replies, and the decoding error."""

from enum import StrEnum


class ErrorCode(StrEnum):
    BAD_MESSAGE = "bad_message"  # bytes that are not a valid message
    TOO_LARGE = "too_large"  # over MAX_MESSAGE_BYTES
    VERSION_MISMATCH = "version_mismatch"  # peer speaks another protocol version
    UNEXPECTED = "unexpected"  # a valid message this endpoint does not take
    UNKNOWN_NODE = "unknown_node"  # node must say hello (again) first
    UNKNOWN_JOB = "unknown_job"
    JOB_FINISHED = "job_finished"  # too late to cancel
    PERMISSION_DENIED = "permission_denied"  # e.g. cancelling another user's job
    INVALID_SPEC = "invalid_spec"  # a job spec the scheduler refuses
    NEVER_FITS = "never_fits"  # a job wider than the cluster
    NODE_UNREACHABLE = "node_unreachable"
    NODE_REFUSED = "node_refused"  # a node whose hello the master will not take, e.g. more memory than its host
    INTERNAL = "internal"  # a handler failed; the daemon lives on


class ProtocolError(Exception):
    """Bytes that could not be decoded into a message, with the reason why."""

    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
