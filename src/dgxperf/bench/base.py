"""What every micro-benchmark shares: how a GPU operation is timed, and the Measurement it yields.

Timing follows nanoGPT's bench.py and nccl-tests: warm-up first (module load, cuBLAS heuristics,
allocator), then ``repeats`` batches of ``inner`` back-to-back operations, each batch bracketed by CUDA
events, so launch gaps are amortised and the host clock never times asynchronous work. We report the
median time per operation and the spread (p10/p90, min/max) over batches. Inputs are random and
rotated through enough buffer sets that L2 (60 MB on H100/H200) cannot serve a repeat.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

BENCH_SCHEMA = "dgxperf.bench/1"


class BenchError(Exception):
    """A benchmark that cannot run as asked (bad sizes, unsupported dtype, too few GPUs)."""


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per operation over ``batches`` timed batches of ``inner`` operations each."""

    median_s: float
    p10_s: float
    p90_s: float
    min_s: float
    max_s: float
    batches: int
    inner: int

    @classmethod
    def of(cls, per_op_seconds: list[float], inner: int) -> Timing:
        ordered = sorted(per_op_seconds)
        return cls(
            median_s=statistics.median(ordered),
            p10_s=_quantile(ordered, 0.10),
            p90_s=_quantile(ordered, 0.90),
            min_s=ordered[0],
            max_s=ordered[-1],
            batches=len(ordered),
            inner=inner,
        )

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: the relative width of the middle 80% of batches."""
        return (self.p90_s - self.p10_s) / self.median_s if self.median_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 9) if isinstance(v, float) else v) for k, v in dataclasses.asdict(self).items()}


def _quantile(ordered: list[float], q: float) -> float:
    """Linear-interpolation quantile of an already sorted list."""
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One figure: ``value`` in ``unit`` (higher is better), and how close it comes to the datasheet peak."""

    bench: str
    name: str
    params: dict[str, Any]
    value: float
    unit: str
    timing: Timing
    peak: float | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def pct_of_peak(self) -> float | None:
        return 100.0 * self.value / self.peak if self.peak else None

    def to_json(self) -> dict[str, Any]:
        pct = self.pct_of_peak
        return {
            "bench": self.bench,
            "name": self.name,
            "params": self.params,
            "value": round(self.value, 4),
            "unit": self.unit,
            "peak": self.peak,
            "pct_of_peak": None if pct is None else round(pct, 2),
            "timing": self.timing.to_json(),
            "extra": self.extra,
        }


def time_gpu(op: Callable[[int], object], *, warmup: int, batches: int, inner: int, cuda: bool) -> Timing:
    """Time ``op(i)`` (i counts calls, so ``op`` can rotate buffers) with CUDA events, or the host clock on CPU."""
    import torch

    for i in range(warmup):
        op(i)
    if cuda:
        torch.cuda.synchronize()
    per_op: list[float] = []
    call = warmup
    for _ in range(batches):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                op(call)
                call += 1
            end.record()
            end.synchronize()
            per_op.append(start.elapsed_time(end) / 1000.0 / inner)
        else:
            began = time.perf_counter()
            for _ in range(inner):
                op(call)
                call += 1
            per_op.append((time.perf_counter() - began) / inner)
    return Timing.of(per_op, inner)


def parse_size(text: str) -> int:
    """``8``, ``64K``, ``1M``, ``8G`` (binary multiples, as nccl-tests' -b/-e take them) -> bytes."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    stripped = text.strip().upper().removesuffix("B")
    number, unit = stripped, ""
    if stripped and stripped[-1] in units:
        number, unit = stripped[:-1], stripped[-1]
    try:
        value = float(number)
    except ValueError:
        raise BenchError(f"size {text!r} is not a number of bytes (e.g. 8, 64K, 1M, 8G)") from None
    if value <= 0:
        raise BenchError(f"size {text!r} must be positive")
    return int(value * units[unit])


def size_sweep(begin: int, end: int, factor: float) -> list[int]:
    """nccl-tests' -b/-e/-f: begin, begin*f, ... up to and including end."""
    if begin > end:
        raise BenchError(f"the size range is inverted: begin {begin} B > end {end} B")
    if factor <= 1:
        raise BenchError(f"the step factor must be > 1, not {factor}")
    sizes = []
    size = float(begin)
    while size <= end * (1 + 1e-9):
        sizes.append(int(size))
        size *= factor
    return sizes


def human_bytes(size: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(size)} B"
