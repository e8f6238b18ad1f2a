"""The tree a site divides its machine by: accounts under accounts, users in accounts, each with shares
(Slurm's associations, as `sacctmgr` keeps them; docs/policies.md, "Fair share").

Every account but ``root`` has a parent account and a number of shares of
its parent; a user is in one or more accounts, with shares in each, and one
of them is their default (where a job without ``--account`` is charged).
A share counts only against its siblings': an account of 2 beside one of 1
is meant two thirds of what their parent is meant. The tree is a value:
checked whole when it is built, so that no half-built tree is ever in use.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ROOT = "root"


class AssociationError(ValueError):
    """A tree that cannot be: one line naming the account, user or value at fault."""


@dataclass(frozen=True)
class AccountShare:
    name: str
    parent: str  # ROOT for an account at the top
    shares: int = 1


@dataclass(frozen=True)
class UserShare:
    user: str
    account: str
    shares: int = 1


@dataclass(frozen=True)
class Node:
    """One association as Fair Tree walks it: an account, or a user within an account."""

    account: str
    user: str | None  # None: the account itself
    shares: int

    @property
    def is_user(self) -> bool:
        return self.user is not None


class AssociationTree:
    def __init__(self, accounts: Iterable[AccountShare] = (), users: Iterable[UserShare] = (),
                 default_accounts: Mapping[str, str] | None = None) -> None:
        """``default_accounts``: user -> their default account; a user without one defaults to the first
        account they were added to."""
        self.accounts: dict[str, AccountShare] = {}
        for account in accounts:
            if account.name in self.accounts or account.name == ROOT:
                raise AssociationError(f"account {account.name!r} is defined twice")
            self.accounts[account.name] = account
        self.users: dict[tuple[str, str], UserShare] = {}
        for user in users:
            key = (user.user, user.account)
            if key in self.users:
                raise AssociationError(f"user {user.user!r} is in account {user.account!r} twice")
            self.users[key] = user
        self._check_accounts()
        self.default_accounts: dict[str, str] = {}
        for name, default in (default_accounts or {}).items():
            if (name, default) not in self.users:
                raise AssociationError(f"user {name!r} is not in account {default!r}, their default account")
            self.default_accounts[name] = default
        for user_share in self.users.values():
            self.default_accounts.setdefault(user_share.user, user_share.account)
        self._children: dict[str, list[Node]] = {ROOT: []}
        for account in self.accounts.values():
            self._children.setdefault(account.name, [])
            self._children.setdefault(account.parent, []).append(Node(account.name, None, account.shares))
        for user_share in self.users.values():
            self._children[user_share.account].append(Node(user_share.account, user_share.user, user_share.shares))

    def _check_accounts(self) -> None:
        for account in self.accounts.values():
            if account.shares <= 0:
                raise AssociationError(f"account {account.name!r}: shares must be above 0, got {account.shares}")
            if account.parent != ROOT and account.parent not in self.accounts:
                raise AssociationError(f"account {account.name!r}: unknown parent account {account.parent!r}")
        for user in self.users.values():
            if user.shares <= 0:
                raise AssociationError(f"user {user.user!r} in account {user.account!r}: shares must be above 0, "
                                       f"got {user.shares}")
            if user.account != ROOT and user.account not in self.accounts:
                raise AssociationError(f"user {user.user!r}: unknown account {user.account!r}")
        for account in self.accounts.values():
            seen = [account.name]
            parent = account.parent
            while parent != ROOT:
                if parent in seen:
                    raise AssociationError(f"account {account.name!r}: its parents make a cycle: "
                                           f"{' -> '.join([*seen, parent])}")
                seen.append(parent)
                parent = self.accounts[parent].parent

    def children(self, account: str) -> list[Node]:
        """The accounts and users directly under ``account``, in the order they were defined."""
        return self._children[account]

    def user_count(self) -> int:
        return len(self.users)

    def accounts_of(self, user: str) -> list[str]:
        return [account for (name, account) in self.users if name == user]

    def account_for(self, user: str, asked: str | None) -> str:
        """The account a job of ``user`` is charged to: ``asked`` (``--account``) if they are in it, else their
        default; one line when it cannot be."""
        if asked is None:
            default = self.default_accounts.get(user)
            if default is None:
                raise AssociationError(f"user {user!r} is in no account")
            return default
        if asked != ROOT and asked not in self.accounts:
            raise AssociationError(f"unknown account {asked!r}")
        if (user, asked) not in self.users:
            raise AssociationError(f"user {user!r} is not in account {asked!r}")
        return asked

    def ancestors(self, account: str) -> list[str]:
        """``account`` and every account above it, up to and with ``root``."""
        chain = [account]
        while account != ROOT:
            account = self.accounts[account].parent
            chain.append(account)
        return chain


def equal_shares(users: Iterable[str], account: str = ROOT) -> AssociationTree:
    """Every user in one account, each with one share: fair share between users alone."""
    return AssociationTree(users=[UserShare(user, account) for user in sorted(set(users))])
