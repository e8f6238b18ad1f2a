"""Talking to a master with the protocol's models: each request a model, each reply validated
into its model (the transport and the errors: ``connection``)."""

import time
import uuid
from collections.abc import Iterable
from typing import TypeVar

from pydantic import BaseModel

from gangsched.client.connection import MasterConnection, MasterUnreachable, RequestRefused
from gangsched.protocol.admin_messages import (
    AdminAction,
    AdminLog,
    AdminLogQuery,
    JobAction,
    JobControl,
    JobsControlled,
    JobUpdate,
    JobUpdated,
    NodeAction,
    NodesUpdated,
    NodeUpdate,
    SetLimits,
)
from gangsched.protocol.array_ranges import IndexRange
from gangsched.protocol.codec import encode, validated
from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.leadership_messages import MasterInfo, MasterRole
from gangsched.protocol.messages import (
    Cancel,
    Cancelled,
    JobCount,
    JobCountQuery,
    JobCounts,
    MastersList,
    MastersQuery,
    MasterStats,
    MatrixQuery,
    MatrixView,
    Message,
    NodeList,
    NodeQuery,
    Reconfigure,
    Reconfigured,
    SetUser,
    StatsQuery,
    Submit,
    Submitted,
    SwitchStats,
    SwitchStatsQuery,
    Takeover,
    TakeoverRequested,
    UserList,
    UserQuery,
)
from gangsched.protocol.records import JobInfo, JobSpec, JobState, NodeInfo, StepSpec, UserInfo
from gangsched.protocol.reservation_messages import (
    ReservationCreate,
    ReservationDelete,
    ReservationFlag,
    ReservationInfo,
    ReservationList,
    ReservationQuery,
    ReservationUpdate,
)
from gangsched.protocol.step_messages import StartStep, StepStarted

__all__ = ["MasterClient", "MasterUnreachable", "RequestRefused"]

Reply = TypeVar("Reply", bound=BaseModel)
# the administrative commands, each with a token: one sent again is answered as the first was
Command = NodeUpdate | JobControl | JobUpdate | SetLimits | ReservationCreate | ReservationUpdate | ReservationDelete


