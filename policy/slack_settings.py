"""What slack-based backfilling (policy/slack.py) is set up with: its weights, and the order in which it
compresses delayed jobs; apart from the policy, so that a setting or a command line names them without
loading it."""

from dataclasses import dataclass
from enum import StrEnum


class Heuristic(StrEnum):
    AST = "ast"  # ascending scheduled time
    AAT = "aat"  # ascending arrival time
    DU = "du"  # descending utilization n·t
    DC = "dc"  # descending cost of one second's delay
    DP = "dp"  # descending priority, then arrival


@dataclass(frozen=True)
class SlackSettings:
    slack_factor: float = 3.0  # SF
    average_wait_s: float = 2401.0  # AWT, the site's yearly average (KTH under conservative)
    heuristic: Heuristic = Heuristic.AST
    utilization_weight: float = 1.0  # αu
    time_weight: float = 1.0  # αt
    priority_weight: float = 1.0  # αp
    fairness_weight: float = 1.0  # αf
