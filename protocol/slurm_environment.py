"""Slurm's variables in a task's environment, beside gangsched's own (protocol/task_environment.py), as
sbatch(1) and srun(1) set them ("OUTPUT ENVIRONMENT VARIABLES"): what scripts and tools written for Slurm read
to find their job, its allocation and their place in it. The master sets them in every task it launches
(master/placement.py), from the allocation; the node adds the account's numbers (noded/task_processes.py).

The job's own are the same for each of its tasks (``job_variables``); a task's place in the allocation is its
own (``task_variables``). A batch job's batch step (its script, once on the first node) has no step id, as in
Slurm; every other step has Slurm's number for it (``slurm_step``)."""

from collections.abc import Sequence
from functools import lru_cache

from gangsched.protocol.hostlists import collect_hostlist
from gangsched.protocol.records import JobSpec
from gangsched.protocol.step_names import first_step_name, step_name

MEGABYTE = 1024 * 1024


def slurm_step(spec: JobSpec, step: int) -> str:
    """Slurm's name for step ``step`` of a job: ``batch`` for a batch job's step 0, ``extern`` for an salloc
    allocation's, and the steps after it counted from 0 (``srun``'s first is 0); another job counts its own
    from 0, as srun's does."""
    return step_name(first_step_name(spec.script is not None, spec.allocation), step)


@lru_cache(maxsize=256)
def _hostlist(nodes: tuple[str, ...]) -> str:
    return collect_hostlist(list(nodes))


def counts_text(counts: Sequence[int]) -> str:
    """Per-node counts as Slurm writes them (SLURM_TASKS_PER_NODE): equal neighbours as ``N(xK)``, ``2(x2),1``."""
    words: list[str] = []
    index = 0
    while index < len(counts):
        run = 1
        while index + run < len(counts) and counts[index + run] == counts[index]:
            run += 1
        words.append(str(counts[index]) if run == 1 else f"{counts[index]}(x{run})")
        index += run
    return ",".join(words)


def job_variables(job_id: int, spec: JobSpec, nodes: Sequence[str], per_node: Sequence[int], partition: str,
                  cluster: str, restarts: int) -> dict[str, str]:
    """The variables every task of the job finds: ``nodes`` its allocation's, in order, ``per_node`` its
    processors on each."""
    hostlist = _hostlist(tuple(nodes))
    grain = spec.cpus_per_task
    variables = {
        "SLURM_JOB_ID": str(job_id), "SLURM_JOBID": str(job_id),
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_NODELIST": hostlist, "SLURM_NODELIST": hostlist,
        "SLURM_JOB_NUM_NODES": str(len(nodes)), "SLURM_NNODES": str(len(nodes)),
        "SLURM_NTASKS": str(spec.tasks), "SLURM_NPROCS": str(spec.tasks),
        "SLURM_TASKS_PER_NODE": counts_text([count // grain for count in per_node]),
        "SLURM_JOB_CPUS_PER_NODE": counts_text(per_node),
        "SLURM_CPUS_PER_TASK": str(grain),
        "SLURM_JOB_PARTITION": partition,
        "SLURM_CLUSTER_NAME": cluster,
        "SLURM_JOB_USER": spec.user,
        "SLURM_SUBMIT_DIR": spec.submit_dir or spec.cwd or "",
    }
    if spec.submit_host is not None:
        variables["SLURM_SUBMIT_HOST"] = spec.submit_host
    if spec.mem_per_node is not None:
        variables["SLURM_MEM_PER_NODE"] = str(-(-spec.mem_per_node // MEGABYTE))
    if spec.mem_per_cpu is not None:
        variables["SLURM_MEM_PER_CPU"] = str(-(-spec.mem_per_cpu // MEGABYTE))
    if spec.array_job_id is not None and spec.array_index is not None:
        variables["SLURM_ARRAY_JOB_ID"] = str(spec.array_job_id)
        variables["SLURM_ARRAY_TASK_ID"] = str(spec.array_index)
        whole = spec.array_span
        if whole is not None:
            variables["SLURM_ARRAY_TASK_COUNT"], variables["SLURM_ARRAY_TASK_MIN"] = str(whole.count), str(whole.first)
            variables["SLURM_ARRAY_TASK_MAX"], variables["SLURM_ARRAY_TASK_STEP"] = str(whole.last), str(whole.step)
    if restarts:
        variables["SLURM_RESTART_COUNT"] = str(restarts)
    return variables


def step_variables(spec: JobSpec, step: int, nodes: Sequence[str], tasks_per_node: Sequence[int]) -> dict[str, str]:
    """A step's own, the same for each of its tasks (none for a batch step): its nodes and tasks on each, under
    the step's names and, as Slurm's srun sets them in a step, the shorter ones (``SLURM_NTASKS``,
    ``SLURM_NNODES``, ``SLURM_NODELIST``, ``SLURM_TASKS_PER_NODE``: the step's; ``SLURM_JOB_*`` stay the job's)."""
    if slurm_step(spec, step) == "batch":
        return {}
    node_list, count, tasks, per_node = _hostlist(tuple(nodes)), str(len(nodes)), str(sum(tasks_per_node)), \
        counts_text(tasks_per_node)
    return {"SLURM_STEP_NODELIST": node_list, "SLURM_STEP_NUM_NODES": count, "SLURM_STEP_NUM_TASKS": tasks,
            "SLURM_STEP_TASKS_PER_NODE": per_node, "SLURM_DISTRIBUTION": "block", "SLURM_NODELIST": node_list,
            "SLURM_NNODES": count, "SLURM_NTASKS": tasks, "SLURM_NPROCS": tasks, "SLURM_TASKS_PER_NODE": per_node}


def task_variables(spec: JobSpec, step: int, rank: int, node: str, node_index: int, local_id: int,
                   cpus_on_node: int) -> dict[str, str]:
    """A task's own: its rank in its step, its node and its place there; its step's id where it has one."""
    variables = {
        "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local_id), "SLURM_NODEID": str(node_index),
        "SLURMD_NODENAME": node, "SLURM_CPUS_ON_NODE": str(cpus_on_node),
    }
    name = slurm_step(spec, step)
    if name != "batch":
        variables["SLURM_STEP_ID"] = variables["SLURM_STEPID"] = name
    return variables
