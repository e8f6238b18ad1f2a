"""A client's connection to a master: one request, one reply, as plain maps, a clear error otherwise.

Where several masters share a store, ``endpoint`` lists them by commas (``tcp://m1:7070,tcp://m2:7070``):
a request goes to the one that answered last; a standby's ``not_leader`` answer sends it to the leader
it names (if listed) or the next, and a master that does not answer passes it to the next, until every
one was tried (docs/architecture.md, "Leadership").

No pydantic here: the list commands (`gang queue`, `gang history`, `gang nodes`), which
people run in loops, read their replies as maps. ``MasterClient`` builds on this with
the protocol's models; tests/test_cli_lists.py checks that the maps are the models'.
Nor pyzmq, but with CURVE keys: without, the socket is ZeroMQ's wire protocol in plain
Python (client/zmtp.py), which a command starts 40 ms sooner for on a slow day.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping

from gangsched.client.zmtp import ZmtpDealer, ZmtpError, routing_id
from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.frames import JOBS_PER_REPLY, MAX_REQUEST_BYTES, pack, unpack

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any, Self

# a CURVE key folder, as a job command finds it (cli/master_access.py: a string, without pathlib's import)
KeyFolderPath = str | os.PathLike[str]


def login_name() -> str:
    """``getpass.getuser()``'s answer (the login name from the environment, else this account's), without
    getpass's import: its password prompt's terminal module, a few milliseconds of a submission's start."""
    for variable in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if name := os.environ.get(variable):
            return name
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def submitter_umask() -> int:
    """This process's umask, which a job's tasks make their files with (sbatch passes it as SLURM_UMASK)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


class MasterUnreachable(Exception):
    pass


class RequestRefused(Exception):
    """The master answered with an error reply."""

    def __init__(self, code: ErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class MasterConnection:
    def __init__(self, endpoint: str, timeout_s: float = 5.0, keys: KeyFolderPath | None = None,
                 user: str | None = None) -> None:
        """``keys``: a CURVE key folder; the client presents ``user``'s key (default: the login name)."""
        self.endpoint = endpoint
        self._masters = endpoint.split(",")
        self._at = 0  # the master asked
        self._timeout_ms = int(timeout_s * 1000)
        self._keys = keys
        self._user = user or login_name()
        self._socket = self._connect()

    def another(self, timeout_s: float) -> Self:
        """A connection of its own to the same master, with the same keys and user (for a thread)."""
        return type(self)(self.endpoint, timeout_s, self._keys, self._user)

    def _connect(self) -> ZmtpDealer | _CurveDealer:
        endpoint = self._masters[self._at]
        if self._keys is None:
            return ZmtpDealer(endpoint, routing_id())
        return _CurveDealer(endpoint, self._keys, self._user, self._timeout_ms)

    def exchange(self, frame: bytes) -> dict[str, Any]:
        """The fields of the leading master's reply to ``frame``; RequestRefused if it is an error reply, or a
        request larger than the master takes (which it would not read: it closes the connection of its sender)."""
        if len(frame) > MAX_REQUEST_BYTES:
            raise RequestRefused(ErrorCode.TOO_LARGE, f"the request takes {len(frame)} bytes: the master takes at "
                                 f"most {MAX_REQUEST_BYTES}")
        unanswered: list[str] = []
        leader: object = None
        # a leader and a standby each asked at most twice: one may take the lead meanwhile
        for _ in range(2 * len(self._masters)):
            try:
                reply = self._exchange_once(frame)
            except MasterUnreachable as error:
                if len(self._masters) == 1:
                    raise
                unanswered.append(str(error))
                if len(unanswered) == len(self._masters):
                    raise MasterUnreachable("no master answers: " + "; ".join(unanswered)) from None
                self._move((self._at + 1) % len(self._masters))
                continue
            if reply.get("type") != "not_leader":
                return reply
            leader = reply.get("leader")
            self._move(self._masters.index(leader) if leader in self._masters and leader != self._masters[self._at]
                       else (self._at + 1) % len(self._masters))
        if leader is None:
            raise MasterUnreachable(f"no master of {self.endpoint} leads now (a takeover under way?): try again")
        raise MasterUnreachable(f"the master at {self._masters[self._at]} stands by: the leader is {leader}")

    def _move(self, at: int) -> None:
        self._at = at
        self._reconnect()

    def _exchange_once(self, frame: bytes) -> dict[str, Any]:
        timeout_s = self._timeout_ms / 1000
        try:  # the timeout for the send (a connection made), and again for the answer, as pyzmq's DEALER has it
            self._socket.send(frame, time.monotonic() + timeout_s)
            received = self._socket.receive(time.monotonic() + timeout_s)
        except ZmtpError as error:  # not a master, or a master that wants keys
            self._reconnect()
            raise self.malformed(str(error)) from None
        except OSError:  # none there (a restart), or no handshake by the deadline
            received = None
        except BaseException:  # interrupted (SIGTERM unwinds as SystemExit) between the request and its answer
            self._reconnect()
            raise
        if received is None:
            self._reconnect()
            raise MasterUnreachable(
                f"no answer from the master at {self._masters[self._at]} within {self._timeout_ms / 1000:g} s"
            )
        try:
            reply = unpack(received)
        except ProtocolError as error:
            raise self.malformed(str(error)) from None
        if reply.get("type") == "error":
            try:
                raise RequestRefused(ErrorCode(reply["code"]), str(reply["reason"]))
            except (KeyError, ValueError):
                raise self.malformed(f"an error reply without a known code and a reason: {reply}") from None
        return reply

    def _reconnect(self) -> None:
        """A request went without its answer: a late answer must not be taken for the next request's."""
        self._socket.close()
        self._socket = self._connect()

    def malformed(self, what: str) -> MasterUnreachable:
        return MasterUnreachable(f"the master at {self.endpoint} answered: {what}")

    def job_maps(self, job_ids: list[int] | None = None, include_finished: bool = False,
                 ended_after: float | None = None, states: Iterable[str] | None = None, user: str | None = None,
                 arrays: bool = False, partition: str | None = None, most: int | None = None,
                 brief: bool = False) -> list[dict[str, Any]]:
        """The jobs asked for (JobInfo's fields), in as many requests as the master's pages take (``JobQuery``):
        by id, or those in ``states`` of ``user`` in ``partition``, each array's waiting jobs as one if
        ``arrays``; the first ``most`` of them, if given; ``brief``: without environments and scripts."""
        if job_ids is not None:
            return [
                job
                for start in range(0, len(job_ids), JOBS_PER_REPLY)
                for job in self._list("jobs", {"type": "job_query", "job_ids": job_ids[start : start + JOBS_PER_REPLY],
                                       "brief": brief})
            ]
        found: list[dict[str, Any]] = []
        while True:
            after_id = found[-1]["job_id"] if found else 0
            page = self._page("jobs", {"type": "job_query", "include_finished": include_finished,
                                       "ended_after": ended_after, "after_id": after_id, "user": user,
                                       "partition": partition,
                                       "states": None if states is None else sorted(states), "arrays": arrays,
                                       "brief": brief})
            found += page["jobs"]
            if not (page.get("more") and page["jobs"]) or (most is not None and len(found) >= most):
                return found[:most]

    def node_maps(self) -> list[dict[str, Any]]:
        """Every node the master knows (NodeInfo's fields)."""
        return self._list("nodes", {"type": "node_query"})

    def node_list_map(self) -> dict[str, Any]:
        """NodeList's fields: the nodes, and the partitions (PartitionInfo's fields)."""
        return self._page("nodes", {"type": "node_query"})

    def _list(self, field: str, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._page(field, request)[field]
        return items

    def _page(self, field: str, request: Mapping[str, Any]) -> dict[str, Any]:
        page = self.exchange(pack(request))
        items = page.get(field)
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise self.malformed(f"a {page.get('type')!r} reply without a list of {field}")
        return page

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _CurveDealer:
    """pyzmq's DEALER, for a client with CURVE keys, which client/zmtp.py does not speak."""

    def __init__(self, endpoint: str, keys: KeyFolderPath, user: str, timeout_ms: int) -> None:
        from pathlib import Path

        import zmq  # only with keys: its import is most of a command's start

        from gangsched.daemon.curve import KeyFolder

        self._zmq = zmq
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        # a failed handshake (a key the master refuses, or none) drops the connection for good, and a
        # DEALER with no connection blocks in send: a send deadline turns that into "no answer"
        self._socket.setsockopt(zmq.SNDTIMEO, timeout_ms)
        self._socket.setsockopt(zmq.ROUTING_ID, routing_id())
        KeyFolder(Path(keys)).connect_as(self._socket, user)
        self._socket.connect(endpoint)

    def send(self, frame: bytes, deadline: float) -> None:
        try:
            self._socket.send(frame)
        except self._zmq.Again:
            raise TimeoutError from None

    def receive(self, deadline: float) -> bytes | None:
        waited_ms = max(0, int((deadline - time.monotonic()) * 1000))
        return self._socket.recv() if self._socket.poll(waited_ms, self._zmq.POLLIN) else None

    def close(self) -> None:
        self._socket.close()
