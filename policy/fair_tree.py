"""Fair Tree: each user association's fair-share factor, from the tree's shares and its decayed use
(Slurm's default algorithm since 19.05, as its Fair Tree documentation describes it; docs/policies.md).

At every level each association has a level fair share LF = S / U: S its
shares over its siblings' and its own, U its use over its parent's (no use:
LF is infinite). Siblings are ranked by LF, highest first, users before
accounts where they tie, and the tree is walked depth first from the top:
every user of an account ranked above a sibling account ranks above every
user of that one. Each user association is given a rank, counting down from
the number of users; its factor is rank / users, so the most deserving user
has 1.0. Ties, as Slurm documents them: users of one LF share a rank; a user
tied with a sibling account shares its rank with the account's highest
ranked user; accounts of one LF have their children merged and ranked
together (each child's LF still against its own parent).
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gangsched.policy.associations import ROOT, AssociationTree, Node

UserKey = tuple[str, str]  # (user, account)


@dataclass(frozen=True)
class Standing:
    """What `sshare -l` shows of one association."""

    account: str
    user: str | None
    shares: int
    norm_shares: float  # S: its shares over its siblings' and its own
    raw_usage: float  # its own use and that of everything under it, decayed
    effective_usage: float  # U: its raw usage over its parent's
    level_fs: float  # S / U (inf: no use)
    fair_share: float | None  # users only: rank / users


def standings(tree: AssociationTree, usage: Mapping[UserKey, float]) -> list[Standing]:
    """Every association of ``tree``, depth first in the tree's order (as `sshare -a` lists them), with its
    factor; ``usage`` is each user association's decayed use (missing: none)."""
    raw = _raw_usage(tree, usage)
    level: dict[Node, tuple[float, float, float]] = {}  # node -> S, U, LF
    _level_fair_shares(tree, ROOT, raw, level)
    factors = _ranked(tree, level)
    listed: list[Standing] = []

    def walk(account: str) -> None:
        for node in tree.children(account):
            norm, effective, lf = level[node]
            listed.append(Standing(node.account, node.user, node.shares, norm, raw[node], effective, lf,
                                   factors.get((node.user, node.account)) if node.user is not None else None))
            if not node.is_user:
                walk(node.account)

    walk(ROOT)
    return listed


def fair_share_factors(tree: AssociationTree, usage: Mapping[UserKey, float]) -> dict[UserKey, float]:
    """Each user association's fair-share factor, in (0, 1]."""
    raw = _raw_usage(tree, usage)
    level: dict[Node, tuple[float, float, float]] = {}
    _level_fair_shares(tree, ROOT, raw, level)
    return _ranked(tree, level)


def _raw_usage(tree: AssociationTree, usage: Mapping[UserKey, float]) -> dict[Node, float]:
    raw: dict[Node, float] = {}

    def total(account: str) -> float:
        summed = 0.0
        for node in tree.children(account):
            own = usage.get((node.user, node.account), 0.0) if node.user is not None else total(node.account)
            raw[node] = own
            summed += own
        return summed

    total(ROOT)
    return raw


def _level_fair_shares(tree: AssociationTree, account: str, raw: Mapping[Node, float],
                       level: dict[Node, tuple[float, float, float]]) -> None:
    children = tree.children(account)
    shares = sum(node.shares for node in children)
    parent_usage = sum(raw[node] for node in children)
    for node in children:
        norm = node.shares / shares
        effective = raw[node] / parent_usage if parent_usage > 0 else 0.0
        level[node] = (norm, effective, norm / effective if effective > 0 else math.inf)
        if not node.is_user:
            _level_fair_shares(tree, node.account, raw, level)


def _ranked(tree: AssociationTree, level: Mapping[Node, tuple[float, float, float]]) -> dict[UserKey, float]:
    users = tree.user_count()
    factors: dict[UserKey, float] = {}
    rank = remaining = users

    def lf(node: Node) -> float:
        return level[node][2]

    def descend(siblings: list[Node], tied: bool) -> None:
        nonlocal rank, remaining
        ordered = sorted(siblings, key=lambda node: (-lf(node), not node.is_user))
        index = 0
        while index < len(ordered):
            node = ordered[index]
            if index > 0:
                tied = lf(node) == lf(ordered[index - 1])
            if node.user is not None:
                if not tied:
                    rank = remaining
                factors[(node.user, node.account)] = rank / users
                remaining -= 1
                index += 1
                continue
            merged = list(tree.children(node.account))
            index += 1
            while index < len(ordered) and not ordered[index].is_user and lf(ordered[index]) == lf(node):
                merged.extend(tree.children(ordered[index].account))
                index += 1
            descend(merged, tied)

    descend(tree.children(ROOT), False)
    return factors
