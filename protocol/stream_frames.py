"""The frames between a step's tasks' node daemons and the srun that started it (``StepStreams``).

srun binds a ZeroMQ ROUTER; each node that runs tasks of the step connects a DEALER to it and sends, for
each of its tasks, ``[token, kind, rank, data]``: ``hello`` once (so that srun knows the node before any
output), ``out`` and ``err`` with bytes of the task's stdout and stderr as they come, and ``out-end`` and
``err-end`` when a stream is closed. srun answers a node with ``[kind, rank, data]``: ``in`` with bytes of
its standard input for the task that reads it, and ``in-end`` when that input ended. A frame without the
step's token, or of another kind, is dropped by srun and said in its log: the token is what only the
master and the step's nodes were given.

Plain code, without pydantic: srun's start reads it."""

HELLO, OUT, ERR, OUT_END, ERR_END = b"hello", b"out", b"err", b"out-end", b"err-end"
IN, IN_END = b"in", b"in-end"
TO_SRUN = (HELLO, OUT, ERR, OUT_END, ERR_END)
CHUNK = 65536  # the most bytes of a stream in one frame: what one read of a pipe gives
