"""Which master leads (docs/architecture.md, "Leadership"): a standby answers every request but these
with ``NotLeader``, naming the leader if one leads; ``MastersQuery`` lists the masters that share the
store (``gang admin masters``); ``Takeover`` asks that the lead move to a standby at the leader's next
quantum boundary (``gang admin takeover``, Slurm's ``scontrol takeover``).

Every message the leader sends the nodes carries its ``leader_epoch`` (``FromLeader``), which rises
with each new leader: a node obeys only the newest epoch it has seen.
"""

from enum import StrEnum
from typing import Literal

from pydantic import Field

from gangsched.protocol.records import WireModel


class FromLeader(WireModel):
    """A message of the leader to nodes: the master stamps its epoch on it as it sends it."""

    leader_epoch: int = Field(0, ge=0)


class NotLeader(WireModel):
    """A standby's answer: ask ``leader`` (None: none leads now, as during a takeover; ask again soon)."""

    type: Literal["not_leader"] = "not_leader"
    master: str  # the standby that answers, as it is bound
    leader: str | None = None  # the leader's endpoint, as it is bound


class MasterRole(StrEnum):
    ACTIVE = "active"  # holds the lead
    STANDBY = "standby"  # ready to take it
    DOWN = "down"  # not heard from for three leases


class MasterInfo(WireModel):
    endpoint: str  # its ROUTER, as bound: nodes and clients list it (--master)
    host: str
    pid: int
    role: MasterRole
    epoch: int  # the epoch of its lead; 0 unless active
    seen_s: float  # since it was last heard from


class MastersQuery(WireModel):
    type: Literal["masters_query"] = "masters_query"


class MastersList(WireModel):
    type: Literal["masters_list"] = "masters_list"
    masters: list[MasterInfo]


class Takeover(WireModel):
    """Root moves the lead: to ``to``, or to the standby that receives it, or (received by the leader)
    to the standby heard from last."""

    type: Literal["takeover"] = "takeover"
    admin: str
    to: str | None = Field(None, min_length=1, max_length=1024)


class TakeoverRequested(WireModel):
    type: Literal["takeover_requested"] = "takeover_requested"
    to: str  # the master that takes the lead
    leader: str | None  # the one that leads until its next quantum boundary
    epoch: int  # of the lead that ends
