"""Two recipes (or two settings) compared over several training seeds each.

A paired test of two runs' test answers (:mod:`dgxperf.train.paired`) asks whether two *trained models*
differ on the same test reviews. Whether two *recipes* differ is another question, because training again
with another seed moves test accuracy too. On the H200, two seeds of `optimized` from one encoder differed by
1.79 points with McNemar p = 0.004 (``docs/benchmarks/2026-12-04-h200-encoder-h/``). So recipes are compared
here over their runs' test accuracies, one number per seed:

- each group's mean and sample standard deviation, the seed-to-seed spread;
- the difference of the means with Welch's 95% interval (unequal spreads and sizes);
- an exact permutation p: the share of all ways to split the runs into groups of these sizes whose
  difference of means is at least as large, in absolute value, as the observed one. It needs no assumption about the
  spread's shape, and it says plainly how few seeds resolve little: with 2 runs a side the smallest
  p that any result can reach is 1/3.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

# Two-sided 95% quantiles of Student's t by degrees of freedom, rounded *up* to three decimals. Welch's
# degrees of freedom are fractional and are rounded down. Both choices widen the interval a little and
# never narrow it.
_T975 = (
    12.707, 4.303, 3.183, 2.777, 2.571, 2.447, 2.365, 2.307, 2.263, 2.229,
    2.201, 2.179, 2.161, 2.145, 2.132, 2.120, 2.110, 2.101, 2.094, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.049, 2.046, 2.043,
)  # fmt: skip
_T975_LARGE = ((30, 2.043), (40, 2.022), (60, 2.001), (120, 1.980))  # held down to the next listed df
# Exact enumeration up to this many splits; past it, the runs are many enough for Welch's interval alone.
MAX_SPLITS = 200_000


class SeedsError(Exception):
    """Runs that cannot be compared as seeds: too few, not train runs, or tested on other examples."""


def t975(df: float) -> float:
    """The two-sided 95% quantile of Student's t at ``df`` degrees of freedom (rounded down)."""
    if not df >= 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    whole = math.floor(df)
    if whole <= len(_T975):
        return _T975[whole - 1]
    return [value for listed, value in _T975_LARGE if listed <= whole][-1]


def compare_seed_groups(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Group ``a`` against group ``b``: ``difference`` is mean a minus mean b (same units as the input)."""
    if len(a) < 2 or len(b) < 2:
        raise SeedsError(
            f"each group needs at least 2 runs (seeds) to show its own spread; got {len(a)} and {len(b)}"
        )
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    var_a, var_b = statistics.variance(a), statistics.variance(b)
    difference = mean_a - mean_b
    se = math.sqrt(var_a / len(a) + var_b / len(b))
    if se == 0:
        df = math.inf
        interval = [difference, difference]
    else:
        df = se**4 / ((var_a / len(a)) ** 2 / (len(a) - 1) + (var_b / len(b)) ** 2 / (len(b) - 1))
        half = t975(df) * se
        interval = [difference - half, difference + half]
    p_value, splits, smallest_p = _permutation_p(a, b)
    return {
        "a": _group(a),
        "b": _group(b),
        "difference": difference,
        "difference_ci95": interval,
        "welch_df": None if math.isinf(df) else df,
        "p_value": p_value,
        "splits": splits,
        "smallest_possible_p": smallest_p,
    }


def _group(values: Sequence[float]) -> dict[str, Any]:
    return {
        "runs": len(values),
        "values": list(values),
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values),
        "min": min(values),
        "max": max(values),
    }


def _permutation_p(a: Sequence[float], b: Sequence[float]) -> tuple[float | None, int, float | None]:
    """Exact two-sided permutation p of the difference of means, the number of splits it enumerated,
    and the smallest p any result could reach with these group sizes; (None, splits, None) when there
    are too many splits to enumerate."""
    pooled = [*a, *b]
    total = sum(pooled)
    n, k = len(pooled), len(a)
    splits = math.comb(n, k)
    if splits > MAX_SPLITS:
        return None, splits, None

    def gap(chosen: Sequence[int]) -> float:
        sum_a = sum(pooled[i] for i in chosen)
        return abs(sum_a / k - (total - sum_a) / (n - k))

    gaps = [gap(c) for c in itertools.combinations(range(n), k)]
    observed = gap(range(k))
    # A tolerance: the observed split's own gap, summed in another order, must count as "at least as large".
    tolerance = 1e-9 * max(1.0, max(abs(v) for v in pooled))
    extreme = sum(g >= observed - tolerance for g in gaps)
    widest = max(gaps)
    at_widest = sum(g >= widest - tolerance for g in gaps)
    return extreme / splits, splits, at_widest / splits


def seed_run(run_id: int, command: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """What a seed comparison needs from one stored run: recipe, seed, test accuracy, split identity."""
    if command != "train":
        raise SeedsError(f"run {run_id} is a `{command}` run; seeds compare `train` runs")
    test = result.get("test")
    accuracy = test.get("accuracy") if isinstance(test, Mapping) else None
    if not isinstance(accuracy, int | float):
        raise SeedsError(f"run {run_id} has no test accuracy (stopped before its test evaluation?)")
    encoded = _mapping(_mapping(result.get("data")).get("encoded"))
    pretrained = _mapping(_mapping(result.get("init")).get("pretrain")).get("sha256")
    return {
        "run_id": run_id,
        "recipe": result.get("recipe"),
        "seed": _mapping(result.get("config")).get("seed"),
        "test_accuracy": float(accuracy),
        "split_hash": encoded.get("split_hash"),
        # the pretraining it was fine-tuned from (12 hex digits of its pretrain.json's sha256); None for a
        # run from scratch or one recorded before train results named their encoder
        "encoder": str(pretrained)[:12] if pretrained else None,
    }


def encoders(runs: Sequence[Mapping[str, Any]]) -> set[str]:
    """The distinct pretrainings the runs were fine-tuned from (those that name one)."""
    return {str(r["encoder"]) for r in runs if r.get("encoder")}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def check_same_split(runs: Sequence[Mapping[str, Any]]) -> None:
    """Refuse runs tested on different splits: their accuracies are not of the same reviews."""
    hashes = {r["split_hash"] for r in runs}
    if len(hashes) > 1:
        by_hash: dict[str, list[str]] = {}
        for r in runs:
            by_hash.setdefault(str(r["split_hash"])[:12], []).append(str(r["run_id"]))
        listing = "; ".join(f"{h}…: runs {', '.join(ids)}" for h, ids in by_hash.items())
        raise SeedsError(
            f"the runs were tested on different splits ({listing}): their accuracies do not compare"
        )
