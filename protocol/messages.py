"""Every message of the wire protocol, one pydantic model each, and their one union ``Message``
(the models are in protocol/node_messages.py and protocol/client_messages.py).

Three conversations share these models:

* node daemon <-> master, over the node's DEALER and the master's ROUTER:
  ``NodeHello`` / ``NodeWelcome``, ``LaunchTask``, ``KillTask``,
  ``CheckpointTask``, ``NodeColumn``, ``ExitAck``, ``PmiFence`` / ``PmiFenceDone`` (an MPI
  job's key-value space, exchanged at each PMI barrier), ``PmixModexRequest`` /
  ``PmixModexReply`` (a rank's PMIx data, asked of its node through the master) and
  ``ErrorReply``;
* node daemon -> master, over PUSH/PULL: ``QuantumReport``, ``Heartbeat`` and
  ``TaskExit``, in the order the node sent them;
* master -> every node, over PUB/SUB: ``SlotSwitch``, once per quantum (the rows
  to run; each node's ``NodeColumn`` of the matrix comes over its DEALER);
* client (the ``gang`` CLI, benchmarks) <-> master, request and reply over the
  ROUTER: ``Submit``, ``Cancel``, ``JobQuery``, ``JobCountQuery``, ``NodeQuery``, ``MatrixQuery``,
  ``SwitchStatsQuery``, ``StatsQuery``, ``SetUser``, ``Reconfigure``, ``UserQuery``, and those of
  day-to-day operation (protocol/admin_messages.py): ``NodeUpdate``, ``JobControl``,
  ``JobUpdate``, ``SetLimits``, ``AdminLogQuery``, and reservations
  (protocol/reservation_messages.py): ``ReservationCreate``, ``ReservationUpdate``,
  ``ReservationDelete``, ``ReservationQuery``, and those of leadership
  (protocol/leadership_messages.py): ``MastersQuery``, ``Takeover``, and a step's start
  (protocol/step_messages.py): ``StartStep``; each answered by its reply model
  or by ``ErrorReply``, or by a standby master with ``NotLeader``.

Every message of the leader to nodes is ``FromLeader``: it carries the leader's epoch.

Times named ``*_ns`` are CLOCK_MONOTONIC nanoseconds (shared by processes and
containers of one host); times named ``*_time`` are Unix seconds.
"""

from typing import Annotated

from pydantic import Field

from gangsched.protocol.admin_messages import (
    AdminLog,
    AdminLogQuery,
    JobControl,
    JobsControlled,
    JobUpdate,
    JobUpdated,
    NodesUpdated,
    NodeUpdate,
    SetLimits,
)
from gangsched.protocol.client_messages import (
    Cancel,
    Cancelled,
    ErrorReply,
    Histogram,
    JobCount,
    JobCountQuery,
    JobCounts,
    JobList,
    JobQuery,
    MasterStats,
    MatrixQuery,
    MatrixView,
    NodeList,
    NodeQuery,
    Reconfigure,
    Reconfigured,
    SetUser,
    SignalJob,
    Signalled,
    StatsQuery,
    Submit,
    Submitted,
    SwitchStats,
    SwitchStatsQuery,
    UserList,
    UserQuery,
)
from gangsched.protocol.leadership_messages import (
    MastersList,
    MastersQuery,
    NotLeader,
    Takeover,
    TakeoverRequested,
)
from gangsched.protocol.node_messages import (
    MAX_REPORT_QUANTA,
    CheckpointTask,
    ExitAck,
    Heartbeat,
    KillTask,
    LaunchTask,
    NodeColumn,
    NodeHello,
    NodeWelcome,
    PmiFence,
    PmiFenceDone,
    PmixModexReply,
    PmixModexRequest,
    QuantumAccount,
    QuantumReport,
    SignalTask,
    SlotSwitch,
    TaskExit,
)
from gangsched.protocol.reservation_messages import (
    ReservationCreate,
    ReservationDelete,
    ReservationList,
    ReservationQuery,
    ReservationUpdate,
)
from gangsched.protocol.step_messages import StartStep, StepStarted

__all__ = [
    "MAX_REPORT_QUANTA",
    "Message",
    "AdminLog",
    "AdminLogQuery",
    "JobControl",
    "JobsControlled",
    "JobUpdate",
    "JobUpdated",
    "NodesUpdated",
    "NodeUpdate",
    "SetLimits",
    "ReservationCreate",
    "ReservationDelete",
    "ReservationList",
    "ReservationQuery",
    "ReservationUpdate",
    "MastersList",
    "MastersQuery",
    "NotLeader",
    "Takeover",
    "TakeoverRequested",
    "Cancel",
    "Cancelled",
    "CheckpointTask",
    "ErrorReply",
    "ExitAck",
    "Heartbeat",
    "Histogram",
    "JobList",
    "JobQuery",
    "KillTask",
    "SignalTask",
    "SignalJob",
    "Signalled",
    "LaunchTask",
    "JobCount",
    "JobCountQuery",
    "JobCounts",
    "MasterStats",
    "MatrixQuery",
    "MatrixView",
    "NodeColumn",
    "NodeHello",
    "NodeList",
    "NodeQuery",
    "NodeWelcome",
    "PmiFence",
    "PmiFenceDone",
    "PmixModexReply",
    "PmixModexRequest",
    "QuantumAccount",
    "QuantumReport",
    "Reconfigure",
    "Reconfigured",
    "SetUser",
    "SlotSwitch",
    "StartStep",
    "StatsQuery",
    "StepStarted",
    "Submit",
    "Submitted",
    "SwitchStats",
    "SwitchStatsQuery",
    "TaskExit",
    "UserList",
    "UserQuery",
]

Message = Annotated[
    NodeHello
    | NodeWelcome
    | Heartbeat
    | LaunchTask
    | KillTask
    | SignalTask
    | CheckpointTask
    | PmiFence
    | PmiFenceDone
    | PmixModexRequest
    | PmixModexReply
    | TaskExit
    | ExitAck
    | NodeColumn
    | SlotSwitch
    | QuantumReport
    | Submit
    | Submitted
    | Cancel
    | Cancelled
    | SignalJob
    | Signalled
    | JobQuery
    | JobList
    | JobCountQuery
    | JobCounts
    | NodeQuery
    | NodeList
    | MatrixQuery
    | MatrixView
    | SwitchStatsQuery
    | SwitchStats
    | StatsQuery
    | MasterStats
    | SetUser
    | Reconfigure
    | Reconfigured
    | UserQuery
    | UserList
    | NodeUpdate
    | NodesUpdated
    | JobControl
    | JobsControlled
    | JobUpdate
    | JobUpdated
    | SetLimits
    | ReservationCreate
    | ReservationUpdate
    | ReservationDelete
    | ReservationQuery
    | ReservationList
    | AdminLogQuery
    | AdminLog
    | MastersQuery
    | MastersList
    | Takeover
    | TakeoverRequested
    | StartStep
    | StepStarted
    | NotLeader
    | ErrorReply,
    Field(discriminator="type"),
]
