"""Slurm's command names installed as a site chooses: a small launcher for each in a folder it names
(``gang slurm install DIR``), as Debian installs the PBS names of slurm-wlm-torque apart. Never over a
file that is not one of these launchers (a real Slurm's ``sbatch``, above all): a site that wants
gangsched's names in front puts the folder first on PATH, or removes the other first.

`gang`'s group names the ``slurm`` command by its place (cli/group.py), as pyproject.toml names `gang`'s."""

import os
import sys
from pathlib import Path

import click

# each command and the module whose ``main`` it runs
COMMANDS = {name: f"gangsched.slurm.{name}"
            for name in ("sbatch", "srun", "salloc", "squeue", "scancel", "scontrol", "sinfo", "sacct")}
MARK = "# gangsched's Slurm command"


def launcher(module: str) -> str:
    """A launcher as pip's console scripts are: this interpreter, the module's ``main``."""
    return f"#!{sys.executable}\n{MARK}\nfrom {module} import main\nmain()\n"


def install(folder: Path) -> list[Path]:
    """Write every command's launcher into ``folder``; ValueError, before writing any, if a file there by a
    command's name is not one of them."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / name for name in COMMANDS}
    for name, path in paths.items():
        if (path.exists() or path.is_symlink()) and not _ours(path):
            raise ValueError(f"{path} is not gangsched's {name}: left as it is (remove it to install over it)")
    for name, path in paths.items():
        temporary = path.with_name(f".{name}.{os.getpid()}")
        temporary.write_text(launcher(COMMANDS[name]))
        temporary.chmod(0o755)
        temporary.replace(path)
    return list(paths.values())


def _ours(path: Path) -> bool:
    try:
        return not path.is_symlink() and MARK in path.read_text(errors="replace").splitlines()[:2]
    except OSError:
        return False


@click.group()
def slurm() -> None:
    """Slurm's commands under their names: sbatch, srun, salloc, squeue, scancel, scontrol, sinfo, sacct."""


@slurm.command("install")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
def install_command(folder: Path) -> None:
    """Install Slurm's command names (sbatch, srun, salloc, squeue, scancel, scontrol, sinfo, sacct) into FOLDER, e.g.
    /usr/local/bin or ~/.local/bin; a file of the same name that is not gangsched's (a real Slurm's) is left as
    it is, and nothing is installed."""
    try:
        paths = install(folder)
    except (ValueError, OSError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"installed {', '.join(COMMANDS)} in {folder}: " + " ".join(str(path) for path in paths))
