"""Which part of the master's core answers each message (the loop's routing tables, master/loop.py): a
handler may take its own message class rather than the whole union; each is given the clocks as read
for its event."""

import time
from collections.abc import Callable
from typing import Any

from gangsched.master.clock import Now
from gangsched.master.core import MasterCore
from gangsched.master.leadership import Lead
from gangsched.master.standby import leadership_answer
from gangsched.protocol.messages import (
    AdminLogQuery,
    Cancel,
    ErrorReply,
    Heartbeat,
    JobControl,
    JobCountQuery,
    JobQuery,
    JobUpdate,
    MastersQuery,
    MatrixQuery,
    Message,
    NodeHello,
    NodeQuery,
    NodeUpdate,
    PmiFence,
    PmixModexReply,
    PmixModexRequest,
    QuantumReport,
    Reconfigure,
    Reconfigured,
    ReservationCreate,
    ReservationDelete,
    ReservationQuery,
    ReservationUpdate,
    SetLimits,
    SetUser,
    SignalJob,
    StartStep,
    StatsQuery,
    Submit,
    SwitchStatsQuery,
    Takeover,
    TaskExit,
    UserQuery,
)

Handler = Callable[[bytes, Any, Now], Message | None]


def node_report_routes(core: MasterCore) -> dict[type, Handler]:
    """What the nodes send unasked, on the report socket (only the nodes' key reaches it): reports, heartbeats,
    exits, and what their MPI process managers exchange through the master, which may take a whole message.
    The ends of tasks are decided in one scheduling pass after each drain of it (master/loop.py), not each
    on its own."""
    reports, exits, pmi = core.node_reports, core.task_exits, core.pmi_relay
    return {
        QuantumReport: lambda _, m, now: reports.report(m, now),
        Heartbeat: lambda _, m, now: reports.heartbeat(m, now),
        TaskExit: lambda _, m, now: exits.ended(m, now),
        PmiFence: lambda _, m, now: pmi.pmi_fence(m, now),
        PmixModexRequest: lambda _, m, _now: pmi.pmix_modex_request(m),
        PmixModexReply: lambda _, m, _now: pmi.pmix_modex_reply(m),
    }


def request_routes(core: MasterCore, lead: Lead, reconfigure: Callable[[Reconfigure, Now], Reconfigured | ErrorReply],
                   resident_bytes: Callable[[], int]) -> dict[type, Handler]:
    """What clients and nodes ask on the ROUTER."""
    nodes, clients, record = core.node_events, core.client_requests, core.command_record
    return {
        NodeHello: nodes.hello,
        Submit: lambda _, m, now: clients.submit(m, now),
        Cancel: lambda _, m, now: clients.cancel(m, now),
        StartStep: lambda _, m, now: core.step_starts.start(m, now),
        SignalJob: lambda _, m, __: core.job_signals.send(m),
        JobQuery: lambda _, m, now: clients.query_jobs(m, now),
        JobCountQuery: lambda _, m, now: clients.count_jobs(now),
        NodeQuery: lambda _, m, now: clients.query_nodes(now),
        MatrixQuery: lambda _, m, __: clients.query_matrix(m),
        SwitchStatsQuery: lambda _, m, __: core.switch_stats(m.last, time.process_time_ns()),
        StatsQuery: lambda _, m, __: core.stats(time.process_time_ns(), resident_bytes()),
        SetUser: lambda _, m, now: core.administer(m, now),
        Reconfigure: lambda _, m, now: record.recorded(m, reconfigure(m, now), now),
        UserQuery: lambda _, m, __: core.users.query_users(),
        NodeUpdate: lambda _, m, now: core.administer(m, now),
        JobControl: lambda _, m, now: core.administer(m, now),
        JobUpdate: lambda _, m, now: core.administer(m, now),
        SetLimits: lambda _, m, now: core.administer(m, now),
        ReservationCreate: lambda _, m, now: core.administer(m, now),
        ReservationUpdate: lambda _, m, now: core.administer(m, now),
        ReservationDelete: lambda _, m, now: core.administer(m, now),
        ReservationQuery: lambda _, m, __: core.reservation_book.query(),
        AdminLogQuery: lambda _, m, __: record.query(m),
        MastersQuery: lambda _, m, __: leadership_answer(lead, m),
        Takeover: lambda _, m, __: leadership_answer(lead, m),
    }
