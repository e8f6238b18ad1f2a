"""The job a user would submit to run a synthetic program (jobs/synthetic.py) on some nodes: for
the benchmarks, the experiments and the tests alike.

A module of its own, so that the synthetic program, which every such task
runs, does not import the job models.
"""

import getpass

from gangsched.jobs.synthetic import SyntheticJob
from gangsched.protocol.records import JobSpec


def job_spec(job: SyntheticJob, nodes: int, estimate_s: float | None = None) -> JobSpec:
    return JobSpec(name=f"bench-{job.kind}", user=getpass.getuser(), tasks=nodes, argv=job.argv(),
                   estimate_s=estimate_s, migratable=job.migratable)
