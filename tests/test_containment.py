"""Nothing escapes a job: children, double forks, setsid daemons and stopped children are held with their task.

Each test runs under both ways a node holds tasks: a cgroup (this machine
can make them) and the process tree under a subreaper (the way of a node
whose cgroups are read-only, e.g. in a container).
"""

import contextlib
import getpass
import os
import signal
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from gangsched.deploy.local import task_processes
from gangsched.noded.containment import choose_containment
from gangsched.protocol.records import JobSpec, JobState, StepSpec
from tests.helpers.clusters import Cluster, is_held, wait_until

pytestmark = pytest.mark.live

# every way a process may leave its parent: 4 live processes per task once started
ESCAPES = """
import os, subprocess, time
if os.fork() == 0:  # a double fork: the grandchild is orphaned
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
subprocess.Popen(["setsid", "sleep", "300"])  # a daemon in a session of its own
if os.fork() == 0:  # a child that stops itself
    os.kill(os.getpid(), 19)
    time.sleep(300)
    os._exit(0)
time.sleep(300)
"""
PER_TASK = 4


@pytest.fixture(params=["cgroup", "process-tree"])
def containment(request, monkeypatch) -> str:
    monkeypatch.setenv("GANG_NODE_CONTAINMENT", request.param)  # the local cluster's node daemons read it
    return request.param


def escaping_job(tasks: int) -> JobSpec:
    return JobSpec(name="escapes", user=getpass.getuser(), tasks=tasks, argv=[sys.executable, "-c", ESCAPES])


def watchdogs_of(daemon: psutil.Process) -> list[int]:
    """The pids of the watchdogs ``daemon`` runs (noded/watchdog.py), not one killed and not yet reaped."""
    found = []
    for child in daemon.children():
        with contextlib.suppress(psutil.Error):  # a killed one: a zombie until the daemon reaps it
            if "watchdog.py" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child.pid)
    return found


