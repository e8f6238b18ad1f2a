"""`gang bench pty`: the time a key takes to come back as its echo from an interactive shell, typed into a
pseudo-terminal as a user's terminal would be: a local ``bash``; ``srun --pty bash`` on a cluster with no
other row; the same while a job of another row holds the shell's processor, so that the shell runs every
other quantum; and a real Slurm's ``srun --pty bash`` where one is given.

Each key is typed after a pause drawn at random (seeded) up to ``GAP_S``, so that keys fall at every phase
of the rotation, and read back as the shell's readline echoes it, in raw mode: it is the shell that
echoes, not the terminal's line discipline, so a key typed while the shell is frozen waits for its turn."""

import fcntl
import os
import pty
import random
import select
import statistics
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

KEY = b"x"
GAP_S = 0.1
PROMPT = "gang-bench$ "
LINE_KEYS = 20  # keys typed before the line is given up (^C: a new prompt), so the line never wraps
_SHELL = ["bash", "--norc", "--noprofile", "-i"]


def _take_terminal() -> None:
    """In the child, a session leader by then: its stdin, the terminal, as its controlling terminal (so that
    the terminal's size changes and its hangup signal it, as a user's terminal does)."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class ShellTerminal:
    """A command run on a pseudo-terminal of its own, its controlling terminal, typed into and read back."""

    def __init__(self, command: list[str], environment: dict[str, str], rows: int = 24, columns: int = 80) -> None:
        self._master, slave = pty.openpty()
        try:
            self.resize(rows, columns)
            self.process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                                            preexec_fn=_take_terminal,
                                            env={**environment, "PS1": PROMPT, "TERM": "xterm"})
        finally:
            os.close(slave)
        self._seen = b""

    def resize(self, rows: int, columns: int) -> None:
        """The window's size changed, as a terminal emulator says it (SIGWINCH to the command)."""
        fcntl.ioctl(self._master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    def read_until(self, wanted: bytes, deadline_s: float) -> bytes:
        """Its output until ``wanted`` came (and that), which is not read again."""
        end = time.monotonic() + deadline_s
        while wanted not in self._seen:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{wanted!r} did not come within {deadline_s} s: {self._seen[-200:]!r}")
            if select.select([self._master], [], [], left)[0]:
                try:
                    self._seen += os.read(self._master, 4096)
                except OSError:  # EIO: the command closed its terminal
                    raise TimeoutError(f"the terminal closed before {wanted!r} came: {self._seen[-200:]!r}") from None
        end_of = self._seen.index(wanted) + len(wanted)
        came, self._seen = self._seen[:end_of], self._seen[end_of:]
        return came

    def type(self, data: bytes) -> None:
        os.write(self._master, data)

    def hang_up(self) -> None:
        """The terminal closed (its window, or the connection it was at): SIGHUP to the command."""
        if self._master >= 0:
            os.close(self._master)
            self._master = -1

    def close(self) -> None:
        """``exit`` typed to the shell, which is waited for (killed if it does not end)."""
        if self._master >= 0:
            self.type(b"\x03")  # the line given up; then exit, once the shell took the interrupt (what comes
            try:  # with it is flushed by the terminal)
                self.read_until(PROMPT.encode(), 10)
            except TimeoutError:
                pass
            self.type(b"exit\r")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.hang_up()


def echo_latencies(command: list[str], environment: dict[str, str], keys: int, seed: int = 1) -> list[float]:
    """Milliseconds from each of ``keys`` keys typed to its echo, from the shell ``command`` starts."""
    draw = random.Random(seed)
    terminal = ShellTerminal(command, environment)
    try:
        terminal.read_until(PROMPT.encode(), 120)
        taken = []
        for typed in range(keys):
            if typed and typed % LINE_KEYS == 0:
                terminal.type(b"\x03")
                terminal.read_until(PROMPT.encode(), 30)
            time.sleep(draw.uniform(0, GAP_S))
            start = time.perf_counter()
            terminal.type(KEY)
            terminal.read_until(KEY, 30)
            taken.append((time.perf_counter() - start) * 1000)
        return taken
    finally:
        terminal.close()


def figures(name: str, taken: list[float]) -> dict[str, Any]:
    ordered = sorted(taken)
    return {"shell": name, "keys": len(ordered), "median_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))], 2),
            "max_ms": round(ordered[-1], 2)}


def srun_shell(srun: Path) -> list[str]:
    return [str(srun), "--pty", *_SHELL]


def local_shell() -> list[str]:
    return list(_SHELL)
