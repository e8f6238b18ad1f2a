"""What a root node daemon does for another user's task, tried as that user would attack it: nothing the
user exports reaches a program of the daemon's rights, no file operation of the daemon's follows a link
the user planted, and the task makes its files with the submitter's umask."""

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gangsched.deploy.local import progress_folder
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.accounts import unix_account
from tests.helpers.clusters import ended

pytestmark = [pytest.mark.live, pytest.mark.skipif(os.geteuid() != 0, reason="changing user needs a root daemon")]

USER = "gangtest"
ROOT = Path(__file__).resolve().parent.parent

# a library every dynamic program loads first under LD_PRELOAD: it writes who runs it, and as which program
_PROBE = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void probe(void) {
    char name[64] = "?";
    FILE *comm = fopen("/proc/self/comm", "r");
    if (comm) { if (!fgets(name, sizeof name, comm)) name[0] = 0; fclose(comm); }
    FILE *log = fopen(LOG, "a");
    if (log) { fprintf(log, "%d %d %s", (int)getuid(), (int)geteuid(), name); fclose(log); }
}
"""


@pytest.fixture(scope="module")
def account() -> pwd.struct_passwd:
    made = unix_account(USER)
    assert made is not None
    return made


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder every account may read and write (pytest's own is root's alone)."""
    with tempfile.TemporaryDirectory(prefix="gang-rights-") as folder:
        os.chmod(folder, 0o777)
        yield Path(folder)


def test_nothing_a_user_exports_reaches_a_program_of_the_daemons_rights(start_cluster, account, shared_folder):
    log = shared_folder / "loaded"
    library = shared_folder / "probe.so"
    subprocess.run(["gcc", "-shared", "-fPIC", f'-DLOG="{log}"', "-o", str(library), "-x", "c", "-"],
                   input=_PROBE, text=True, check=True)
    cluster = start_cluster(nodes=1)
    spec = JobSpec(name="preload", user=USER, tasks=1, argv=["/bin/true"],
                   env={"LD_PRELOAD": str(library), "LD_LIBRARY_PATH": str(shared_folder)})
    info = ended(cluster, cluster.client.submit(spec))
    assert info.state is JobState.COMPLETED, info.reason
    loaded = [line.split() for line in log.read_text().splitlines()]
    # the task itself loads it, as the user: the variable reached it, and nothing else of the start
    assert loaded and all(int(uid) == int(euid) == account.pw_uid for uid, euid, _ in loaded), loaded
    assert ["true"] == [name for _, _, name in loaded]


def test_a_values_quotes_and_expansions_reach_the_task_as_text(start_cluster, account, shared_folder):
    cluster = start_cluster(nodes=1)
    tricky = {"QUOTES": "it's \"quoted\" '' \\", "EXPANSION": "$(touch /tmp/gang-x) `id` ${HOME} $0",
              "LINES": "one\ntwo\n", "EMPTY": ""}
    script = "for name in QUOTES EXPANSION LINES EMPTY; do printenv $name; echo .; done"
    info = ended(cluster, cluster.client.submit(JobSpec(name="env", user=USER, tasks=1, env=tricky,
                                                        argv=["sh", "-c", script])))
    assert info.state is JobState.COMPLETED, info.reason
    output = (cluster.user_spool / "node1" / USER / f"job-{info.job_id}.0.out").read_text()
    assert output == "".join(f"{value}\n.\n" for value in tricky.values())
    assert not Path("/tmp/gang-x").exists()


def test_a_link_planted_at_a_progress_files_name_is_removed_never_followed(start_cluster, account, shared_folder):
    cluster = start_cluster(nodes=1)
    first = ended(cluster, cluster.client.submit(JobSpec(name="first", user=USER, tasks=1, argv=["true"])))
    folder = progress_folder(cluster.home) / "node1" / USER  # the user's own: they may write in it
    assert folder.stat().st_uid == account.pw_uid
    target = shared_folder / "roots-file"
    target.write_text("precious\n")
    target.chmod(0o600)
    missing = Path("/etc") / f"gangsched-probe-{os.getpid()}"
    # what the user may do in their own folder: a link at the names of their next jobs' progress files
    for job_id in range(first.job_id + 1, first.job_id + 6):
        link = folder / f"job-{job_id}.0.progress"
        subprocess.run(["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups",
                        "ln", "-s", str(target if job_id % 2 else missing), str(link)], check=True)
    for _ in range(4):
        info = ended(cluster, cluster.client.submit(JobSpec(name="after", user=USER, tasks=1, argv=["true"])))
        assert info.state is JobState.COMPLETED, info.reason
    assert target.read_text() == "precious\n"
    assert (target.stat().st_uid, target.stat().st_mode & 0o777) == (0, 0o600)
    assert not missing.exists()


def test_a_task_makes_its_files_with_the_submitters_umask(start_cluster, account):
    cluster = start_cluster(nodes=1)
    modes = {}
    for umask in (0o077, None):
        spec = JobSpec(name="mask", user=USER, tasks=1, argv=["sh", "-c", "umask; : > made"], umask=umask,
                       cwd=str(cluster.user_spool / "node1" / USER))
        info = ended(cluster, cluster.client.submit(spec))
        assert info.state is JobState.COMPLETED, info.reason
        output = cluster.user_spool / "node1" / USER / f"job-{info.job_id}.0.out"
        modes[umask] = output.read_text().strip(), output.stat().st_mode & 0o777
    assert modes == {0o077: ("0077", 0o600), None: ("0022", 0o644)}


@pytest.fixture(scope="module")
def task_python(account, debian) -> Iterator[tuple[list[str], dict[str, str]]]:
    """An interpreter the account may run the job runtime with, and what the task's environment needs for it:
    this one where the account can run it, else Debian's with its pyzmq and the project's folders on
    PYTHONPATH (an interpreter below /root, as pyenv's here, is root's alone: docs/install.md), copied to a folder
    the account may read."""
    probe = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups"]
    if subprocess.run([*probe, "/bin/sh", "-c", '"$0" -c "import gangsched.jobs.runtime"', sys.executable],
                      capture_output=True, cwd="/").returncode == 0:
        yield [sys.executable], {}
        return
    debian.install("python3-zmq")
    with tempfile.TemporaryDirectory(prefix="gang-layout-") as folder:  # not pytest's: root's alone
        layout = Path(folder)
        layout.chmod(0o755)
        (layout / "gangsched").mkdir(mode=0o755)
        for package in ("jobs", "protocol"):  # copied: a clone may sit in a folder only root passes (mktemp -d)
            shutil.copytree(ROOT / package, layout / "gangsched" / package,
                            ignore=shutil.ignore_patterns("__pycache__"))
        yield ["/usr/bin/python3"], {"PYTHONPATH": str(layout)}


@pytest.mark.parametrize("kind", ["compute", "io"])
def test_another_users_job_reaches_its_own_barrier_and_the_io_server_on_a_root_cluster(start_cluster, account, kind,
                                                                                       task_python):
    cluster = start_cluster(nodes=2)
    interpreter, environment = task_python
    program = SyntheticJob(kind, iterations=20, compute_ms=1, io_writes=2, io_bytes=512)
    spec = JobSpec(name=kind, user=USER, tasks=2, argv=[*interpreter, *program.argv()[1:]], env=environment)
    info = ended(cluster, cluster.client.submit(spec), 60)
    outputs = [cluster.user_spool / node / USER / f"job-{info.job_id}.{rank}.out"
               for rank, node in enumerate(info.node_names)]
    assert info.state is JobState.COMPLETED and info.barriers == 20, (info.reason, [p.read_text() for p in outputs])
