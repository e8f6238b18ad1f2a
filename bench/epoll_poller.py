"""A ``zmq.Poller`` for thousands of sockets of which a few are ready at a time, as in `gang bench
scale`'s processes of hundreds of node daemons.

``zmq_poll`` looks at every registered socket on every call: 1.5 ms a call over 2,500 sockets,
paid at each of the many wake-ups a switch causes in a process of 512 daemons, which delayed the
last daemon's switch by more than the switch itself cost. Here each ZeroMQ socket is watched
through its signalling descriptor (``ZMQ_FD``) in an epoll set, so that a poll costs what is ready.

That descriptor only says that the socket's state may have changed, and reading the socket's
``EVENTS`` (or sending, or receiving) consumes the signal: a socket that still holds messages
after its owner's turn, or whose signal a send consumed, would never be reported again. So a
socket stays *unsure*, and is looked at on every poll, from its signal (or registration) until a
look finds it empty; and the sockets sent on are handed back with ``recheck``. Which those are,
the sockets of a ``SendNotingContext`` note themselves: looking again at every daemon's DEALER
after each of its turns, though it had sent nothing there, was a third of the looks of a switch at
a thousand daemons (a look reads the socket's ``EVENTS``, a system call).
"""

import select
from collections.abc import Iterable
from typing import Any, cast

import zmq

_RECEIVE_ONLY = (zmq.SUB, zmq.PULL)
_EPOLL_EVENTS = {zmq.POLLIN: select.EPOLLIN, zmq.POLLOUT: select.EPOLLOUT, zmq.POLLERR: select.EPOLLERR}


class SendNotingSocket(zmq.Socket[bytes]):
    """A socket that notes each send in its context's ``sent`` (``send_multipart`` sends by ``send``)."""

    def send(self, *args: Any, **kwargs: Any) -> Any:
        cast(SendNotingContext, self.context).sent.add(self)
        return super().send(*args, **kwargs)


class SendNotingContext(zmq.Context[SendNotingSocket]):
    """A context whose sockets note in ``sent`` that they were sent on, for ``EpollPoller.recheck``."""

    _socket_class = SendNotingSocket
    sent: "set[zmq.Socket[bytes]]"  # declared: pyzmq takes an undeclared attribute for a socket option

    def __init__(self) -> None:
        super().__init__()
        self.sent = set()


class EpollPoller(zmq.Poller):
    def __init__(self) -> None:
        super().__init__()
        self._epoll = select.epoll()
        self._by_fd: dict[int, Any] = {}  # descriptor -> what was registered (a socket, or the descriptor)
        self._flags: dict[Any, int] = {}  # what was registered -> the zmq.POLL* events asked for
        self._fds: dict[Any, int] = {}
        self._unsure: set[zmq.Socket[bytes]] = set()
        self._sending: set[zmq.Socket[bytes]] = set()  # the registered sockets a send can be made on

    def register(self, socket: Any, flags: int = zmq.POLLIN | zmq.POLLOUT) -> None:
        if not flags:
            self.unregister(socket)
            return
        if isinstance(socket, zmq.Socket):
            fd, mask = int(socket.getsockopt(zmq.FD)), select.EPOLLIN
            self._unsure.add(socket)  # it may hold messages already
            if socket.type not in _RECEIVE_ONLY:
                self._sending.add(socket)
        else:
            fd = socket if isinstance(socket, int) else socket.fileno()
            mask = sum(epoll for polled, epoll in _EPOLL_EVENTS.items() if flags & polled)
        if socket in self._flags:
            self._epoll.modify(fd, mask)
        else:
            self._epoll.register(fd, mask)
        self._by_fd[fd], self._flags[socket], self._fds[socket] = socket, int(flags), fd

    def unregister(self, socket: Any) -> None:
        fd = self._fds.pop(socket)
        del self._flags[socket], self._by_fd[fd]
        self._epoll.unregister(fd)
        self._unsure.discard(socket)
        self._sending.discard(socket)

    def recheck(self, sockets: "Iterable[zmq.Socket[bytes]]") -> None:
        """``sockets`` were just sent on: a send consumes the signal of a message that came meanwhile
        (one that cannot send, or that was not registered, is left alone)."""
        self._unsure.update(socket for socket in sockets if socket in self._sending)

    def poll(self, timeout: int | None = None) -> list[tuple[Any, int]]:
        ready: dict[Any, int] = {}
        self._look(ready, list(self._unsure))
        wait = 0.0 if ready else -1.0 if timeout is None or timeout < 0 else timeout / 1000
        signalled = []
        for fd, events in self._epoll.poll(wait):
            item = self._by_fd[fd]
            if isinstance(item, zmq.Socket):
                if item not in ready:  # else looked at just now, and unsure still
                    signalled.append(item)
            else:
                polled = sum(flag for flag, epoll in _EPOLL_EVENTS.items() if events & epoll)
                if polled & (self._flags[item] | zmq.POLLERR):
                    ready[item] = polled
        self._unsure.update(signalled)
        self._look(ready, signalled)
        return list(ready.items())

    def close(self) -> None:
        self._epoll.close()

    def _look(self, ready: dict[Any, int], sockets: "list[zmq.Socket[bytes]]") -> None:
        """Each of ``sockets`` (unsure ones) into ``ready`` if it is, out of the unsure if it is not.

        All in one ``zmq_poll`` that does not wait, which reads each socket's ``EVENTS`` in C:
        2.7 µs a socket that holds a switch and 0.7 µs an empty one, against 4.1 and 1.7 µs
        through ``getsockopt`` from Python (512 sockets)."""
        if not sockets:
            return
        found = dict(zmq.zmq_poll([(socket, self._flags[socket]) for socket in sockets], 0))
        for socket in sockets:
            events = found.get(socket, 0) & self._flags[socket]
            if events:
                ready[socket] = events  # and unsure still: its owner may not take all it holds
            else:
                self._unsure.discard(socket)
