"""sbatch as Slurm runs it (slurm/sbatch.py), short of a cluster: its flags as getopt_long reads them, a
script's #SBATCH lines under the command line's, Slurm's errors and statuses, the submitter's environment,
and the batch job the master makes of it: its script once, on the allocation's first processor, with Slurm's
variables. Nothing here starts a process."""

import os
import stat
import time

import pytest

from gangsched.master.placement import job_patterns
from gangsched.noded.task_files import write_script
from gangsched.protocol.client_messages import Submit
from gangsched.protocol.messages import Heartbeat, LaunchTask, SignalTask
from gangsched.protocol.records import ArraySpan, JobSpec
from gangsched.protocol.slurm_environment import counts_text, slurm_step
from gangsched.slurm.sbatch import FATAL, SbatchError, exported, read_options, request_of
from tests.helpers.driven_master import driven_master
from tests.helpers.master_events import ENDPOINTS, SETTINGS, hello, sent

SCRIPT = "#!/bin/sh\n#SBATCH -J from-script\n#SBATCH -n 2 --time=10\n#SBATCH -A lab\necho hi\n#SBATCH -n 7\n"


def requested(tmp_path, *arguments: str, text: str = SCRIPT, environment: dict[str, str] | None = None):
    script = tmp_path / "job.sh"
    script.write_text(text)
    request, options = request_of([*arguments, str(script), "one", "two"], environment or {"HOME": "/home/a"},
                                  "alice", "/work", 0o022)
    return request, options, JobSpec(**request["spec"])


def refusal(tmp_path, *arguments: str, text: str = SCRIPT) -> tuple[str, int]:
    with pytest.raises(SbatchError) as refused:
        requested(tmp_path, *arguments, text=text)
    return refused.value.prefix + refused.value.message, refused.value.status


def test_a_script_s_directives_count_until_its_first_command_and_the_command_line_wins(tmp_path):
    _, _, spec = requested(tmp_path, "--job-name=given")
    assert (spec.name, spec.tasks, spec.estimate_s, spec.labels) == ("given", 2, 600.0, {"account": "lab"})
    assert spec.script == SCRIPT and spec.argv == [str(tmp_path / "job.sh"), "one", "two"]
    assert (spec.output, spec.open_mode, spec.cwd, spec.submit_dir) == ("slurm-%j.out", "truncate", "/work", "/work")


def test_begin_dependencies_and_cpus_per_task_go_into_the_job(tmp_path):
    _, _, spec = requested(tmp_path, "--begin=2030-01-01T09:30", "-d", "afternotok:4:5,singleton", "-c", "2")
    assert spec.begin_time == time.mktime((2030, 1, 1, 9, 30, 0, 0, 0, -1))
    assert (spec.after_ok, spec.after_not_ok, spec.singleton) == ([], [4, 5], True)
    assert (spec.cpus_per_task, spec.processors) == (2, 4)


def test_flags_are_read_as_getopt_long_reads_them():
    options, rest = read_options(["-n4", "-N", "2", "--ntasks-per-n=2", "--time", "1:00", "-Hv", "-o", "x.%j", "s.sh"])
    assert options == {"tasks": "4", "nodes": "2", "tasks_per_node": "2", "estimate": "1:00", "hold": True,
                       "output": "x.%j"}
    assert rest == ["s.sh"]
    assert read_options(["--account", "a", "--qos=q", "--comment", "c d", "-s", "--", "-x"])[0]["labels"] == \
        {"account": "a", "qos": "q", "comment": "c d", "oversubscribe": ""}


@pytest.mark.parametrize(("arguments", "said", "status"), [
    (["--foo"], "sbatch: unrecognized option '--foo'\nTry \"sbatch --help\" for more information", FATAL),
    (["-t", "abc"], "sbatch: error: Invalid --time specification", FATAL),
    (["--begin=garbage"], "sbatch: error: Invalid --begin specification", FATAL),
    (["-n", "0"], 'sbatch: error: Invalid numeric value "0" for --ntasks.', 1),
    (["--mem=12Q"], "sbatch: error: Invalid --mem specification", FATAL),
    (["--open-mode=x"], "sbatch: error: Invalid --open-mode specification", FATAL),
    (["--gres=gpu:1"], "sbatch: error: Invalid generic resource (gres) specification", 1),
    (["--wait=5"], "sbatch: option '--wait' doesn't allow an argument\nTry \"sbatch --help\" for more information",
     FATAL),
    (["-w", "n1"], "sbatch: error: -w is not supported by gangsched yet (docs/slurm.md)", 1),
    (["-c", "0"], 'sbatch: error: Invalid numeric value "0" for --cpus-per-task.', 1),
    (["-c", "abc"], 'sbatch: error: Invalid numeric value "abc" for --cpus-per-task.', 1),
    (["-d", "after:3"], "sbatch: error: Invalid dependency specification: 'after:3': a dependency is "
     "afterok:ID[:ID...], afterany:ID[:ID...], afternotok:ID[:ID...] or singleton", 1),
])
def test_a_bad_flag_gets_slurm_s_line_and_status(tmp_path, arguments, said, status):
    assert refusal(tmp_path, *arguments) == (said, status)


