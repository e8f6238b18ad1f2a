"""scancel --signal on a live cluster: a running batch job's steps take the signal, its script's shell does
not; with -b the shell alone; bad signals and jobs that cannot take one are refused in Slurm's words."""

import sys

import pytest

from gangsched.client.connection import login_name
from gangsched.protocol.records import JobState, StepSpec
from tests.helpers.clusters import wait_until
from tests.helpers.slurm_commands import command, submitted

pytestmark = pytest.mark.live

CATCHER = """
import signal, sys, time
for number in (signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(number, lambda got, _: open(sys.argv[1], "a").write(f"step {signal.Signals(got).name}\\n"))
open(sys.argv[1], "a").write("step ready\\n")
time.sleep(120)
"""


def test_scancel_signals_a_batch_job_s_steps_or_its_shell_alone(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    marks = tmp_path / "marks"
    shell = (f"trap 'echo shell USR1 >> {marks}' USR1; trap 'echo shell USR2 >> {marks}' USR2; "
             f"echo shell ready >> {marks}; while true; do sleep 0.1; done")
    job = submitted(cluster, slurm, "-n", "2", "--wrap", shell, cwd=tmp_path)
    wait_until(lambda: marks.exists() and "shell ready" in marks.read_text(), 30, "the batch script to start")
    cluster.client.start_step(job, login_name(), StepSpec(argv=[sys.executable, "-c", CATCHER, str(marks)],
                                                          slots=[1]))
    wait_until(lambda: "step ready" in marks.read_text(), 30, "the step to start")

    def scancel(*arguments: str):
        return command(cluster, slurm, "scancel", *arguments)

    assert scancel("--signal=USR1", str(job)).returncode == 0
    wait_until(lambda: "step SIGUSR1" in marks.read_text(), 15, "the step to take SIGUSR1")
    assert scancel("-b", "-s", "SIGUSR2", str(job)).returncode == 0
    wait_until(lambda: "shell USR2" in marks.read_text(), 15, "the shell to take SIGUSR2")
    lines = marks.read_text().splitlines()
    assert "shell USR1" not in lines and "step SIGUSR2" not in lines, "each signal reached what it was sent to"
    assert cluster.client.job(job).state is JobState.RUNNING, "a signal the job handles does not end it"

    held = submitted(cluster, slurm, "-H", "--wrap", "true", cwd=tmp_path)
    refused = scancel("-s", "USR1", str(held))
    assert refused.returncode == 1 and refused.stderr.startswith(f"scancel: error: Kill job error on job id {held}: ")
    bogus = scancel("--signal=NOPE", str(job))
    assert (bogus.returncode, bogus.stderr.strip()) == (1, "scancel: error: Invalid job signal: NOPE")
    assert scancel(str(job), str(held)).returncode == 0


def test_sbatch_signal_reaches_the_batch_shell_before_the_time_limit(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=1, processors_per_node=2)
    marks = tmp_path / "marks"
    shell = f"trap 'echo warned >> {marks}; exit 0' USR1; while true; do sleep 0.1; done"
    job = submitted(cluster, slurm, "-t", "1", "--signal=B:USR1@56", "--wrap", shell, cwd=tmp_path)
    wait_until(lambda: cluster.client.job(job).state.is_final, 40, "the job to end at its warning")
    info = cluster.client.job(job)
    assert info.state is JobState.COMPLETED and marks.read_text() == "warned\n", info.reason
    assert 4 <= info.ran_s < 30, "warned 56 s before its limit of a minute, of the time it ran"
