"""Unix accounts the tests make, removed at the end of the session."""

import pwd

from gangsched.deploy.unix_accounts import unix_account as deploy_unix_account

made_accounts: list[str] = []


def unix_account(name: str) -> pwd.struct_passwd | None:
    """The account ``name``, made (no home, /bin/sh) where the tests run as root; None elsewhere.

    Accounts made here are removed when the session ends (see ``_test_machine_state``)."""
    found = deploy_unix_account(name)
    if found is None:
        return None
    account, made = found
    if made:
        made_accounts.append(name)
    return account
