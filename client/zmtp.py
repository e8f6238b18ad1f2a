"""A client's DEALER socket in plain Python: ZeroMQ's wire protocol (ZMTP 3.0, https://rfc.zeromq.org/spec/23/)
with the NULL mechanism, on ``ipc://`` and ``tcp://`` endpoints, for one request at a time.

Why: importing pyzmq took 42 ms of the 142 of a whole `gang submit` on a slow day (docs/limits.md,
"500 a second against the day's own floor"), and a sweep's script runs such commands thousands of
times. Without CURVE keys a client needs no more of ZeroMQ than this: a greeting, a READY command each
way, and frames. With keys, ``MasterConnection`` uses pyzmq, whose CURVE this does not speak.

A master that is not there yet (a restart) is tried again every ``RETRY_S`` until the request's
deadline, as a pyzmq socket reconnects; what the master sends that is not ZMTP ends the connection
with ``ZmtpError``.
"""

# the C module under socket.py: socket.py's import makes enums of all its constants and loads selectors,
# a few milliseconds of every submission (docs/limits.md, "A submission's imports")
import _socket
import os
import struct
import time

from gangsched.protocol.frames import MAX_MESSAGE_BYTES

RETRY_S = 0.1  # between tries to connect, as libzmq's reconnect interval
FRAME_S = 5.0  # what the rest of a frame begun may take
MAX_FRAME_BYTES = 2 * MAX_MESSAGE_BYTES  # as the master's own sockets take
_MORE, _LONG, _COMMAND = 0x01, 0x02, 0x04
# signature, version 3.0, the NULL mechanism, as client, filler
_GREETING = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" + bytes(31)


class ZmtpError(OSError):
    """The peer is not a ZeroMQ socket this client can talk to, or it broke the protocol."""


class _Closed(ZmtpError):
    pass


