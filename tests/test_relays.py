"""Nodes relaying for others, on real daemons (docs/architecture.md, 'Relays'). With a fanout of
1 among 4 nodes, the master homes one node at another: a job across all four runs its
barriers, and that node's reports and exits reach the master through its relay. The relay
killed -9, the node registers with the master again, is homed anew (at the master or the
other relay) and is never marked down. The tree's
rules are in tests/test_relay_tree.py."""

import os
import signal

import pytest
import zmq

from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.noded.relay import NodeRelay
from gangsched.protocol.records import JobInfo, JobState, NodeState
from tests.helpers.clusters import Cluster, wait_until

pytestmark = pytest.mark.live


def relayed(cluster: Cluster) -> dict[str, str]:
    """Each node homed at a relay, with its relay."""
    return {node.name: node.via for node in cluster.client.nodes() if node.via is not None}


def run_to_the_end(cluster: Cluster, tasks: int) -> JobInfo:
    """A job of ``tasks`` ranks, a barrier every 5 ms: it completes only if every rank runs with the others."""
    job = cluster.client.submit(job_spec(SyntheticJob("compute", 200, 5.0), tasks))
    info = wait_until(lambda: (found := cluster.client.job(job)).state.is_final and found, 60, f"job {job} to end")
    assert isinstance(info, JobInfo)
    return info


@pytest.fixture
def relaying(start_cluster, monkeypatch) -> tuple[Cluster, str, str]:
    """A cluster of 4 nodes, one homed at a relay: (the cluster, that node, its relay)."""
    monkeypatch.setenv("GANG_MASTER_RELAY_FANOUT", "1")  # 1 node at the master, then relays of 1 node
    # a node is lost after 1.5 s of silence (3 s behind a relay), and leaves a relay after 0.5 s without
    # a switch: a CI host that stalls a daemon for half a second loses no node
    cluster = start_cluster(nodes=4, heartbeat_ms=500)
    homes = wait_until(lambda: relayed(cluster), 10, "a node homed at a relay")
    assert isinstance(homes, dict) and len(homes) == 1, homes
    [(node, relay)] = homes.items()
    return cluster, node, relay


def test_a_job_runs_across_a_relay_and_its_nodes_reports_come_through(relaying):
    cluster, node, relay = relaying
    homed_at = cluster.client.stats().quanta  # the quanta before: some sent while nodes were registering
    info = run_to_the_end(cluster, 4)
    assert info.state is JobState.COMPLETED, info.reason
    assert node in info.node_names
    # a switch counts only once every node reported it: the relayed node's reports came through
    # (all but the last few, on their way)
    since = cluster.client.stats().quanta - homed_at
    assert len(cluster.client.switch_stats(since).latencies_ns) >= since - 5
    assert relayed(cluster) == {node: relay}  # no node left its relay


def test_a_node_whose_relay_is_killed_is_homed_anew_and_stays_up(relaying):
    cluster, node, relay = relaying
    os.kill(cluster.local.state().pids[relay], signal.SIGKILL)
    states: list[NodeState] = []

    def rehomed() -> bool:
        nodes = {found.name: found for found in cluster.client.nodes()}
        states.append(nodes[node].state)
        return nodes[relay].state is NodeState.DOWN and nodes[node].via != relay
    wait_until(rehomed, 10, f"{relay} to be down and {node} homed anew")
    assert set(states) == {NodeState.UP}, states
    info = run_to_the_end(cluster, 3)  # the three nodes up
    assert info.state is JobState.COMPLETED, info.reason
    assert node in info.node_names
    assert {found.name: found.state for found in cluster.client.nodes()}[node] is NodeState.UP


def test_a_node_offers_no_relay_where_it_cannot_bind_one_and_closes_what_it_opened(tmp_path):
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    too_long = tmp_path / ("x" * 120)  # longer than an ipc socket's path may be
    assert NodeRelay.open(context, too_long, None, None) is None
    context.term()  # returns: no socket of the failed relay is left open
