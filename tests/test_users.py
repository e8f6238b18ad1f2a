"""Jobs run as their user: a root node daemon takes the account the job's user names."""

import os
import pwd
from pathlib import Path

import pytest

from gangsched.client.master_client import MasterClient, MasterUnreachable
from gangsched.deploy.local import progress_folder
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.accounts import unix_account
from tests.helpers.clusters import ended

pytestmark = [pytest.mark.live, pytest.mark.skipif(os.geteuid() != 0, reason="changing user needs a root daemon")]

USER = "gangtest"


@pytest.fixture(scope="module")
def account() -> pwd.struct_passwd:
    """A second Unix account, made for the tests if this machine has none."""
    made = unix_account(USER)
    assert made is not None
    return made


def test_a_task_runs_with_its_users_identity_and_rights(start_cluster, account, tmp_path):
    cluster = start_cluster(nodes=1)
    root_only = tmp_path / "root-only"
    root_only.write_text("secret")
    root_only.chmod(0o600)
    script = f"id -u; id -g; echo $USER $HOME; cat {root_only} 2>/dev/null || echo denied; touch /root/x 2>&1"
    job = cluster.client.submit(JobSpec(name="who", user=USER, tasks=1, argv=["sh", "-c", script]))
    info = ended(cluster, job)
    # touch /root/x fails: the last command's status, not a task that could not start
    assert info.state is JobState.FAILED and "could not start" not in info.reason, info.reason
    output = cluster.user_spool / "node1" / USER / f"job-{job}.0.out"
    uid, gid, names, secret, *touch = output.read_text().splitlines()
    assert (int(uid), int(gid)) == (account.pw_uid, account.pw_gid) and int(uid) != 0
    assert names == f"{USER} {account.pw_dir}" and secret == "denied" and "Permission denied" in touch[0]
    assert output.stat().st_uid == account.pw_uid and output.parent.stat().st_mode & 0o777 == 0o700


def test_a_users_task_counts_its_progress_on_a_tmpfs_in_a_folder_of_its_own(start_cluster, account):
    cluster = start_cluster(nodes=1)
    # what the job runtime's progress(3) writes: the count, eight bytes little-endian
    script = 'echo "$GANG_PROGRESS_FILE"; stat -c "%U %a" "$(dirname "$GANG_PROGRESS_FILE")"; ' \
        r'printf "\003\000\000\000\000\000\000\000" > "$GANG_PROGRESS_FILE"'
    job = cluster.client.submit(JobSpec(name="counts", user=USER, tasks=1, argv=["sh", "-c", script]))
    info = ended(cluster, job)
    assert info.state is JobState.COMPLETED and info.barriers == 3, info.reason
    path, folder = (cluster.user_spool / "node1" / USER / f"job-{job}.0.out").read_text().splitlines()
    run = progress_folder(cluster.home)
    assert run.is_relative_to("/dev/shm") and Path(path).parent == run / "node1" / USER
    assert folder == f"{USER} 700" and not Path(path).exists()  # theirs alone, and gone with the task


def test_an_output_path_is_opened_with_the_users_rights(start_cluster, account):
    cluster = start_cluster(nodes=1)
    job = cluster.client.submit(JobSpec(name="out", user=USER, tasks=1, argv=["true"],
                                        output="/etc/gangsched-should-not-exist-%j"))
    info = ended(cluster, job)
    assert info.state is JobState.FAILED and "cannot open the output" in info.reason, info.reason
    assert not Path(f"/etc/gangsched-should-not-exist-{job}").exists()


def test_an_output_left_by_another_owner_is_replaced_not_refused(start_cluster, account):
    """An account removed and made again (another uid), and a new cluster numbering its jobs from 1
    again: the old owner's job-J.R.out must not refuse the new task its output."""
    cluster = start_cluster(nodes=1)
    folder = cluster.user_spool / "node1" / USER
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder, account.pw_uid, account.pw_gid)
    stale_uid = account.pw_uid + 4242  # nobody's here
    for job_id in range(1, 6):  # the fresh cluster's first job number is among these
        stale = folder / f"job-{job_id}.0.out"
        stale.write_text("an earlier owner's\n")
        os.chown(stale, stale_uid, stale_uid)
    job = cluster.client.submit(JobSpec(name="again", user=USER, tasks=1, argv=["echo", "mine"]))
    assert job <= 5
    info = ended(cluster, job)
    assert info.state is JobState.COMPLETED, info.reason
    output = folder / f"job-{job}.0.out"
    assert output.read_text() == "mine\n" and output.stat().st_uid == account.pw_uid


def test_a_user_without_an_account_fails_the_job_naming_the_node(start_cluster):
    cluster = start_cluster(nodes=1)
    job = cluster.client.submit(JobSpec(name="nobody", user="no-such-user", tasks=1, argv=["true"]))
    info = ended(cluster, job)
    assert info.state is JobState.FAILED and "user no-such-user has no account on node node1" in info.reason


def test_a_root_cluster_with_keys_runs_a_users_job_as_that_user(start_cluster, account):
    """`gang cluster up --keys` as root: a user's key, not the message, says whose job it is."""
    cluster = start_cluster(nodes=1, keys=True, key_users=(USER,))
    state = cluster.local.state()
    assert state is not None and state.master.startswith("tcp://127.0.0.1:")
    with MasterClient(state.master, keys=cluster.local.keys, user=USER) as client:
        job = client.submit(JobSpec(name="mine", user="root", tasks=1, argv=["sh", "-c", "id -u"]))
        assert ended(cluster, job).state is JobState.COMPLETED
    output = cluster.user_spool / "node1" / USER / f"job-{job}.0.out"
    assert output.read_text().split() == [str(account.pw_uid)]
    with pytest.raises(MasterUnreachable):  # no key: no handshake, so no request either
        MasterClient(state.master, timeout_s=1.0).nodes()
