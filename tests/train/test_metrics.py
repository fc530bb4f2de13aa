"""train/metrics.py: scores from a confusion matrix and the interval of a measured accuracy."""

from __future__ import annotations

import pytest

from dgxperf.train.metrics import scores, wilson_interval


def test_scores_from_a_confusion_matrix() -> None:
    result = scores([[8, 2], [1, 9]])
    assert result["accuracy"] == pytest.approx(0.85) and result["samples"] == 20
    assert result["macro_f1"] == pytest.approx((16 / 19 + 18 / 21) / 2)


def test_wilson_interval_matches_the_textbook_values() -> None:
    # 50 of 100: Wilson 95% is 0.4038-0.5962 (Newcombe 1998, Table I's method 3 gives the same)
    assert wilson_interval(0.5, 100) == pytest.approx([0.4038, 0.5962], abs=1e-4)
    # guide's 86.06% on the 1,736 test reviews: +-1.6 points
    low, high = wilson_interval(0.8606, 1736)  # type: ignore[misc]
    assert (round(100 * low, 1), round(100 * high, 1)) == (84.4, 87.6)


def test_wilson_interval_stays_inside_zero_and_one() -> None:
    assert wilson_interval(1.0, 10) == pytest.approx([0.7225, 1.0], abs=1e-4)
    assert wilson_interval(0.0, 10) == pytest.approx([0.0, 0.2775], abs=1e-4)
    assert wilson_interval(0.7, 0) is None
