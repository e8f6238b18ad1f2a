"""A real client of Slurm, unchanged: submitit (from PyPI, its current release) with its defaults, over the Slurm
commands `gang slurm install` writes, against a live cluster. Its batch scripts run their function through
`srun --unbuffered --output .../%j_%t_log.out`, it polls `sacct -o JobID,State,NodeList --parsable2`, and reads
its tasks' place from SLURM_* in each."""

import os
import subprocess
import sys

import pytest

from gangsched.protocol.records import JobState
from tests.helpers.clusters import wait_until

pytestmark = pytest.mark.live

CLIENT = """
import submitit


def square(x):
    return x * x


def where():
    environment = submitit.JobEnvironment()
    return environment.global_rank, environment.num_tasks, environment.node, environment.num_nodes, \\
        environment.hostnames


executor = submitit.AutoExecutor(folder="logs")
assert executor.cluster == "slurm", executor.cluster
executor.update_parameters(timeout_min=5, slurm_array_parallelism=4)
jobs = executor.map_array(square, range(8))
print("squares", [job.result() for job in jobs])
executor.update_parameters(nodes=2, tasks_per_node=1)
job = executor.submit(where)
print("ranks", sorted(job.results()))
"""


def test_submitit_maps_an_array_and_runs_a_job_of_two_nodes_through_srun(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    done = subprocess.run([sys.executable, "-c", CLIENT], capture_output=True, text=True, cwd=tmp_path, timeout=240,
                          env={**os.environ, "GANG_MASTER": cluster.client.endpoint,
                               "PATH": f"{slurm}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "squares [0, 1, 4, 9, 16, 25, 36, 49]", done.stdout
    assert lines[1] == "ranks [(0, 2, 0, 2, ['node1', 'node2']), (1, 2, 1, 2, ['node1', 'node2'])]", done.stdout
    # submitit has a result once its task wrote it: the job itself may end a moment later
    wait_until(lambda: all(job.state.is_final for job in cluster.client.jobs(include_finished=True)), 30,
               "every job to end")
    jobs = cluster.client.jobs(include_finished=True)
    assert len(jobs) == 9 and all(job.state is JobState.COMPLETED and job.batch for job in jobs)
    assert [len(job.steps) for job in jobs] == [2] * 9, "each a batch step and an srun step"
