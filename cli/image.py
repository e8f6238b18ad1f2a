"""`gang image build`: the container image of the docker-compose cluster, built offline."""

from pathlib import Path

import click

from gangsched.cli.console import command_console
from gangsched.deploy.compose import project_dir
from gangsched.deploy.image import IMAGE, ImageError, build_image

console = command_console()


@click.group()
def image() -> None:
    """The gangsched container image (one for master, nodes and I/O server)."""


@image.command("build")
@click.option("--project", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="the gangsched source folder [the working folder]")
def build(project: Path | None) -> None:
    """Build the image: a debootstrapped bookworm base once, the wheels in cached layers."""
    try:
        report = build_image(project or project_dir(), log=lambda line: console.print(f"[dim]{line}[/dim]"))
    except ImageError as error:
        raise click.ClickException(str(error)) from None
    done = [what for what, did in (("base image made", report.base_built),
                                   ("dependencies downloaded", report.dependencies_downloaded)) if did]
    console.print(f"{IMAGE} built in {report.seconds:.1f} s" + (f" ({', '.join(done)})" if done else ""))
