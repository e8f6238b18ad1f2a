"""Day-to-day operation live, as an administrator types it: a node drained, a job held and released,
a job updated, a running gang suspended and resumed (its tasks frozen, its CPU time still), `gang nodes -R`,
`gang show` and `gang admin log` (docs/operations.md)."""

import getpass
import json
import os

import pytest

from gangsched.deploy.local import task_processes
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.cluster_commands import cpu_ns, gang
from tests.helpers.clusters import is_held, wait_until

pytestmark = [pytest.mark.live, pytest.mark.skipif(os.geteuid() != 0, reason="gang admin is root's")]


def test_a_drain_a_hold_and_a_suspension_as_an_administrator_types_them(start_cluster):
    cluster = start_cluster(nodes=4)
    client, user = cluster.client, getpass.getuser()
    spinning = client.submit(JobSpec(name="spin", user=user, tasks=2, argv=["sh", "-c", "while :; do :; done"]))
    wait_until(lambda: client.job(spinning).state is JobState.RUNNING and cpu_ns(cluster, spinning) > 0, 20,
               "the gang to run")
    on = client.job(spinning).node_names
    drained = gang(cluster, "admin", "node", "drain", on[0], "--reason", "fan noise")
    assert drained.returncode == 0 and drained.stdout == f"{on[0]}: draining\n", drained.stderr
    reasons = gang(cluster, "nodes", "-R").stdout.splitlines()
    assert reasons[0].split() == ["REASON", "USER", "TIMESTAMP", "NODELIST"]
    assert reasons[1].startswith("fan noise") and reasons[1].split()[-3] == "root" and reasons[1].endswith(on[0])
    states = dict(line.split()[:2] for line in gang(cluster, "nodes", "-o", "node,state").stdout.splitlines()[1:])
    assert states[on[0]] == "draining"  # its gang runs on

    wide = json.loads(gang(cluster, "submit", "--json", "-n", "4", "--", "sleep", "30").stdout)["job_id"]
    held = json.loads(gang(cluster, "submit", "--json", "-H", "-n", "1", "--", "sleep", "30").stdout)["job_id"]
    queue = {line.split()[0]: line for line in gang(cluster, "queue", "-o", "jobid,st,nodelist").stdout.splitlines()}
    assert queue[str(held)].split()[1] == "PD" and "(JobHeldUser)" in queue[str(held)]
    assert client.job(wide).state is JobState.PENDING  # it needs the drained node
    updated = gang(cluster, "update", str(held), "TimeLimit=10:00", "Name=short")
    assert updated.stdout.splitlines() == [f"job {held}: TimeLimit 1-00:00:00 -> 10:00",
                                         f"job {held}: Name sleep -> short"]
    released = gang(cluster, "release", str(held))
    assert released.returncode == 0, released.stderr
    wait_until(lambda: client.job(held).state is JobState.RUNNING, 20, "the released job to start")
    assert on[0] not in client.job(held).node_names

    suspended = gang(cluster, "admin", "suspend", "--json", str(spinning))
    assert suspended.returncode == 0 and json.loads(suspended.stdout)[0]["state"] == "suspended", suspended.stderr
    wait_until(lambda: all(is_held(process) for process in task_processes(cluster.home, spinning)), 20,
               "every task of the gang to be held")
    frozen_at, ran_s, quantum = cpu_ns(cluster, spinning), client.job(spinning).ran_s, client.matrix().quantum
    wait_until(lambda: client.matrix().quantum >= quantum + 10, 20, "ten quanta")
    assert cpu_ns(cluster, spinning) - frozen_at < 20_000_000 and client.job(spinning).ran_s == ran_s
    shown = gang(cluster, "show", "job", str(spinning)).stdout.splitlines()
    assert "state=suspended" in shown and "reason=Suspended by root" in shown and "preemptions[0].by_user=root" in shown
    assert gang(cluster, "admin", "resume", str(spinning)).returncode == 0
    wait_until(lambda: cpu_ns(cluster, spinning) > frozen_at + 50_000_000, 20, "the gang to run again")

    client.cancel(spinning, user)
    wait_until(lambda: "state=drained" in gang(cluster, "show", "node", on[0]).stdout.splitlines(), 20,
               "the node to be drained once its gang ended")
    assert "reason.text=fan noise" in gang(cluster, "show", "node", on[0]).stdout.splitlines()
    assert gang(cluster, "admin", "node", "resume", on[0]).returncode == 0
    wait_until(lambda: client.job(wide).state is JobState.RUNNING, 20, "the wide job to start once it is resumed")
    refused = gang(cluster, "release", str(held))
    assert refused.returncode == 1 and f"job {held} is not held: nothing changed" in refused.stderr

    log = json.loads(gang(cluster, "admin", "log", "--json").stdout)
    assert [(each["command"], each["result"].split(":")[0]) for each in log] == [
        (f"admin node drain {on[0]} --reason 'fan noise'", "done"),
        (f"update {held} TimeLimit=10:00 Name=short", "done"),
        (f"release {held}", "done"),
        (f"admin suspend {spinning}", "done"),
        (f"admin resume {spinning}", "done"),
        (f"admin node resume {on[0]}", "done"),
        (f"release {held}", "refused"),
    ]
    for job in (held, wide):
        client.cancel(job, user)


