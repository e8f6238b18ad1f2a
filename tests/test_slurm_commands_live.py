"""squeue, scancel, scontrol and sinfo on a live cluster, run from the folder `gang slurm install` puts them
in, as a tool runs them: Slurm's columns, state codes, one-word reasons, array ids, Key=Value records, and
its words and statuses for what it refuses."""

import pytest

from gangsched.client.connection import login_name
from gangsched.protocol.records import JobState
from tests.helpers.clusters import wait_until
from tests.helpers.slurm_commands import command, submitted

pytestmark = pytest.mark.live


def test_the_queue_and_its_jobs_as_slurm_s_commands_show_and_change_them(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    user = login_name()

    def sbatch(*arguments: str) -> int:
        return submitted(cluster, slurm, *arguments, cwd=tmp_path)

    running = sbatch("-J", "wide", "-n", "3", "-t", "5", "--wrap", "sleep 60")
    held = sbatch("-J", "held", "-H", "--wrap", "true")
    array = sbatch("--array=1-4%1", "--wrap", "sleep 60")
    wait_until(lambda: cluster.client.job(running).state is JobState.RUNNING
               and cluster.client.job(array).state is JobState.RUNNING, 20, "the jobs to start")

    queue = command(cluster, slurm, "squeue")
    assert queue.returncode == 0, queue.stderr
    lines = queue.stdout.splitlines()
    assert lines[0] == "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    rows = [line.split() for line in lines[1:]]
    # pending first (the held one after the others), each array's waiting jobs as one, then the running by id
    assert [row[0] for row in rows] == [f"{array}_[2-4%1]", str(held), str(running), f"{array}_1"]
    assert [row[4] for row in rows] == ["PD", "PD", "R", "R"]
    assert rows[0][-1] == "(JobArrayTaskLimit)" and rows[1][-1] == "(JobHeldUser)"
    assert (rows[2][2], rows[2][3], rows[2][6]) == ("wide", user[:8], "2")

    formatted = command(cluster, slurm, "squeue", "-h", "-r", "-j", str(array), "-o", "%i|%K|%.4t|%r|%5j|%%")
    assert formatted.stdout.splitlines() == [
        *[f"{array}_{index}|{index}|  PD|JobArrayTaskLimit|wrap |%" for index in (2, 3, 4)],
        f"{array}_1|1|   R|None|wrap |%"]
    fields = command(cluster, slurm, "squeue", "-h", "-j", str(running), "-O", "jobid,state:.10,timelimit:6")
    assert fields.stdout == f"{str(running).ljust(20)}   RUNNING5:00  \n"

    for arguments, said in [(["-j", "999"], "slurm_load_jobs error: Invalid job id specified"),
                            (["-t", "bogus"], "squeue: error: Invalid job state specified: bogus"),
                            (["-u", "no-such-user"], "squeue: error: Invalid user: no-such-user"),
                            (["-o", "%b"], "squeue: error: Invalid job format specification: b"),
                            (["--bogus"], "squeue: unrecognized option '--bogus'")]:
        refused = command(cluster, slurm, "squeue", *arguments)
        assert (refused.returncode, refused.stderr.splitlines()[0]) == (1, said), arguments

    record = command(cluster, slurm, "scontrol", "show", "job", str(running))
    assert record.returncode == 0, record.stderr
    pairs = dict(pair.split("=", 1) for pair in record.stdout.split() if "=" in pair)
    assert (pairs["JobId"], pairs["JobName"], pairs["JobState"], pairs["Reason"], pairs["TimeLimit"],
            pairs["NumCPUs"], pairs["BatchFlag"], pairs["ExitCode"]) == (
        str(running), "wide", "RUNNING", "None", "00:05:00", "3", "1", "0:0")
    assert pairs["StdOut"] == str(tmp_path / f"slurm-{running}.out")
    one_line = command(cluster, slurm, "scontrol", "-o", "show", "job", str(held)).stdout
    assert one_line.count("\n") == 1 and "JobState=PENDING Reason=JobHeldUser" in one_line
    assert command(cluster, slurm, "scontrol", "show", "hostnames", "node[1-2],x").stdout == "node1\nnode2\nx\n"

    assert command(cluster, slurm, "scontrol", "release", str(held)).returncode == 0
    wait_until(lambda: cluster.client.job(held).state is JobState.COMPLETED, 20, "the released job to run")
    assert command(cluster, slurm, "scontrol", "hold", "abc").stderr == "Invalid job id specified for job abc\n"
    assert command(cluster, slurm, "scontrol", "update", f"JobId={running}", "TimeLimit=7").returncode == 0
    assert cluster.client.job(running).spec.estimate_s == 420
    bad = command(cluster, slurm, "scontrol", "update", f"JobId={running}", "Bogus=1")
    assert (bad.returncode, bad.stderr.splitlines()[0]) == (1, "Update of this parameter is not supported: Bogus=1")

    nodes = command(cluster, slurm, "sinfo", "-h", "-o", "%P %a %D %c %N")
    assert nodes.stdout.split("\n")[0].split()[0].endswith("*")
    summary = command(cluster, slurm, "sinfo", "-s", "-h").stdout.split()
    assert summary[-1] == "node[1-2]" and summary[-2].endswith("/0/0/2")

    # an array's waiting jobs by their ids, then the rest of it and the running job by name
    assert command(cluster, slurm, "scancel", f"{array}_[3-4]").returncode == 0
    wait_until(lambda: {cluster.client.job(job).state for job in (array + 2, array + 3)} == {JobState.CANCELLED},
               10, "the two array jobs to be cancelled")
    assert command(cluster, slurm, "scancel", str(array)).returncode == 0
    assert command(cluster, slurm, "scancel", "-n", "wide").returncode == 0
    wait_until(lambda: all(cluster.client.job(job).state is JobState.CANCELLED
                           for job in (running, array, array + 1)), 20, "every job to be cancelled")
    ended = command(cluster, slurm, "squeue", "-h", "-t", "all", "-j", str(running), "-o", "%T %r")
    assert ended.stdout == "CANCELLED None\n"
    assert command(cluster, slurm, "squeue", "-h").stdout == ""
    for arguments, said in [([], "scancel: error: No job identification provided"),
                            (["abc"], "scancel: error: Invalid job id abc")]:
        refused = command(cluster, slurm, "scancel", *arguments)
        assert (refused.returncode, refused.stderr) == (1, said + "\n")
    assert command(cluster, slurm, "scancel", "999").returncode == 0  # passed over quietly, as Slurm does
