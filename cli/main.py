"""`gang`: run the daemons, bring a local cluster up and down, submit and watch jobs, simulate.

Every subcommand lives in its own module, imported only when called, so that
`gang sim` never loads zmq and `gang queue` never loads matplotlib.
"""

import importlib
import sys

import click


class LazyGroup(click.Group):
    """Subcommands imported only when called."""

    lazy = {
        "master": "gangsched.cli.daemons:master",
        "noded": "gangsched.cli.daemons:noded",
        "ioserver": "gangsched.cli.daemons:ioserver",
        "keygen": "gangsched.cli.daemons:keygen",
        "cluster": "gangsched.cli.cluster:cluster",
        "image": "gangsched.cli.image:image",
        "submit": "gangsched.cli.jobs:submit",
        "queue": "gangsched.cli.jobs:queue",
        "cancel": "gangsched.cli.jobs:cancel",
        "nodes": "gangsched.cli.jobs:nodes",
        "matrix": "gangsched.cli.jobs:matrix",
        "admin": "gangsched.cli.admin:admin",
        "bench": "gangsched.cli.bench:bench",
        "experiment": "gangsched.cli.experiment:experiment",
        "sim": "gangsched.cli.sim:sim",
        "replay": "gangsched.cli.replay:replay",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, _, attribute = self.lazy[name].partition(":")
            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """gangsched: a cluster gang scheduler in the style of ParPar."""


def main() -> None:
    try:
        cli(prog_name="gang")
    except KeyboardInterrupt:
        sys.exit(130)
