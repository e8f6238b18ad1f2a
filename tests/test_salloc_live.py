"""salloc on a live cluster, from the folder `gang slurm install` puts it in: the allocation granted, its
command run here with the allocation's variables, srun in it starting steps, the allocation released as the
command ends and the job ending as it did; --no-shell's allocation kept until scancel; salloc killed, its
allocation ends and its command is not left behind."""

import os
import signal
import subprocess
import time

import psutil
import pytest

from gangsched.deploy.local import task_processes
from gangsched.protocol.records import JobState
from tests.helpers.clusters import wait_until
from tests.helpers.slurm_commands import command

pytestmark = pytest.mark.live


def salloc(cluster, slurm, *arguments: str, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen([str(slurm / "salloc"), *arguments], text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "GANG_MASTER": cluster.client.endpoint,
                                                         "PATH": f"{slurm}{os.pathsep}{os.environ['PATH']}"},
                            **kwargs)


def test_salloc_runs_its_command_here_with_the_allocation_and_ends_as_it_did(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    process = salloc(cluster, slurm, "-N", "2", "-n", "4", "sh", "-c",
                     'echo "$SLURM_JOB_ID $SLURM_NNODES $SLURM_JOB_NODELIST $SLURM_TASKS_PER_NODE"; '
                     'echo "here $$ $PPID"; srun -l sh -c \'echo "$SLURM_STEP_ID on $SLURMD_NODENAME"\' | sort; exit 3',
                     cwd=tmp_path)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 3, err
    (job,) = cluster.client.jobs(include_finished=True)
    lines = out.splitlines()
    assert lines[0] == f"{job.job_id} 2 node[1-2] 2(x2)"
    assert lines[2:] == ["0: 0 on node1", "1: 0 on node1", "2: 0 on node2", "3: 0 on node2"]
    assert err.splitlines() == [f"salloc: Granted job allocation {job.job_id}",
                                f"salloc: Relinquishing job allocation {job.job_id}"]
    wait_until(lambda: cluster.client.job(job.job_id).state.is_final, 20, "the allocation to end")
    rows = command(cluster, slurm, "sacct", "-n", "-P", "-j", str(job.job_id), "-o", "JobID,JobName,State,ExitCode")
    assert rows.stdout.splitlines() == [f"{job.job_id}|interactive|FAILED|3:0",
                                        f"{job.job_id}.extern|extern|FAILED|3:0", f"{job.job_id}.0|sh|COMPLETED|0:0"]
    assert not task_processes(cluster.home)


def test_no_shell_keeps_the_allocation_until_scancel(start_cluster, slurm):
    cluster = start_cluster(nodes=1, processors_per_node=2)
    process = salloc(cluster, slurm, "--no-shell", "-n", "2")
    out, err = process.communicate(timeout=30)
    (job,) = cluster.client.jobs()
    assert (process.returncode, err) == (0, f"salloc: Granted job allocation {job.job_id}\n")
    assert job.spec.name == "no-shell" and job.state is JobState.RUNNING
    inside = subprocess.run([str(slurm / "srun"), "-n", "2", "-l", "echo", "in"], capture_output=True, text=True,
                            timeout=30, env={**os.environ, "GANG_MASTER": cluster.client.endpoint,
                                             "SLURM_JOB_ID": str(job.job_id)})
    assert sorted(inside.stdout.splitlines()) == ["0: in", "1: in"], inside.stderr
    time.sleep(1)
    assert cluster.client.job(job.job_id).state is JobState.RUNNING, "its steps end, not the allocation"
    assert command(cluster, slurm, "scancel", str(job.job_id)).returncode == 0
    wait_until(lambda: cluster.client.job(job.job_id).state is JobState.CANCELLED, 20, "the allocation to end")


def test_salloc_killed_releases_its_allocation_and_its_command_goes_with_it(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=1, processors_per_node=2)
    process = salloc(cluster, slurm, "sh", "-c", "echo $$ > shell.pid; exec sleep 120", cwd=tmp_path)
    wait_until(lambda: (tmp_path / "shell.pid").exists() and (tmp_path / "shell.pid").read_text().strip(), 30,
               "its command to run")
    shell = psutil.Process(int((tmp_path / "shell.pid").read_text()))
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=10)
    psutil.wait_procs([shell], timeout=10)
    assert not shell.is_running(), "its command got SIGHUP as salloc died"
    (job,) = cluster.client.jobs(include_finished=True)
    wait_until(lambda: cluster.client.job(job.job_id).state.is_final, 30, "the nodes to end the allocation")
    wait_until(lambda: not task_processes(cluster.home), 10, "no task left")
