"""A job's endpoints that anyone may reach, tried as another account would: rank 0's barrier answers only
peers that carry the launch's token, and the I/O server serves only writes that carry their job's token.
Real ZeroMQ sockets in this process, and a real I/O server."""

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq

from gangsched.jobs.runtime import Barrier, IoClient
from gangsched.protocol.job_tokens import io_token

TOKEN = b"0123456789abcdef0123456789abcdef"


def free_tcp_endpoint() -> str:
    """A port free a moment ago, as the master hands out one of a node's range to a job's rank 0."""
    with socket.socket() as probe:  # the kernel's own: free again at its close (ZeroMQ's closes later)
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def test_rank_0s_barrier_counts_only_peers_with_the_launchs_token_and_each_once():
    address = free_tcp_endpoint()
    rank0 = Barrier(0, 3, address, address, TOKEN)
    released = threading.Event()
    threading.Thread(target=lambda: (rank0.wait(), released.set()), daemon=True).start()
    attacker = zmq.Context.instance().socket(zmq.DEALER)
    attacker.setsockopt(zmq.LINGER, 0)
    attacker.connect(address)
    for _ in range(1000):
        attacker.send(b"")  # the empty frames that had ended a job TIMEOUT
    attacker.send(b"x" * len(TOKEN))
    ranks = [Barrier(rank, 3, address, None, TOKEN) for rank in (1, 2)]
    threading.Thread(target=ranks[0].wait, daemon=True).start()
    attacker.send(TOKEN[:-1] + b"!")
    assert not released.wait(0.5), "rank 0 left its barrier with one of its two peers"
    assert not attacker.poll(100), "rank 0 answered a socket that showed no token"
    ranks[1].wait()
    assert released.wait(5), "rank 0 did not leave its barrier once every peer arrived"
    for each in (rank0, *ranks):
        each.close()
    attacker.close()


@pytest.fixture
def io_server(tmp_path):
    key = tmp_path / "io.key"
    key.write_bytes(b"k" * 32)
    endpoint = f"ipc://{tmp_path}/io.sock"
    server = subprocess.Popen([sys.executable, "-m", "gangsched.cli", "ioserver", "--bind", endpoint, "--key",
                               str(key), "--service-us", "0", "--realtime-priority", "0"])
    deadline = time.monotonic() + 15
    while not Path(endpoint.removeprefix("ipc://")).exists():
        assert time.monotonic() < deadline and server.poll() is None, "the I/O server did not start"
        time.sleep(0.02)
    yield endpoint, key.read_bytes()
    server.terminate()
    server.wait(10)


@pytest.mark.live
def test_the_io_server_serves_only_writes_with_their_jobs_token(io_server):
    endpoint, key = io_server
    IoClient(endpoint, 7, io_token(key, 7)).write(b"data")  # served: it returns
    for job, token in [(7, ""), (8, io_token(key, 7)), (7, io_token(b"other" * 7, 7))]:
        with pytest.raises(RuntimeError, match="refused the write"):
            IoClient(endpoint, job, token).write(b"data")
    raw = zmq.Context.instance().socket(zmq.REQ)
    raw.setsockopt(zmq.LINGER, 0)
    raw.connect(endpoint)
    raw.send(b"a write with no job")
    assert raw.poll(5000) and raw.recv() == b"refused"
    raw.close()
    assert Path(endpoint.removeprefix("ipc://")).stat().st_mode & 0o777 == 0o666  # every account's jobs write
