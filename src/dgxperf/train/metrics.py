"""What a training run reports: accuracy and macro-F1, throughput over timed windows, and MFU.

Throughput is measured over windows of steps with a device synchronisation at each window edge, never
per step (a per-step synchronisation would slow the run it measures). MFU counts only the FLOPs of real
tokens (``train.flops``): padding is wasted compute and must not flatter the figure.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from dgxperf.train.flops import mfu as flops_mfu


def confusion(predictions: Sequence[int], labels: Sequence[int], num_labels: int) -> list[list[int]]:
    matrix = [[0] * num_labels for _ in range(num_labels)]
    for pred, label in zip(predictions, labels, strict=True):
        matrix[label][pred] += 1
    return matrix


def scores(matrix: Sequence[Sequence[int]]) -> dict[str, float]:
    """Accuracy and macro-F1 from a confusion matrix (rows: true label, columns: prediction)."""
    n = len(matrix)
    total = sum(sum(row) for row in matrix)
    correct = sum(matrix[i][i] for i in range(n))
    f1s = []
    for i in range(n):
        tp = matrix[i][i]
        predicted = sum(matrix[r][i] for r in range(n))
        actual = sum(matrix[i])
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1s.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return {
        "accuracy": correct / total if total else 0.0,
        "macro_f1": sum(f1s) / n if n else 0.0,
        "samples": total,
    }


def wilson_interval(accuracy: float, samples: int, z: float = 1.96) -> list[float] | None:
    """The Wilson score interval (95% by default) of an accuracy measured on ``samples`` examples.

    A test split of 1,736 reviews measures an accuracy near 86% to about +-1.6 points: two recipes whose
    figures differ by less than that are not shown to differ by this one run."""
    if samples <= 0:
        return None
    centre = accuracy + z * z / (2 * samples)
    half = z * math.sqrt(accuracy * (1 - accuracy) / samples + z * z / (4 * samples * samples))
    scale = 1 + z * z / samples
    return [max(0.0, (centre - half) / scale), min(1.0, (centre + half) / scale)]


def paired_comparison(
    predictions_a: Sequence[int], predictions_b: Sequence[int], gold: Sequence[int], z: float = 1.96
) -> dict[str, Any]:
    """Two classifiers' accuracies on the *same* examples, compared pair by pair.

    Two accuracies each known to +-1.6 points (``wilson_interval``) can still differ clearly: on the same
    test reviews most answers agree, and only the reviews exactly one of the two gets right carry the
    difference. ``a_only``/``b_only`` count those; ``difference`` is accuracy a minus accuracy b, with the
    Wald interval of a paired difference of proportions; ``p_value`` is McNemar's exact test (a two-sided
    binomial test of ``a_only`` against ``a_only + b_only`` at one half): the chance of a split at least
    this uneven if the two were equally good.
    """
    n = len(gold)
    if len(predictions_a) != n or len(predictions_b) != n:
        raise ValueError(
            f"paired predictions must cover the same examples: {len(predictions_a)} and "
            f"{len(predictions_b)} predictions for {n} labels"
        )
    if n == 0:
        raise ValueError("no examples to compare")
    a_right = b_right = a_only = b_only = 0
    for a, b, y in zip(predictions_a, predictions_b, gold, strict=True):
        a_right += a == y
        b_right += b == y
        a_only += a == y and b != y
        b_only += b == y and a != y
    difference = (a_only - b_only) / n
    spread = z * math.sqrt(max(0.0, a_only + b_only - (a_only - b_only) ** 2 / n)) / n
    return {
        "samples": n,
        "a_only": a_only,
        "b_only": b_only,
        "difference": difference,
        "difference_ci95": [difference - spread, difference + spread],
        "p_value": mcnemar_exact(a_only, b_only),
        "accuracy_a": a_right / n,
        "accuracy_b": b_right / n,
    }


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: 1.0 when the discordant pairs split evenly (or there are none)."""
    if a_only < 0 or b_only < 0:
        raise ValueError("discordant counts cannot be negative")
    total = a_only + b_only
    if total == 0:
        return 1.0
    tail = sum(math.comb(total, k) for k in range(min(a_only, b_only) + 1))
    # Exact integers: 2**total is far past a float's range for a few thousand pairs, the ratio is not.
    return min(1.0, float(Fraction(2 * tail, 2**total)))


@dataclasses.dataclass
class Window:
    """Counts since the last synchronised timestamp."""

    started: float
    steps: int = 0
    samples: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    useful_flops: float = 0.0


class ThroughputMeter:
    """Samples/s, real tokens/s and MFU over windows bounded by device synchronisations."""

    def __init__(
        self,
        sync: Any,
        *,
        peak_tflops: float | None,
        ceiling_tflops: float | None,
        world: int,
        reduce: Any = None,
    ) -> None:
        self._sync = sync
        self._reduce = reduce
        self.peak_tflops = peak_tflops
        self.ceiling_tflops = ceiling_tflops
        self.world = world
        self._sync()
        self.window = Window(time.perf_counter())
        self.total = Window(self.window.started)
        self.total_seconds = 0.0

    def add(self, *, samples: int, real_tokens: int, padded_tokens: int, useful_flops: float) -> None:
        for w in (self.window, self.total):
            w.samples += samples
            w.real_tokens += real_tokens
            w.padded_tokens += padded_tokens
            w.useful_flops += useful_flops

    def step(self) -> None:
        self.window.steps += 1
        self.total.steps += 1

    def lap(self) -> dict[str, float | None]:
        """Close the window (synchronising the device) and return its rates; a new window starts."""
        self._sync()
        now = time.perf_counter()
        seconds = max(now - self.window.started, 1e-9)
        if self._reduce is not None:
            # Counts are per rank until here; the window's figures are for the whole job.
            w = self.window
            local = [w.samples, w.real_tokens, w.padded_tokens, w.useful_flops]
            summed = self._reduce([float(v) for v in local])
            extra = [b - a for a, b in zip(local, summed, strict=True)]
            for target in (self.window, self.total):
                target.samples += int(extra[0])
                target.real_tokens += int(extra[1])
                target.padded_tokens += int(extra[2])
                target.useful_flops += extra[3]
        self.total_seconds += seconds
        rates = self.rates(self.window, seconds)
        self.window = Window(now)
        return rates

    def pause(self) -> None:
        """Exclude what follows (evaluation, checkpointing) from the timed totals until ``resume``."""
        self.lap()

    def resume(self) -> None:
        self._sync()
        self.window = Window(time.perf_counter())

    def rates(self, window: Window, seconds: float) -> dict[str, float | None]:
        flops_per_s = window.useful_flops / seconds
        return {
            "seconds": seconds,
            "steps": window.steps,
            "samples_per_s": window.samples / seconds,
            "real_tokens_per_s": window.real_tokens / seconds,
            "padding_share": 1 - window.real_tokens / window.padded_tokens if window.padded_tokens else 0.0,
            "model_tflops": flops_per_s / 1e12,
            "mfu": mfu(flops_per_s, self.peak_tflops, self.world),
            "mfu_vs_measured_gemm": mfu(flops_per_s, self.ceiling_tflops, self.world),
        }

    def totals(self) -> dict[str, float | None]:
        return self.rates(self.total, max(self.total_seconds, 1e-9))


def mfu(flops_per_second: float, peak_tflops: float | None, n_gpus: int) -> float | None:
    """flops.mfu, or None when the GPU's peak is unknown (CPU runs, GPUs missing from hw/specs)."""
    if not peak_tflops:
        return None
    return flops_mfu(flops_per_second, peak_tflops, n_gpus)