def test_a_flag_without_its_value_or_by_a_prefix_of_several_is_refused():
    with pytest.raises(SbatchError) as refused:
        read_options(["-c"])
    said = refused.value.message.splitlines()[0]
    assert (said, refused.value.status) == ("option requires an argument -- 'c'", FATAL)
    with pytest.raises(SbatchError, match="option '--ntasks-per' is ambiguous"):
        read_options(["--ntasks-per=2"])


def test_a_bad_directive_names_the_script_and_its_line(tmp_path):
    said, status = refusal(tmp_path, text="#!/bin/sh\n#SBATCH -J x\n#SBATCH --bogus\ntrue\n")
    assert said.splitlines()[0] == f"sbatch: {tmp_path / 'job.sh'}:3: unrecognized option '--bogus'"
    assert status == FATAL


def test_a_script_without_an_interpreter_line_or_empty_is_refused_as_slurm_refuses_it(tmp_path):
    said, status = refusal(tmp_path, text="echo hi\n")
    assert said.splitlines() == ["sbatch: error: This does not look like a batch script.  The first",
                                 "sbatch: error: line must start with #! followed by the path to an interpreter.",
                                 "sbatch: error: For instance: #!/bin/sh"]
    assert status == 1
    assert refusal(tmp_path, text="")[0] == "sbatch: error: Batch script is empty!"
    with pytest.raises(SbatchError, match="Unable to open file /nonexistent/job.sh"):
        request_of(["/nonexistent/job.sh"], {}, "alice", "/work", 0o022)


def test_wrap_is_a_script_run_by_sh_and_takes_no_arguments():
    request, _ = request_of(["--wrap", "echo $HOME"], {}, "alice", "/work", 0o022)
    spec = JobSpec(**request["spec"])
    assert spec.script.startswith("#!/bin/sh\n") and "echo $HOME\n" in spec.script and spec.name == "wrap"
    with pytest.raises(SbatchError, match="Script arguments not permitted with --wrap option"):
        request_of(["--wrap", "true", "extra"], {}, "alice", "/work", 0o022)


def test_the_submitter_s_environment_goes_with_the_job_as_export_says():
    submitter = {"HOME": "/home/a", "PATH": "/bin", "A": "1", "BASH_FUNC_f%%": "() { :; }"}
    assert exported("ALL", submitter) == {"HOME": "/home/a", "PATH": "/bin", "A": "1"}, \
        "a name no shell can set (an exported bash function) is not passed"
    assert exported("NONE", submitter) == {}
    assert exported("A,B=2", submitter) == {"A": "1", "B": "2"}
    assert exported("ALL,B=2", submitter) == {"HOME": "/home/a", "PATH": "/bin", "A": "1", "B": "2"}


def test_an_array_s_default_output_names_its_index_and_its_ranges_go_with_the_submission(tmp_path):
    request, _, spec = requested(tmp_path, "--array=1-3%2")
    assert spec.output == "slurm-%A_%a.out" and request["array_limit"] == 2 and request["array"]


def test_slurm_s_counts_and_step_names():
    assert counts_text([2, 2, 1, 3, 3, 3]) == "2(x2),1,3(x3)"
    batch = JobSpec(name="b", user="alice", tasks=2, argv=["b.sh"], script="#!/bin/sh\n")
    plain = JobSpec(name="p", user="alice", tasks=2, argv=["true"])
    assert [slurm_step(batch, step) for step in (0, 1, 2)] == ["batch", "0", "1"]
    assert [slurm_step(plain, step) for step in (0, 1)] == ["0", "1"]
    environment, output, error = job_patterns(7, 0, batch.model_copy(update={"output": "o-%x-%J-%s-%%j",
                                                                             "error": "e-%u-%j"}), {})
    assert (output, error) == ("o-b-7-batch-%%j", "e-alice-7")


