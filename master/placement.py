"""Where a job's tasks go, in node names: its shape as the topology reads it, the ranks per
node that MPI's process mapping describes, and the launch message of each task."""

from dataclasses import dataclass
from pathlib import Path

from gangsched.master.job_record import Job
from gangsched.master.job_steps import Step
from gangsched.policy.live_scheduler import Processor
from gangsched.policy.memory import MemoryRequest
from gangsched.protocol import task_environment
from gangsched.protocol.messages import LaunchTask
from gangsched.protocol.output_pattern import expand
from gangsched.protocol.records import JobSpec, MpiKind, StepSpec, TaskSpec
from gangsched.protocol.sizes import readable
from gangsched.protocol.slurm_environment import job_variables, slurm_step, step_variables, task_variables


@dataclass
class Shape:
    """A job's placement request as the topology and the memory book read it."""

    job_id: int
    procs: int
    nodes: int | None
    tasks_per_node: int | None
    cpus_per_task: int
    memory: MemoryRequest
    estimate: float = 0.0  # the topologies it is measured against hold no reservation

    @classmethod
    def of(cls, spec: JobSpec) -> "Shape":
        return cls(0, spec.processors, spec.nodes, spec.tasks_per_node, spec.cpus_per_task, memory_request(spec))


def memory_request(spec: JobSpec) -> MemoryRequest:
    return MemoryRequest(per_node=spec.mem_per_node or 0, per_task=spec.mem_per_cpu or 0)


def describe_shape(spec: JobSpec, memory: bool = True) -> str:
    words = f"{spec.tasks} processors" if spec.cpus_per_task == 1 else \
        f"{spec.tasks} task{'s' if spec.tasks > 1 else ''} of {spec.cpus_per_task} processors"
    if spec.nodes is not None:
        words += f" on {spec.nodes} nodes"
    if spec.tasks_per_node is not None:
        words += f", at most {spec.tasks_per_node} a node"
    if memory and spec.mem_per_node is not None:
        words += f", {readable(spec.mem_per_node)} of memory on each node"
    if memory and spec.mem_per_cpu is not None:
        words += f", {readable(spec.mem_per_cpu)} of memory per task"
    return words


def processors_of(job: Job) -> list[Processor]:
    return [Processor(node, index) for node, index in zip(job.node_names, job.processors, strict=True)]


def where(processors: list[Processor]) -> str:
    return ",".join(f"{processor.node}:{processor.number}" for processor in processors)


def block(nodes: list[str]) -> list[int]:
    """Ranks per node, in the order of their first rank: the policy's columns keep each node's ranks together."""
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node] = counts.get(node, 0) + 1
    if sum(1 for previous, node in zip(nodes, nodes[1:]) if previous != node) != len(counts) - 1:
        raise ValueError(f"the ranks of one node are not consecutive: {nodes}")
    return list(counts.values())


def job_patterns(job_id: int, step_id: int, spec: JobSpec, env: dict[str, str], command: StepSpec | None = None) \
        -> tuple[dict[str, str], str | None, str | None]:
    """The tasks' environment (``env``, the job's or its step's) and output and error patterns (the step's
    ``command``'s where it gives them, else the job's), with what the master fills in: the job, its step and its
    name and user (``%j``, ``%s``, ``%J``, ``%x``, ``%u``), a job of an array's ids (``%A``, ``%a``,
    ``GANG_ARRAY_*``); the node fills in the task's (noded/task_processes.py)."""
    step = slurm_step(spec, step_id)
    values: dict[str, object] = {"j": job_id, "s": step, "J": job_id if step == "batch" else f"{job_id}.{step}",
                                 "x": spec.name, "u": spec.user}
    environment = env
    if spec.array_job_id is not None and spec.array_index is not None:
        values |= {"A": spec.array_job_id, "a": spec.array_index}
        environment = {**env, task_environment.ARRAY_JOB_ID: str(spec.array_job_id),
                       task_environment.ARRAY_TASK_ID: str(spec.array_index)}
    patterns = (spec.output, spec.error) if command is None or command.output is None else \
        (command.output, command.error)
    output, error = (pattern and expand(pattern, values, final=False) for pattern in patterns)
    return environment, output, error


@dataclass(frozen=True)
class Rendezvous:
    """Where a job's ranks meet: rank 0's barrier address and bind, and MASTER_ADDR:MASTER_PORT; and the
    launch's secret, which rank 0 checks what reaches it by."""

    barrier_addr: str
    barrier_bind: str | None
    master: str | None
    token: str