def live(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_every_process_of_a_task_stops_and_continues_with_it_and_ends_with_it(start_cluster, containment):
    cluster = start_cluster(nodes=1, quantum_ms=200)
    held, other = (cluster.client.submit(escaping_job(1)) for _ in range(2))
    processes = wait_until(lambda: len(found := task_processes(cluster.home, held)) >= PER_TASK and found, 10,
                           "the task's processes")
    wait_until(lambda: all(is_held(p) for p in live(processes)), 5,
               "all of them stopped while the other job runs")
    # a continued task is continued whole: the child that stopped itself runs too
    wait_until(lambda: all(not is_held(p) for p in live(processes)), 5,
               "all of them running in their turn")
    for job in (held, other):
        cluster.client.cancel(job, getpass.getuser())
    wait_until(lambda: not task_processes(cluster.home), 10, "every process of both jobs to end")
    wait_until(lambda: all(info.state is JobState.CANCELLED for info in cluster.client.jobs([held, other])), 10,
               "both jobs cancelled")


def test_a_second_step_s_tasks_stop_and_continue_with_the_job_s_first(start_cluster, containment):
    """A step started in a running allocation (``StartStep``): its tasks are the job's on their node, stopped
    while another job has the processor and continued in the job's turn, together with step 0's."""
    cluster = start_cluster(nodes=1, quantum_ms=200)
    user = getpass.getuser()
    job = cluster.client.submit(JobSpec(name="alloc", user=user, tasks=1, argv=["sleep", "300"]))
    cluster.client.wait_until_running([job], timeout_s=10)
    assert cluster.client.start_step(job, user, StepSpec(argv=[sys.executable, "-c", ESCAPES])) == 1
    other = cluster.client.submit(JobSpec(name="other", user=user, tasks=1, argv=["sleep", "300"]))

    def steps() -> dict[str, list[psutil.Process]]:
        found: dict[str, list[psutil.Process]] = {}
        for process in live(task_processes(cluster.home, job)):
            with contextlib.suppress(psutil.Error):
                found.setdefault(process.environ()["GANG_STEP_ID"], []).append(process)
        return found

    both = wait_until(lambda: len((found := steps()).get("1", [])) >= PER_TASK and "0" in found and found, 10,
                      "both steps' processes")
    processes = [process for step in both.values() for process in step]
    for _ in range(2):  # turns of the rows: every process of both steps at once
        wait_until(lambda: all(is_held(p) for p in live(processes)), 5, "both steps stopped while the other job runs")
        wait_until(lambda: all(not is_held(p) for p in live(processes)), 5, "both steps running in the job's turn")
    for each in (job, other):
        cluster.client.cancel(each, user)
    wait_until(lambda: not task_processes(cluster.home), 10, "every process of both jobs and both steps to end")
    wait_until(lambda: cluster.client.jobs([job])[0].state is JobState.CANCELLED, 10,
               "the job cancelled once every task of both steps has ended")


# a task that starts a process once it has run for a while: alone on its node, through switches that
# signal nothing, after which the node does not look for new processes
FORKS_LATER = """
import os, time
time.sleep(1.0)
if os.fork() == 0:
    time.sleep(300)
    os._exit(0)
time.sleep(300)
"""


@contextlib.contextmanager
def beside_another_job(cluster: Cluster, program: str) -> Iterator[int]:
    """A one-task job running ``program`` alone until it has two processes, then beside a second job on
    its node, which stops it every other quantum; at the end both are cancelled, and their processes gone."""
    user = getpass.getuser()
    job = cluster.client.submit(JobSpec(name="forks", user=user, tasks=1, argv=[sys.executable, "-c", program]))
    wait_until(lambda: len(task_processes(cluster.home, job)) == 2, 10, "the task and the process it started")
    other = cluster.client.submit(JobSpec(name="other", user=user, tasks=1, argv=["sleep", "300"]))
    yield job
    for each in (job, other):
        cluster.client.cancel(each, user)
    wait_until(lambda: not task_processes(cluster.home), 10, "every process of both jobs to end")


def test_a_process_started_between_signals_is_stopped_with_its_task(start_cluster, containment):
    cluster = start_cluster(nodes=1, quantum_ms=100)
    with beside_another_job(cluster, FORKS_LATER) as job:
        processes = task_processes(cluster.home, job)
        # the switch that stops the task signals the process it had at the last look; the look after it
        # gives the new one the same signal
        wait_until(lambda: all(is_held(p) for p in processes), 5,
                   "both stopped while the other job runs")


# a chain of forks: each process starts the next and exits, a new pid every 50 ms, the
# way a process outruns signals sent to the pids seen a moment before (the first one stays)
FORK_CHAIN = """
import os, time
if os.fork() == 0:
    while True:
        time.sleep(0.05)
        if os.fork():
            os._exit(0)
time.sleep(300)
"""


def test_a_chain_of_forks_is_stopped_with_its_task(start_cluster, containment):
    cluster = start_cluster(nodes=1, quantum_ms=300)
    with beside_another_job(cluster, FORK_CHAIN) as job:

        def stopped_whole() -> list[int] | None:
            """The pids of the task and of the chain's newest process, if both are stopped."""
            processes = task_processes(cluster.home, job)
            try:
                if len(processes) == 2 and all(is_held(p) for p in processes):
                    return sorted(p.pid for p in processes)
            except psutil.NoSuchProcess:  # a link of the chain ended: it was running
                pass
            return None

        held = wait_until(stopped_whole, 10, "the task and the chain stopped while the other job runs")
        wait_until(lambda: stopped_whole() != held, 10, "the chain going on in the task's next turn")


def test_a_task_that_exits_takes_what_it_started_with_it(start_cluster, containment):
    cluster = start_cluster(nodes=2)
    leader_returns = ESCAPES.rsplit("time.sleep(300)", 1)[0] + "time.sleep(1)\n"
    job = cluster.client.submit(JobSpec(name="leaves", user=getpass.getuser(), tasks=2,
                                        argv=[sys.executable, "-c", leader_returns]))
    wait_until(lambda: (info := cluster.client.job(job)).state.is_final and info, 15, "the job to end")
    wait_until(lambda: not task_processes(cluster.home, job), 10, "what its tasks started to end with them")


def test_a_fork_bomb_fails_its_own_forks_past_its_tasks_process_limit(start_cluster, monkeypatch):
    monkeypatch.setenv("GANG_NODE_TASK_PIDS_MAX", "40")
    monkeypatch.setenv("GANG_NODE_TASK_PIDS_V1", "true")  # where only cgroup v1 has the controller (here)
    cluster = start_cluster(nodes=1)
    bomb = "n=0; while [ $n -lt 200 ]; do sleep 30 & n=$((n+1)); done"
    job = cluster.client.submit(JobSpec(name="bomb", user=getpass.getuser(), tasks=1, argv=["sh", "-c", bomb]))
    info = wait_until(lambda: (info := cluster.client.job(job)).state.is_final and info, 30, "the bomb to end")
    assert info.state is JobState.FAILED, info.reason
    output = (cluster.home / "nodes" / "node1" / f"job-{job}.0.out").read_text()
    assert "fork" in output.lower(), output
    wait_until(lambda: not task_processes(cluster.home, job), 10, "what it forked to end with it")
    healthy = cluster.client.submit(JobSpec(name="after", user=getpass.getuser(), tasks=1, argv=["true"]))
    ended = wait_until(lambda: (info := cluster.client.job(healthy)).state.is_final and info, 30, "the next job")
    assert ended.state is JobState.COMPLETED, ended.reason


def test_a_process_tree_takes_no_process_for_a_jobs_by_what_its_environment_says(start_cluster, monkeypatch):
    """Another job's marks, forged in an orphan's environment: the orphan stays its own job's, which ends it
    with itself, and the job it named is not failed for it."""
    monkeypatch.setenv("GANG_NODE_CONTAINMENT", "process-tree")
    cluster = start_cluster(nodes=1, quantum_ms=100)
    user = getpass.getuser()
    victim = cluster.client.submit(JobSpec(name="victim", user=user, tasks=1, argv=["sleep", "300"]))
    wait_until(lambda: cluster.client.job(victim).state is JobState.RUNNING, 15, "the victim to run")
    # the subshell exits at once: the loop is orphaned, the node daemon's child (a subreaper)
    forged = f"(env -i GANG_JOB_ID={victim} GANG_RANK=0 GANG_PROGRESS_FILE=$GANG_PROGRESS_FILE sh -c " \
        "'while :; do :; done' &); sleep 300"
    attacker = cluster.client.submit(JobSpec(name="attacker", user=user, tasks=1, argv=["sh", "-c", forged]))
    wait_until(lambda: len(task_processes(cluster.home, victim)) >= 2, 15, "the forged orphan to run")
    time.sleep(3)  # a wait for what must not happen: dozens of the victim's stretches out of its slot
    assert cluster.client.job(victim).state is JobState.RUNNING, cluster.client.job(victim).reason
    cluster.client.cancel(attacker, user)
    wait_until(lambda: len(task_processes(cluster.home, victim)) == 1, 15, "the orphan to end with its own job")
    assert cluster.client.job(victim).state is JobState.RUNNING


def test_a_killed_node_daemon_leaves_nothing_running_or_stopped(start_cluster, containment):
    cluster = start_cluster(nodes=2, quantum_ms=200)
    jobs = [cluster.client.submit(escaping_job(2)) for _ in range(2)]  # one runs, one is stopped
    wait_until(lambda: len(task_processes(cluster.home)) >= 4 * PER_TASK, 10, "every task's processes")
    for node in ("node1", "node2"):
        os.kill(cluster.local.state().pids[node], signal.SIGKILL)
    wait_until(lambda: not task_processes(cluster.home), 10, "every process of every task to be killed")
    assert len(jobs) == 2


def test_a_node_daemon_killed_after_its_watchdog_leaves_nothing_running_or_stopped(start_cluster, containment):
    # the watchdog is what ends a task whose daemon dies: one that died first is replaced at once
    cluster = start_cluster(nodes=1, quantum_ms=200)
    jobs = [cluster.client.submit(escaping_job(1)) for _ in range(2)]  # one runs, one is stopped
    wait_until(lambda: len(task_processes(cluster.home)) >= 2 * PER_TASK, 10, "every task's processes")
    daemon = psutil.Process(cluster.local.state().pids["node1"])
    first = watchdogs_of(daemon)
    assert len(first) == 1
    os.kill(first[0], signal.SIGKILL)
    wait_until(lambda: (now := watchdogs_of(daemon)) and now != first, 10, "another watchdog in its place")
    daemon.kill()
    wait_until(lambda: not task_processes(cluster.home), 10, "every process of every task to be killed")
    assert len(jobs) == 2


def test_a_watchdog_that_keeps_dying_is_replaced_at_most_once_a_second(tmp_path):
    containment = choose_containment("watchdog-test", tmp_path, "auto")
    me = psutil.Process()

    def watchdog() -> psutil.Process | None:
        return next((psutil.Process(pid) for pid in watchdogs_of(me)), None)

    try:
        first = wait_until(watchdog, 10, "the first watchdog")
        first.kill()
        second = wait_until(lambda: (found := watchdog()) and found.pid != first.pid and found, 10, "a second")
        second.kill()
        third = wait_until(lambda: (found := watchdog()) and found.pid != second.pid and found, 10, "a third")
        assert third.create_time() - second.create_time() >= 0.9  # the second lived less than a second
    finally:
        containment.close()
