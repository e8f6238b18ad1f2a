"""Talking to a master from a client: one request, one reply, a clear error otherwise."""

import getpass
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import zmq
from pydantic import BaseModel

from gangsched.daemon.curve import KeyFolder
from gangsched.protocol.codec import decode, encode
from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.messages import (
    Cancel,
    Cancelled,
    ErrorReply,
    JOBS_PER_REPLY,
    JobInfo,
    JobList,
    JobQuery,
    JobSpec,
    MasterStats,
    MatrixQuery,
    MatrixView,
    Message,
    NodeInfo,
    NodeList,
    NodeQuery,
    SetUser,
    StatsQuery,
    Submit,
    Submitted,
    SwitchStats,
    SwitchStatsQuery,
    UserInfo,
    UserList,
    UserQuery,
)

Reply = TypeVar("Reply", bound=BaseModel)


class MasterUnreachable(Exception):
    pass


class RequestRefused(Exception):
    """The master answered with an error reply."""

    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class MasterClient:
    def __init__(self, endpoint: str, timeout_s: float = 5.0, keys: Path | None = None,
                 user: str | None = None) -> None:
        """``keys``: a CURVE key folder; the client presents ``user``'s key (default: the login name)."""
        self.endpoint = endpoint
        self._timeout_ms = int(timeout_s * 1000)
        self._keys = KeyFolder(keys) if keys is not None else None
        self._user = user or getpass.getuser()
        self._socket = self._connect()

    def _connect(self) -> zmq.Socket[bytes]:
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        # a failed handshake (a key the master refuses, or none) drops the connection for good, and a
        # DEALER with no connection blocks in send: a send deadline turns that into "no answer"
        socket.setsockopt(zmq.SNDTIMEO, self._timeout_ms)
        socket.setsockopt(zmq.ROUTING_ID, f"client-{uuid.uuid4().hex[:12]}".encode())
        if self._keys is not None:
            self._keys.connect_as(socket, self._user)
        socket.connect(self.endpoint)
        return socket

    def request(self, message: Message, expect: type[Reply]) -> Reply:
        try:
            self._socket.send(encode(message))
            answered = self._socket.poll(self._timeout_ms, zmq.POLLIN)
        except zmq.Again:
            answered = False
        if not answered:
            # a late answer must not be taken for the next request's
            self._socket.close()
            self._socket = self._connect()
            raise MasterUnreachable(
                f"no answer from the master at {self.endpoint} within {self._timeout_ms / 1000:g} s"
            )
        try:
            reply = decode(self._socket.recv(), (expect, ErrorReply))
        except ProtocolError as error:
            raise MasterUnreachable(f"the master at {self.endpoint} answered: {error}") from None
        if isinstance(reply, ErrorReply):
            raise RequestRefused(reply.code, reply.reason)
        assert isinstance(reply, expect)
        return reply

    def submit(self, spec: JobSpec, retry_s: float = 0.0) -> int:
        return self.submit_jobs(spec, None, retry_s)[0]

    def submit_jobs(self, spec: JobSpec, array: list[int] | None, retry_s: float = 0.0) -> list[int]:
        """Submit a job, or one per index of ``array``; for ``retry_s`` seconds more, again while the
        master does not answer (a restart). Every try carries the same token, so the jobs are
        made once whichever reply was lost."""
        message = Submit(spec=spec, token=uuid.uuid4().hex, array=array)
        deadline = time.monotonic() + retry_s
        while True:
            try:
                return self.request(message, Submitted).job_ids
            except MasterUnreachable:
                if time.monotonic() >= deadline:
                    raise

    def cancel(self, job_id: int, user: str) -> Cancelled:
        return self.request(Cancel(job_id=job_id, user=user), Cancelled)

    def set_user(self, user: str, political_priority: float | None = None, quota_node_s: float | None = None,
                 clear_quota: bool = False) -> list[UserInfo]:
        message = SetUser(admin=self._user, user=user, political_priority=political_priority,
                          quota_node_s=quota_node_s, clear_quota=clear_quota)
        return self.request(message, UserList).users

    def users(self) -> list[UserInfo]:
        return self.request(UserQuery(), UserList).users

    def jobs(self, job_ids: list[int] | None = None, include_finished: bool = False,
             ended_after: float | None = None) -> list[JobInfo]:
        """The jobs asked for, in as many requests as the master's pages take (``JobQuery``)."""
        if job_ids is not None:
            return [info for start in range(0, len(job_ids), JOBS_PER_REPLY)
                    for info in self.request(JobQuery(job_ids=job_ids[start:start + JOBS_PER_REPLY]), JobList).jobs]
        found: list[JobInfo] = []
        more = True
        while more:
            after_id = found[-1].job_id if found else 0
            query = JobQuery(include_finished=include_finished, ended_after=ended_after, after_id=after_id)
            page = self.request(query, JobList)
            found += page.jobs
            more = page.more and bool(page.jobs)
        return found

    def job(self, job_id: int) -> JobInfo:
        jobs = self.jobs([job_id])
        if not jobs:
            raise RequestRefused(ErrorCode.UNKNOWN_JOB, f"no job {job_id}")
        return jobs[0]

    def nodes(self) -> list[NodeInfo]:
        return self.request(NodeQuery(), NodeList).nodes

    def matrix(self) -> MatrixView:
        return self.request(MatrixQuery(), MatrixView)

    def switch_stats(self, last: int) -> SwitchStats:
        return self.request(SwitchStatsQuery(last=last), SwitchStats)

    def stats(self) -> MasterStats:
        return self.request(StatsQuery(), MasterStats)

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> "MasterClient":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
