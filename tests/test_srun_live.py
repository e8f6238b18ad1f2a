"""srun on a live cluster, from the folder `gang slurm install` puts it in: outside an allocation a job and its
step, its tasks' output on srun's own stdout and stderr, its exit status the worst task's; inside a batch
script steps one after another and side by side, found from SLURM_JOB_ID alone, with srun's input; SIGINT
forwarded to the step; another user's allocation refused."""

import getpass
import os
import re
import signal
import subprocess
import time

import psutil
import pytest

from gangsched.client.master_client import MasterClient
from gangsched.deploy.local import task_processes
from gangsched.protocol.records import JobState
from tests.helpers.accounts import unix_account
from tests.helpers.clusters import wait_until
from tests.helpers.slurm_commands import command, submitted

pytestmark = pytest.mark.live


def srun(cluster, slurm, *arguments: str, input: str | None = None, **environment: str):
    return subprocess.run([str(slurm / "srun"), *arguments], capture_output=True, input=input, timeout=60,
                          env={**os.environ, "GANG_MASTER": cluster.client.endpoint, **environment})


def test_srun_outside_an_allocation_runs_a_job_of_its_step_with_its_output_and_worst_exit(start_cluster, slurm):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    done = srun(cluster, slurm, "-n", "3", "-l", "sh", "-c",
                'echo "$SLURM_PROCID of $SLURM_STEP_NUM_TASKS on $SLURM_STEP_NUM_NODES"; echo err >&2')
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.decode().splitlines()) == [f"{rank}: {rank} of 3 on 2" for rank in range(3)]
    assert sorted(done.stderr.decode().splitlines()) == [f"{rank}: err" for rank in range(3)]
    failed = srun(cluster, slurm, "-n", "4", "-N", "2", "sh", "-c",
                  '[ $SLURM_PROCID = 2 ] && kill -9 $$; exit $((SLURM_PROCID % 2 + 3))')
    assert failed.returncode == 137, failed.stderr  # the worst: a signal's as 128 + its number, as Slurm's
    assert sorted(failed.stderr.decode().splitlines()) == [  # each node's tasks that ended alike, as Slurm's
        "srun: error: node1: task 0: Exited with exit code 3", "srun: error: node1: task 1: Exited with exit code 4",
        "srun: error: node2: task 2: Killed", "srun: error: node2: task 3: Exited with exit code 4"]
    alike = srun(cluster, slurm, "-n", "2", "-N", "1", "sh", "-c", "exit 5")
    assert (alike.returncode, alike.stderr.decode()) == (5, "srun: error: node1: tasks 0-1: Exited with exit code 5\n")
    many = srun(cluster, slurm, "-n", "1", "head", "-c", "3000000", "/dev/zero")
    assert (many.returncode, len(many.stdout)) == (0, 3_000_000), "a step's output whole, however fast it comes"
    jobs = cluster.client.jobs(include_finished=True)
    assert [job.state for job in jobs] == [JobState.COMPLETED, JobState.FAILED, JobState.FAILED, JobState.COMPLETED]


SCRIPT = """#!/bin/sh
#SBATCH -N 2 -n 4
srun -l sh -c 'echo "$SLURM_STEP_ID $SLURM_STEP_NUM_TASKS $SLURMD_NODENAME"' | sort
srun -N 2 -n 2 -l sh -c 'echo "tpn $SLURM_STEP_TASKS_PER_NODE"' > side.txt &
srun -N 1 -n 1 sh -c 'exit 3'
echo "status $?"
wait
echo "read $(echo piped | srun -N 1 -n 1 cat)"
for name in $(env | grep ^SLURM_ | cut -d= -f1); do [ "$name" = SLURM_JOB_ID ] || unset "$name"; done
srun -l sh -c 'echo "one on $SLURMD_NODENAME"' | sort
"""


