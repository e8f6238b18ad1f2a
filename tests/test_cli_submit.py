"""`gang submit` as scripts use it, like sbatch: #GANG directive lines (flags win), --wait and
--follow, dependencies, arrays; and `gang history`, like sacct."""

import datetime
import getpass
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gangsched.cli import job_script
from gangsched.cli.listing import parse_time
from gangsched.protocol.array_ranges import array_indices, array_size, compact, parse_array, span
from gangsched.protocol.dependency_text import read_dependency
from gangsched.protocol.output_pattern import expand
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.clusters import wait_until

SCRIPT = """#!/bin/sh
# a job script: its options come first, as #GANG lines
#GANG -n 1 -J from-script   # a comment after the options
#GANG --export GREETING=hello -o out-%j.%t
echo "$GREETING from $GANG_RANK of $GANG_SIZE"
#GANG -n 9   (after the first command: a comment, as sbatch reads #SBATCH)
"""


def _script(folder: Path, text: str) -> Path:
    path = folder / "job.sh"
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_directives_are_read_until_the_first_command_and_split_like_a_shell(tmp_path):
    assert job_script.directives(_script(tmp_path, SCRIPT)) == \
        ["-n", "1", "-J", "from-script", "--export", "GREETING=hello", "-o", "out-%j.%t"]
    assert job_script.is_script(str(tmp_path / "job.sh")) and not job_script.is_script("/nonexistent")
    with pytest.raises(ValueError, match=r"job.sh:2: No closing quotation"):
        job_script.directives(_script(tmp_path, "#!/bin/sh\n#GANG -J 'open\n"))
    # a directive of 10 MB: refused at once, naming its line (shlex had split it for minutes)
    with pytest.raises(ValueError, match=r"job.sh:3: a #GANG line is at most 4096 characters, this one 10000006"):
        job_script.directives(_script(tmp_path, "#!/bin/sh\n#GANG -n 1\n#GANG " + "x" * 10_000_000 + "\n"))


def test_dependencies_and_arrays_parse_as_slurms():
    assert read_dependency("afterok:3:4,afterany:5,afternotok:6,singleton") == \
        {"after_ok": [3, 4], "after_any": [5], "after_not_ok": [6], "singleton": True}
    assert parse_array("0-3") == ([(0, 3, 1)], None)
    ranges, limit = parse_array("1,5-10:2%2")
    assert list(array_indices(ranges)) == [1, 5, 7, 9] and array_size(ranges) == 4 and limit == 2
    assert parse_array("0-3999999%50") == ([(0, 3_999_999, 1)], 50)  # millions travel as one range
    for bad in ("after:3", "afterok:", "afterok:x", "afterok:0", "afterok:3?afterany:4", "singleton:3"):
        with pytest.raises(ValueError, match="dependency|job id|not supported"):
            read_dependency(bad)
    for bad, why in (("3-1", "upwards"), ("a-b", "ranges A-B"), ("1,1", "overlap"), ("0-5:0", "steps"),
                     ("0-4000001", "4000000"), ("0-9%0", "throttle"), ("0-9%11", "more than the array's 10"),
                     ("0-9%x", "throttle")):
        with pytest.raises(ValueError, match=why):
            parse_array(bad)
    assert compact([5, 6, 7, 9, 12, 13]) == "5-7,9,12-13"
    # SLURM_ARRAY_TASK_COUNT, _MIN, _MAX, _STEP: the step where the indices are evenly spaced, else 1
    for text, whole in (("0-15:4", (4, 0, 12, 4)), ("1,3,5-9:2", (5, 1, 9, 2)), ("7", (1, 7, 7, 1)),
                        ("1,5-10:2", (4, 1, 9, 1)), ("9,0-6:3", (4, 0, 9, 3)),
                        ("0-3999999", (4_000_000, 0, 3_999_999, 1))):
        assert span(parse_array(text)[0]) == whole, text


live = pytest.mark.live


