"""`gang queue` and `gang nodes` as scripts read them: fixed columns that fit 80, never a cut
header, filters by user and state, chosen fields, JSON; bad choices are one clear line.

The list commands read the master's replies as plain maps, without the models: the first
test holds those maps to the models."""

import getpass
import json

import pytest

from gangsched.cli import table
from gangsched.protocol.codec import encode
from gangsched.protocol.frames import unpack
from gangsched.protocol.messages import JobList, NodeList
from gangsched.protocol.records import JobInfo, JobSpec, JobState, NodeInfo
from tests.helpers.clusters import wait_until


def test_the_maps_the_list_commands_read_are_the_models():
    spec = JobSpec(name="mapped", user="alice", tasks=2, argv=["true"], estimate_s=60,
                   array_job_id=7, array_index=3, mem_per_cpu=128 << 20, partition="debug")
    job = JobInfo(job_id=8, spec=spec, state=JobState.FAILED, reason="rank 1 exited 3", submit_time=1.5e9,
                  start_time=1.5e9 + 10, end_time=1.5e9 + 70, node_names=["n1", "n2"], processors=[0, 0],
                  exit_code=3, util_pct=97.5, predicted_pct=90.0, barriers=12, barriers_per_s=0.2,
                  migration_s=[0.4], max_rss=50 << 20)
    node = NodeInfo(name="n1", state="up", cpu_share=1.0, processors=2, processors_used=1, jobs=[8], seen_ago_s=0.2,
                    via="r1", memory=512 << 20, memory_committed=300 << 20, partitions=["batch", "debug"])
    job_map = unpack(encode(JobList(jobs=[job], more=True)))["jobs"][0]
    node_map = unpack(encode(NodeList(nodes=[node])))["nodes"][0]

    # --json prints the maps: the same document as the models' own JSON
    assert json.loads(json.dumps(job_map)) == job.model_dump(mode="json")
    assert json.loads(json.dumps(node_map)) == node.model_dump(mode="json")
    # every column reads fields the models have, and shows what they hold
    shown = table.render(list(table.JOB_FIELDS.values()), [job_map]).splitlines()[1].split()
    assert shown[:6] == ["8", "debug", "mapped", "alice", "F", "FAILED"] and "7_3" in shown and "(rank" in shown
    assert "128Mc" in shown and "50M" in shown  # MIN_MEMORY per task, MAXRSS
    assert table.render(list(table.NODE_FIELDS.values()), [node_map]).splitlines()[1].split() == \
        ["n1", "up", "batch,deb", "1", "1/2", "512", "300", "0.2", "8", "r1", "-"]


@pytest.mark.live


def test_the_queue_fits_80_columns_filters_and_speaks_json(gang):
    client = gang.client
    done = client.submit(JobSpec(name="quick", user=getpass.getuser(), tasks=1, argv=["true"]))
    wait_until(lambda: client.job(done).state.is_final, 20, "the quick job to end")
    running = client.submit(JobSpec(name="a-rather-long-job-name", user=getpass.getuser(), tasks=2,
                                    argv=["sleep", "60"]))
    waiting = client.submit(JobSpec(name="second", user=getpass.getuser(), tasks=2, argv=["sleep", "60"]))
    wait_until(lambda: client.job(running).state is JobState.RUNNING, 20, "the first job to start")

    shown = gang("queue")
    assert shown.returncode == 0, shown.stderr
    header, *rows = shown.stdout.splitlines()
    assert header.split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "TASKS", "UTIL%",
                              "NODELIST(REASON)"]
    assert all(len(line) <= 80 for line in shown.stdout.splitlines())
    by_id = {int(row.split()[0]): row.split() for row in rows}
    assert set(by_id) == {running, waiting}  # finished jobs only with --all
    assert by_id[running][1:3] == ["batch", "a-rather"] and by_id[running][4] == "R"
    assert by_id[waiting][4] == "PD"
    assert gang("queue", "-p", "batch", "-o", "jobid").stdout.split()[1:] == [str(running), str(waiting)]
    assert gang("queue", "-p", "debug", "-o", "jobid").stdout.split() == ["JOBID"]

    assert [line.split()[0] for line in gang("queue", "-t", "PD", "-o", "jobid").stdout.splitlines()] == \
        ["JOBID", str(waiting)]
    assert gang("queue", "-t", "completed", "-o", "jobid,st,exit").stdout.splitlines()[1].split() == \
        [str(done), "CD", "0"]
    assert gang("queue", "-u", "nobody-here").stdout.splitlines() == [gang("queue").stdout.splitlines()[0]]

    listed = json.loads(gang("queue", "--all", "--json").stdout)
    assert {job["job_id"] for job in listed} == {running, waiting, done}
    assert {job["job_id"]: job["state"] for job in listed}[running] == "running"
    assert all({"spec", "state", "node_names", "util_pct"} <= set(job) for job in listed)

    bad_field = gang("queue", "-o", "jobid,colour")
    assert bad_field.returncode == 2 and "no field colour: the fields are jobid, partition, name" in bad_field.stderr
    bad_state = gang("queue", "-t", "asleep")
    assert bad_state.returncode == 2 and "no state 'asleep'" in bad_state.stderr


