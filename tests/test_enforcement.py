"""Descheduled means not running: a task that arms a timer sending itself SIGCONT cannot run outside
its gang's slot (noded/holding.py, docs/architecture.md "Descheduled means not running").

Under a cgroup the node freezes a descheduled task, and no signal resumes it; by process tree the
node looks for descheduled tasks that run anyway, stops them again, and ends the job of one that
keeps resuming.
"""

import getpass
import subprocess
import sys
from pathlib import Path

import pytest

from gangsched.deploy.local import progress_folder, task_processes
from gangsched.jobs.adversaries import RESUMES_ITSELF, RESUMES_OTHERS
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.clusters import cgroup_frozen, wait_until

pytestmark = pytest.mark.live

SPINS = "while True:\n    pass\n"


def job(name: str, program: str) -> JobSpec:
    return JobSpec(name=name, user=getpass.getuser(), tasks=1, argv=[sys.executable, "-c", program])


def frozen(home: Path, job_id: int) -> bool:
    """Whether the job's task's cgroup v2 group says it is frozen."""
    return any(cgroup_frozen(process.pid) for process in task_processes(home, job_id)[:1])


def test_a_frozen_task_stays_frozen_whatever_signals_it_sends_itself(start_cluster, monkeypatch):
    monkeypatch.setenv("GANG_NODE_CONTAINMENT", "cgroup")
    cluster = start_cluster(nodes=1, quantum_ms=100, mpl=2)
    greedy = cluster.client.submit(job("greedy", RESUMES_ITSELF))
    honest = cluster.client.submit(job("honest", SPINS))
    wait_until(lambda: all(info.state is JobState.RUNNING for info in cluster.client.jobs([greedy, honest])), 15,
               "both jobs to run")
    # in the honest job's quanta the greedy task's group is frozen, its timer's SIGCONTs notwithstanding
    wait_until(lambda: frozen(cluster.home, greedy), 10, "the descheduled greedy task frozen")
    wait_until(lambda: not frozen(cluster.home, greedy), 10, "the greedy task thawed in its own quantum")
    wait_until(lambda: frozen(cluster.home, greedy), 10, "and frozen again")
    assert cluster.client.job(greedy).state is JobState.RUNNING  # frozen, it never escaped: nothing to end
    for job_id in (greedy, honest):
        cluster.client.cancel(job_id, getpass.getuser())
    wait_until(lambda: not task_processes(cluster.home), 15, "both jobs' tasks to end, frozen or not")


def test_by_process_tree_a_task_that_keeps_being_resumed_ends_its_job(start_cluster, monkeypatch):
    """The greedy task's own timer resumes it, and so does another process of its account, every 5 ms.

    The process from outside is what makes the test certain: the timer may stop resuming the task
    (jobs/adversaries.py)."""
    monkeypatch.setenv("GANG_NODE_CONTAINMENT", "process-tree")
    cluster = start_cluster(nodes=1, quantum_ms=100, mpl=2)
    greedy = cluster.client.submit(job("greedy", RESUMES_ITSELF))
    honest = cluster.client.submit(job("honest", SPINS))
    resumer = subprocess.Popen([sys.executable, "-c", RESUMES_OTHERS, "3600", str(progress_folder(cluster.home)),
                                str(greedy)])
    try:
        ended = wait_until(lambda: (info := cluster.client.job(greedy)).state.is_final and info, 60,
                           "the self-resuming job to be ended")
    finally:
        resumer.kill()
        resumer.wait()
    assert ended.state is JobState.FAILED
    assert "kept running while its gang was descheduled" in ended.reason, ended.reason
    wait_until(lambda: not task_processes(cluster.home, greedy), 10, "its task to be gone")
    assert cluster.client.job(honest).state is JobState.RUNNING  # the honest job runs on
    cluster.client.cancel(honest, getpass.getuser())


def test_a_single_stray_sigcont_is_only_undone(start_cluster, monkeypatch):
    """By process tree: something continues a descheduled task once; it is stopped again and its job runs on."""
    import os
    import signal

    monkeypatch.setenv("GANG_NODE_CONTAINMENT", "process-tree")
    cluster = start_cluster(nodes=1, quantum_ms=2000, mpl=2)  # long quanta: no switch comes between
    first = cluster.client.submit(job("first", SPINS))
    second = cluster.client.submit(job("second", SPINS))
    wait_until(lambda: all(info.state is JobState.RUNNING for info in cluster.client.jobs([first, second])), 15,
               "both jobs to run")
    stopped = wait_until(lambda: next((p for job_id in (first, second) for p in task_processes(cluster.home, job_id)
                                       if p.status() == "stopped"), None), 10, "a descheduled task")
    os.kill(stopped.pid, signal.SIGCONT)
    log = cluster.home / "logs" / "node1.log"
    wait_until(lambda: "ran while descheduled: stopped again (1 in this stretch)" in log.read_text(), 5,
               "the node to stop it again")
    assert stopped.status() == "stopped"
    assert all(info.state is JobState.RUNNING for info in cluster.client.jobs([first, second]))
    for job_id in (first, second):
        cluster.client.cancel(job_id, getpass.getuser())
