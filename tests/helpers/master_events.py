"""The events a driven master's tests give it most: nodes saying hello, jobs submitted, what it sent."""

from pathlib import Path

from gangsched.master.node_events import NodeEndpoints
from gangsched.master.settings import MasterSettings
from gangsched.protocol.messages import (
    JobQuery,
    Message,
    NodeHello,
    Submit,
    TaskExit,
)
from gangsched.protocol.records import JobSpec, MpiKind, PeerEndpoint, TaskRef
from tests.helpers.driven_master import DrivenMaster

SETTINGS = MasterSettings(quantum_ms=100, heartbeat_ms=100, heartbeat_misses=3, policy="gs", mpl=2,
                          state_dir=Path("/nonexistent"))


ENDPOINTS = NodeEndpoints(switch="ipc:///tmp/s", report="ipc:///tmp/r")


def hello(core: DrivenMaster, node: str, tasks: list[TaskRef] = (), incarnation: str = "first",
          mpi: tuple[MpiKind, ...] = (), welcomed: int = 0, exits: list[TaskExit] = (),
          processors: int = 1) -> Message | None:
    # memory enough that it never binds: these tests (and the master replaying the simulator) are of processors
    return core.node_events.hello(node.encode(), NodeHello(
        node=node, cpu_share=0.5, processors=processors, pid=1, incarnation=incarnation, tasks=list(tasks),
        peer=PeerEndpoint(transport="ipc", host="/tmp"), mpi=list(mpi), memory=1 << 40, host_memory=1 << 40,
        welcomed=welcomed, exits=list(exits)))


def submit(core: DrivenMaster, nodes: int = 4, requeue: bool = False) -> int:
    spec = JobSpec(name="j", user="alice", tasks=nodes, argv=["true"], requeue=requeue)
    return core.clients.submit(Submit(spec=spec)).job_id


def infos(core: DrivenMaster, job_ids: list[int]) -> list:
    return core.clients.query_jobs(JobQuery(job_ids=job_ids)).jobs


def sent(core: DrivenMaster, kind: type) -> list:
    found = [(node, message) for node, message in core.outbox if isinstance(message, kind)]
    core.outbox.clear()
    return found
