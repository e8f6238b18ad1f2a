"""srun's own decisions, without a cluster: the allocation's tasks a step's shape runs on (Slurm's block
distribution, refused in Slurm's words where the allocation cannot hold it), and its command line's
refusals, one line each."""

import pytest

from gangsched.slurm.command import SlurmError
from gangsched.slurm.srun import Request
from gangsched.slurm.step_shape import Shape, step_slots


def allocation(nodes: list[str], cpus_per_task: int = 1) -> dict:
    """A running job as the master's map gives it: its processors' nodes, in order."""
    return {"job_id": 7, "spec": {"cpus_per_task": cpus_per_task}, "node_names": nodes}


FOUR = allocation(["n1", "n1", "n2", "n2"])


@pytest.mark.parametrize(("tasks", "nodes", "per_node", "slots"), [
    (None, None, None, [0, 2]),  # one a node, as Slurm's srun given SLURM_JOB_ID alone
    (4, None, None, [0, 1, 2, 3]),  # SLURM_NTASKS, a batch script's, where it gives none
    (2, None, None, [0, 2]),  # over every node of the allocation
    (3, None, None, [0, 1, 2]),
    (2, 1, None, [0, 1]),
    (None, 2, 2, [0, 1, 2, 3]),
    (None, 1, None, [0]),
])
def test_a_step_s_shape_takes_the_allocation_s_tasks_by_blocks(tasks, nodes, per_node, slots):
    assert step_slots(FOUR, Shape(tasks, nodes, per_node)) == (slots, [])


def test_where_slurm_s_srun_changes_the_shape_it_warns_as_slurm_s_does():
    assert step_slots(FOUR, Shape(1, 2)) == ([0], ["can't run 1 processes on 2 nodes, setting nnodes to 1"])
    assert step_slots(FOUR, Shape(1, 2, required=("n2",))) == ([2], [
        "can't run 1 processes on 2 nodes, setting nnodes to 1"]), "on the node it must run on"
    assert step_slots(FOUR, Shape(4, 2, 1)) == ([0, 1, 2, 3], [
        "can't honor --ntasks-per-node set to 1 which doesn't match the requested tasks 4 with the number of "
        "requested nodes 2. Ignoring --ntasks-per-node."])


def test_tasks_of_several_processors_are_counted_as_tasks():
    two_by_two = allocation(["n1", "n1", "n2", "n2"], cpus_per_task=2)
    assert step_slots(two_by_two, Shape()) == ([0, 1], [])
    with pytest.raises(SlurmError):  # two tasks of two processors on one node of two
        step_slots(two_by_two, Shape(2, 1))


def test_w_names_nodes_a_step_must_run_on_and_x_nodes_it_must_not():
    """As Slurm's: -w's nodes are required, others of the allocation make up -N, in the allocation's order."""
    assert step_slots(FOUR, Shape(required=("n2",))) == ([2], [])
    assert step_slots(FOUR, Shape(4, 2, required=("n2",))) == ([0, 1, 2, 3], [])
    assert step_slots(FOUR, Shape(2, excluded=("n1",))) == ([2, 3], [])


UNAVAILABLE = "Unable to create step for job 7: Requested node configuration is not available"


@pytest.mark.parametrize(("shape", "words"), [
    (Shape(5), "Unable to create step for job 7: More processors requested than permitted"),
    (Shape(3, 1), "Unable to create step for job 7: More processors requested than permitted"),
    (Shape(nodes=3), "Only allocated 2 nodes asked for 3"),
    (Shape(nodes=2, excluded=("n1",)), "Only allocated 1 nodes asked for 2\nsrun: error: Are required nodes "
                                       "explicitly excluded?"),
    (Shape(required=("n3",)), UNAVAILABLE),
    (Shape(1, required=("n1", "n2")), UNAVAILABLE),
    (Shape(required=("n1",), excluded=("n1",)), UNAVAILABLE),
])
def test_a_step_the_allocation_cannot_hold_is_refused_in_slurm_s_words(shape, words):
    with pytest.raises(SlurmError) as refused:
        step_slots(FOUR, shape)
    assert refused.value.message == words


@pytest.mark.parametrize(("arguments", "words"), [
    (["-w", "n[1-", "true"], "Invalid hostlist: n[1-"),
    (["-e", "err", "true"], "-e/--error without -o/--output is not supported by gangsched's srun yet (docs/slurm.md)"),
    (["--mpi=bogus", "true"], "Invalid MPI type 'bogus', --mpi=list for acceptable types"),
    (["--pty", "-i", "none", "bash"], "--pty gives task 0 a terminal for its input and output: not with -i or -o"),
    (["--pty", "-o", "out", "bash"], "--pty gives task 0 a terminal for its input and output: not with -i or -o"),
    (["-n", "0", "true"], 'Invalid numeric value "0" for --ntasks.'),
    (["--input=file.txt", "cat"], "--input=file.txt: gangsched's srun sends its input to one task (a number) or none"),
    ([], "No command given to execute."),
])
def test_a_command_line_srun_does_not_take_is_refused_in_one_line(arguments, words):
    with pytest.raises(SlurmError) as refused:
        Request.read(arguments)
    assert refused.value.message == words


def test_flags_stop_at_the_command_whose_own_flags_are_its_own():
    request = Request.read(["-n", "2", "-l", "-K", "sh", "-c", "echo -n x", "-n", "3"])
    assert (request.shape.tasks, request.command, request.kill_on_bad_exit) == (
        2, ["sh", "-c", "echo -n x", "-n", "3"], True)
    assert Request.read(["--input=none", "true"]).input_rank is None


def test_gang_queue_s_lists_running_steps_with_slurm_s_names():
    from gangsched.cli import table

    def step(step_id: int, name: str, end: float | None = None) -> dict:
        return {"step_id": step_id, "name": name, "state": "running" if end is None else "completed", "tasks": 2,
                "nodes": ["n1", "n2"], "start_time": 0.0, "end_time": end}

    batch = {"job_id": 7, "batch": True, "spec": {"user": "alice"},
             "steps": [step(0, "job.sh"), step(1, "hostname", end=5.0), step(2, "sleep")]}
    held = {"job_id": 8, "batch": False, "spec": {"user": "bob", "allocation": True}, "steps": [step(0, "sleep")]}
    rows = table.render(table.STEP_COLUMNS, table.live_steps([batch, held])).splitlines()
    assert [line.split()[:4] for line in rows] == [
        ["STEPID", "NAME", "USER", "ST"], ["7.batch", "job.sh", "alice", "R"], ["7.1", "sleep", "alice", "R"],
        ["8.extern", "sleep", "bob", "R"]], "the ended step left out"
