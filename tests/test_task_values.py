"""Every value a task gives the daemons is bounded where it enters, and one job's bad value fails that job
alone: its progress counter, and what its MPI library puts in its key-value space and fences."""

import getpass
import sys

import pytest

from gangsched.jobs.adversaries import PMI_FLOOD
from gangsched.protocol.records import JobSpec, JobState, MpiKind
from tests.helpers.clusters import ended

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


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_pmi_key_value_space_past_its_bound_fails_its_job_alone(start_cluster, nodes):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    user = getpass.getuser()
    flood = cluster.client.submit(JobSpec(name="kvs", user=user, tasks=2, nodes=nodes, mpi=MpiKind.PMI1,
                                          argv=[sys.executable, "-c", PMI_FLOOD, "20000"]))
    info = ended(cluster, flood, 60)
    assert info.state is JobState.FAILED and "key-value space" in info.reason, info.reason
    fits = cluster.client.submit(JobSpec(name="kvs-fits", user=user, tasks=2, nodes=nodes, mpi=MpiKind.PMI1,
                                         argv=[sys.executable, "-c", PMI_FLOOD, "200"]))
    assert ended(cluster, fits, 60).state is JobState.COMPLETED
