"""The frames between a step's tasks' node daemons and the srun that started it (``StepStreams``).

srun binds a ZeroMQ ROUTER; each node that runs tasks of the step connects a DEALER to it and sends, for
each of its tasks, ``[token, kind, rank, data]``: ``hello`` once (so that srun knows the node before any
output), ``out`` and ``err`` with bytes of the task's stdout and stderr as they come, and ``out-end`` and
``err-end`` when a stream is closed. srun answers a node with ``[kind, rank, data]``: ``in`` with bytes of
its standard input for the task that reads it, ``in-end`` when that input ended, and, for a step on a
pseudo-terminal (``StepStreams.pty``), ``winch`` with the user's terminal's size as the kernel's ``struct
winsize`` (``WINSIZE_BYTES``: rows, columns, pixels across and down, each an unsigned short) when it
changes, as the first frame too; a terminal's task has one stream, ``out``, its stderr being its stdout,
and its ``err-end`` follows its hello. A frame without the
step's token, or of another kind, is dropped by srun and said in its log: the token is what only the
master and the step's nodes were given.

Plain code, without pydantic: srun's start reads it."""

HELLO, OUT, ERR, OUT_END, ERR_END = b"hello", b"out", b"err", b"out-end", b"err-end"
IN, IN_END, WINCH = b"in", b"in-end", b"winch"
FROM_SRUN = (IN, IN_END, WINCH)
WINSIZE_BYTES = 8
TO_SRUN = (HELLO, OUT, ERR, OUT_END, ERR_END)
CHUNK = 65536  # the most bytes of a stream in one frame: what one read of a pipe gives