def test_a_batch_script_s_sruns_run_as_steps_of_its_allocation(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    (tmp_path / "job.sh").write_text(SCRIPT)
    # the tools that strip Slurm's variables but SLURM_JOB_ID before they call srun find the allocation still
    job = submitted(cluster, slurm, "job.sh", cwd=tmp_path)
    wait_until(lambda: cluster.client.job(job).state is JobState.COMPLETED, 40, "the batch job to complete")
    lines = (tmp_path / f"slurm-{job}.out").read_text().splitlines()
    assert lines[:4] == ["0: 0 4 node1", "1: 0 4 node1", "2: 0 4 node2", "3: 0 4 node2"]
    # the side step and the failing one start at once, numbered 1 and 2 in the order they reach the master
    assert lines[4] == "srun: error: node1: task 0: Exited with exit code 3", lines[4]
    assert lines[5:] == ["status 3", "read piped", "0: one on node1", "1: one on node2"], \
        "found from SLURM_JOB_ID alone, a task a node"
    assert sorted((tmp_path / "side.txt").read_text().splitlines()) == ["0: tpn 1(x2)", "1: tpn 1(x2)"]
    rows = command(cluster, slurm, "sacct", "-n", "-P", "-j", str(job), "-o", "JobID,State,ExitCode").stdout
    rows = rows.splitlines()
    assert rows[:3] + rows[5:] == [f"{job}|COMPLETED|0:0", f"{job}.batch|COMPLETED|0:0", f"{job}.0|COMPLETED|0:0",
                                   f"{job}.3|COMPLETED|0:0", f"{job}.4|COMPLETED|0:0"]
    assert sorted(row.split("|", 1)[1] for row in rows[3:5]) == ["COMPLETED|0:0", "FAILED|3:0"]


def test_sigint_goes_on_to_the_step_and_ends_it(start_cluster, slurm):
    cluster = start_cluster(nodes=1, processors_per_node=2)
    process = subprocess.Popen([str(slurm / "srun"), "-n", "2", "sh", "-c",
                                "trap 'echo caught; exit 7' INT; while :; do sleep 0.1; done"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "GANG_MASTER": cluster.client.endpoint})
    try:
        wait_until(lambda: len(task_processes(cluster.home)) >= 2 and cluster.client.jobs()
                   and cluster.client.jobs()[0].state is JobState.RUNNING, 20, "the step to run")
        time.sleep(0.5)  # the tasks' shells have set their trap
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 7, err
    assert out.decode().splitlines() == ["caught", "caught"]
    assert b"srun: interrupt" in err
    wait_until(lambda: not task_processes(cluster.home), 10, "no task left")


def test_another_user_s_allocation_is_refused_and_its_streams_are_kept_from_him(start_cluster, slurm):
    for user in ("gangalice", "gangbob"):  # a root node daemon runs a job as its user's account
        unix_account(user)
    cluster = start_cluster(key_users=("gangalice", "gangbob"), nodes=1, keys=True)
    endpoint, keys = cluster.local.state().master, str(cluster.local.keys)
    alice = subprocess.Popen([str(slurm / "srun"), "sleep", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, "GANG_MASTER": endpoint, "GANG_KEYS": keys, "LOGNAME": "gangalice",
                                  "SLURM_JOB_ID": ""})
    try:
        with MasterClient(endpoint, keys=cluster.local.keys, user="gangbob") as bob:
            wait_until(lambda: [job.state for job in bob.jobs()] == [JobState.RUNNING], 20, "her srun's job to run")
            (seen,) = bob.jobs()
            assert seen.spec.streams is None, "her srun's address and token are hers alone"
        as_bob = srun(cluster, slurm, "true", GANG_MASTER=endpoint, GANG_KEYS=keys, LOGNAME="gangbob",
                      SLURM_JOB_ID=str(seen.job_id))
        assert (as_bob.returncode, as_bob.stderr.decode()) == (
            1, f"srun: error: Unable to create step for job {seen.job_id}: Access/permission denied\n")
        with MasterClient(endpoint, keys=cluster.local.keys, user="gangalice") as her:
            assert [step.step_id for step in her.job(seen.job_id).steps] == [0], "no step of his in her job"
    finally:
        with MasterClient(endpoint, keys=cluster.local.keys, user="gangalice") as her:
            for job in her.jobs():
                her.cancel(job.job_id, "gangalice")
        alice.communicate(timeout=30)


def test_o_writes_each_task_s_output_to_its_own_file(start_cluster, slurm, tmp_path):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    (tmp_path / "job.sh").write_text('#!/bin/sh\n#SBATCH -N 2 -n 4\nsrun -o "out/%j.%s.%t.%N" -l sh -c '
                                     '\'echo "task $SLURM_PROCID"; echo "err $SLURM_PROCID" >&2\'\necho "rc $?"\n')
    (tmp_path / "out").mkdir()
    job = submitted(cluster, slurm, "job.sh", cwd=tmp_path)
    wait_until(lambda: cluster.client.job(job).state is JobState.COMPLETED, 40, "the batch job to complete")
    assert (tmp_path / f"slurm-{job}.out").read_text() == "rc 0\n"
    files = {path.name: path.read_text() for path in (tmp_path / "out").iterdir()}
    nodes = ["node1", "node1", "node2", "node2"]
    assert files == {f"{job}.0.{rank}.{nodes[rank]}": f"task {rank}\nerr {rank}\n" for rank in range(4)}


def assert_allreduce_runs(cluster, slurm, tmp_path, launch: str, allreduce) -> None:
    """A batch script of 2 nodes x 2 whose one line launches the allreduce program: the result a gang gives."""
    (tmp_path / "job.sh").write_text(f"#!/bin/sh\n#SBATCH -N 2 -n 4\n{launch} {allreduce} --iterations 200 "
                                     "--grain-ms 0\n")
    job = submitted(cluster, slurm, "job.sh", cwd=tmp_path)
    wait_until(lambda: cluster.client.job(job).state.is_final, 90, "the batch job to end")
    output = (tmp_path / f"slurm-{job}.out").read_text()
    assert cluster.client.job(job).state is JobState.COMPLETED, output
    assert re.search(r"result=(\d+)", output).group(1) == str(200 * (1 + 2 + 3 + 4)), output


@pytest.mark.mpi
@pytest.mark.parametrize("launch", ["srun --mpi=pmi1", "srun --mpi=pmi2", "mpiexec -n 4"])
def test_an_mpi_program_in_an_allocation_gives_the_result_it_gives_as_a_gang(start_cluster, slurm, tmp_path, launch):
    """srun's own PMI (the nodes' process managers, for the step), and MPICH's Hydra, whose Slurm launcher
    starts a hydra_pmi_proxy on each node through srun."""
    from gangsched.jobs.mpi_programs import build, mpi_tool

    allreduce = build("allreduce", tmp_path / "bin-mpi")
    cluster = start_cluster(nodes=2, processors_per_node=2)
    assert_allreduce_runs(cluster, slurm, tmp_path, launch.replace("mpiexec", mpi_tool("mpiexec")), allreduce)


@pytest.mark.mpi
@pytest.mark.parametrize("launch", ["srun --mpi=pmix", "mpirun"])
def test_an_open_mpi_program_in_an_allocation_gives_the_result_it_gives_as_a_gang(start_cluster, slurm, tmp_path,
                                                                                  monkeypatch, launch):
    """The nodes' PMIx server for srun's step; and Open MPI's mpirun, whose PRRTE starts a prted on each node
    through srun --ntasks-per-node=1 --kill-on-bad-exit --nodelist=...; the ranks' TCP pinned to loopback
    where the emulated nodes share a host (PRRTE's own messaging takes no loopback alone: it reaches mpirun at
    this host's own address)."""
    from gangsched.jobs.mpi_environments import ensure

    openmpi = ensure("openmpi")
    monkeypatch.setenv("GANG_NODE_PMIX_LIBRARY", str(openmpi.pmix_library))
    allreduce = openmpi.build("allreduce", tmp_path / "bin-mpi")
    cluster = start_cluster(nodes=2, processors_per_node=2)
    for name, value in {**openmpi.variables(), "OMPI_MCA_btl_tcp_if_include": "lo",
                        "OMPI_ALLOW_RUN_AS_ROOT": "1",
                        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}.items():
        monkeypatch.setenv(name, value)  # sbatch's --export=ALL takes them to the batch script
    assert_allreduce_runs(cluster, slurm, tmp_path, launch.replace("mpirun", str(openmpi.bin / "mpirun")), allreduce)


def sleeping(cluster, job: int) -> list:
    """The job's processes that are ``sleep`` (a batch step's srun has the job's environment too)."""
    found = []
    for process in task_processes(cluster.home, job):
        try:
            if process.name() == "sleep":
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_an_srun_killed_ends_its_step_and_leaves_nothing_running(start_cluster, slurm, tmp_path):
    """Killed with -9 it can say nothing: its nodes find its socket gone and end the step's tasks there; a
    step of a batch script ends alone, the script goes on."""
    cluster = start_cluster(nodes=2, processors_per_node=2)
    (tmp_path / "job.sh").write_text("#!/bin/sh\n#SBATCH -N 2 -n 2\nsrun sleep 120 &\necho $! > srun.pid\n"
                                     "wait $!\necho \"after $?\"\nexec sleep 120\n")
    job = submitted(cluster, slurm, "job.sh", cwd=tmp_path)
    wait_until(lambda: len(sleeping(cluster, job)) == 2, 20, "the step's two tasks")
    os.kill(int((tmp_path / "srun.pid").read_text()), signal.SIGKILL)

    def step_ended():
        info = cluster.client.job(job)
        return next((step for step in info.steps if step.step_id == 1 and step.end_time is not None), None)

    step = wait_until(step_ended, 30, "the step to end without its srun")
    assert step.state is JobState.FAILED and cluster.client.job(job).state is JobState.RUNNING, "the job goes on"
    assert (tmp_path / f"slurm-{job}.out").read_text().splitlines()[-1] == "after 137"
    assert len(sleeping(cluster, job)) == 1, "the batch step's own"
    cluster.client.cancel(job, getpass.getuser())
    alone = subprocess.Popen([str(slurm / "srun"), "-n", "2", "sleep", "120"],
                             env={**os.environ, "GANG_MASTER": cluster.client.endpoint})
    own = wait_until(lambda: [each.job_id for each in cluster.client.jobs()
                              if each.state is JobState.RUNNING and each.job_id != job], 20, "srun's own job to run")
    wait_until(lambda: len(sleeping(cluster, own[0])) == 2, 20, "its tasks")
    alone.kill()
    alone.wait()
    wait_until(lambda: cluster.client.job(own[0]).state.is_final, 30, "srun's job to end without it")
    assert not task_processes(cluster.home)


def test_a_step_goes_on_through_a_master_restart_and_srun_gets_its_end(start_cluster, slurm, tmp_path):
    """srun's streams come from the nodes, not the master: a master killed and restarted mid-step loses none
    of them, and srun asks the new one for the step's end."""
    cluster = start_cluster(nodes=2, processors_per_node=2)
    (tmp_path / "job.sh").write_text("#!/bin/sh\n#SBATCH -N 2 -n 2\nsrun -l sh -c 'for i in $(seq 40); do echo $i; "
                                     "sleep 0.1; done; exit 4'\necho \"rc $?\"\n")
    job = submitted(cluster, slurm, "job.sh", cwd=tmp_path)
    wait_until(lambda: len(sleeping(cluster, job)) == 2, 20, "the step to run")
    cluster.local.restart("master", crash=True)
    wait_until(lambda: cluster.client.job(job).state.is_final, 60, "the job to end")
    lines = (tmp_path / f"slurm-{job}.out").read_text().splitlines()
    assert sorted(line for line in lines if line[:2] in ("0:", "1:")) == sorted(
        f"{rank}: {i}" for rank in (0, 1) for i in range(1, 41)), "every line of both tasks"
    assert lines[-1] == "rc 4", lines[-3:]


def test_a_node_lost_fails_srun_s_job_and_srun_names_the_node(start_cluster, slurm):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    process = subprocess.Popen([str(slurm / "srun"), "-n", "4", "sleep", "60"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "GANG_MASTER": cluster.client.endpoint})
    wait_until(lambda: cluster.client.jobs() and len(sleeping(cluster, cluster.client.jobs()[0].job_id)) == 4, 20,
               "its four tasks")
    cluster.local.restart("node2", crash=True)  # its tasks die with it (its watchdog)
    _, err = process.communicate(timeout=60)
    (job,) = cluster.client.jobs(include_finished=True)
    assert (process.returncode, job.state) == (1, JobState.NODE_FAIL), err
    assert "NODE_FAIL" in err and "node2" in err, err
