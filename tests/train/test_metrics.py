"""train/metrics.py: scores from a confusion matrix, the interval of a measured accuracy, and two runs' accuracies
compared on the same examples."""

from __future__ import annotations

import pytest

from dgxperf.train.metrics import mcnemar_exact, paired_comparison, scores, wilson_interval


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


def test_mcnemar_exact_matches_the_binomial_test() -> None:
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 2**10)  # all ten discordant pairs one way
    assert mcnemar_exact(0, 10) == mcnemar_exact(10, 0)  # two-sided
    assert mcnemar_exact(60, 40) == pytest.approx(0.056888, abs=1e-6)  # scipy.stats.binomtest(60, 100)
    assert mcnemar_exact(1000, 900) == pytest.approx(0.023109, abs=1e-6)  # 2**1900 is past any float
    assert mcnemar_exact(5, 5) == 1.0 and mcnemar_exact(0, 0) == 1.0


def test_mcnemar_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="negative"):
        mcnemar_exact(-1, 3)


def test_paired_comparison_counts_only_the_examples_one_run_gets_right() -> None:
    gold = [0, 1, 0, 1, 0, 1, 0, 1]
    a = [0, 1, 0, 1, 0, 1, 1, 0]  # 6 right: wrong on the last two
    b = [0, 1, 1, 0, 0, 1, 0, 0]  # 5 right: wrong on 2, 3 and the last
    pair = paired_comparison(a, b, gold)
    assert (pair["a_only"], pair["b_only"], pair["samples"]) == (2, 1, 8)
    assert pair["difference"] == pytest.approx(6 / 8 - 5 / 8)
    low, high = pair["difference_ci95"]
    assert low < pair["difference"] < high
    # Wald interval of a paired difference: sqrt(b + c - (b - c)^2 / n) / n
    assert high - pair["difference"] == pytest.approx(1.96 * (3 - 1 / 8) ** 0.5 / 8)
    assert pair["p_value"] == 1.0  # 2 against 1 is no evidence
    flipped = paired_comparison(b, a, gold)
    assert flipped["difference"] == -pair["difference"] and flipped["p_value"] == pair["p_value"]


def test_a_real_gap_is_seen_inside_both_accuracies_wilson_intervals() -> None:
    # Two runs on 1,736 reviews, 86.0% and 85.0%: their Wilson intervals (about +-1.6 points) overlap, yet
    # when the 1-point gap comes from 20 reviews only one gets right and 3 only the other, it is clear.
    n = 1736
    gold = [0] * n
    both_right = round(0.85 * n) - 3
    rest = n - both_right - 23
    a = [0] * both_right + [0] * 20 + [1] * 3 + [1] * rest  # right, right only here, wrong, wrong
    b = [0] * both_right + [1] * 20 + [0] * 3 + [1] * rest
    pair = paired_comparison(a, b, gold)
    assert (pair["a_only"], pair["b_only"]) == (20, 3)
    low_a, _ = wilson_interval(sum(p == 0 for p in a) / n, n)  # type: ignore[misc]
    _, high_b = wilson_interval(sum(p == 0 for p in b) / n, n)  # type: ignore[misc]
    assert low_a < high_b  # one run at a time, the two are not told apart
    assert pair["p_value"] < 0.001 and pair["difference_ci95"][0] > 0


def test_paired_comparison_refuses_unpaired_inputs() -> None:
    with pytest.raises(ValueError, match="same examples"):
        paired_comparison([0, 1], [0], [0, 1])
    with pytest.raises(ValueError, match="no examples"):
        paired_comparison([], [], [])
