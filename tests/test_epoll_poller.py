"""The epoll poller of `gang bench scale`'s emulated nodes: what zmq.Poller reports, it reports."""

import os
import time
from collections.abc import Iterator

import pytest
import zmq

from gangsched.bench.epoll_poller import EpollPoller, SendNotingContext


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield context
    context.destroy(linger=0)


def poll_until(poller: EpollPoller, wanted: object, deadline_s: float = 5.0) -> dict[object, int]:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        ready = dict(poller.poll(100))
        if wanted in ready:
            return ready
    raise AssertionError(f"{wanted} never reported ready")


def pair(context: zmq.Context[zmq.Socket[bytes]], kinds: tuple[int, int], name: str
         ) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes]]:
    """Over inproc: a message sent is in the receiver's pipe when ``send`` returns, so what a test counts
    as queued is, whatever the host's load (over ipc, the I/O thread delivers it later)."""
    receiver, sender = context.socket(kinds[0]), context.socket(kinds[1])
    receiver.bind(f"inproc://{name}")
    sender.connect(f"inproc://{name}")
    return receiver, sender


def test_a_socket_is_reported_until_it_is_drained(context):
    poller = EpollPoller()
    receiver, sender = pair(context, (zmq.PULL, zmq.PUSH), "a")
    poller.register(receiver, zmq.POLLIN)
    for number in range(3):
        sender.send(b"%d" % number)
    assert poll_until(poller, receiver)[receiver] == zmq.POLLIN
    receiver.recv()  # one of three taken: no new signal comes, yet two are left
    assert dict(poller.poll(0)).get(receiver) == zmq.POLLIN
    receiver.recv()
    receiver.recv()
    assert receiver not in dict(poller.poll(50))
    poller.close()


def test_messages_there_before_registration_are_reported(context):
    receiver, sender = pair(context, (zmq.PULL, zmq.PUSH), "b")
    sender.send(b"early")
    deadline = time.monotonic() + 5
    while not receiver.poll(0) and time.monotonic() < deadline:  # queued at the receiver, signal consumed
        time.sleep(0.01)
    poller = EpollPoller()
    poller.register(receiver, zmq.POLLIN)
    assert dict(poller.poll(0)).get(receiver) == zmq.POLLIN
    poller.close()


def test_a_message_that_came_during_a_send_is_found_by_the_recheck():
    context = SendNotingContext()  # its sockets say which were sent on
    poller = EpollPoller()
    master, node = pair(context, (zmq.ROUTER, zmq.DEALER), "c")
    poller.register(node, zmq.POLLIN)
    node.send(b"hello")
    identity, _ = master.recv_multipart()
    assert node not in dict(poller.poll(0))
    master.send_multipart([identity, b"welcome"])
    deadline = time.monotonic() + 5
    while not node.poll(0) and time.monotonic() < deadline:  # as a send would, this takes the signal
        time.sleep(0.01)
    context.sent.clear()
    node.send(b"heartbeat")
    assert context.sent == {node}
    poller.recheck(context.sent)
    assert dict(poller.poll(0)).get(node) == zmq.POLLIN
    assert node.recv() == b"welcome"
    poller.close()
    context.destroy(linger=0)


def test_plain_descriptors_and_unregistering(context):
    poller = EpollPoller()
    exited = os.eventfd(0, os.EFD_NONBLOCK)
    receiver, _ = pair(context, (zmq.PULL, zmq.PUSH), "d")
    poller.register(exited, zmq.POLLIN)
    poller.register(receiver, zmq.POLLIN)
    assert poller.poll(20) == []
    os.eventfd_write(exited, 1)
    assert poll_until(poller, exited)[exited] == zmq.POLLIN
    poller.unregister(exited)
    poller.unregister(receiver)
    assert poller.poll(20) == []
    os.close(exited)
    poller.close()
