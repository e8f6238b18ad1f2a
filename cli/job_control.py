"""`gang hold`, `gang release`, `gang requeue` and `gang admin suspend|resume`: Slurm's ``scontrol
hold|release|requeue|suspend|resume`` (docs/operations.md, "Jobs"). A command acts on every job it
names, or, if the master refuses one, on none."""

import json

import click

from gangsched.cli.connect import with_master
from gangsched.master.client import MasterClient
from gangsched.protocol.admin_messages import JobAction

_DONE = {JobAction.HOLD: "held", JobAction.RELEASE: "released", JobAction.SUSPEND: "suspended",
         JobAction.RESUME: "resumed", JobAction.REQUEUE: "requeued"}


def _job_command(action: JobAction, help_text: str) -> click.Command:
    @click.command(name=action.value, help=help_text)
    @click.option("--json", "as_json", is_flag=True, help="print the jobs as they are now: a list of JobInfo")
    @click.argument("job_ids", nargs=-1, type=int, required=True)
    @with_master
    def command(client: MasterClient, job_ids: tuple[int, ...], as_json: bool) -> None:
        done = client.control_jobs(action, list(job_ids))
        if as_json:
            click.echo(json.dumps([job.model_dump(mode="json") for job in done.jobs]))
            return
        for job in done.jobs:
            click.echo(f"job {job.job_id} {_DONE[action]}: {job.state}{f' ({job.reason})' if job.reason else ''}")

    return command


hold = _job_command(JobAction.HOLD, "Hold pending jobs: they wait until released (root's hold: only root releases).")
release = _job_command(JobAction.RELEASE, "Release held jobs: back in their partition's queue.")
requeue = _job_command(JobAction.REQUEUE, "Requeue running jobs: killed and queued again, their output appended.")
suspend = _job_command(JobAction.SUSPEND, "Suspend running jobs (root): frozen whole, memory kept, limit stopped.")
resume = _job_command(JobAction.RESUME, "Resume jobs root suspended: back into a row of their matrix.")