def test_a_batch_job_runs_its_script_once_on_its_first_processor_with_slurm_s_variables(tmp_path, clock):
    from gangsched.master.sqlite_store import SqliteStore

    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    hello(core, "n2")
    request, _, spec = requested(tmp_path, "-N", "2", "--mem=100M")
    job = core.clients.submit(Submit(spec=spec)).job_id
    (node, launch), = sent(core, LaunchTask)
    task, info = launch.task, core.table.jobs[job]
    assert len(info.node_names) == 2 and node == info.node_names[0], "one task, on the allocation's first node"
    assert (task.rank, task.size, task.script, task.whole_environment) == (0, 1, SCRIPT, True)
    variables = {name: value for name, value in task.env.items() if name.startswith("SLURM")}
    assert variables == {
        "SLURM_JOB_ID": str(job), "SLURM_JOBID": str(job), "SLURM_JOB_NAME": "from-script",
        "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2",
        "SLURM_NTASKS": "2", "SLURM_NPROCS": "2", "SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_JOB_CPUS_PER_NODE": "1(x2)",
        "SLURM_CPUS_PER_TASK": "1", "SLURM_JOB_PARTITION": info.spec.partition, "SLURM_CLUSTER_NAME": "gangsched",
        "SLURM_JOB_USER": "alice", "SLURM_SUBMIT_DIR": "/work", "SLURM_SUBMIT_HOST": os.uname().nodename,
        "SLURM_MEM_PER_NODE": "100", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
        "SLURMD_NODENAME": node, "SLURM_CPUS_ON_NODE": "1",
    }, "the batch step has no step id, as Slurm's"
    assert task.env["HOME"] == "/home/a", "the submitter's environment"
    assert info.live_tasks() == {(0, 0)}


def test_each_job_of_an_array_knows_the_whole_array_as_slurm_s_do(tmp_path, clock):
    from gangsched.master.sqlite_store import SqliteStore

    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    hello(core, "n2")
    _, _, spec = requested(tmp_path)
    first = core.clients.submit(Submit(spec=spec, array=[(1, 9, 4)])).job_id
    arrays = {launch.task.env["SLURM_ARRAY_TASK_ID"]: {name: value for name, value in launch.task.env.items()
                                                        if name.startswith("SLURM_ARRAY")}
              for _, launch in sent(core, LaunchTask)}
    assert arrays["5"] == {"SLURM_ARRAY_JOB_ID": str(first), "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "3",
                           "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "9", "SLURM_ARRAY_TASK_STEP": "4"}
    forged = core.clients.submit(Submit(spec=spec.model_copy(update={"array_span": ArraySpan(count=1, first=0,
                                                                                               last=0, step=1)})))
    assert "the master's to set" in forged.reason


def test_signal_before_the_time_limit_goes_once_to_what_it_names(tmp_path, clock):
    from gangsched.master.sqlite_store import SqliteStore

    _, _, spec = requested(tmp_path, "--signal=B:USR1@60", "-t", "2")
    assert spec.signal is not None and (spec.signal.number, spec.signal.seconds, spec.signal.batch) == (10, 60, True)
    assert requested(tmp_path, "--signal=12")[2].signal.model_dump() == {"number": 12, "seconds": 60, "batch": False}
    for bad in ("R:USR1", "NOPE", "USR1@x", "USR1@70000", "99"):
        assert refusal(tmp_path, f"--signal={bad}") == ("sbatch: error: Invalid --signal specification", FATAL), bad
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    hello(core, "n2")
    job = core.clients.submit(Submit(spec=spec)).job_id
    (first, _), = sent(core, LaunchTask)
    signals = []
    for _ in range(1300):  # two minutes of quanta of 100 ms: the job runs alone, in every one
        clock.now += 0.1
        for node in ("n1", "n2"):
            core.node_reports.heartbeat(Heartbeat(node=node))
        core.tick()
        signals += [(node, message, core.table.jobs[job].ran_s) for node, message in sent(core, SignalTask)]
    assert [(node, message.signal, message.steps, message.whole) for node, message, _ in signals] == [
        (first, 10, [0], False)], "once, to the batch script's shell alone"
    assert 60 <= signals[0][2] < 60.5, "60 s before the limit of the time it ran"


def test_a_batch_step_s_script_is_written_new_whatever_was_planted_at_its_name(tmp_path):
    victim = tmp_path / "root-owned"
    victim.write_text("keep")
    planted = tmp_path / "job-1.0.script"
    planted.symlink_to(victim)
    write_script(planted, "#!/bin/sh\necho mine\n", None)
    assert victim.read_text() == "keep", "the link's target is never opened"
    assert not planted.is_symlink() and planted.read_text() == "#!/bin/sh\necho mine\n"
    assert stat.S_IMODE(planted.stat().st_mode) == 0o700