def test_a_users_limit_holds_back_their_jobs_past_it(start_cluster):
    cluster = start_cluster(nodes=2)
    client, user = cluster.client, getpass.getuser()
    limited = gang(cluster, "admin", "limit", user, "--max-jobs", "1", "--max-submit-jobs", "3")
    assert limited.returncode == 0, limited.stderr
    users = json.loads(gang(cluster, "admin", "users", "--json").stdout)
    assert [each["limits"] for each in users if each["user"] == user] == [[{
        "partition": None, "max_submit_jobs": 3, "max_jobs": 1, "max_cpus": None, "max_memory": None}]]
    jobs = [json.loads(gang(cluster, "submit", "--json", "--", "sleep", "30").stdout)["job_id"] for _ in range(3)]
    refused = gang(cluster, "submit", "--", "sleep", "30")
    assert refused.returncode == 1 and "MaxSubmitJobs 3: nothing submitted" in refused.stderr
    wait_until(lambda: client.job(jobs[0]).state is JobState.RUNNING, 20, "the first job to start")
    queue = {line.split()[0]: line for line in gang(cluster, "queue", "-o", "jobid,st,nodelist").stdout.splitlines()}
    assert "(QOSMaxJobsPerUserLimit)" in queue[str(jobs[1])] and "(QOSMaxJobsPerUserLimit)" in queue[str(jobs[2])]
    client.cancel(jobs[0], user)
    wait_until(lambda: client.job(jobs[1]).state is JobState.RUNNING, 20, "the next one to start")
    assert gang(cluster, "admin", "limit", user, "--max-jobs", "-1").returncode == 0
    wait_until(lambda: client.job(jobs[2]).state is JobState.RUNNING, 20, "the last one to start once lifted")
    for job in jobs[1:]:
        client.cancel(job, user)


def test_a_reservation_keeps_long_jobs_off_its_node_and_starts_its_job_in_its_window(start_cluster):
    cluster = start_cluster(nodes=4)
    client, user = cluster.client, getpass.getuser()
    booked = gang(cluster, "admin", "reservation", "create", "maint", "--nodes", "node4", "--start", "now+3",
                  "--duration", "1:00", "--users", user, "--flags", "maint", "--json")
    assert booked.returncode == 0, booked.stderr
    (reservation,) = json.loads(booked.stdout)
    mine = json.loads(gang(cluster, "submit", "--json", "--reservation", "maint", "--", "sleep", "30").stdout)["job_id"]
    wide = json.loads(gang(cluster, "submit", "--json", "-n", "4", "-t", "600", "--", "sleep", "30").stdout)["job_id"]
    wait_until(lambda: client.job(wide).reason == "ReqNodeNotAvail, Reserved for maint", 10,
               "the wide job to say it waits for the reservation")
    assert client.job(mine).reason == "Reservation: maint has not begun"
    started = wait_until(lambda: client.job(mine).start_time, 30, "the reservation's job to start")
    assert started >= reservation["start"] and client.job(mine).node_names == ["node4"]
    print(f"the reservation's job started {started - reservation['start']:.3f} s after the window opened")
    nodes = gang(cluster, "nodes", "-o", "node,reservation").stdout.splitlines()
    assert nodes[0].split() == ["NODELIST", "RESERVATION"] and nodes[4].split() == ["node4", "maint"]
    queue = gang(cluster, "queue", "-o", "jobid,reservation").stdout.splitlines()
    assert [str(mine), "maint"] in [line.split() for line in queue]
    listed = json.loads(gang(cluster, "admin", "reservation", "list", "--json").stdout)
    assert [(each["name"], each["nodes"], each["jobs"]) for each in listed] == [("maint", ["node4"], [mine])]
    refused = gang(cluster, "admin", "reservation", "delete", "maint")
    assert refused.returncode == 1 and f"reservation maint has jobs {mine}: cancel them first" in refused.stderr
    for job in (mine, wide):
        client.cancel(job, user)
    wait_until(lambda: gang(cluster, "admin", "reservation", "delete", "maint").returncode == 0, 20,
               "the reservation to be deleted once its job ended")
    assert json.loads(gang(cluster, "admin", "reservation", "list", "--json").stdout) == []


def test_commands_through_a_master_kill_are_each_recorded_once_and_leave_every_job_as_they_said(start_cluster):
    from gangsched.bench.operations_restarts import run_operations_restart

    cluster = start_cluster(nodes=2)
    result = run_operations_restart(cluster.local, submissions=80, clients=4)
    assert (result.accepted, result.commands, result.recorded, result.recorded_twice, result.wrong_state,
            result.lost) == (80, 80, 80, 0, 0, 0), result
