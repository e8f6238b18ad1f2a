"""Random workloads for the property tests of the policies: up to 25 jobs on 8 processors."""

from hypothesis import strategies as st

from gangsched.sim.sim_job import SimJob

Row = tuple[int, int, int, int]  # submit, procs, run time, estimate above the run time


def workloads(last_submit: int) -> st.SearchStrategy[list[Row]]:
    return st.lists(
        st.tuples(st.integers(0, last_submit), st.integers(1, 8), st.integers(0, 20), st.integers(0, 30)),
        min_size=1, max_size=25,
    )


def estimated(rows: list[Row]) -> list[SimJob]:
    """Ids from 1; an estimate of at least 1 s, as trace preparation makes it."""
    return [SimJob(i, submit, run, max(run + slack, 1), procs)
            for i, (submit, procs, run, slack) in enumerate(rows, 1)]