class ZmtpDealer:
    def __init__(self, endpoint: str, identity: bytes) -> None:
        """Connects at the first ``send``; ``identity``: the routing id the master's ROUTER knows it by."""
        self._endpoint, self._identity = endpoint, identity
        self._socket: _socket.socket | None = None
        self._request = b""  # the last message sent, framed: sent again on a new connection until answered

    def send(self, frame: bytes, deadline: float) -> None:
        """One single-frame message; connected first if need be, by ``deadline`` (monotonic): TimeoutError
        (a master that never answered the handshake), OSError (none listens there), ZmtpError."""
        self._request = _header(0, len(frame)) + frame
        self._deliver(deadline)

    def receive(self, deadline: float) -> bytes | None:
        """The first frame of the next message (the others are read and dropped), or None by ``deadline``.
        A connection that breaks meanwhile (its master killed) is made anew and the request sent again, as
        a pyzmq socket reconnects: every request of the protocol may be (a submission carries its token)."""
        while True:
            try:
                return self._message(deadline)
            except TimeoutError:
                return None
            except (ConnectionResetError, _Closed):
                self.close()
            try:
                self._deliver(deadline)
            except ZmtpError:
                raise
            except OSError:  # no master there again by the deadline: no answer
                return None

    def _deliver(self, deadline: float) -> None:
        while True:
            if self._socket is None:
                self._socket = self._connect(deadline)
            try:
                self._socket.sendall(self._request)
                return
            except (BrokenPipeError, ConnectionResetError):  # the master went since the last request
                self.close()

    def _message(self, deadline: float) -> bytes:
        assert self._socket is not None, "send first"
        while True:
            flags, body = self._frame(deadline)
            if flags & _COMMAND:
                self._command(body)
                continue
            first = body
            while flags & _MORE:
                flags, _ = self._frame(deadline)
            return first

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _connect(self, deadline: float) -> _socket.socket:
        while True:
            try:
                connection = _open(self._endpoint, max(0.0, deadline - time.monotonic()))
                break
            except (ConnectionRefusedError, FileNotFoundError):  # not there yet: a restart
                if time.monotonic() + RETRY_S >= deadline:
                    raise
                time.sleep(RETRY_S)
        self._socket = connection
        try:
            connection.sendall(_GREETING + _ready({b"Socket-Type": b"DEALER", b"Identity": self._identity}))
            greeting = self._read(len(_GREETING), deadline)
            if greeting[0] != 0xFF or greeting[9] != 0x7F or greeting[10] < 3:
                raise ZmtpError(f"{self._endpoint} does not speak ZMTP 3 (its greeting: {greeting[:12]!r})")
            if greeting[12:32].rstrip(b"\0") != b"NULL":
                mechanism = greeting[12:32].rstrip(b"\0").decode(errors="replace")
                raise ZmtpError(f"{self._endpoint} asks for the {mechanism} mechanism: a master with keys lets in only "
                                "a client with keys")
            flags, body = self._frame(deadline)
            if not flags & _COMMAND or not body.startswith(b"\x05READY"):
                raise ZmtpError(f"{self._endpoint} did not answer the handshake with READY")
        except (ConnectionResetError, BrokenPipeError, _Closed):
            # libzmq drops a peer whose mechanism is not its own before its greeting names its own
            self.close()
            raise ZmtpError(f"{self._endpoint} ended the handshake: a master with keys lets in only a client "
                            "with keys") from None
        except BaseException:
            self.close()
            raise
        return connection

    def _frame(self, deadline: float) -> tuple[int, bytes]:
        (flags,) = self._read(1, deadline)
        if flags & ~(_MORE | _LONG | _COMMAND):
            raise ZmtpError(f"a frame with unknown flags {flags:#x}")
        # a frame begun is read whole, its bytes on their way, even past the deadline: one left half read
        # would leave the next read in the middle of it
        whole = max(deadline, time.monotonic() + FRAME_S)
        try:
            size = struct.unpack(">Q", self._read(8, whole))[0] if flags & _LONG else self._read(1, whole)[0]
            if size > MAX_FRAME_BYTES:
                raise ZmtpError(f"a frame of {size} bytes, past the {MAX_FRAME_BYTES} a reply may have")
            return flags, self._read(size, whole)
        except TimeoutError:
            self.close()
            raise _Closed(f"{self._endpoint} sent half a frame") from None

    def _command(self, body: bytes) -> None:
        """A command after the handshake: a PING (ZMTP 3.1) is answered, others are taken as read."""
        name = body[1 : 1 + body[0]] if body else b""
        if name == b"PING" and self._socket is not None:
            context = body[1 + 4 + 2 :][:16]  # after the name and the TTL: the ping's context, echoed
            pong = b"\x04PONG" + context
            self._socket.sendall(_header(_COMMAND, len(pong)) + pong)

    def _read(self, size: int, deadline: float) -> bytes:
        assert self._socket is not None
        chunks, left = [], size
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self._socket.settimeout(remaining)
            chunk = self._socket.recv(left)
            if not chunk:
                raise _Closed(f"{self._endpoint} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def _open(endpoint: str, timeout_s: float) -> _socket.socket:
    transport, _, address = endpoint.partition("://")
    if transport == "ipc":  # an abstract address is written with a leading @
        return _connected(_socket.AF_UNIX, 0, "\0" + address[1:] if address.startswith("@") else address, timeout_s)
    if transport == "tcp":
        host, _, port = address.rpartition(":")
        name = host.strip("[]")
        # an ASCII name as bytes: the resolver takes a string through the IDNA codec, whose import
        # (unicodedata, stringprep) a submission to a master by address need not wait for
        found = _socket.getaddrinfo(name.encode() if name.isascii() else name, int(port), 0, _socket.SOCK_STREAM)
        for family, _, protocol, _, peer in found[:-1]:
            try:  # each address the name has, in turn, as socket.create_connection tries them
                return _connected(family, protocol, peer, timeout_s)
            except OSError:
                continue
        family, _, protocol, _, peer = found[-1]  # getaddrinfo names at least one, or raises
        return _connected(family, protocol, peer, timeout_s)
    raise ZmtpError(f"cannot reach {endpoint}: only ipc:// and tcp:// endpoints are known")


def _connected(family: int, protocol: int, peer: str | tuple[object, ...], timeout_s: float) -> _socket.socket:
    connection = _socket.socket(family, _socket.SOCK_STREAM, protocol)
    connection.settimeout(timeout_s)
    try:
        connection.connect(peer)
    except OSError:
        connection.close()
        raise
    return connection


def _header(flags: int, size: int) -> bytes:
    return bytes((flags, size)) if size < 256 else bytes((flags | _LONG,)) + struct.pack(">Q", size)


def _ready(properties: dict[bytes, bytes]) -> bytes:
    """A READY command's body: its name, then each property as name and value."""
    body = b"\x05READY" + b"".join(bytes((len(name),)) + name + struct.pack(">I", len(value)) + value
                                   for name, value in properties.items())
    return _header(_COMMAND, len(body)) + body


def routing_id() -> bytes:
    return f"client-{os.urandom(6).hex()}".encode()
