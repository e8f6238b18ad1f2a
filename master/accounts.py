"""Users as the administrator sets them: a political priority and a quota (Talby & Feitelson 1999; docs/policies.md).

Slack-based backfilling prices a job by the priorities of its user (UP, given
at submission), of the site (PP, political) and of the scheduler. A user over
quota has PP = -1: their new jobs get infinite slack, so any other job may
delay them. Use is counted in node-seconds of run time (nodes x the time in
the quanta the job ran in), added when a job ends.
"""

from dataclasses import dataclass

from gangsched.protocol.records import UserInfo

OVER_QUOTA = -1.0


@dataclass
class Account:
    user: str
    political_priority: float = 0.0
    quota_node_s: float | None = None
    used_node_s: float = 0.0

    @property
    def over_quota(self) -> bool:
        return self.quota_node_s is not None and self.used_node_s >= self.quota_node_s

    @property
    def priority_for_policy(self) -> float:
        return OVER_QUOTA if self.over_quota else self.political_priority

    def info(self) -> UserInfo:
        return UserInfo(user=self.user, political_priority=self.political_priority, quota_node_s=self.quota_node_s,
                        used_node_s=self.used_node_s, over_quota=self.over_quota)
