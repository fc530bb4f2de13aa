"""Where a series' level fell most, and whether by enough to call it a change of pace.

A host-bound run goes at the speed of the core its process holds, and that speed can change part-way: on a
lent H100 on 2026-12-07, guide A's recipe logged ~520 samples/s for ~320 steps, then ~310 for the rest of
the session, with its process at one core and the GPU's clocks unchanged throughout
(``docs/benchmarks/2026-12-07-h100-encoder-w/``). Epoch figures then mix two paces, and a speed-up measured
against such a run says more about its host than about the change. Both the training loop (from its logged
steps) and ``dgxperf advise``'s ``launch.host_slowed`` (from a recording's GPU busy share) look for that fall
with :func:`pace_change`.

The split is the one that maximises the mean before it minus the mean after it (one pass with prefix sums, so
hour-long recordings stay cheap); the levels reported are the two sides' medians, which a single slow
interval (an evaluation, a checkpoint) does not move.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class PaceChange:
    """The series fell at ``index`` (the first value after the change) from ``before`` to ``after`` (medians)."""

    index: int
    before: float
    after: float

    @property
    def drop(self) -> float:
        """The fall as a share of the level before it (0.4 = 40% lower)."""
        return 1 - self.after / self.before


def largest_fall(values: Sequence[float], min_side: int) -> int | None:
    """The split (index of the first value after it) with the largest mean before minus mean after, with at least
    ``min_side`` values on each side; None when the series is shorter than two sides."""
    if min_side < 1:
        raise ValueError(f"min_side must be at least 1, not {min_side}")
    n = len(values)
    if n < 2 * min_side:
        return None
    prefix = [0.0]
    for value in values:
        prefix.append(prefix[-1] + value)
    return max(
        range(min_side, n - min_side + 1),
        key=lambda k: prefix[k] / k - (prefix[n] - prefix[k]) / (n - k),
    )


def pace_change(values: Sequence[float], *, min_side: int, min_drop: float) -> PaceChange | None:
    """The largest fall in ``values`` when its median after is at least ``min_drop`` (a share) below its median
    before; None otherwise, or when the series is too short to judge."""
    k = largest_fall(values, min_side)
    if k is None:
        return None
    change = PaceChange(k, statistics.median(values[:k]), statistics.median(values[k:]))
    if change.before <= 0 or change.after > change.before * (1 - min_drop):
        return None
    return change
