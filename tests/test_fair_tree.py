"""The association tree and Fair Tree's factors, against the rules Slurm's Fair Tree documentation gives
(policy/associations.py, policy/fair_tree.py)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.policy.associations import (
    ROOT,
    AccountShare,
    AssociationError,
    AssociationTree,
    UserShare,
    equal_shares,
)
from gangsched.policy.fair_tree import fair_share_factors, standings


def two_accounts(shares_a: int = 1, shares_b: int = 1) -> AssociationTree:
    return AssociationTree(
        [AccountShare("A", ROOT, shares_a), AccountShare("B", ROOT, shares_b)],
        [UserShare("a1", "A"), UserShare("a2", "A"), UserShare("b1", "B"), UserShare("b2", "B")])


def test_no_use_ranks_everyone_first() -> None:
    """With no use every level fair share is infinite: all tie, and every user has 1.0."""
    factors = fair_share_factors(two_accounts(), {})
    assert factors == dict.fromkeys([("a1", "A"), ("a2", "A"), ("b1", "B"), ("b2", "B")], 1.0)


def test_every_user_of_a_higher_account_ranks_above_every_user_of_a_lower_one() -> None:
    """'If accounts A and B are siblings and A has a higher fairshare factor than B, all children of A will
    have higher fairshare factors than all children of B': a1 used far more than its share of A, b2 nothing
    of B, yet A used less of the machine than B."""
    factors = fair_share_factors(two_accounts(), {("a1", "A"): 3.0, ("b1", "B"): 4.0})
    assert min(factors[("a1", "A")], factors[("a2", "A")]) > max(factors[("b1", "B")], factors[("b2", "B")])
    assert factors == {("a2", "A"): 1.0, ("a1", "A"): 0.75, ("b2", "B"): 0.5, ("b1", "B"): 0.25}


def test_sibling_users_of_one_level_fair_share_share_a_rank() -> None:
    tree = equal_shares(["u1", "u2", "u3"])
    factors = fair_share_factors(tree, {("u1", ROOT): 1.0, ("u2", ROOT): 1.0, ("u3", ROOT): 2.0})
    assert factors == {("u1", ROOT): 1.0, ("u2", ROOT): 1.0, ("u3", ROOT): pytest.approx(1 / 3)}


def test_a_user_tied_with_a_sibling_account_shares_the_rank_of_its_highest_ranked_user() -> None:
    tree = AssociationTree([AccountShare("A", ROOT)], [UserShare("u", ROOT), UserShare("a1", "A"),
                                                        UserShare("a2", "A")])
    factors = fair_share_factors(tree, {("u", ROOT): 1.0, ("a1", "A"): 1.0})
    assert factors == {("u", ROOT): 1.0, ("a2", "A"): 1.0, ("a1", "A"): pytest.approx(1 / 3)}


def test_tied_accounts_have_their_children_ranked_together() -> None:
    """A and B used alike: their users are ranked as one list, each by its level fair share in its own
    account (a2 none, b1 and b2 half of B each, a1 all of A)."""
    usage = {("a1", "A"): 2.0, ("b1", "B"): 1.0, ("b2", "B"): 1.0}
    factors = fair_share_factors(two_accounts(), usage)
    assert factors == {("a2", "A"): 1.0, ("b1", "B"): 0.75, ("b2", "B"): 0.75, ("a1", "A"): 0.25}


def test_shares_weigh_against_use() -> None:
    tree = AssociationTree(users=[UserShare("x", ROOT, 2), UserShare("y", ROOT, 1)])
    assert fair_share_factors(tree, {("x", ROOT): 2.0, ("y", ROOT): 1.0}) == {("x", ROOT): 1.0, ("y", ROOT): 1.0}
    assert fair_share_factors(tree, {("x", ROOT): 1.0, ("y", ROOT): 1.0}) == {("x", ROOT): 1.0, ("y", ROOT): 0.5}


def test_standings_list_the_tree_depth_first_with_its_use_summed_upwards() -> None:
    listed = standings(two_accounts(2, 1), {("a1", "A"): 3.0, ("b1", "B"): 1.0})
    assert [(row.account, row.user) for row in listed] == [
        ("A", None), ("A", "a1"), ("A", "a2"), ("B", None), ("B", "b1"), ("B", "b2")]
    account_a, a1, a2 = listed[:3]
    assert (account_a.norm_shares, account_a.raw_usage, account_a.effective_usage) == (pytest.approx(2 / 3), 3.0,
                                                                                      0.75)
    assert account_a.level_fs == pytest.approx((2 / 3) / 0.75) and account_a.fair_share is None
    assert (a1.effective_usage, a1.level_fs, a2.level_fs) == (1.0, 0.5, math.inf)


def test_a_users_account_is_the_asked_one_if_they_are_in_it_else_their_default() -> None:
    tree = AssociationTree([AccountShare("A", ROOT), AccountShare("B", ROOT)],
                           [UserShare("u", "A"), UserShare("u", "B")], default_accounts={"u": "B"})
    assert tree.account_for("u", None) == "B"
    assert tree.account_for("u", "A") == "A"
    with pytest.raises(AssociationError, match="^user 'v' is in no account$"):
        tree.account_for("v", None)
    with pytest.raises(AssociationError, match="^unknown account 'C'$"):
        tree.account_for("u", "C")
    with pytest.raises(AssociationError, match="^user 'w' is not in account 'A'$"):
        AssociationTree([AccountShare("A", ROOT)], [UserShare("w2", "A")]).account_for("w", "A")
    assert tree.ancestors("A") == ["A", ROOT]


@pytest.mark.parametrize(("accounts", "users", "defaults", "message"), [
    ([AccountShare("A", "nowhere")], [], {}, "account 'A': unknown parent account 'nowhere'"),
    ([AccountShare("A", ROOT, 0)], [], {}, "account 'A': shares must be above 0, got 0"),
    ([AccountShare("A", ROOT)], [UserShare("u", "A", -1)], {}, "user 'u' in account 'A': shares must be above 0, "
                                                               "got -1"),
    ([], [UserShare("u", "A")], {}, "user 'u': unknown account 'A'"),
    ([AccountShare("A", "B"), AccountShare("B", "C"), AccountShare("C", "A")], [], {},
     "account 'A': its parents make a cycle: A -> B -> C -> A"),
    ([AccountShare("A", ROOT), AccountShare("A", ROOT)], [], {}, "account 'A' is defined twice"),
    ([AccountShare("A", ROOT)], [UserShare("u", "A"), UserShare("u", "A")], {}, "user 'u' is in account 'A' twice"),
    ([AccountShare("A", ROOT)], [UserShare("u", "A")], {"u": "B"},
     "user 'u' is not in account 'B', their default account"),
])
def test_a_tree_that_cannot_be_is_refused_in_one_line(accounts: list[AccountShare], users: list[UserShare],
                                                      defaults: dict[str, str], message: str) -> None:
    with pytest.raises(AssociationError) as refused:
        AssociationTree(accounts, users, defaults)
    assert str(refused.value) == message


@st.composite
def trees_with_use(draw: st.DrawFn) -> tuple[AssociationTree, dict[tuple[str, str], float]]:
    count = draw(st.integers(1, 5))
    accounts = [AccountShare(f"acct{index}", draw(st.sampled_from([ROOT, *[f"acct{j}" for j in range(index)]])),
                             draw(st.integers(1, 4))) for index in range(count)]
    users = [UserShare(f"u{index}", draw(st.sampled_from([ROOT, *[a.name for a in accounts]])),
                       draw(st.integers(1, 4))) for index in range(draw(st.integers(1, 8)))]
    use = {(user.user, user.account): float(draw(st.integers(0, 5))) for user in users}
    return AssociationTree(accounts, users), use


@given(trees_with_use())
def test_factors_rank_every_user_with_the_most_deserving_at_one(tree_and_use: tuple[AssociationTree,
                                                                                     dict[tuple[str, str], float]]
                                                                ) -> None:
    tree, use = tree_and_use
    factors = fair_share_factors(tree, use)
    assert set(factors) == set(tree.users)
    assert max(factors.values()) == 1.0
    assert all(0 < factor <= 1 for factor in factors.values())
    # a user who used nothing is never ranked below a sibling user who used something
    for (user, account), factor in factors.items():
        for (other, other_account), other_factor in factors.items():
            if account == other_account and use[(user, account)] == 0 < use[(other, other_account)]:
                assert factor >= other_factor
