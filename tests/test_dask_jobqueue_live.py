"""A real client of Slurm, unchanged: dask-jobqueue's SLURMCluster (from PyPI, its current release) with its
defaults but for addresses on loopback, over the Slurm commands `gang slurm install` writes, against a live
cluster: two workers as batch jobs, a sum computed on them, then closed, both jobs gone."""

import os
import subprocess
import sys

import pytest

from gangsched.protocol.records import JobState
from tests.helpers.clusters import wait_until

pytestmark = pytest.mark.live

CLIENT = """
from dask_jobqueue import SLURMCluster
from distributed import Client

cluster = SLURMCluster(cores=1, memory="100MB", interface="lo")
cluster.scale(2)
client = Client(cluster)
client.wait_for_workers(2, timeout=60)
print("workers", len(client.scheduler_info()["workers"]))
print("sum", client.submit(sum, range(101)).result())
client.close()
cluster.close()
"""


def test_dask_jobqueue_s_slurm_cluster_runs_its_workers_as_batch_jobs(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    done = subprocess.run([sys.executable, "-c", CLIENT], capture_output=True, text=True, cwd=tmp_path, timeout=180,
                          env={**os.environ, "GANG_MASTER": cluster.client.endpoint,
                               "PATH": f"{slurm}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:2] == ["workers 2", "sum 5050"], done.stdout
    jobs = cluster.client.jobs(include_finished=True)
    assert [job.spec.name for job in jobs] == ["dask-worker", "dask-worker"] and all(job.batch for job in jobs)
    wait_until(lambda: all(job.state.is_final for job in cluster.client.jobs(include_finished=True)), 30,
               "both workers' jobs to end once the cluster is closed")
    assert {job.state for job in cluster.client.jobs(include_finished=True)} <= {JobState.CANCELLED,
                                                                                JobState.COMPLETED}