@pytest.mark.live
def test_the_nodes_list_fits_and_speaks_json(gang):
    shown = gang("nodes")
    assert shown.returncode == 0, shown.stderr
    header, *rows = shown.stdout.splitlines()
    assert header.split() == ["NODELIST", "STATE", "SHARE", "PROCS(U/T)", "MEMORY", "ALLOC_MEM", "SEEN_S", "JOBS"]
    assert sorted(row.split()[0] for row in rows) == ["node1", "node2"]
    listed = json.loads(gang("nodes", "--json").stdout)
    assert sorted(node["name"] for node in listed) == ["node1", "node2"]
    assert all(node["state"] == "up" and node["partitions"] == ["batch"] for node in listed)
    assert gang("nodes", "-s").stdout.splitlines() == [
        "PARTITION AVAIL  TIMELIMIT NODES STATE NODELIST", "batch*    up      infinite     2 up    node[1-2]"]
    (batch,) = json.loads(gang("nodes", "-s", "--json").stdout)
    assert (batch["name"], batch["nodes"], batch["policy"], batch["default"]) == ("batch", ["node1", "node2"], "fcfs",
                                                                                True)


@pytest.mark.live
def test_submit_cancel_and_the_matrix_speak_json(gang):
    submitted = gang("submit", "--json", "-n", "2", "--", "sleep", "60")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["job_id"]
    wait_until(lambda: gang.client.job(job_id).state is JobState.RUNNING, 20, "the job to start")
    view = json.loads(gang("matrix", "--json").stdout)
    assert sorted(view["nodes"]) == ["node1", "node2"] and [job_id, job_id] in view["rows"]
    assert json.loads(gang("cancel", "--json", str(job_id)).stdout) == [{"job_id": job_id, "state": "cancelled"}]
    both = gang("matrix", "--json", "--watch")
    assert both.returncode == 2 and "not with --watch" in both.stderr


@pytest.mark.live
def test_with_json_an_error_is_json_on_stderr(gang):
    refused = gang("cancel", "--json", "999")
    assert refused.returncode == 1 and json.loads(refused.stdout) == []  # none cancelled
    error = json.loads(refused.stderr)
    assert "999" in error["error"] and error["code"] == "unknown_job"
    unreachable = gang("queue", "--json", "--master", "ipc:///nonexistent/master.sock")
    assert unreachable.returncode == 1 and json.loads(unreachable.stderr)["code"] == "MasterUnreachable"
    plain = gang("cancel", "999")
    assert plain.returncode == 1 and plain.stderr.startswith("Error: ") and len(plain.stderr.splitlines()) == 1


@pytest.mark.live
def test_an_arrays_waiting_jobs_are_one_line_and_its_throttle_holds(gang):
    submitted = gang("submit", "--json", "-a", "0-99%2", "-n", "1", "--", "sleep", "60")
    assert submitted.returncode == 0, submitted.stderr
    first = json.loads(submitted.stdout)["job_id"]
    wait_until(lambda: len(gang("queue", "-t", "R", "-o", "jobid").stdout.splitlines()) == 3, 20,
               "two of the array running")
    _, *rows = gang("queue", "-o", "jobid,st,nodelist").stdout.splitlines()
    assert [row.split() for row in rows] == [
        [f"{first}", "R", "node1"] if rows[0].split()[2] == "node1" else [f"{first}", "R", "node2"],
        rows[1].split(), [f"{first}_[2-99]", "PD", "(JobArrayTaskLimit)"]]
    assert len(gang("queue", "-r").stdout.splitlines()) == 1 + 100  # -r: a line for each
    assert gang("cancel", str(first)).returncode == 0
    wait_until(lambda: f"{first}_[3-99]" in gang("queue").stdout, 20, "the next index to start in its place")


@pytest.mark.live
def test_a_submission_past_the_array_limits_is_one_line_and_submits_nothing(gang):
    for array, why in (("0-1001", "--max-array-size 1001 (indices 0-1000)"), ("0-9%0", "throttle"),
                       ("0-9%11", "more than the array's 10"), ("3-x", "ranges A-B")):
        refused = gang("submit", "-a", array, "--", "true")
        assert refused.returncode != 0 and why in refused.stderr, refused.stderr
        assert [line for line in refused.stderr.splitlines() if line.startswith("Error: ")] == \
            [refused.stderr.strip().splitlines()[-1]]  # one line says why
    assert gang("queue", "--all", "--json").stdout.strip() == "[]"
