"""A task that speaks fuzzed PMI: ``python -m gangsched.bench.pmi_fuzz_task SEED LINES [pmi1|pmi2]``.

Run as a rank of a job submitted with ``--mpi pmi1`` (or ``pmi2``): it writes LINES
fuzzed lines (see ``fuzz.pmi_lines``; PMI-2: ``fuzz.pmi2_commands``) to the socket in
PMI_FD at once, then waits until the node daemon closes the channel (it failed the
job) or 30 s pass.
"""

import os
import random
import socket
import sys

from gangsched.bench.fuzz import pmi2_commands, pmi_lines


def main() -> None:
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed * 100_003 + int(os.environ["PMI_RANK"]))
    channel = socket.socket(fileno=int(os.environ["PMI_FD"]))
    channel.settimeout(30)
    try:
        fuzzed = pmi2_commands if sys.argv[3:] == ["pmi2"] else pmi_lines
        channel.sendall(b"".join(fuzzed(rng, count)))
        while channel.recv(65536):
            pass
    except OSError:  # closed under us, or no answer: either way this task is done
        pass


if __name__ == "__main__":
    main()
