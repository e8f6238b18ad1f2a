"""The simulator quantum by quantum: the CPU model, and strict against paired gang scheduling on hand-made cases."""

import pytest

from gangsched.policy.catalog import Choice
from gangsched.sim.cpu import Cores, job_rates, stretch
from gangsched.sim.quanta import Quanta
from gangsched.sim.runner import run_keeping_jobs
from gangsched.sim.sim_job import SimJob

GS = Choice(policy="gs", mpl=4)


def test_tasks_that_fit_their_core_run_at_full_speed_and_others_share_it():
    assert stretch([(0.4, 0.6), (0.5, 0.5)]) == 1.0
    assert stretch([(1.0, 0.0), (1.0, 0.0)]) == pytest.approx(2.0)  # two CPU-bound tasks: half a core each
    rates = job_rates({1: (100.0, [0]), 2: (100.0, [1])}, Cores.dedicated(2))
    assert rates == {1: 1.0, 2: 1.0}


def test_a_job_goes_at_the_pace_of_its_slowest_task():
    # job 1 spans columns 0 and 1; job 2 shares column 1's core with it
    rates = job_rates({1: (100.0, [0, 1]), 2: (100.0, [1])}, Cores.dedicated(2))
    assert rates[1] == pytest.approx(0.5) and rates[2] == pytest.approx(0.5)


def test_emulated_nodes_on_one_core_run_faster_alone_than_their_share():
    cores = Cores.pinned(4, 1, 2)
    assert cores.of_column == (0, 0, 1, 1) and cores.share == 0.5
    alone = job_rates({1: (50.0, [0])}, cores)[1]
    assert alone == pytest.approx(1 / (0.5 + 0.25))  # its computing takes half the time on a whole core
    crowded = job_rates({1: (100.0, [0]), 2: (100.0, [1])}, cores)
    assert crowded == {1: pytest.approx(1.0), 2: pytest.approx(1.0)}  # two half-core shares fill the core


def test_a_jobs_tasks_on_one_core_compute_at_the_same_time():
    cores = Cores.pinned(4, 1, 2)  # columns 0 and 1 share core 0
    # two tasks of one job leave each barrier together: 2 x 22.5 % of the core computing, then 55 % waiting
    assert job_rates({1: (45.0, [0, 1])}, cores)[1] == pytest.approx(1.0)
    # a task of each of two jobs interleave instead: no barrier holds them together
    assert job_rates({1: (45.0, [0]), 2: (45.0, [1])}, cores)[1] == pytest.approx(1 / (0.55 + 0.225))


def test_a_cpu_bound_start_takes_a_whole_core_before_the_jobs_own_utilization():
    cores = Cores.pinned(2, 1, 1)  # two processors of half a core each on one core
    started = SimJob(1, 0.0, 2.0, 100.0, 1, utilization=50.0, startup_s=1.0)
    _, (job,) = run_keeping_jobs(GS, [started], 2, quanta=Quanta(0.5, "strict", cores=cores))
    # 1 s of start on the whole core, then 1 s of work at 50 % of a half core: 0.5 + 0.25 s a second
    assert job.end == pytest.approx(1.0 + 0.75)
    with pytest.raises(ValueError, match="start-up"):
        SimJob(2, 0.0, 1.0, 100.0, 1, startup_s=2.0)


def one_column_pair(utilization: float, pairing: str) -> list[SimJob]:
    jobs = [SimJob(1, 0.0, 4.0, 100.0, 1, utilization=utilization),
            SimJob(2, 0.0, 4.0, 100.0, 1, utilization=utilization)]
    _, scheduled = run_keeping_jobs(GS, jobs, 1, quanta=Quanta(0.5, pairing))  # type: ignore[arg-type]
    return scheduled


def test_a_job_placed_during_a_quantum_runs_from_the_next_boundary():
    jobs = [SimJob(1, 0.3, 2.0, 100.0, 1)]
    _, (job,) = run_keeping_jobs(GS, jobs, 1, quanta=Quanta(0.5, "strict"))
    assert job.start == pytest.approx(0.3) and job.end == pytest.approx(2.5)


def test_strict_rows_take_turns():
    first, second = one_column_pair(40.0, "strict")
    # 4 s of work each in alternate 0.5 s quanta: they end in the 15th and 16th quanta
    assert (first.end, second.end) == (pytest.approx(7.5), pytest.approx(8.0))


def test_paired_rows_share_a_quantum_once_measured_complementary():
    strict = one_column_pair(40.0, "strict")
    paired = one_column_pair(40.0, "paired")
    # each runs one quantum alone (a new job is predicted at 100 %), then both run every quantum
    assert [job.end for job in paired] == [pytest.approx(4.5), pytest.approx(4.5)]
    assert sum(job.end or 0 for job in paired) < 0.7 * sum(job.end or 0 for job in strict)


def test_cpu_bound_rows_are_never_paired():
    assert [job.end for job in one_column_pair(100.0, "paired")] == [
        job.end for job in one_column_pair(100.0, "strict")
    ]


def test_local_scheduling_lets_the_kernel_share_the_processor():
    jobs = [SimJob(1, 0.0, 4.0, 100.0, 1), SimJob(2, 0.0, 4.0, 100.0, 1)]
    _, scheduled = run_keeping_jobs(GS, jobs, 1, quanta=Quanta(0.5, "strict", coordination="local"))
    assert [job.end for job in scheduled] == [pytest.approx(8.0), pytest.approx(8.0)]
