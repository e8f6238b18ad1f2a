"""sbatch on a live cluster, run as a user's shell runs it, from the folder `gang slurm install` puts it in:
a plain (not executable) script, deleted once sbatch returns, runs once on the allocation's first node with
the submitter's environment and Slurm's variables, its output in slurm-N.out of the folder it was submitted
from; -o/-e patterns; --wait ends with the job's exit status."""

import os
import subprocess
import sys

import pytest

from gangsched.protocol.records import JobState
from tests.helpers.clusters import wait_until

pytestmark = pytest.mark.live

SCRIPT = """#!/bin/sh
#SBATCH --job-name=hello
#SBATCH -N 2 -n 3
#SBATCH --time=5
echo "ran $SLURM_JOB_ID $SLURM_JOB_NAME on $SLURMD_NODENAME of $SLURM_JOB_NODELIST: $SLURM_NTASKS tasks \
$SLURM_TASKS_PER_NODE step=${SLURM_STEP_ID-none} mine=$MINE args=$*"
echo "to stderr" >&2
"""


@pytest.fixture
def sbatch(tmp_path):
    folder = tmp_path / "bin"
    subprocess.run([sys.executable, "-m", "gangsched.cli", "slurm", "install", str(folder)], check=True,
                   capture_output=True)
    return str(folder / "sbatch")


def run(cluster, sbatch: str, *arguments: str, cwd, **environment: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sbatch, *arguments], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "GANG_MASTER": cluster.client.endpoint, **environment})


def test_a_batch_script_runs_once_on_the_first_node_with_the_submitter_s_environment(start_cluster, sbatch,
                                                                                      tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT)
    submitted = run(cluster, sbatch, str(script), "a", "b", cwd=tmp_path, MINE="kept")
    script.unlink()  # Slurm keeps the text: a tool may delete its script at once
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stdout.startswith("Submitted batch job ")
    job = int(submitted.stdout.split()[-1])
    wait_until(lambda: cluster.client.job(job).state is JobState.COMPLETED, 20, "the batch job to complete")
    info = cluster.client.job(job)
    first, nodes = info.node_names[0], sorted(set(info.node_names))
    assert len(nodes) == 2
    lines = (tmp_path / f"slurm-{job}.out").read_text().splitlines()
    assert lines == [f"ran {job} hello on {first} of node[1-2]: 3 tasks 2,1 step=none mine=kept args=a b",
                     "to stderr"], "once, on the first node, stdout and stderr in one file"


def test_output_and_error_patterns_and_wait_s_exit_status(start_cluster, sbatch, tmp_path):
    cluster = start_cluster(nodes=1)
    (tmp_path / "out").mkdir()
    waited = run(cluster, sbatch, "--wait", "--parsable", "-o", "out/%x-%j.txt", "-e", "out/%x-%j.err",
                 "-J", "w", "--wrap", "echo out; echo err >&2; exit 3", cwd=tmp_path)
    assert waited.returncode == 3, waited.stderr
    job = int(waited.stdout.split()[0])
    assert (tmp_path / "out" / f"w-{job}.txt").read_text() == "out\n"
    assert (tmp_path / "out" / f"w-{job}.err").read_text() == "err\n"
    assert cluster.client.job(job).state is JobState.FAILED


def test_a_bad_flag_is_refused_by_the_command_with_slurm_s_words_and_nothing_submitted(start_cluster, sbatch,
                                                                                        tmp_path):
    cluster = start_cluster(nodes=1)
    refused = run(cluster, sbatch, "--bogus", "--wrap", "true", cwd=tmp_path)
    assert (refused.returncode, refused.stderr) == (
        255, "sbatch: unrecognized option '--bogus'\nTry \"sbatch --help\" for more information\n")
    assert cluster.client.jobs(include_finished=True) == []


def test_a_task_of_two_processors_runs_on_both_and_one_of_three_is_refused(start_cluster, sbatch, tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    waited = run(cluster, sbatch, "--wait", "-c", "2", "-n", "2", "-o", "out.txt", "--wrap",
                 "echo $SLURM_CPUS_PER_TASK $SLURM_NTASKS $SLURM_TASKS_PER_NODE $SLURM_JOB_CPUS_PER_NODE", cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    assert (tmp_path / "out.txt").read_text() == "2 2 1(x2) 2(x2)\n"
    job = cluster.client.job(int(waited.stdout.split()[-1]))
    assert job.node_names == ["node1", "node1", "node2", "node2"], "each task holds a whole node's processors"
    refused = run(cluster, sbatch, "-c", "3", "--wrap", "true", cwd=tmp_path)
    assert (refused.returncode, refused.stderr) == (
        1, "sbatch: error: needs 1 task of 3 processors, the cluster has 4 processors on 2 nodes\n"
           "sbatch: error: Batch job submission failed: Requested node configuration is not available\n")
    assert len(cluster.client.jobs(include_finished=True)) == 1, "nothing of the refused job kept"
