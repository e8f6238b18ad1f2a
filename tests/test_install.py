"""An install for real hosts (docs/install.md): the systemd units pass ``systemd-analyze verify`` and
name only flags the daemons take; and a node daemon given a cgroup subtree of its own (the unit's
``Delegate=yes``) moves itself into a leaf of it and makes its tasks' groups beside that leaf."""

import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gangsched.deploy.local import task_processes
from gangsched.noded.cgroups import cgroup2_mount, cgroup_of
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.clusters import ended, wait_until

UNITS = Path(__file__).resolve().parent.parent / "deploy" / "systemd"
INSTALLED = "/opt/gangsched/bin"  # where docs/install.md puts the package's commands


@pytest.mark.live
def test_the_units_pass_systemd_analyze_verify(tmp_path, debian):
    analyze = debian.tool("systemd-analyze", "systemd")
    commands = tmp_path / "bin"  # the units' commands, here: this environment's
    commands.mkdir()
    for name in ("gang", "python"):
        (commands / name).symlink_to(Path(sys.executable).parent / name)
    units = sorted(UNITS.glob("*.service"))
    assert {unit.name for unit in units} == {"gangsched-master.service", "gangsched-noded.service",
                                             "gangsched-web.service"}
    for unit in units:
        (tmp_path / unit.name).write_text(unit.read_text().replace(INSTALLED, str(commands)))
    checked = subprocess.run([analyze, "verify", *(str(tmp_path / unit.name) for unit in units)],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr


@pytest.mark.live
@pytest.mark.parametrize("unit", ["gangsched-master.service", "gangsched-noded.service"])
def test_a_unit_gives_its_daemon_only_flags_it_takes(unit):
    line = next(line for line in (UNITS / unit).read_text().splitlines() if line.startswith("ExecStart="))
    command = line.removeprefix("ExecStart=").split()
    assert command[0] == f"{INSTALLED}/gang"
    checked = subprocess.run([sys.executable, "-m", "gangsched.cli", *command[1:], "--help"], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr


def _delegated_group() -> Path:
    mount = cgroup2_mount()
    if os.geteuid() != 0 or mount is None:
        pytest.skip("a cgroup v2 group of its own is made by root where cgroup v2 is mounted")
    group = mount / f"gang-delegated-{secrets.token_hex(4)}"
    group.mkdir()
    return group


def _remove(group: Path) -> None:
    for folder in sorted((path for path in group.rglob("*") if path.is_dir()), key=lambda p: -len(p.parts)):
        folder.rmdir()
    group.rmdir()


@pytest.mark.live
def test_a_node_daemon_in_a_delegated_group_moves_into_a_leaf_and_puts_its_tasks_beside_it(start_cluster):
    cluster = start_cluster(nodes=1)
    group = _delegated_group()
    spool = cluster.home / "nodes" / "delegated"
    noded = [sys.executable, "-m", "gangsched.cli", "noded", "--master", cluster.client.endpoint, "--name",
             "delegated", "--spool-dir", str(spool), "--peer-transport", "ipc", "--processors", "1",
             "--memory", "256M", "--cgroup-delegated", "true"]
    # as systemd starts a unit with Delegate=yes: the daemon starts in the group it is given
    daemon = subprocess.Popen(["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh", *noded],
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(cluster.client.nodes()) == 2, 20, "the delegated node to register")
        assert cgroup_of(str(daemon.pid)) == group / "daemon"
        job_id = cluster.client.submit(JobSpec(name="two", user=os.environ.get("USER", "root"), tasks=2,
                                               argv=["sleep", "30"]))
        wait_until(lambda: cluster.client.job(job_id).state is JobState.RUNNING, 20, "the job to run")

        def in_the_tasks_groups() -> bool:  # beside the daemon's leaf, once out of the gate it starts at
            groups = [cgroup_of(str(task.pid)) for task in task_processes(cluster.home, job_id)]
            return any(found is not None and group in found.parents
                       and found.relative_to(group).parts[0].startswith("gangsched-delegated-") for found in groups)
        wait_until(in_the_tasks_groups, 20, "the delegated node's task in a group beside the daemon's leaf")
        cluster.client.cancel(job_id, os.environ.get("USER", "root"))
        ended(cluster, job_id)
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, printed = daemon.communicate(timeout=30)
        shutil.rmtree(spool, ignore_errors=True)
        _remove(group)  # OSError if a process of the node were left in it
    assert daemon.returncode == 0, printed
