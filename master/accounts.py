"""Users as the administrator sets them: a political priority and a quota (Talby & Feitelson 1999; docs/policies.md).

Slack-based backfilling prices a job by the priorities of its user (UP, given
at submission), of the site (PP, political) and of the scheduler. A user over
quota has PP = -1: their new jobs get infinite slack, so any other job may
delay them. Use (``Use``) is charged as it accrues, each quantum: the
processor-seconds a job holds (its processors x the quanta it ran in), the
CPU-seconds its tasks used as their nodes report them, the byte-seconds of
the memory it committed in those quanta; the quota counts processor-seconds.
The store has a user's use as of the last close of one of their jobs.
"""

from dataclasses import dataclass
from typing import NamedTuple

from gangsched.protocol.records import UserInfo


class Use(NamedTuple):
    """What a job (and a user, over their jobs) used, charged as it accrued. A tuple, cheap to build: each report
    of a node charges one (docs/limits.md, "A node report's charge")."""

    processor_s: float = 0.0  # processors held x the quanta they ran in
    cpu_s: float = 0.0  # CPU time its tasks used, as the nodes reported it
    memory_byte_s: float = 0.0  # bytes committed x the quanta they ran in

    def __add__(self, other: tuple[object, ...]) -> "Use":  # the sum of two uses, not tuple concatenation
        assert isinstance(other, Use)
        return Use(self.processor_s + other.processor_s, self.cpu_s + other.cpu_s,
                   self.memory_byte_s + other.memory_byte_s)

OVER_QUOTA = -1.0


@dataclass
class Account:
    user: str
    political_priority: float = 0.0
    quota_processor_s: float | None = None
    used: Use = Use()

    def charge(self, use: Use) -> None:
        """What one of the user's jobs used since it was last charged."""
        self.used = self.used + use

    @property
    def over_quota(self) -> bool:
        return self.quota_processor_s is not None and self.used.processor_s >= self.quota_processor_s

    @property
    def priority_for_policy(self) -> float:
        return OVER_QUOTA if self.over_quota else self.political_priority

    def info(self) -> UserInfo:
        return UserInfo(user=self.user, political_priority=self.political_priority,
                        quota_processor_s=self.quota_processor_s, used_processor_s=self.used.processor_s,
                        used_cpu_s=self.used.cpu_s, used_memory_byte_s=self.used.memory_byte_s,
                        over_quota=self.over_quota)
