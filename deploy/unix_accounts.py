"""A second Unix account for the tests and benchmarks that submit as another user."""

import os
import pwd
import subprocess


def unix_account(name: str) -> tuple[pwd.struct_passwd, bool] | None:
    """The account ``name`` and whether it was made here (no home, /bin/sh); None where this process
    is not root and the account does not exist. Whoever made it removes it (``remove_unix_account``)."""
    try:
        return pwd.getpwnam(name), False
    except KeyError:
        if os.geteuid() != 0:
            return None
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
    return pwd.getpwnam(name), True


def remove_unix_account(name: str) -> None:
    subprocess.run(["userdel", name], check=False)
