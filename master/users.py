"""The administrator's settings of users (root only): a political priority and a quota, which
slack-based backfilling prices jobs by (master/accounts.py), and the limits of what a user may have
at once (master/user_limits.py); and their listing, with what each used."""

import dataclasses
import logging
import pwd

from gangsched.master.accounts import Account
from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_table import JobTable
from gangsched.master.matrices import Matrices
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.master.user_limits import EVERY_PARTITION, Admission
from gangsched.protocol.admin_messages import SetLimits
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import ErrorReply, SetUser, UserList
from gangsched.protocol.records import UserLimits

log = logging.getLogger("gangsched.master")


class Users:
    def __init__(self, store: JobStore, table: JobTable, admission: Admission, matrices: Matrices,
                 endings: Endings) -> None:
        self._store = store
        self._table = table
        self._admission = admission
        self._matrices = matrices
        self._endings = endings

    def set_user(self, message: SetUser) -> UserList | ErrorReply:
        """The administrator's word on a user: it counts for the jobs they submit from now on."""
        if message.admin != "root":
            return ErrorReply(code=ErrorCode.PERMISSION_DENIED,
                              reason=f"only root sets users' priorities and quotas, not {message.admin}")
        account = self._table.account(message.user)
        if message.political_priority is not None:
            account = dataclasses.replace(account, political_priority=message.political_priority)
        if message.quota_processor_s is not None or message.clear_quota:
            account = dataclasses.replace(account, quota_processor_s=message.quota_processor_s)
        self._store.save_account(account)
        self._table.account_written(account)
        log.info("user %s: political priority %g, quota %s processor-s", account.user, account.political_priority,
                 account.quota_processor_s)
        return self.query_users()

    def set_limits(self, message: SetLimits, now: Now) -> UserList | ErrorReply:
        """A user's limits, for every partition or one; the jobs they now admit go to their queues."""
        refusal = self._limits_refusal(message)
        if refusal is not None:
            return ErrorReply.nothing_changed(
                ErrorCode.PERMISSION_DENIED if message.admin != "root" else ErrorCode.INVALID_SPEC, refusal)
        key = (message.user, message.partition or EVERY_PARTITION)
        limits = message.applied_to(self._admission.limits.get(key, UserLimits(partition=message.partition)))
        try:
            self._store.save_limits(message.user, limits)
        except StoreWriteError as error:
            return ErrorReply.nothing_changed(ErrorCode.INTERNAL, f"the job store cannot write ({error})")
        for job in self._admission.set(message.user, limits):
            self._endings.enqueue(job, now)
        log.info("user %s: limits %s", message.user, limits.model_dump(exclude_none=True) or "none")
        return self.query_users()

    def _limits_refusal(self, message: SetLimits) -> str | None:
        if message.admin != "root":
            return f"only root sets users' limits, not {message.admin}"
        if not known_user(message.user):
            return f"no user {message.user} on the master's host"
        if message.partition is not None and self._matrices.named(message.partition) is None:
            return f"no partition {message.partition!r}"
        if all(getattr(message, name) is None for name in ("max_submit_jobs", "max_jobs", "max_cpus", "max_memory")):
            return "no limit given (--max-submit-jobs, --max-jobs, --max-cpus, --max-memory; -1 lifts one)"
        return None

    def query_users(self) -> UserList:
        accounts, admission = self._table.accounts, self._admission
        names = sorted(set(accounts) | {user for user, _ in admission.limits})
        return UserList(users=[(accounts.get(user) or Account(user)).info().model_copy(
            update={"limits": admission.of(user)}) for user in names])


def known_user(name: str) -> bool:
    """Whether the master's host has an account ``name``."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
