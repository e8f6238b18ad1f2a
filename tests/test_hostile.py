"""Hostile clients against a real cluster: junk and fuzzed frames on every socket a client or a
task reaches. The daemons live on, the master answers, a new job completes, and every fuzzed MPI
job ends with a reason. (How long the switch waits under a flood is a figure: `gang bench hostile`.)"""

import pytest

from gangsched.bench.hostile import drained, flood, fuzz_master, fuzz_pmi
from gangsched.protocol.records import JobState, MpiKind

pytestmark = pytest.mark.live


def test_junk_and_fuzzed_frames_on_every_socket_stop_nothing(start_cluster):
    cluster = start_cluster(nodes=2)
    flooded = flood(cluster.local, 3000, quantum_ms=100)
    assert flooded.switches >= 1
    submitted = flood(cluster.local, 300, quantum_ms=100, submissions=True)
    assert submitted.frames == 300
    drained(cluster.local)  # every submission was taken and its job ran to its end
    with cluster.local.client(cluster.local.state()) as client:
        ended = client.jobs(include_finished=True, ended_after=0.0)
    assert sum(job.spec.name == "flood" and job.state is JobState.COMPLETED for job in ended) == 300
    results = [fuzz_master(cluster.local, "client", 1000), fuzz_master(cluster.local, "report", 1000),
               fuzz_pmi(cluster.local, 200, lines_per_task=20),
               fuzz_pmi(cluster.local, 200, lines_per_task=20, kind=MpiKind.PMI2)]
    for result in results:
        assert (result.socket, result.daemons_exited, result.queue_answers, result.new_job) == \
            (result.socket, [], True, JobState.COMPLETED)
    for pmi in results[2:]:
        assert pmi.fuzz_jobs == {"failed": 5}, pmi
        assert "PMI" in pmi.reason, pmi.reason
