"""A client's socket in plain Python (client/zmtp.py) against real pyzmq sockets: a ROUTER answers it as it
answers a pyzmq DEALER, on ipc and tcp; a master that comes up late is waited for; whatever is not a
ZeroMQ socket without keys gets one clear line, and no answer gets "no answer"."""

import socket
import threading
import time

import pytest
import zmq

from gangsched.client.connection import MasterConnection, MasterUnreachable
from gangsched.client.zmtp import ZmtpDealer
from gangsched.protocol.frames import pack, unpack


def serve(router: zmq.Socket, answers: int, extra_frame: bool = False) -> threading.Thread:
    """Answer ``answers`` requests with their own type and the routing id they came from."""

    def answer() -> None:
        for _ in range(answers):
            identity, frame = router.recv_multipart()
            reply = [identity, pack({"type": unpack(frame)["type"], "from": identity.decode()})]
            router.send_multipart(reply + ([b"more"] if extra_frame else []))

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def router():
    context = zmq.Context()
    socket_ = context.socket(zmq.ROUTER)
    socket_.setsockopt(zmq.LINGER, 0)
    yield socket_
    socket_.close()
    context.term()


def test_a_router_answers_it_on_ipc_and_tcp_as_it_answers_a_pyzmq_dealer(router, tmp_path):
    router.bind(f"ipc://{tmp_path}/master.sock")
    port = router.bind_to_random_port("tcp://127.0.0.1")
    serve(router, 3, extra_frame=True)
    for endpoint in (f"ipc://{tmp_path}/master.sock", f"tcp://127.0.0.1:{port}"):
        with MasterConnection(endpoint, timeout_s=5) as master:
            reply = master.exchange(pack({"type": "job_query"}))
        assert reply["type"] == "job_query" and reply["from"].startswith("client-")
    large = {"type": "submit", "argv": ["x" * 100_000]}  # frames past 255 bytes have 8-byte sizes
    with MasterConnection(f"ipc://{tmp_path}/master.sock", timeout_s=5) as master:
        assert master.exchange(pack(large))["type"] == "submit"


def test_a_master_that_comes_up_late_is_waited_for_until_the_deadline(router, tmp_path):
    endpoint = f"ipc://{tmp_path}/master.sock"

    def late() -> None:
        time.sleep(0.3)  # a restart
        router.bind(endpoint)
        serve(router, 1)

    threading.Thread(target=late, daemon=True).start()
    with MasterConnection(endpoint, timeout_s=5) as master:
        assert master.exchange(pack({"type": "stats_query"}))["type"] == "stats_query"
    started = time.monotonic()
    with pytest.raises(MasterUnreachable, match="no answer from the master at ipc://.*/none.sock within 0.5 s"):
        MasterConnection(f"ipc://{tmp_path}/none.sock", timeout_s=0.5).exchange(pack({"type": "stats_query"}))
    assert time.monotonic() - started >= 0.4


def test_a_peer_that_is_not_a_master_without_keys_gets_one_clear_line(tmp_path):
    context = zmq.Context()
    curve = context.socket(zmq.ROUTER)
    curve.setsockopt(zmq.LINGER, 0)
    public, secret = zmq.curve_keypair()
    curve.curve_server, curve.curve_secretkey = True, secret
    curve.bind(f"ipc://{tmp_path}/curve.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(f"{tmp_path}/http.sock")
    listener.listen()

    def not_zeromq() -> None:
        connection, _ = listener.accept()
        connection.recv(64)
        connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" + bytes(64))

    threading.Thread(target=not_zeromq, daemon=True).start()
    try:
        with pytest.raises(MasterUnreachable, match="answered: .*does not speak ZMTP 3"):
            MasterConnection(f"ipc://{tmp_path}/http.sock", timeout_s=5).exchange(pack({"type": "stats_query"}))
        with pytest.raises(MasterUnreachable, match="a master with keys lets in only a client with keys"):
            MasterConnection(f"ipc://{tmp_path}/curve.sock", timeout_s=5).exchange(pack({"type": "stats_query"}))
    finally:
        listener.close()
        curve.close()
        context.term()


def test_a_ping_of_the_peer_is_answered_and_a_silent_peer_times_out(router, tmp_path):
    router.setsockopt(zmq.HEARTBEAT_IVL, 50)  # the router pings its peers every 50 ms (ZMTP 3.1)
    router.setsockopt(zmq.HEARTBEAT_TIMEOUT, 300)
    router.bind(f"ipc://{tmp_path}/master.sock")
    dealer = ZmtpDealer(f"ipc://{tmp_path}/master.sock", b"client-test")
    dealer.send(pack({"type": "stats_query"}), time.monotonic() + 5)
    identity, _ = router.recv_multipart()
    assert dealer.receive(time.monotonic() + 0.6) is None  # pings come and are answered; no message
    router.send_multipart([identity, b"late"])  # the connection outlived the router's heartbeat timeout
    assert dealer.receive(time.monotonic() + 5) == b"late"
    dealer.close()


def test_a_master_that_comes_back_with_keys_gets_the_keys_line_not_no_answer(router, tmp_path):
    endpoint = f"ipc://{tmp_path}/master.sock"
    router.bind(endpoint)
    serve(router, 1)
    master = MasterConnection(endpoint, timeout_s=5)
    assert master.exchange(pack({"type": "stats_query"}))["type"] == "stats_query"
    router.unbind(endpoint)
    router.close()  # gone; back on the same socket with keys
    context = zmq.Context()
    curve = context.socket(zmq.ROUTER)
    curve.setsockopt(zmq.LINGER, 0)
    curve.curve_server, curve.curve_secretkey = True, zmq.curve_keypair()[1]
    curve.bind(endpoint)
    try:
        with pytest.raises(MasterUnreachable, match="a master with keys lets in only a client with keys"):
            master.exchange(pack({"type": "stats_query"}))
    finally:
        master.close()
        curve.close()
        context.term()


def test_a_request_whose_master_went_is_sent_again_to_the_master_that_comes_back(tmp_path):
    endpoint = f"ipc://{tmp_path}/master.sock"
    context = zmq.Context()
    first = context.socket(zmq.ROUTER)
    first.setsockopt(zmq.LINGER, 0)
    first.bind(endpoint)
    serve(first, 1)
    master = MasterConnection(endpoint, timeout_s=5)
    assert master.exchange(pack({"type": "stats_query"}))["type"] == "stats_query"
    first.close()  # killed: the connection breaks under the next request
    second = context.socket(zmq.ROUTER)
    second.setsockopt(zmq.LINGER, 0)

    def restarted() -> None:
        time.sleep(0.3)
        second.bind(endpoint)
        serve(second, 1)

    threading.Thread(target=restarted, daemon=True).start()
    try:
        assert master.exchange(pack({"type": "job_query"}))["type"] == "job_query"
    finally:
        master.close()
        second.close()
        context.term()
