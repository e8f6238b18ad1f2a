"""What proves a message comes from a task of a job, where anyone may reach the endpoint it goes to.

* A job's own endpoints (rank 0's barrier, MASTER_PORT): the master gives every task of one launch the
  same random token (``GANG_JOB_TOKEN``); rank 0 answers only what carries it.
* The cluster's I/O server: it holds a key the master holds too, and each task of a job carries the key's
  HMAC of the job's id (``GANG_IO_TOKEN``), which the server checks before it serves a write.
"""

import hashlib
import hmac

IO_SERVED, IO_REFUSED = b"", b"refused"  # the I/O server's answers to a write


def io_token(key: bytes, job_id: int) -> str:
    """The token a task of job ``job_id`` shows the I/O server."""
    return hmac.new(key, str(job_id).encode(), hashlib.sha256).hexdigest()


def is_io_token(key: bytes, job_id: bytes, token: bytes) -> bool:
    """Whether ``token`` is the I/O token of the job whose id ``job_id`` spells (compared in constant time)."""
    if not job_id.isdigit() or len(job_id) > 20:
        return False
    return hmac.compare_digest(io_token(key, int(job_id)).encode(), token)
