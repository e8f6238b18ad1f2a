"""`gang hold`, `gang release`, `gang requeue`, `gang update` and `gang admin suspend|resume`: Slurm's
``scontrol hold|release|requeue|update|suspend|resume`` (docs/operations.md, "Jobs"). A command acts on
every job it names, or, if the master refuses one, on none."""

import json

import click

from gangsched.cli.connect import with_master
from gangsched.client.master_client import MasterClient
from gangsched.protocol.admin_messages import Dependency, JobAction
from gangsched.protocol.dependency_text import read_dependency
from gangsched.protocol.durations import parse_duration

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


@click.command()
@click.argument("job_id", type=int)
@click.argument("settings", nargs=-1, required=True, metavar="KEY=VALUE...")
@click.option("--json", "as_json", is_flag=True, help="print the job as it is now (a JobInfo) and what changed")
@with_master
def update(client: MasterClient, job_id: int, settings: tuple[str, ...], as_json: bool) -> None:
    """Change a job: TimeLimit=, Name=, Dependency=, Partition=, Priority=."""
    fields: dict[str, object] = {}
    for setting in settings:
        key, equals, value = setting.partition("=")
        field = UPDATABLE.get(key.lower().replace("_", ""))
        if not equals or field is None:
            raise click.BadParameter(f"{setting!r}: give KEY=VALUE, KEY one of TimeLimit, Name, Dependency, "
                                     "Partition, Priority", param_hint="KEY=VALUE")
        try:
            fields[field] = setting_value(field, value)
        except ValueError as error:
            raise click.BadParameter(f"{setting!r}: {error}", param_hint="KEY=VALUE") from None
    done = client.update_job(job_id, fields)
    if as_json:
        click.echo(json.dumps({"job": done.job.model_dump(mode="json"), "changes": done.changes}))
        return
    for change in done.changes:
        click.echo(f"job {job_id}: {change}")


UPDATABLE = {"timelimit": "time_limit_s", "time": "time_limit_s", "name": "name", "jobname": "name",
              "dependency": "dependency", "partition": "partition", "priority": "priority"}


def setting_value(field: str, text: str) -> object:
    """A setting's value as ``JobUpdate`` takes it, from Slurm's spelling."""
    if field == "time_limit_s":
        seconds = parse_duration(text)
        if seconds is None:
            raise ValueError("a time limit has an end (not UNLIMITED)")
        return seconds
    if field == "dependency":
        return Dependency() if text.lower() in ("", "none") else Dependency(**read_dependency(text))
    if field == "priority":
        return float(text)
    return text
