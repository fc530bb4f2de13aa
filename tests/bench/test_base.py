from __future__ import annotations

import pytest

from dgxperf.bench.base import BenchError, Measurement, Timing, human_bytes, parse_size, size_sweep, time_gpu


def test_timing_median_quantiles_and_spread() -> None:
    t = Timing.of([4.0, 1.0, 3.0, 2.0, 5.0], inner=10)
    assert t.median_s == 3.0 and t.min_s == 1.0 and t.max_s == 5.0
    assert t.p10_s == pytest.approx(1.4) and t.p90_s == pytest.approx(4.6)
    assert t.spread == pytest.approx((4.6 - 1.4) / 3.0)
    assert t.batches == 5 and t.inner == 10
    single = Timing.of([2.0], inner=1)
    assert single.p10_s == single.p90_s == 2.0 and single.spread == 0.0


def test_measurement_percent_of_peak() -> None:
    timing = Timing.of([1.0], 1)
    m = Measurement("gemm", "bf16", {}, 700.0, "TFLOP/s", timing, peak=989.5)
    assert m.pct_of_peak == pytest.approx(70.743, rel=1e-3)
    assert m.to_json()["pct_of_peak"] == 70.74
    assert Measurement("gemm", "x", {}, 1.0, "TFLOP/s", timing).pct_of_peak is None


@pytest.mark.parametrize(
    ("text", "size"),
    [("8", 8), ("64K", 65536), ("1M", 1 << 20), ("8G", 8 << 30), ("1.5k", 1536), ("256MB", 256 << 20)],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "abc", "-1M", "0", "1Q"])
def test_parse_size_rejects_garbage(text: str) -> None:
    with pytest.raises(BenchError):
        parse_size(text)


def test_size_sweep_matches_nccl_tests() -> None:
    assert size_sweep(8, 128, 2) == [8, 16, 32, 64, 128]
    assert size_sweep(1 << 20, 1 << 30, 4) == [1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30]
    with pytest.raises(BenchError, match="inverted"):
        size_sweep(1 << 30, 1 << 20, 2)
    with pytest.raises(BenchError, match="> 1"):
        size_sweep(8, 64, 1)


def test_human_bytes() -> None:
    assert human_bytes(1 << 30) == "1 GiB"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(8) == "8 B"


def test_time_gpu_on_cpu_counts_calls_for_rotation() -> None:
    calls: list[int] = []
    timing = time_gpu(calls.append, warmup=2, batches=3, inner=4, cuda=False)
    assert calls == list(range(14))
    assert timing.batches == 3 and timing.inner == 4 and timing.median_s >= 0
