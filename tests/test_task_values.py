"""Every value a task gives the daemons is bounded where it enters, and one job's bad value fails that job
alone: its progress counter, and what its MPI library puts in its key-value space and fences."""

import getpass
import sys

import pytest

from gangsched.protocol.records import JobSpec, JobState, MpiKind
from tests.conftest import ended

pytestmark = pytest.mark.live

_LARGEST_COUNTER = r'printf "\377\377\377\377\377\377\377\377" > "$GANG_PROGRESS_FILE"; sleep 2'


def test_a_progress_counter_past_what_a_store_holds_fails_its_job_alone(start_cluster):
    cluster = start_cluster(nodes=2, quantum_ms=50)
    user = getpass.getuser()
    bad = cluster.client.submit(JobSpec(name="huge", user=user, tasks=1, argv=["sh", "-c", _LARGEST_COUNTER]))
    others = [cluster.client.submit(JobSpec(name=f"after-{n}", user=user, tasks=1, argv=["sh", "-c", "sleep 0.3"]))
              for n in range(4)]
    info = ended(cluster, bad, 30)
    assert info.state is JobState.FAILED and "progress counter" in info.reason, info.reason
    assert str(2**64 - 1) in info.reason
    assert [ended(cluster, job, 30).state for job in others] == [JobState.COMPLETED] * 4
    later = cluster.client.submit(JobSpec(name="later", user=user, tasks=2, argv=["true"]))
    assert ended(cluster, later, 30).state is JobState.COMPLETED


# PMI-1 as MPICH speaks it: a put of many keys, then a fence
_PMI_FLOOD = r"""
import os, socket, sys
connection = socket.socket(fileno=int(os.environ["PMI_FD"]))
reader = connection.makefile("rb")

def command(line):
    connection.sendall(line.encode() + b"\n")
    return reader.readline().decode()

command("cmd=init pmi_version=1 pmi_subversion=1")
name = command("cmd=get_my_kvsname").split("kvsname=")[1].split()[0]
for number in range(int(sys.argv[1])):
    answer = command(f"cmd=put kvsname={name} key=k{os.environ['PMI_RANK']}-{number} value={'v' * 1000}")
    if "rc=0" not in answer:
        print("refused at", number, answer.strip(), flush=True)
        sys.exit(3)
print(command("cmd=barrier_in").strip(), flush=True)
command("cmd=finalize")
"""


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_pmi_key_value_space_past_its_bound_fails_its_job_alone(start_cluster, nodes):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    user = getpass.getuser()
    flood = cluster.client.submit(JobSpec(name="kvs", user=user, tasks=2, nodes=nodes, mpi=MpiKind.PMI1,
                                          argv=[sys.executable, "-c", _PMI_FLOOD, "20000"]))
    info = ended(cluster, flood, 60)
    assert info.state is JobState.FAILED and "key-value space" in info.reason, info.reason
    fits = cluster.client.submit(JobSpec(name="kvs-fits", user=user, tasks=2, nodes=nodes, mpi=MpiKind.PMI1,
                                         argv=[sys.executable, "-c", _PMI_FLOOD, "200"]))
    assert ended(cluster, fits, 60).state is JobState.COMPLETED
