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
from collections.abc import Mapping, Sequence
from typing import Any


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


# A change of pace worth a line: at least 8 logged windows (160 steps at the default log_every) on each side, and
# the median samples/s after at least 20% under the median before. 20% was chosen after a scan at 15% of the 255
# runs' metrics.jsonl committed under docs/benchmarks/ by 2026-12-07 (9 named): it keeps the 5 largest falls, four
# of 21-26% (guide A's recipe three times, optimized once, on lent H200s and an H100) and the 40% fall of guide-s1
# on the 2026-12-07 H100 host, whose process held one core throughout.
PACE_MIN_WINDOWS = 8
PACE_MIN_DROP = 0.2


def step_pace_change(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Where a run's logged samples/s fell and ran lower on the median after, from its step records (``step``
    and ``samples_per_s``, in order; the first holds compilation and warm-up and is left out), or None when it
    held its pace, logged too few windows, or some window has no rate."""
    usable = list(records[1:])
    rates = [r.get("samples_per_s") for r in usable]
    measured = [float(v) for v in rates if isinstance(v, int | float)]
    if not measured or len(measured) < len(rates):
        return None
    change = pace_change(measured, min_side=PACE_MIN_WINDOWS, min_drop=PACE_MIN_DROP)
    if change is None:
        return None
    return {
        "step": int(usable[change.index]["step"]),
        "samples_per_s_before": round(change.before, 1),
        "samples_per_s_after": round(change.after, 1),
        "drop": round(change.drop, 3),
        "windows_before": change.index,
        "windows_after": len(usable) - change.index,
    }


def pace_line(pace: Mapping[str, Any]) -> str:
    """One line on a run whose logged samples/s fell part-way and ran lower on the median after
    (step_pace_change)."""
    return (
        f"pace: the logged samples/s fell {100 * pace['drop']:.0f}% by step {pace['step']}: a median of "
        f"{pace['samples_per_s_before']:,.0f} over the {pace['windows_before']} windows before, "
        f"{pace['samples_per_s_after']:,.0f} over the {pace['windows_after']} from it on, so the epochs mix two "
        "paces. A host-bound run follows its host's CPU speed: `dgxperf advise` on a `dgxperf monitor` recording "
        "of the run says whether the host slowed (launch.host_slowed)"
    )
