"""What the daemons' loops ask of their ZeroMQ sockets."""

from typing import cast

import zmq

_POLLIN = int(zmq.POLLIN)  # a plain int: `&` on pyzmq's flag enum runs Python code


def has_message(socket: zmq.Socket[bytes]) -> bool:
    """Whether a message waits on ``socket``, without receiving it.

    EVENTS rather than a receive that raises zmq.Again: the daemons ask after
    every message they take, and an exception per wake-up is costly on the
    switch path.
    """
    return bool(cast(int, socket.getsockopt(zmq.EVENTS)) & _POLLIN)
