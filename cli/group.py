"""The `gang` command group (click): every subcommand lives in its own module, imported only
when called, so that `gang sim` never loads zmq and `gang submit` never loads matplotlib.

The list commands (queue, history, nodes) are not click commands: ``main`` runs them
before click is imported (``listing``); the group only lists them in its help.
"""

import importlib

import click

HELP_LIMIT = 60
# the list commands' entry: ``main`` runs them before click is imported; here they are listed for help
LISTING = "gangsched.cli.listing:main"


class LazyGroup(click.Group):
    """Subcommands imported only when called."""

    # name -> (where it is, its one-line help): `gang --help` lists them without importing any
    # (tests/test_cli_start.py checks each against the command's own, cut at HELP_LIMIT)
    lazy = {
        "master": ("gangsched.cli.daemons:master", "Run the master daemon (job table, matrix, quantum timer)."),
        "noded": ("gangsched.cli.daemons:noded", "Run a node daemon (launches tasks, applies switches,..."),
        "ioserver": ("gangsched.cli.daemons:ioserver", "Run the I/O server that synthetic I/O jobs write to."),
        "keygen": ("gangsched.cli.daemons:keygen", "Make CURVE keys: the master's, the nodes', and one per..."),
        "cluster": ("gangsched.cli.cluster:cluster", "A cluster to run on: local processes (the default) or..."),
        "image": ("gangsched.cli.image:image", "The gangsched container image (one for master, nodes and..."),
        "submit": ("gangsched.cli.submit:submit", "Submit a job: `gang submit -n 4 -- ./prog args`, `gang..."),
        "queue": (LISTING, "List jobs, like squeue: state, nodes, elapsed time,..."),
        "history": (LISTING, "Jobs of today, or since -S, finished or not, like sacct:..."),
        "nodes": (LISTING, "List nodes, like sinfo: state, CPU share, jobs, last..."),
        "cancel": ("gangsched.cli.cancel:cancel", "Cancel jobs, like scancel: their tasks get SIGTERM, then..."),
        "matrix": ("gangsched.cli.matrix:matrix", "Show the Ousterhout matrix: slots by nodes, the running..."),
        "admin": ("gangsched.cli.admin:admin", "Nodes, reservations, suspensions, users, masters,..."),
        "hold": ("gangsched.cli.job_control:hold", "Hold pending jobs: they wait until released (root's hold:..."),
        "release": ("gangsched.cli.job_control:release", "Release held jobs: back in their partition's queue."),
        "update": ("gangsched.cli.job_control:update", "Change a job: TimeLimit=, Name=, Dependency=, Partition=,..."),
        "show": ("gangsched.cli.show:show", "Every field of a job or a node, like scontrol show."),
        "requeue": ("gangsched.cli.job_control:requeue", "Requeue running jobs: killed and queued again, their..."),
        "bench": ("gangsched.cli.bench:bench", "Benchmarks on a fresh local cluster; each prints its..."),
        "experiment": ("gangsched.cli.experiment:experiment",
                       "Rerun an experiment: L1-L6 live (L6: MPI jobs, gang vs..."),
        "sim": ("gangsched.cli.sim:sim", "Simulate policies over traces (SWF, gzip or plain) or..."),
        "replay": ("gangsched.cli.replay:replay", "Replay a trace on a fresh cluster and print its metrics..."),
        "slurm": ("gangsched.slurm.install:slurm", "Slurm's commands under their names: sbatch, srun, salloc,..."),
    }

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # click would end with status 1; Slurm's commands end quietly with 0
            from gangsched.cli.pipes import quiet_pipe

            quiet_pipe()
            return None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if self.lazy.get(name, ("",))[0] == LISTING:
            return _list_command(name)
        if name in self.lazy:
            module, _, attribute = self.lazy[name][0].partition(":")
            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, self.lazy[name][1]) for name in sorted(self.lazy)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """gangsched: a cluster gang scheduler in the style of ParPar."""


def _list_command(name: str) -> click.Command:
    """A list command as click sees it (``main`` runs them without click): its arguments go to argparse."""

    def run(arguments: tuple[str, ...]) -> None:
        from gangsched.cli import listing

        listing.main(name, arguments)

    return click.Command(name, callback=run, add_help_option=False,
                         params=[click.Argument(["arguments"], nargs=-1, type=click.UNPROCESSED)],
                         context_settings={"ignore_unknown_options": True})
