"""`gang sim run`'s options of multifactor priority and fair share (sim/fair_share.py), read into its
settings; Slurm's names where it has them (PriorityWeightAge, PriorityDecayHalfLife, ...)."""

import functools
from collections.abc import Callable
from typing import Any

import click

from gangsched.policy.multifactor import PriorityError, PriorityWeights
from gangsched.protocol.durations import DurationError, parse_duration
from gangsched.sim.fair_share import DEFAULT_HALF_LIFE_S, FairShareSettings

WEIGHT_NAMES = {"age": "age", "fairshare": "fair_share", "jobsize": "job_size", "partition": "partition"}


def priority_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--priority-weight", "priority_weights", multiple=True, metavar="FACTOR=WEIGHT",
                     help="a factor's weight in each job's priority, FACTOR one of "
                          f"{', '.join(WEIGHT_NAMES)} (Slurm's PriorityWeight*); any of them, or --accounts, "
                          "puts the queues in priority order [arrival order]"),
        click.option("--priority-max-age", default="7-0", show_default=True, metavar="TIME",
                     help="the wait at which the age factor reaches 1 (PriorityMaxAge)"),
        click.option("--priority-favor-small", is_flag=True,
                     help="the job size factor favours small jobs, not large ones (PriorityFavorSmall)"),
        click.option("--half-life", default="7-0", show_default=True, metavar="TIME",
                     help="use counts half after this long (PriorityDecayHalfLife)"),
        click.option("--accounts", type=click.Choice(["users", "groups"]), default=None,
                     help="fair share between the log's users, or its groups with their users in them"),
    ]
    return functools.reduce(lambda wrapped, option: option(wrapped), reversed(options), command)


def fair_share_settings(given: dict[str, Any]) -> FairShareSettings | None:
    """The settings the options give (taken out of ``given``), None where none asks for priorities."""
    spelled: tuple[str, ...] = given.pop("priority_weights")
    max_age, favor_small = given.pop("priority_max_age"), given.pop("priority_favor_small")
    half_life, accounts = given.pop("half_life"), given.pop("accounts")
    if not spelled and accounts is None:
        return None
    weights: dict[str, float] = {}
    for pair in spelled:
        name, equals, value = pair.partition("=")
        if not equals or name.lower() not in WEIGHT_NAMES:
            raise click.BadParameter(f"{pair!r}: FACTOR=WEIGHT, FACTOR one of {', '.join(WEIGHT_NAMES)}",
                                     param_hint="'--priority-weight'")
        try:
            weights[WEIGHT_NAMES[name.lower()]] = float(value)
        except ValueError:
            raise click.BadParameter(f"{pair!r}: the weight must be a number", param_hint="'--priority-weight'") \
                from None
    try:
        built = PriorityWeights(**weights, max_age_s=_seconds(max_age, "--priority-max-age"),
                                favor_small=favor_small)
    except PriorityError as error:
        raise click.BadParameter(str(error), param_hint="'--priority-weight'") from None
    return FairShareSettings(built, half_life_s=_seconds(half_life, "--half-life") or DEFAULT_HALF_LIFE_S,
                             accounts_from=accounts or "users")


def _seconds(text: str, option: str) -> float:
    try:
        seconds = parse_duration(text)
    except DurationError as error:
        raise click.BadParameter(str(error), param_hint=f"'{option}'") from None
    if seconds is None:
        raise click.BadParameter(f"{text!r}: a time, not UNLIMITED", param_hint=f"'{option}'")
    return seconds
