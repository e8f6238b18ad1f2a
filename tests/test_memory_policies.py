"""Memory under every policy: no node is ever committed beyond its memory (policy/memory.py)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.policy.catalog import POLICY_NAMES, Choice, build_policy
from gangsched.policy.interface import Decision, LivePolicy
from gangsched.policy.memory import MemoryBook, MemoryRequest
from gangsched.policy.topology import Topology
from gangsched.sim.engine import simulate
from gangsched.sim.memory_audit import MemoryAudit, Overcommitted
from gangsched.sim.sim_job import SimJob

MEMORY = 1000  # bytes a node: the figures are small and exact


def fits_alone(topology: Topology, job: SimJob) -> bool:
    book = MemoryBook(topology)
    return topology.fits(book.usable(job, (1 << topology.width) - 1), job)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[Topology, list[SimJob]]:
    processors = draw(st.lists(st.integers(1, 3), min_size=2, max_size=4))
    topology = Topology.of(processors, [MEMORY] * len(processors))
    jobs = []
    for job_id in range(1, draw(st.integers(1, 14)) + 1):
        procs = draw(st.integers(1, topology.width))
        nodes = draw(st.one_of(st.none(), st.integers(1, min(procs, len(processors)))))
        per_node = draw(st.sampled_from([0, 0, 300, 600, 1000]))
        per_task = 0 if per_node else draw(st.sampled_from([0, 100, 250, 400, 700]))
        job = SimJob(job_id, submit=draw(st.integers(0, 50)), run_time=draw(st.integers(1, 60)),
                     estimate=100.0, procs=procs, nodes=nodes, memory=MemoryRequest(per_node, per_task),
                     migratable=draw(st.booleans()))
        if fits_alone(topology, job):
            jobs.append(job)
    return topology, jobs


class Regrouped(MemoryAudit):
    """Paired gang scheduling's slot homogeneity after every event, on made-up predictions: it moves
    jobs between rows on their own columns, and must commit nothing."""

    def schedule(self, now: float) -> Decision:
        decision = self.policy.schedule(now)
        self.check(now)
        self.policy.homogenize({job_id: (job_id * 37) % 100 / 100 for job_id in self._jobs}, now)
        self.check(now)
        return decision


def policy_for(name: str, topology: Topology, mpl: int) -> LivePolicy:
    choice = Choice(policy=name, mpl=mpl, migrate_per_slice=4, migration_cost_s=1.0, most_large=1)
    return build_policy(choice, topology.width, 100.0, topology)


@pytest.mark.parametrize("name", POLICY_NAMES)
@settings(max_examples=60, deadline=None)
@given(workload=workloads(), mpl=st.integers(1, 5))
def test_no_policy_ever_commits_a_node_beyond_its_memory(name, workload, mpl):
    topology, jobs = workload
    audit = Regrouped(policy_for(name, topology, mpl), topology)
    simulate(jobs, audit)
    assert all(job.end is not None for job in jobs), "a job that fits the machine alone never ran"
    assert audit.events > 0 or not jobs


def test_five_jobs_of_sixty_percent_of_a_node_run_one_at_a_time_under_gang_scheduling():
    # the case memory must bind: MPL 5 would put them in five rows of the same nodes
    topology = Topology.uniform(4, 2, MEMORY)
    jobs = [SimJob(job_id, 0, 10, 100.0, 8, memory=MemoryRequest(per_node=600)) for job_id in range(1, 6)]
    audit = MemoryAudit(policy_for("gs", topology, 5), topology)
    simulate(jobs, audit)
    spans = sorted((job.start, job.end) for job in jobs)
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:]))
    assert audit.peak_fraction == 0.6


def test_without_memory_requests_the_same_jobs_share_the_nodes_in_rows():
    topology = Topology.uniform(4, 2, MEMORY)
    jobs = [SimJob(job_id, 0, 10, 100.0, 8) for job_id in range(1, 6)]
    simulate(jobs, MemoryAudit(policy_for("gs", topology, 5), topology))
    assert {job.start for job in jobs} == {0}


def test_per_task_memory_limits_how_many_tasks_a_node_takes():
    topology = Topology.uniform(2, 4, MEMORY)
    policy = policy_for("gs", topology, 5)
    first, second, third = (SimJob(job_id, 0, 10, 100.0, 2, memory=MemoryRequest(per_task=400))
                            for job_id in (1, 2, 3))
    simulate([first, second, third], MemoryAudit(policy, topology))
    # the second's lowest free columns are on node 0 beside the first: it takes node 1's instead,
    # and the third waits although both nodes have free processors (200 bytes left on each)
    assert first.start == second.start == 0 and third.start == 10.0


def test_the_audit_catches_an_overcommitted_node():
    topology = Topology.uniform(1, 2, MEMORY)
    greedy = SimJob(1, 0, 10, 100.0, 1, memory=MemoryRequest(per_task=800))
    audit = MemoryAudit(policy_for("gs", topology, 2), topology)
    audit.submit(greedy, 0.0)
    audit.schedule(0.0)
    audit.policy.adopt(SimJob(2, 0, 10, 100.0, 1, memory=MemoryRequest(per_task=800)), 0b10, 0.0, 0.0)
    audit._jobs[2] = SimJob(2, 0, 10, 100.0, 1, memory=MemoryRequest(per_task=800))
    with pytest.raises(Overcommitted, match="node 0 committed 1600 bytes of 1000"):
        audit.check(1.0)


@pytest.mark.parametrize("kind", ["gs", "bgs", "mbgs"])
def test_the_event_benchmarks_memory_that_holds_every_row_changes_no_decision(kind):
    # gang bench event --memory compares the same schedule with and without counting memory
    from gangsched.bench.event import HOLDS_EVERY_ROW, measure_events
    from gangsched.policy.matrix_settings import MatrixPolicyKind

    without = measure_events(MatrixPolicyKind(kind), 64, 5, 40, 60)
    counted = measure_events(MatrixPolicyKind(kind), 64, 5, 40, 60, node_memory=HOLDS_EVERY_ROW)
    assert (counted.running, counted.rows, counted.queued) == (without.running, without.rows, without.queued)
