"""Use forgotten over a half-life (Slurm's PriorityDecayHalfLife; docs/policies.md, "Fair share").

What an association used t seconds ago counts 2^(-t / half-life) of itself
now. Use is charged as it accrues (each quantum's processor-seconds), so it
is kept scaled to a fixed instant: a charge at ``now`` adds amount x
2^((now - base) / half-life), and a reading divides by the same, which makes
a charge cost the same with 10 associations or 10,000. The base moves up
before the scale grows past what a float holds. Optionally all use is
forgotten at the start of each period (PriorityUsageResetPeriod), counted
from the clock's zero.
"""

import math
from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)

_RESCALE_EXPONENT = 512.0  # 2^512 is far inside a float's range, 2^1024 is not


class DecayedUsage(Generic[Key]):
    def __init__(self, half_life_s: float, reset_every_s: float | None = None,
                 values: Mapping[Key, float] | None = None, now: float = 0.0) -> None:
        """``values``: the use as of ``now`` (a store's, after a restart)."""
        if not half_life_s > 0 or math.isinf(half_life_s):
            raise ValueError(f"a half-life must be above 0 s and finite, got {half_life_s}")
        if reset_every_s is not None and not reset_every_s > 0:
            raise ValueError(f"a reset period must be above 0 s, got {reset_every_s}")
        self.half_life_s = half_life_s
        self.reset_every_s = reset_every_s
        self._base = now
        self._scaled: dict[Key, float] = dict(values or {})
        self._period = self._period_of(now)

    def charge(self, key: Key, amount: float, now: float) -> None:
        self._advance(now)
        self._scaled[key] = self._scaled.get(key, 0.0) + amount * self._scale(now)

    def at(self, now: float) -> dict[Key, float]:
        """Every key's use as it counts at ``now``."""
        self._advance(now)
        return self._unscaled(now)

    def _scale(self, now: float) -> float:
        return float(2.0 ** ((now - self._base) / self.half_life_s))

    def _advance(self, now: float) -> None:
        period = self._period_of(now)
        if period != self._period:
            self._scaled.clear()
            self._period, self._base = period, now
        elif (now - self._base) / self.half_life_s > _RESCALE_EXPONENT:
            self._scaled = self._unscaled(now)
            self._base = now

    def _unscaled(self, now: float) -> dict[Key, float]:
        unscale = 1.0 / self._scale(now)
        return {key: value * unscale for key, value in self._scaled.items()}

    def _period_of(self, now: float) -> int:
        return 0 if self.reset_every_s is None else math.floor(now / self.reset_every_s)