@live
def test_a_scripts_directives_are_options_and_flags_win(gang, tmp_path):
    _script(tmp_path, SCRIPT)
    done = gang("submit", "--wait", "--json", "-n", "2", "job.sh", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = gang.client.job(json.loads(done.stdout)["job_id"])
    assert (job.spec.name, job.spec.tasks) == ("from-script", 2)  # -n 2 on the command line wins over -n 1
    outputs = sorted(path.read_text() for path in tmp_path.glob(f"out-{job.job_id}.*"))
    assert outputs == ["hello from 0 of 2\n", "hello from 1 of 2\n"]
    _script(tmp_path, "#!/bin/sh\n#GANG --tasks-galore 3\ntrue\n")
    bad = gang("submit", "job.sh", cwd=tmp_path)
    assert bad.returncode == 2 and "job.sh's #GANG lines: No such option '--tasks-galore'" in bad.stderr


@live
def test_follow_prints_rank_0s_output_as_it_comes_and_exits_with_the_jobs_status(gang, tmp_path):
    # rank 1 fails last: a rank that fails first ends the job, and the others may be killed mid-output
    followed = gang("submit", "--follow", "-n", "2", "--", "sh", "-c",
                    'echo "first $GANG_RANK"; sleep 0.5; echo "second $GANG_RANK"; [ "$GANG_RANK" = 0 ] || sleep 1; '
                    'exit 4', cwd=tmp_path)
    assert followed.stdout == "first 0\nsecond 0\n", followed.stderr
    assert followed.returncode == 4 and "failed" in followed.stderr
    assert len(list(tmp_path.glob("gang-*.out"))) == 2  # --follow's default output, one per rank


@live
def test_submit_waits_for_the_end_and_exits_with_the_job_status(gang, tmp_path):
    failed = gang("submit", "--wait", "-n", "1", "--", "sh", "-c", "exit 3")
    assert failed.returncode == 3 and "failed" in failed.stdout, failed.stdout + failed.stderr
    done = gang("submit", "--wait", "--json", "-D", str(tmp_path), "-n", "1", "--", "sh", "-c", "pwd > where")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["state"] == "completed" and answer["jobs"] == [
        {"job_id": answer["job_id"], "state": "completed", "exit_code": 0, "reason": ""}]
    assert (tmp_path / "where").read_text().strip() == str(tmp_path)


@live
def test_a_job_waits_for_its_dependencies_and_an_unmet_afterok_cancels_it(gang):
    first = json.loads(gang("submit", "--json", "--", "sh", "-c", "sleep 5; exit 1").stdout)["job_id"]
    after_ok = json.loads(gang("submit", "--json", "-d", f"afterok:{first}", "--", "true").stdout)["job_id"]
    after_any = json.loads(gang("submit", "--json", "-d", f"afterany:{first}", "--", "true").stdout)["job_id"]
    waiting = {job.job_id: job for job in gang.client.jobs([after_ok, after_any])}
    assert all(job.state is JobState.PENDING and job.reason.startswith("Dependency") for job in waiting.values())
    ended = wait_until(lambda: (jobs := gang.client.jobs([first, after_ok, after_any]))
                       and all(job.state.is_final for job in jobs) and jobs, 30, "the three jobs to end")
    states = {job.job_id: job for job in ended}
    assert states[first].state is JobState.FAILED
    assert states[after_ok].state is JobState.CANCELLED and "DependencyNeverSatisfied" in states[after_ok].reason
    assert states[after_any].state is JobState.COMPLETED
    assert states[after_any].start_time >= states[first].end_time
    never = gang("submit", "-d", f"afterok:{first}", "--", "true")
    assert never.returncode == 1 and "can never be satisfied" in never.stderr
    unknown = gang("submit", "--json", "-d", "afterany:999", "--", "true")
    assert unknown.returncode == 1 and json.loads(unknown.stderr)["code"] == "unknown_job"


@live
def test_an_array_is_one_job_per_index_named_in_its_output_and_environment(gang, tmp_path):
    submitted = gang("submit", "--wait", "--json", "-a", "0-1,5", "-o", "array-%A-%a.out", "--",
                     "sh", "-c", 'echo "$GANG_ARRAY_JOB_ID $GANG_ARRAY_TASK_ID $GANG_JOB_ID"', cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    answer = json.loads(submitted.stdout)
    first, ids = answer["job_id"], answer["job_ids"]
    assert ids == [first, first + 1, first + 2] and [job["state"] for job in answer["jobs"]] == ["completed"] * 3
    for index, job_id in zip((0, 1, 5), ids):
        assert (tmp_path / f"array-{first}-{index}.out").read_text() == f"{first} {index} {job_id}\n"
    shown = gang("queue", "--all", "-o", "jobid,array", *map(str, ids))
    assert shown.stdout.split()[2:] == [str(ids[0]), f"{first}_0", str(ids[1]), f"{first}_1", str(ids[2]), f"{first}_5"]


@live
def test_history_lists_the_jobs_of_a_time_window_like_sacct(gang):
    early = json.loads(gang("submit", "--wait", "--json", "--", "true").stdout)["job_id"]
    later = json.loads(gang("submit", "--wait", "--json", "--", "true").stdout)["job_id"]
    between = (gang.client.job(early).end_time + gang.client.job(later).submit_time) / 2
    today = json.loads(gang("history", "--json").stdout)
    assert {early, later} <= {job["job_id"] for job in today}
    since = gang("history", "--json", "-S", datetime.datetime.fromtimestamp(between).isoformat())
    assert [job["job_id"] for job in json.loads(since.stdout)] == [later]
    before = gang("history", "-E", datetime.datetime.fromtimestamp(between).isoformat(), "-o", "jobid")
    assert before.stdout.split() == ["JOBID", str(early)]
    bad = gang("history", "-S", "yesterday-ish")
    assert bad.returncode == 2 and "is not a time: now[+|-COUNT[minutes|hours|days|weeks]]" in bad.stderr


def test_times_read_as_sacct_reads_them():
    assert abs(parse_time("now") - time.time()) < 1
    assert abs(parse_time("now-2h") - (time.time() - 7200)) < 1
    assert parse_time("2026-01-02T03:04:05") == datetime.datetime(2026, 1, 2, 3, 4, 5).timestamp()
    today = datetime.date.today()
    assert parse_time("9:30") == datetime.datetime.combine(today, datetime.time(9, 30)).timestamp()


@pytest.mark.live
def test_mpi_list_says_what_the_cluster_serves_and_the_default(gang):
    listed = gang("submit", "--mpi", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["MPI", "NODES", "NOTE"]
    served = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert served["none"][:2] == ["2/2", "the"] and served["pmi1"] == ["2/2"] and served["pmi2"] == ["2/2"]
    assert set(served) == {"none", "pmi1", "pmi2", "pmix"}


def test_an_output_pattern_reads_as_slurms_and_a_doubled_percent_is_one():
    array = expand("out-%A_%a-%%A-%%j-%j.%t-%x%", {"A": 10, "a": 2}, final=False)  # the master's part
    assert array == "out-10_2-%%A-%%j-%j.%t-%x%"
    assert expand(array, {"j": 12, "t": 3}, final=True) == "out-10_2-%A-%j-12.3-%x%"  # the node's


@pytest.mark.live
@pytest.mark.parametrize("command", [["queue", "--all"], ["submit", "--mpi", "list"], ["matrix"]])
def test_a_command_whose_reader_went_away_ends_quietly_with_status_0(gang, command):
    """`gang queue | head -1` with more output than head reads: no traceback, status 0, as squeue's."""
    for _ in range(3):
        gang.client.submit(JobSpec(name="x", user=getpass.getuser(), tasks=1, argv=["true"]))
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write
    try:
        done = subprocess.run([sys.executable, "-m", "gangsched.cli", *command], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")
