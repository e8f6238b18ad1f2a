"""What Slurm's commands print of a job (slurm/words.py, slurm/columns.py) and how they read their flags
(slurm/getopt.py), short of a cluster: state codes, exit codes as N:S, lengths of time, array ids, -o's
columns. Nothing here starts a process."""

import pytest

from gangsched.slurm import columns, getopt, words


def job(state: str, **fields):
    return {"job_id": 7, "state": state, "spec": {"array_job_id": None, "array_index": None}, **fields}


def test_states_exits_and_reasons_as_slurm_words_them():
    assert [words.state_code(job(state)) for state in ("pending", "running", "completed", "out_of_memory")] == \
        ["PD", "R", "CD", "OOM"]
    assert [words.exit_code(job("completed", exit_code=0)), words.exit_code(job("failed", exit_code=3)),
            words.exit_code(job("failed", exit_code=-9)), words.exit_code(job("cancelled"))] == \
        ["0:0", "3:0", "0:9", "0:15"]
    assert [words.reason(job("pending", waits_for="Priority")), words.reason(job("failed")),
            words.reason(job("timeout")), words.reason(job("completed"))] == \
        ["Priority", "NonZeroExitCode", "TimeLimit", "None"]
    assert words.states_asked("pd,R,COMPLETED") == {"pending", "running", "completed"}
    assert words.states_asked("all") is None
    with pytest.raises(words.StateError):
        words.states_asked("bogus")


def test_lengths_of_time_and_array_ids():
    assert [words.elapsed(5), words.elapsed(3725), words.elapsed(90061)] == ["0:05", "1:02:05", "1-01:01:01"]
    assert [words.hours(5), words.hours(90061), words.hours(None)] == ["00:00:05", "1-01:01:01", "UNLIMITED"]
    member = job("running", spec={"array_job_id": 3, "array_index": 2})
    waiting = job("pending", array_pending="3-5", spec={"array_job_id": 3, "array_index": 3, "array_limit": 2})
    assert [words.job_id(member), words.job_id(waiting), words.job_id(job("running"))] == ["3_2", "3_[3-5%2]", "7"]


def test_a_format_s_columns_cut_and_justify_as_squeue_s():
    codes = {"i": ("JOBID", lambda row: row["id"]), "j": ("NAME", lambda row: row["name"])}
    parts = columns.parse("%.3i|%5j|%j|%%", codes)
    assert columns.header(parts) == "JOB|NAME |NAME|%"
    assert columns.row(parts, {"id": "12_[3-4]", "name": "ab"}) == "12_|ab   |ab|%"
    with pytest.raises(columns.FormatError, match="b"):
        columns.parse("%b", codes)


def test_operands_among_the_flags_as_gnu_getopt_permutes_them():
    flags = getopt.table(((("-s", "--signal"), True, "signal"), (("-v", "--verbose"), False, "verbose")))
    given, operands = getopt.read(["12", "--sig=USR1", "-v", "13", "--", "-14"], flags)
    assert [(flag.key, value) for flag, _, value in given] == [("signal", "USR1"), ("verbose", True)]
    assert operands == ["12", "13", "-14"]
    with pytest.raises(getopt.OptionError, match="unrecognized option '--bogus'"):
        getopt.read(["--bogus"], flags)


def test_failed_tasks_are_said_a_line_for_each_node_s_tasks_that_ended_alike():
    step = {"failed_tasks": [{"rank": 0, "node": "n1", "exit_code": 3}, {"rank": 1, "node": "n1", "exit_code": 3},
                             {"rank": 3, "node": "n1", "exit_code": 3}, {"rank": 2, "node": "n2", "exit_code": -9},
                             {"rank": 4, "node": "n2", "exit_code": -15}, {"rank": 5, "node": "n2", "exit_code": 1}]}
    assert words.task_failures(step) == ["n1: tasks 0-1,3: Exited with exit code 3", "n2: task 2: Killed",
                                         "n2: task 4: Terminated", "n2: task 5: Exited with exit code 1"]
    assert words.task_failures({"failed_tasks": []}) == words.task_failures({}) == []
