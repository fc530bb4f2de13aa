"""dgxperf.pace: the largest fall of a series and whether it is a change of pace."""

from __future__ import annotations

import pytest

from dgxperf.pace import PaceChange, largest_fall, pace_change, step_pace_change


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


def logged(folder: str, run: str) -> list[dict[str, object]]:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / folder / run / "metrics.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("type") == "step"]


def test_step_pace_change_names_the_host_that_slowed_part_way() -> None:
    """guide-s1 on the 2026-12-07 H100 host: ~520 samples/s, then ~310 from the window that ends at step 320."""
    assert step_pace_change(logged("2026-12-07-h100-encoder-w", "guide-s1")) == {
        "step": 320,
        "samples_per_s_before": 521.3,
        "samples_per_s_after": 314.1,
        "drop": 0.397,
        "windows_before": 15,
        "windows_after": 19,
    }


def test_step_pace_change_is_none_for_runs_that_held_their_pace() -> None:
    # the same host's later guide runs (all at the lower pace) and its GPU-bound optimized runs
    for run in ("guide-s2", "guide-s3", "optimized-s1", "optimized-s4"):
        assert step_pace_change(logged("2026-12-07-h100-encoder-w", run)) is None, run


def test_step_pace_change_leaves_out_the_warm_up_window_and_needs_every_rate() -> None:
    steady = [{"step": 20 * (i + 1), "samples_per_s": 500.0} for i in range(20)]
    assert step_pace_change([{"step": 20, "samples_per_s": 5000.0}, *steady]) is None  # a fast first window
    slowed = steady[:10] + [{"step": r["step"], "samples_per_s": 300.0} for r in steady[10:]]
    assert step_pace_change(slowed) == {"step": 220, "samples_per_s_before": 500.0, "samples_per_s_after": 300.0,
                                        "drop": 0.4, "windows_before": 9, "windows_after": 10}  # fmt: skip
    assert step_pace_change([*slowed[:5], {"step": 999}, *slowed[5:]]) is None  # a window without a rate
    assert step_pace_change(slowed[:16]) is None  # 15 windows after the first: too few for 8 a side
    assert step_pace_change([]) is None