class MasterClient(MasterConnection):
    def request(self, message: Message, expect: type[Reply]) -> Reply:
        try:
            reply = validated(self.exchange(encode(message)), (expect,))
        except ProtocolError as error:
            raise self.malformed(str(error)) from None
        assert isinstance(reply, expect)
        return reply

    def submit(self, spec: JobSpec, retry_s: float = 0.0) -> int:
        return self.submit_jobs(spec, None, retry_s)[0]

    def submit_jobs(self, spec: JobSpec, array: list[IndexRange] | None, retry_s: float = 0.0,
                    array_limit: int | None = None, hold: bool = False) -> list[int]:
        """Submit a job, or one per index of ``array`` (at most ``array_limit`` of them running at once);
        for ``retry_s`` seconds more, again while the master does not answer (a restart). Every try
        carries the same token, so the jobs are made once whichever reply was lost."""
        message = Submit(spec=spec, token=uuid.uuid4().hex, array=array, array_limit=array_limit, hold=hold)
        return self._retried(message, Submitted, retry_s).job_ids

    def _retried(self, message: Message, expect: type[Reply], retry_s: float) -> Reply:
        """``message`` (with a token) asked, and for ``retry_s`` seconds more asked again while the master
        does not answer (a restart): the token makes every try one request to the master."""
        deadline = time.monotonic() + retry_s
        while True:
            try:
                return self.request(message, expect)
            except MasterUnreachable:
                if time.monotonic() >= deadline:
                    raise

    def command(self, message: Command, expect: type[Reply], retry_s: float = 0.0) -> Reply:
        """An administrative command, with a token of its own, asked as ``_retried`` asks."""
        return self._retried(message.model_copy(update={"token": message.token or uuid.uuid4().hex}), expect,
                             retry_s)

    def cancel(self, job_id: int, user: str) -> Cancelled:
        return self.request(Cancel(job_id=job_id, user=user), Cancelled)

    def start_step(self, job_id: int, user: str, step: StepSpec) -> int:
        """Start ``step`` in running job ``job_id``'s allocation: the step's id."""
        return self.request(StartStep(job_id=job_id, user=user, step=step), StepStarted).step_id

    def set_user(self, user: str, political_priority: float | None = None, quota_processor_s: float | None = None,
                 clear_quota: bool = False) -> list[UserInfo]:
        message = SetUser(admin=self._user, user=user, political_priority=political_priority,
                          quota_processor_s=quota_processor_s, clear_quota=clear_quota)
        return self.request(message, UserList).users

    def users(self) -> list[UserInfo]:
        return self.request(UserQuery(), UserList).users

    def jobs(self, job_ids: list[int] | None = None, include_finished: bool = False,
             ended_after: float | None = None, states: Iterable[JobState] | None = None, arrays: bool = False,
             most: int | None = None) -> list[JobInfo]:
        """As ``job_maps``, as JobInfo."""
        try:
            return [JobInfo.model_validate(job) for job in self.job_maps(
                job_ids, include_finished, ended_after, None if states is None else [state.value for state in states],
                arrays=arrays, most=most)]
        except ValueError as error:  # pydantic's ValidationError
            raise self.malformed(f"a job that is no JobInfo: {error}") from None

    def wait_until_running(self, job_ids: list[int], timeout_s: float) -> list[JobInfo]:
        """Until every job runs and its rank 0 has been measured once; RuntimeError on a job that ended."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            jobs = self.jobs(job_ids)
            ended = [job for job in jobs if job.state.is_final]
            if ended:
                raise RuntimeError(f"job {ended[0].job_id} ended: {ended[0].state} ({ended[0].reason})")
            if all(job.state is JobState.RUNNING and job.barriers_time for job in jobs):
                return jobs
            time.sleep(0.1)
        raise RuntimeError(f"jobs {job_ids} did not all start within {timeout_s:g} s")

    def job(self, job_id: int) -> JobInfo:
        jobs = self.jobs([job_id])
        if not jobs:
            raise RequestRefused(ErrorCode.UNKNOWN_JOB, f"no job {job_id}")
        return jobs[0]

    def nodes(self) -> list[NodeInfo]:
        try:
            return [NodeInfo.model_validate(node) for node in self.node_maps()]
        except ValueError as error:  # pydantic's ValidationError
            raise self.malformed(f"a node that is no NodeInfo: {error}") from None

    def node_list(self) -> NodeList:
        """The nodes with all the master says of them, and its --mpi-default (``nodes`` reads only the nodes)."""
        return self.request(NodeQuery(), NodeList)

    def reconfigure(self) -> Reconfigured:
        """Have the master read its configuration file again (root only)."""
        return self.request(Reconfigure(admin=self._user), Reconfigured)

    def update_nodes(self, nodes: str, action: NodeAction, reason: str | None = None) -> NodesUpdated:
        """Drain, resume or take down the nodes of a hostlist (root only)."""
        return self.command(NodeUpdate(admin=self._user, nodes=nodes, action=action, reason=reason), NodesUpdated)

    def masters(self) -> list[MasterInfo]:
        """The masters that share the store, each with its role (any master answers)."""
        return self.request(MastersQuery(), MastersList).masters

    def leader(self) -> MasterInfo | None:
        """The master that leads; None while none does (a takeover under way) or none answers."""
        try:
            return next((master for master in self.masters() if master.role is MasterRole.ACTIVE), None)
        except MasterUnreachable:
            return None

    def takeover(self, to: str | None = None) -> TakeoverRequested:
        """Move the lead to ``to`` (None: to the standby asked, or the freshest standby); root only."""
        return self.request(Takeover(admin=self._user, to=to), TakeoverRequested)

    def control_jobs(self, action: JobAction, job_ids: list[int], retry_s: float = 0.0) -> JobsControlled:
        """Hold, release, suspend, resume or requeue jobs: all of them, or none."""
        return self.command(JobControl(user=self._user, action=action, job_ids=job_ids), JobsControlled, retry_s)

    def update_job(self, job_id: int, fields: dict[str, object], retry_s: float = 0.0) -> JobUpdated:
        """Change what a job asked for (``JobUpdate``'s fields: name, time_limit_s, dependency, partition,
        priority)."""
        return self.command(JobUpdate.model_validate({"user": self._user, "job_id": job_id, **fields}), JobUpdated,
                            retry_s)

    def set_limits(self, user: str, partition: str | None = None, **limits: int | None) -> list[UserInfo]:
        """Set a user's limits (``SetLimits``' fields; -1 lifts one), in every partition or one (root only)."""
        message = SetLimits(admin=self._user, user=user, partition=partition, **limits)
        return self.command(message, UserList).users

    def create_reservation(self, name: str, nodes: str, start: str, duration: str, users: list[str] | None,
                           flags: list[ReservationFlag]) -> list[ReservationInfo]:
        message = ReservationCreate(admin=self._user, name=name, nodes=nodes, start=start, duration=duration,
                                    users=users, flags=flags)
        return self.command(message, ReservationList).reservations

    def update_reservation(self, name: str, **fields: object) -> list[ReservationInfo]:
        """Change a reservation: ``ReservationUpdate``'s fields given (None: as it is)."""
        message = ReservationUpdate.model_validate({"admin": self._user, "name": name, **fields})
        return self.command(message, ReservationList).reservations

    def delete_reservation(self, name: str) -> list[ReservationInfo]:
        return self.command(ReservationDelete(admin=self._user, name=name), ReservationList).reservations

    def reservations(self) -> list[ReservationInfo]:
        return self.request(ReservationQuery(), ReservationList).reservations

    def admin_log(self) -> list[AdminAction]:
        """Every administrative command the master recorded, oldest first."""
        actions: list[AdminAction] = []
        while True:
            page = self.request(AdminLogQuery(after=actions[-1].number if actions else 0), AdminLog)
            actions += page.actions
            if not page.more:
                return actions

    def matrix(self, partition: str | None = None) -> MatrixView:
        """A partition's matrix; None: the default partition's."""
        return self.request(MatrixQuery(partition=partition), MatrixView)

    def switch_stats(self, last: int) -> SwitchStats:
        return self.request(SwitchStatsQuery(last=last), SwitchStats)

    def job_counts(self) -> list[JobCount]:
        return self.request(JobCountQuery(), JobCounts).counts

    def stats(self) -> MasterStats:
        return self.request(StatsQuery(), MasterStats)