def launches(job: Job, step: Step, meet: Rendezvous, kvsname: str, io: tuple[str, str | None] | None,
             checkpoint_dir: Path | None, restore: bool, run_in: int | None,
             cluster: str) -> list[tuple[str, LaunchTask]]:
    """The launch of each task of ``step`` of ``job``, by node; ``io``: the I/O server's address and the job's
    token for it; ``run_in``: the switch in whose idle processors its tasks start running (None: they start as
    the switch in force says); ``cluster``: the name its Slurm variables give."""
    spec = job.spec
    processors = [Processor(job.node_names[slot], job.processors[slot]) for slot in step.slots]
    grain = spec.cpus_per_task
    ranks_per_node = block([processor.node for processor in processors])
    nodes_order = list(dict.fromkeys(processor.node for processor in processors))
    command = step.spec
    mpi = (spec.mpi if command is None or command.mpi is None else command.mpi) or MpiKind.NONE
    nodes = nodes_order if mpi is MpiKind.PMIX else []
    env = spec.env if command is None or command.env is None else command.env
    streams = spec.streams if command is None else command.streams
    environment, output, error = job_patterns(job.job_id, step.step_id, spec, env, command)
    allocation = dict.fromkeys(job.node_names, 0)  # processors per node, in the allocation's order
    for name in job.node_names:
        allocation[name] += 1
    environment = {**environment, **job_variables(job.job_id, spec, list(allocation), list(allocation.values()),
                                                  spec.partition or "", cluster, job.requeues),
                   **step_variables(spec, step.step_id, nodes_order, ranks_per_node)}
    step_nodes = {name: (index, sum(ranks_per_node[:index])) for index, name in enumerate(nodes_order)}
    launched = []
    for rank, processor in enumerate(processors):
        index, first_rank = step_nodes[processor.node]
        own = task_variables(spec, step.step_id, rank, processor.node, index, rank - first_rank,
                             allocation[processor.node])
        launched.append((processor.node, LaunchTask(task=TaskSpec(
            job_id=job.job_id,
            step=step.step_id,
            rank=rank,
            size=len(processors),
            user=spec.user,
            processors=job.processors[step.slots[rank]:step.slots[rank] + grain],
            block=ranks_per_node,
            nodes=nodes,
            mpi=mpi,
            kvsname=kvsname,
            rendezvous=meet.master,
            argv=spec.argv if command is None else command.argv,
            cwd=spec.cwd if command is None or command.cwd is None else command.cwd,
            env={**environment, **own},
            barrier_addr=meet.barrier_addr,
            barrier_bind=meet.barrier_bind,
            job_token=meet.token,
            io_addr=None if io is None else io[0],
            io_token=None if io is None else io[1],
            output=output,
            checkpoint=checkpoint_path(job, rank, checkpoint_dir) if step.step_id == 0 else None,
            restore=restore,
            memory_limit=task_memory(spec, ranks_per_node[index]),
            umask=0o022 if spec.umask is None else spec.umask,
            script=spec.script if command is None else None,
            error=error,
            open_mode="append" if job.requeues else spec.open_mode,  # a run again adds to the first's output
            whole_environment=spec.whole_environment,
            streams=streams,
        ), run_in=run_in)))
    return launched


def task_memory(spec: JobSpec, tasks_on_node: int) -> int | None:
    """A task's share of its job's request: --mem-per-cpu for each of its processors, or --mem split between
    its tasks on the node."""
    if spec.mem_per_cpu is not None:
        return spec.mem_per_cpu * spec.cpus_per_task
    if spec.mem_per_node is not None:
        return max(1, spec.mem_per_node // tasks_on_node)
    return None


def committed_memory(placed: list[Job]) -> dict[str, int]:
    """Per node, the bytes the placed jobs commit there, in all its rows."""
    committed: dict[str, int] = {}
    for job in placed:
        request = memory_request(job.spec)
        for node in set(job.node_names):
            committed[node] = committed.get(node, 0) + request.on_node(job.node_names.count(node))
    return committed


def limit_of(job: Job, step: Step, rank: int) -> int:
    """The memory limit rank ``rank`` of ``step`` of ``job`` ran under (0 if none)."""
    nodes = [job.node_names[slot] for slot in step.slots]
    return task_memory(job.spec, nodes.count(nodes[rank])) or 0


def checkpoint_path(job: Job, rank: int, checkpoint_dir: Path | None) -> str | None:
    if checkpoint_dir is None or not job.spec.migratable:
        return None
    # each user's checkpoints in a folder of theirs (the node makes it 0700), not readable by other jobs
    return str(checkpoint_dir / job.spec.user / f"job-{job.job_id}" / f"rank-{rank}")
