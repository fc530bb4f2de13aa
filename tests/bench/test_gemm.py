from __future__ import annotations

import pytest

from dgxperf.bench import gemm
from dgxperf.bench.base import BenchError
from dgxperf.bench.device import Device, open_device
from dgxperf.hw.specs import get_spec

H200 = Device("cuda", 0, "NVIDIA H200", get_spec("h200-sxm"), 60 << 20, 141 << 30, (9, 0))
A100 = Device("cuda", 0, "NVIDIA A100-SXM4-80GB", get_spec("a100-sxm4-80gb"), 40 << 20, 80 << 30, (8, 0))


def test_parse_shape() -> None:
    assert str(gemm.parse_shape("8192")) == "8192x8192x8192"
    shape = gemm.parse_shape("8192x4096x1024")
    assert (shape.m, shape.n, shape.k) == (8192, 4096, 1024)
    assert shape.flops == 2 * 8192 * 4096 * 1024
    for bad in ("", "8192x", "1x2", "axbxc", "0x4x4"):
        with pytest.raises(BenchError):
            gemm.parse_shape(bad)


def test_buffers_rotate_past_three_times_the_l2() -> None:
    small = gemm.Shape("square", 1024, 1024, 1024)  # 4 MiB of bf16 operands per set
    assert gemm._buffer_sets("bf16", small, H200) == gemm.MAX_BUFFER_SETS
    big = gemm.Shape("square", 8192, 8192, 8192)  # 256 MiB per set: already 4x the L2
    assert gemm._buffer_sets("bf16", big, H200) == 1
    mid = gemm.Shape("square", 4096, 4096, 4096)  # 64 MiB per set -> 3 sets for 180 MiB
    assert gemm._buffer_sets("bf16", mid, H200) == 3


def test_peaks_come_from_the_datasheet_table() -> None:
    assert gemm._peak(H200, "bf16") == pytest.approx(989.5, rel=0.01)
    assert gemm._peak(H200, "fp64") == pytest.approx(67, rel=0.01)  # DGEMM runs on FP64 tensor cores
    assert gemm._peak(A100, "tf32") == pytest.approx(156, rel=0.01)


def test_fp8_needs_compute_capability_8_9() -> None:
    with pytest.raises(BenchError, match=r"8\.9"):
        gemm.check_dtypes(["fp8"], A100)
    with pytest.raises(BenchError, match="unknown dtype"):
        gemm.check_dtypes(["bf32"], H200)


def test_a_cpu_run_reports_flops_over_time() -> None:
    cpu = open_device("cpu")
    shape = gemm.Shape("square", 128, 128, 128)
    sustained, burst = gemm.run(cpu, ["fp32"], [shape], batches=3, preload_s=0.01)
    assert sustained.params["mode"] == "sustained" and burst.params["mode"] == "burst"
    assert burst.name.endswith("burst")
    for m in (sustained, burst):
        assert m.unit == "TFLOP/s" and m.peak is None
        assert m.value == pytest.approx(shape.flops / m.timing.median_s / 1e12)
    best = gemm.best_per_dtype([sustained, burst])["fp32"]
    assert best["shape"] == "128x128x128"
    assert best["tflops"] == round(sustained.value, 2) and best["burst_tflops"] == round(burst.value, 2)


def test_the_burst_runs_on_the_best_sustained_shape() -> None:
    cpu = open_device("cpu")
    shapes = [gemm.Shape("square", 32, 32, 32), gemm.Shape("square", 192, 192, 192)]
    results = gemm.run(cpu, ["fp32"], shapes, batches=3, preload_s=0.0)
    sustained = [m for m in results if m.params["mode"] == "sustained"]
    (burst,) = [m for m in results if m.params["mode"] == "burst"]
    best = max(sustained, key=lambda m: m.value)
    assert (burst.params["m"], burst.params["n"], burst.params["k"]) == (
        best.params["m"],
        best.params["n"],
        best.params["k"],
    )
    with pytest.raises(BenchError, match="mode"):
        gemm.measure("fp32", shapes[0], cpu, batches=3, mode="peak")


def test_default_shapes_include_training_shapes() -> None:
    labels = {s.label for s in gemm.default_shapes(quick=True)}
    assert "square" in labels and any(label.startswith("bert-large") for label in labels)
