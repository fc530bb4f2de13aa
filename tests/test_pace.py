"""dgxperf.pace: the largest fall of a series and whether it is a change of pace."""

from __future__ import annotations

import pytest

from dgxperf.pace import PaceChange, largest_fall, pace_change


def test_largest_fall_finds_the_step() -> None:
    assert largest_fall([70.0] * 40 + [44.0] * 50, 30) == 40
    # a dip inside one side does not move the split: the step is where the level changes for good
    assert largest_fall([70.0] * 20 + [10.0] + [70.0] * 19 + [44.0] * 40, 10) == 40


def test_largest_fall_needs_min_side_values_on_each_side() -> None:
    assert largest_fall([70.0] * 59, 30) is None
    assert largest_fall([], 1) is None
    assert largest_fall([44.0] * 30 + [70.0] * 30, 30) == 30  # the only split: pace_change judges its sign
    with pytest.raises(ValueError, match="min_side must be at least 1"):
        largest_fall([1.0, 2.0], 0)


def test_pace_change_reports_medians_and_the_drop() -> None:
    # guide-s1's logged samples/s on the 2026-12-07 H100 host (docs/benchmarks/2026-12-07-h100-encoder-w/),
    # after the first interval, which holds the warm-up
    logged = [521, 523, 508, 521, 529, 470, 547, 491, 490, 503, 388, 540, 554, 558, 482, 406, 337, 306, 315, 314,
              315, 329, 236, 313, 304, 291, 310, 323, 313, 336, 317, 302, 329, 314]  # fmt: skip
    change = pace_change([float(v) for v in logged], min_side=8, min_drop=0.2)
    assert change == PaceChange(index=15, before=521.0, after=314.0)
    assert round(change.drop, 3) == 0.397


def test_pace_change_is_none_for_a_small_fall_a_rise_or_a_short_series() -> None:
    assert pace_change([100.0] * 10 + [85.0] * 10, min_side=8, min_drop=0.2) is None  # 15% < 20%
    assert pace_change([100.0] * 10 + [80.0] * 10, min_side=8, min_drop=0.2) == PaceChange(10, 100.0, 80.0)
    assert pace_change([50.0] * 10 + [100.0] * 10, min_side=8, min_drop=0.2) is None  # faster is not a fall
    assert pace_change([100.0] * 15, min_side=8, min_drop=0.2) is None
    assert pace_change([0.0] * 20, min_side=8, min_drop=0.2) is None  # no level to fall from
