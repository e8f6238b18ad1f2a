"""sacct on a live cluster, run from the folder `gang slurm install` puts it in: a row for each job's allocation
and each of its steps, Slurm's columns, widths and parsable forms, its time window and filters, its words for
what it refuses, and a batch job's record whole through a master killed and started again while it runs."""

import subprocess
import time

import pytest

from gangsched.client.connection import login_name
from gangsched.protocol.records import JobState, StepSpec
from tests.helpers.clusters import ended, wait_until
from tests.helpers.slurm_commands import command, submitted

pytestmark = pytest.mark.live


def test_sacct_shows_each_allocation_and_its_steps_as_slurm_s_accounting_does(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    user = login_name()

    def sbatch(*arguments: str) -> int:
        return submitted(cluster, slurm, *arguments, cwd=tmp_path)

    def sacct(*arguments: str) -> list[str]:
        done = command(cluster, slurm, "sacct", *arguments)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    flag = tmp_path / "go"
    batch = sbatch("-J", "steps", "-n", "2", "-A", "physics", "--wrap", f"while [ ! -e {flag} ]; do sleep 0.1; done;"
                   " exit 3")
    cancelled = sbatch("-J", "long", "--wrap", "sleep 300")
    wait_until(lambda: cluster.client.job(batch).state is JobState.RUNNING
               and cluster.client.job(cancelled).state is JobState.RUNNING, 30, "the jobs to start")
    step = cluster.client.start_step(batch, user, StepSpec(argv=["/bin/true"], slots=[1]))
    assert step == 1
    wait_until(lambda: cluster.client.job(batch).steps[1].state is JobState.COMPLETED, 30, "the step to end")
    cluster.local.restart("master", crash=True)  # the batch job runs on, and its record stays whole
    wait_until(lambda: cluster.client.job(batch).state is JobState.RUNNING, 30, "the master to be back")
    flag.touch()
    assert ended(cluster, batch).state is JobState.FAILED
    command(cluster, slurm, "scancel", str(cancelled))
    ended(cluster, cancelled)

    lines = sacct("-j", f"{batch},{cancelled}")
    assert lines[:2] == ["JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ",
                         "------------ ---------- ---------- ---------- ---------- ---------- -------- "]
    rows = [line.split() for line in lines[2:]]
    assert rows == [
        [str(batch), "steps", "batch", "physics", "2", "FAILED", "3:0"],
        [f"{batch}.batch", "batch", "physics", "1", "FAILED", "3:0"],
        [f"{batch}.0", "true", "physics", "1", "COMPLETED", "0:0"],
        [str(cancelled), "long", "batch", "1", "CANCELLED+", "0:0"],
        [f"{cancelled}.batch", "batch", "1", "CANCELLED", "0:15"],
    ], "the allocation, its batch step and its first step by Slurm's number; a cancelled job's signal on its step"

    parsable = sacct("-X", "-P", "-j", str(cancelled), "-o", "JobID,State,ExitCode,User,NNodes,NodeList,Start,End")
    assert parsable[0] == "JobID|State|ExitCode|User|NNodes|NodeList|Start|End"
    fields = parsable[1].split("|")
    uid = subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip()
    assert fields[:5] == [str(cancelled), f"CANCELLED by {uid}", "0:0", user, "1"], "-X: the allocation alone"
    info = cluster.client.job(cancelled)
    assert fields[5] == info.node_names[0] and fields[6] == time.strftime("%Y-%m-%dT%H:%M:%S",
                                                                        time.localtime(info.start_time))
    assert sacct("-n", "-p", "-j", f"{batch}.batch", "-o", "jobid,elapsedraw,state") == [
        f"{batch}.batch|{int(cluster.client.job(batch).steps[0].end_time - cluster.client.job(batch).start_time)}"
        "|FAILED|"], "-j JOB.STEP: that step alone; -p ends each line with its delimiter"
    assert sacct("-n", "-X", "-j", str(batch), "-o", "jobid%-8,jobname%3,state%12") == [
        f"{batch:<8} st+       FAILED "], "a width of its own, left with %-N; cut with a + where it does not fit"
    assert sacct("-b", "-n", "-X", "--name", "long") == [f"{cancelled:<12} CANCELLED+      0:0 "], "-b: id, state, exit"
    window = sacct("-n", "-X", "-s", "F", "-S", "now-1hour", "-E", "now", "-o", "jobid")
    assert [line.split()[0] for line in window] == [str(batch)], "-s: the jobs that ended so in the window"
    assert sacct("-n", "-X", "-s", "F") == [], "-s without -S: the jobs in that state now, as Slurm's window has it"
    assert sacct("-n", "-X", "-S", "now+1hour", "-o", "jobid") == [], "nothing ended after the window's start"

    for arguments, said in [(["-o", "bogus"], 'sacct: error: Invalid field requested: "bogus"'),
                            (["-S", "yesterday-ish"], "sacct: error: Invalid time specification: "),
                            (["-j", "abc"], "sacct: error: Bad job/step specified: abc"),
                            (["--bogus"], "sacct: unrecognized option '--bogus'")]:
        refused = command(cluster, slurm, "sacct", *arguments)
        assert refused.returncode == 1 and refused.stderr.splitlines()[0].startswith(said), (arguments, refused)
