"""`gang cancel`: Slurm's scancel."""

import getpass
import json

import click

from gangsched.cli.connect import with_master
from gangsched.cli.master_access import json_error
from gangsched.client.master_client import MasterClient, RequestRefused


@click.command()
@click.option("--json", "as_json", is_flag=True, help='print [{"job_id": N, "state": ...}] instead of sentences')
@click.argument("job_ids", nargs=-1, type=int, required=True)
@with_master
def cancel(client: MasterClient, job_ids: tuple[int, ...], as_json: bool) -> None:
    """Cancel jobs, like scancel: their tasks get SIGTERM, then SIGKILL."""
    failures, cancelled = [], []
    for job_id in job_ids:
        try:
            cancelled.append(client.cancel(job_id, getpass.getuser()))
            if not as_json:
                click.echo(f"job {job_id} cancelled")
        except RequestRefused as error:
            failures.append(error)
    if as_json:
        click.echo(json.dumps([reply.model_dump(mode="json", exclude={"type", "killed"}) for reply in cancelled]))
    if failures:
        reason = "; ".join(failure.reason for failure in failures)
        if as_json:
            json_error(reason, failures[0].code.value)
        raise click.ClickException(reason)
