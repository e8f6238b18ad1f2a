"""A step's shape as srun reads it from its flags (-n, -N, --ntasks-per-node, -w, -x), and the allocation's
tasks a step of that shape runs on, laid out as Slurm's block distribution does, with Slurm's warnings and
refusals: plain code over the job's map, which srun asks the master for."""

from __future__ import annotations

from dataclasses import dataclass

from gangsched.slurm.command import SlurmError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def count_flag(given: dict[str, Any], key: str, flag: str) -> int | None:
    """A flag's positive number (``flag`` its name in the error), None where it is not given."""
    if key not in given:
        return None
    text = given[key]
    if not text.isdigit() or int(text) < 1:
        raise SlurmError(f'Invalid numeric value "{text}" for {flag}.')
    return int(text)


@dataclass(frozen=True)
class Shape:
    """A step's shape as srun's flags give it: ``tasks`` (-n), ``nodes`` (-N), ``per_node``
    (--ntasks-per-node), nodes it must run on (-w) and nodes it must not (-x)."""

    tasks: int | None = None
    nodes: int | None = None
    per_node: int | None = None
    required: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()

    @classmethod
    def of_flags(cls, given: dict[str, Any]) -> Shape:
        return cls(count_flag(given, "tasks", "--ntasks"), count_flag(given, "nodes", "--nodes"),
                   count_flag(given, "per_node", "--ntasks-per-node"), hosts_flag(given, "nodelist"),
                   hosts_flag(given, "exclude"))


def step_slots(job: dict[str, Any], shape: Shape) -> tuple[list[int], list[str]]:
    """The allocation's tasks a step of ``shape`` runs on, as Slurm's block distribution lays it out: on its
    required nodes and, to make up its number of nodes (its required ones' if none is given, else all of the
    allocation's), the allocation's first others not excluded, in the allocation's order; its tasks (one a
    node if not given, or ``per_node`` a node) spread over them as evenly as they go, each node's from its
    first. Also the warnings Slurm's srun gives where it changes what was asked."""
    grain = job["spec"].get("cpus_per_task", 1)
    names = job.get("node_names") or []
    by_node: dict[str, list[int]] = {}
    for task, slot in enumerate(range(0, len(names), grain)):
        by_node.setdefault(names[slot], []).append(task)
    unavailable = SlurmError(f"Unable to create step for job {job['job_id']}: Requested node configuration is "
                             "not available")
    if any(name not in by_node or name in shape.excluded for name in shape.required):
        raise unavailable
    candidates = [name for name in by_node if name not in shape.excluded]
    nodes = shape.nodes or len(shape.required) or len(candidates)
    if nodes > len(candidates):
        raise SlurmError(f"Only allocated {len(candidates)} nodes asked for {nodes}" + (
            "\nsrun: error: Are required nodes explicitly excluded?" if shape.excluded else ""))
    tasks = shape.tasks or nodes * (shape.per_node or 1)
    warnings = []
    if tasks < nodes:
        warnings.append(f"can't run {tasks} processes on {nodes} nodes, setting nnodes to {tasks}")
        nodes = tasks
    if len(shape.required) > nodes:
        raise unavailable
    if shape.per_node is not None and shape.per_node * nodes != tasks:
        warnings.append(f"can't honor --ntasks-per-node set to {shape.per_node} which doesn't match the requested "
                        f"tasks {tasks} with the number of requested nodes {nodes}. Ignoring --ntasks-per-node.")
    others = [name for name in candidates if name not in shape.required][:nodes - len(shape.required)]
    order = [by_node[name] for name in candidates if name in shape.required or name in others]
    base, extra = divmod(tasks, nodes)
    wanted = [base + 1] * extra + [base] * (nodes - extra)
    if any(count > len(node) for count, node in zip(wanted, order, strict=True)):
        raise SlurmError(f"Unable to create step for job {job['job_id']}: More processors requested than "
                         "permitted")
    return [task for count, node in zip(wanted, order, strict=True) for task in node[:count]], warnings


def hosts_flag(given: dict[str, Any], key: str) -> tuple[str, ...]:
    """-w's or -x's nodes: a hostlist (``node[1-2],node4``), as Slurm's; a file's name is not read."""
    if key not in given:
        return ()
    from gangsched.protocol.hostlists import expand_hostlist  # ClusterShell's import: only where it is needed

    try:
        return tuple(expand_hostlist(given[key]))
    except ValueError:
        raise SlurmError(f"Invalid hostlist: {given[key]}") from None


def inherited_count(environment: dict[str, str], name: str) -> int | None:
    """A count of the allocation's in srun's environment (``SLURM_NTASKS``), None where it has none."""
    text = environment.get(name, "")
    return int(text) if text.isdigit() and int(text) > 0 else None
