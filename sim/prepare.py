"""From trace records to simulation jobs, counting every record that needs a decision.

What is done with awkward records (docs/metrics.md, 'Traces'):

* no processors (allocated <= 0): the requested number if there is one, else dropped;
* wider than the machine: dropped;
* unknown run time (< 0): dropped; zero run time: kept (it ends as it starts);
* no estimate (requested time <= 0): the run time is the estimate;
* an estimate of 0 (no estimate, zero run time): 1 s, the trace's time unit,
  since a job planned for no time would not hold its processors in the plan;
* run time above the estimate: the estimate is raised to the run time (the
  trace's run time already shows what the real scheduler allowed);
* cancelled jobs (status 5) that ran are kept, like any other;
* memory: the requested memory per processor (field 10, KB) where the log
  has it, else the used memory (field 7), as each task's request
  (``--mem-per-cpu``); counted only on a machine that declares memory.
"""

from collections import Counter
from dataclasses import dataclass

from gangsched.policy.memory import NO_MEMORY, MemoryRequest
from gangsched.sim.sim_job import SimJob
from gangsched.workload.swf import SwfJob


@dataclass(frozen=True)
class Prepared:
    jobs: list[SimJob]
    awkward: Counter[str]  # what was done -> how many records
    dropped: int


def prepare(records: list[SwfJob], procs: int, memory_per_node: int | None = None) -> Prepared:
    """``memory_per_node``: a machine with memory, where a job that asks more per processor is dropped."""
    awkward: Counter[str] = Counter()
    jobs = []
    for record in records:
        size = record.procs
        if size <= 0:
            if record.req_procs <= 0:
                awkward["dropped: no processors"] += 1
                continue
            size = record.req_procs
            awkward["no allocated processors: used the request"] += 1
        if size > procs:
            awkward["dropped: wider than the machine"] += 1
            continue
        if record.run_time < 0:
            awkward["dropped: unknown run time"] += 1
            continue
        if record.run_time == 0:
            awkward["zero run time"] += 1
        estimate = record.req_time
        if estimate <= 0:
            estimate = record.run_time
            awkward["no estimate: used the run time"] += 1
        elif record.run_time > estimate:
            estimate = record.run_time
            awkward["ran past its estimate: estimate raised"] += 1
        if estimate == 0:
            estimate = 1
            awkward["zero estimate: 1 s"] += 1
        memory = memory_of(record)
        if memory_per_node is not None and memory.on_node(1) > memory_per_node:
            awkward["dropped: more memory than a node has"] += 1
            continue
        if record.status == 5:
            awkward["cancelled, kept as it ran"] += 1
        jobs.append(SimJob(record.job_id, record.submit, record.run_time, estimate, size, memory=memory,
                           user=user_of(record), group=group_of(record)))
    dropped = sum(count for what, count in awkward.items() if what.startswith("dropped"))
    return Prepared(jobs, awkward, dropped)


def user_of(record: SwfJob) -> str:
    """The log's user id as a name; "" where the log has none (-1)."""
    return "" if record.user < 0 else str(record.user)


def group_of(record: SwfJob) -> str:
    return "" if record.group < 0 else str(record.group)


def memory_of(record: SwfJob) -> MemoryRequest:
    kilobytes = record.req_memory if record.req_memory > 0 else record.memory
    return MemoryRequest(per_task=int(kilobytes * 1024)) if kilobytes > 0 else NO_MEMORY


def prepare_as_pyss(records: list[SwfJob], procs: int) -> Prepared:
    """The jobs as the pyss simulator reads a trace, so that its figures and ours compare (docs/metrics.md).

    A record with no run time, no processors or a negative submit time becomes a
    1-second serial job with a 1-second estimate (which its statistics then leave
    out: ``sim.metrics.pyss_selection``); otherwise the run time is cut to the
    estimate where it ran past it, times are whole seconds (at least 1), and a
    job wider than the machine is narrowed to it.
    """
    awkward: Counter[str] = Counter()
    jobs = []
    for record in records:
        if record.run_time <= 0 or record.procs <= 0 or record.submit < 0:
            awkward["pyss: a 1-second serial job"] += 1
            jobs.append(SimJob(record.job_id, max(record.submit, 1), 1, 1, max(1, record.procs), user=user_of(record),
                               group=group_of(record)))
            continue
        run_time = int(max(min(record.req_time, record.run_time), 1))
        if run_time < record.run_time:
            awkward["pyss: run time cut to the estimate"] += 1
        if record.procs > procs:
            awkward["pyss: narrowed to the machine"] += 1
        estimate = int(max(record.req_time, record.run_time, 1))
        jobs.append(SimJob(record.job_id, record.submit, run_time, estimate, max(min(record.procs, procs), 1),
                           user=user_of(record), group=group_of(record)))
    return Prepared(jobs, awkward, 0)
