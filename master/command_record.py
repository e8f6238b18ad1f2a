"""The record of every administrative command, done or refused: who asked what, when, and what came of
it (``gang admin log``; docs/operations.md). Slurm keeps such a trail only in its daemons' logs; here
it is in the store, written in the same commit as what the command changed."""

import logging
from typing import TypeVar

from gangsched.master.clock import Now
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.protocol.admin_messages import (
    LIMIT_FIELDS,
    AdminAction,
    AdminLog,
    AdminLogQuery,
    JobAction,
    JobControl,
    JobUpdate,
    NodeUpdate,
    SetLimits,
    Tokened,
)
from gangsched.protocol.dependency_text import dependency_text
from gangsched.protocol.durations import format_duration
from gangsched.protocol.messages import ErrorReply, Message, Reconfigure, SetUser
from gangsched.protocol.reservation_messages import ReservationCreate, ReservationDelete, ReservationUpdate

log = logging.getLogger("gangsched.master")

Reply = TypeVar("Reply", bound=Message)
Recorded = (NodeUpdate | JobControl | JobUpdate | SetLimits | SetUser | Reconfigure | ReservationCreate
            | ReservationUpdate | ReservationDelete)
_ADMIN_ACTIONS = (JobAction.SUSPEND, JobAction.RESUME)  # gang admin suspend|resume; the others are gang's own


class CommandRecord:
    def __init__(self, store: JobStore) -> None:
        self._store = store

    def recorded(self, command: Recorded, reply: Reply, now: Now) -> Reply:
        """``command`` answered by ``reply``, recorded; the reply as it goes back."""
        result = f"refused: {reply.reason}" if isinstance(reply, ErrorReply) else "done"
        user = _user(command)
        token = command.token if isinstance(command, Tokened) else None
        try:
            self._store.record_action(now.wall, user, words(command), result, token)
        except StoreWriteError as error:
            log.error("the job store cannot record %s's command %r (%s)", user, words(command), error)
        return reply

    def earlier(self, command: Recorded) -> AdminAction | None:
        """The record of this command, if the client sent it before with the same token (a retry)."""
        if not isinstance(command, Tokened) or command.token is None:
            return None
        return self._store.action_of_token(_user(command), command.token)

    def query(self, message: AdminLogQuery) -> AdminLog:
        actions = self._store.admin_log(message.after, message.limit + 1)
        return AdminLog(actions=actions[:message.limit], more=len(actions) > message.limit)


def _user(command: Recorded) -> str:
    return command.user if isinstance(command, (JobControl, JobUpdate)) else command.admin


def words(command: Recorded) -> str:
    """The command as ``gang`` is asked for it."""
    match command:
        case NodeUpdate():
            reason = "" if command.reason is None else f" --reason {command.reason!r}"
            return f"admin node {command.action} {command.nodes}{reason}"
        case JobControl():
            jobs = " ".join(map(str, command.job_ids))
            return f"{'admin ' if command.action in _ADMIN_ACTIONS else ''}{command.action} {jobs}"
        case JobUpdate():
            return f"update {command.job_id} {' '.join(_update_words(command))}"
        case SetLimits():
            partition = "" if command.partition is None else f" -p {command.partition}"
            given = " ".join(f"--{name.replace('_', '-')} {getattr(command, name)}" for name in LIMIT_FIELDS
                             if getattr(command, name) is not None)
            return f"admin limit {command.user}{partition} {given}".rstrip()
        case SetUser():
            if command.political_priority is not None:
                return f"admin priority {command.user} {command.political_priority:g}"
            quota = "none" if command.clear_quota or command.quota_processor_s is None \
                else f"{command.quota_processor_s:g}"
            return f"admin quota {command.user} {quota}"
        case Reconfigure():
            return "admin reconfigure"
        case ReservationCreate() | ReservationUpdate():
            verb = "create" if isinstance(command, ReservationCreate) else "update"
            fields = command.model_dump(include={"nodes", "start", "duration", "users", "flags"}, mode="json")
            options = [f"--{name} {value if isinstance(value, str) else ','.join(value)}"
                       for name, value in fields.items() if value is not None and value != []]
            return " ".join([f"admin reservation {verb} {command.name}", *options])
        case ReservationDelete():
            return f"admin reservation delete {command.name}"


def _update_words(command: JobUpdate) -> list[str]:
    """The KEY=VALUE pairs of an update, as Slurm's scontrol names them."""
    words = []
    if command.time_limit_s is not None:
        words.append(f"TimeLimit={format_duration(command.time_limit_s)}")
    if command.name is not None:
        words.append(f"Name={command.name}")
    if command.dependency is not None:
        words.append("Dependency=" + (dependency_text(command.dependency.model_dump()) or "none"))
    if command.partition is not None:
        words.append(f"Partition={command.partition}")
    if command.priority is not None:
        words.append(f"Priority={command.priority:g}")
    return words
