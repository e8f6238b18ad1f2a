"""Reservations (docs/operations.md, "Reservations"): Slurm's ``scontrol create|update|delete
reservation`` and ``scontrol show reservation``, as ``gang admin reservation``. Root books nodes for
a window of time; jobs submitted with ``--reservation NAME`` run only there and then, time-sharing the
nodes under their partition's gang scheduling; no other job is placed where it would still run when
the window opens. Times and durations are sent as the user spelled them (``now+10minutes``,
``2:00:00``) and read against the master's clock (protocol/times.py, protocol/durations.py).
"""

from enum import StrEnum
from typing import Literal

from pydantic import Field

from gangsched.protocol.admin_messages import Tokened
from gangsched.protocol.records import UserName, WireModel

RESERVATION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ReservationFlag(StrEnum):
    MAINT = "maint"  # a maintenance window: the jobs it keeps off its nodes say so
    IGNORE_JOBS = "ignore_jobs"  # booked even where running jobs would still run when it opens


class ReservationInfo(WireModel):
    name: str = Field(pattern=RESERVATION_NAME)
    nodes: list[str]
    start: float  # Unix time
    end: float
    users: list[UserName] | None = None  # who may submit to it; None: root only
    flags: list[ReservationFlag] = []
    jobs: list[int] = []  # its jobs pending or running


class ReservationCreate(Tokened):
    type: Literal["reservation_create"] = "reservation_create"
    admin: str
    name: str = Field(pattern=RESERVATION_NAME)
    nodes: str = Field(min_length=1, max_length=4096)  # Slurm's hostlist
    start: str = Field("now", min_length=1, max_length=64)  # now, now+10minutes, 2026-12-01T08:00
    duration: str = Field(min_length=1, max_length=64)  # MM, HH:MM:SS, D-HH:MM:SS
    users: list[UserName] | None = None
    flags: list[ReservationFlag] = []


class ReservationUpdate(Tokened):
    """What is given changes; the rest stays."""

    type: Literal["reservation_update"] = "reservation_update"
    admin: str
    name: str = Field(pattern=RESERVATION_NAME)
    nodes: str | None = Field(None, min_length=1, max_length=4096)
    start: str | None = Field(None, min_length=1, max_length=64)
    duration: str | None = Field(None, min_length=1, max_length=64)
    users: list[UserName] | None = None
    flags: list[ReservationFlag] | None = None


class ReservationDelete(Tokened):
    type: Literal["reservation_delete"] = "reservation_delete"
    admin: str
    name: str = Field(pattern=RESERVATION_NAME)


class ReservationQuery(WireModel):
    type: Literal["reservation_query"] = "reservation_query"


class ReservationList(WireModel):
    type: Literal["reservation_list"] = "reservation_list"
    reservations: list[ReservationInfo]
