"""Hostile clients against a real cluster: junk and fuzzed frames on every socket a client or a
task reaches. The daemons live on, the master answers, a new job completes, and every fuzzed MPI
job ends with a reason. (How long the switch waits under a flood is a figure: `gang bench hostile`.)"""

import pytest
import zmq

from gangsched.bench.hostile import drained, flood, fuzz_master, fuzz_pmi
from gangsched.bench.hostile_load import ATTACKS, run_attack
from gangsched.client.master_client import RequestRefused
from gangsched.protocol.frames import pack
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


def test_attacks_that_are_load_are_refused_or_bounded_and_the_cluster_serves_on(start_cluster):
    """What each attack comes to (its figures are `gang bench hostile`'s): a message over what the master
    takes gets no hearing, a PMI flood fails its own job, a barrier flood is dropped by rank 0 unanswered."""
    cluster = start_cluster(nodes=2, quantum_ms=100)
    results = {attack: run_attack(cluster.local, attack, 2.0, 100) for attack in ATTACKS}
    assert results["large messages"].sent >= 1
    assert results["PMI floods"].sent >= 1 and set(results["PMI floods"].attack_jobs) == {"failed"}
    assert results["barrier floods"].sent >= 1 and results["barrier floods"].victim.startswith("running")
    assert all(result.query_p50_ms > 0 for result in results.values())  # the other client was answered
    assert all(cluster.local.alive().values())
    failed = cluster.client.jobs(include_finished=True)
    assert any("key-value space" in job.reason for job in failed if job.spec.name == "pmi-flood")


def test_a_request_over_what_the_master_takes_is_not_read_and_ours_are_refused_before_they_are_sent(start_cluster):
    cluster = start_cluster(nodes=1)
    large = pack({"type": "submit", "spec": {"name": "large", "user": "root", "tasks": 1, "argv": ["true"],
                                             "env": {f"V{n}": "" for n in range(300_000)}}})
    with pytest.raises(RequestRefused, match="the master takes at most"):  # a client of ours says so at once
        cluster.client.exchange(large)
    raw = zmq.Context.instance().socket(zmq.DEALER)  # one that sends it anyway is not read: no answer comes
    raw.setsockopt(zmq.LINGER, 0)
    raw.connect(cluster.client.endpoint)
    raw.send(large)
    assert not raw.poll(2000)
    raw.close()
    assert cluster.client.nodes()  # and the master answers everyone else
