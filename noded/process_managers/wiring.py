"""What a process manager gives a task before it starts (noded/process_managers/interface.py)."""

import socket
from dataclasses import dataclass, field


@dataclass
class TaskWiring:
    """What a process manager gives a task before it starts: variables, and a socket whose other end
    (``passed``) the task inherits, the daemon keeping ``ours``."""

    environment: dict[str, str] = field(default_factory=dict)
    ours: socket.socket | None = None
    passed: socket.socket | None = None

    def close(self) -> None:
        for end in (self.ours, self.passed):
            if end is not None:
                end.close()
