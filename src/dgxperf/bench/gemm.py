"""Matrix-multiply throughput per dtype over square and training-like shapes, against the datasheet peak.

FLOPs per product are 2*M*N*K. fp32 runs with TF32 off (IEEE fp32 on the CUDA cores), tf32 with it on;
fp64 is compared with the FP64 tensor-core peak where the GPU has one (cuBLAS DGEMM uses it on A100/H100).
fp8 (e4m3 operands, bf16 output, per-tensor scales) goes through ``torch._scaled_mm`` and needs compute
capability 8.9 or newer.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

from dgxperf.bench.base import BenchError, Measurement, time_gpu
from dgxperf.bench.device import Device
from dgxperf.hw.specs import peak_tflops

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
MODES = ("sustained", "burst")

SQUARE_SIZES = (1024, 2048, 4096, 8192, 16384)
QUICK_SQUARE_SIZES = (4096, 8192)

# (label, M, N, K): the products of a training step. BERT-large at batch 64 x 128 tokens (8192 tokens,
# hidden 1024, FFN 4096) and a Llama-3-8B-sized layer at 16384 tokens (hidden 4096, FFN 14336).
TRAINING_SHAPES: tuple[tuple[str, int, int, int], ...] = (
    ("bert-large qkv", 8192, 3072, 1024),
    ("bert-large ffn-up", 8192, 4096, 1024),
    ("bert-large ffn-down", 8192, 1024, 4096),
    ("llama3-8b ffn-up", 16384, 14336, 4096),
    ("llama3-8b ffn-down", 16384, 4096, 14336),
)
QUICK_TRAINING_SHAPES = TRAINING_SHAPES[1:2] + TRAINING_SHAPES[3:4]

# Buffers rotate until the working set is this many times the L2, so no repeat is served from cache.
L2_MULTIPLE = 3
MAX_BUFFER_SETS = 8


@dataclasses.dataclass(frozen=True)
class Shape:
    label: str
    m: int
    n: int
    k: int

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


def parse_shape(text: str) -> Shape:
    """``8192`` (square) or ``MxNxK``."""
    parts = text.lower().replace("×", "x").split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise BenchError(f"shape {text!r}: use N (square) or MxNxK, e.g. 8192 or 8192x4096x1024") from None
    if len(dims) == 1:
        dims = dims * 3
    if len(dims) != 3 or min(dims) <= 0:
        raise BenchError(f"shape {text!r}: use N (square) or MxNxK with positive sizes")
    return Shape("custom" if len(parts) == 3 else "square", *dims)


def default_shapes(quick: bool) -> list[Shape]:
    square = QUICK_SQUARE_SIZES if quick else SQUARE_SIZES
    training = QUICK_TRAINING_SHAPES if quick else TRAINING_SHAPES
    return [Shape("square", s, s, s) for s in square] + [Shape(*t) for t in training]


def fp8_supported(device: Device) -> bool:
    import torch

    cc = device.compute_capability
    return bool(device.cuda and cc is not None and cc >= (8, 9) and hasattr(torch, "_scaled_mm"))


def check_dtype_names(dtypes: Sequence[str]) -> None:
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        raise BenchError(f"unknown dtype {', '.join(unknown)}; choose from {', '.join(DTYPES)}")


def check_dtypes(dtypes: Sequence[str], device: Device) -> None:
    check_dtype_names(dtypes)
    if "fp8" in dtypes and not fp8_supported(device):
        cc = device.compute_capability
        where = f"compute capability {cc[0]}.{cc[1]}" if cc else "the CPU"
        raise BenchError(f"fp8 needs an NVIDIA GPU of compute capability 8.9 or newer; this is {where}")


def _peak(device: Device, dtype: str) -> float | None:
    if device.spec is None:
        return None
    if dtype == "fp64":
        return peak_tflops(device.spec, "fp64_tensor") or peak_tflops(device.spec, "fp64")
    return peak_tflops(device.spec, dtype)


def _operands(dtype: str, shape: Shape, sets: int, device: Device) -> list[tuple[Any, ...]]:
    import torch

    torch_dtype = {
        "fp64": torch.float64,
        "fp32": torch.float32,
        "tf32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
    }
    dev = device.torch_device
    operands: list[tuple[Any, ...]] = []
    for _ in range(sets):
        if dtype == "fp8":
            a = torch.randn(shape.m, shape.k, device=dev).to(torch.float8_e4m3fn)
            # _scaled_mm wants the second operand column-major: a (N, K) row-major tensor, transposed.
            b = torch.randn(shape.n, shape.k, device=dev).to(torch.float8_e4m3fn).t()
            scale = torch.ones((), device=dev, dtype=torch.float32)
            operands.append((a, b, scale))
        else:
            a = torch.randn(shape.m, shape.k, device=dev, dtype=torch_dtype[dtype])
            b = torch.randn(shape.k, shape.n, device=dev, dtype=torch_dtype[dtype])
            operands.append((a, b))
    return operands


def _buffer_sets(dtype: str, shape: Shape, device: Device) -> int:
    elsize = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}[dtype]
    per_set = (shape.m * shape.k + shape.k * shape.n) * elsize
    return max(1, min(MAX_BUFFER_SETS, math.ceil(L2_MULTIPLE * device.l2_bytes / per_set)))


def measure(
    dtype: str,
    shape: Shape,
    device: Device,
    *,
    batches: int,
    mode: str = "sustained",
    preload_s: float = 0.5,
    burst_s: float = 0.025,
    warmup: int = 3,
    sensor: Any = None,
) -> Measurement:
    """One dtype on one shape, ``sustained`` or ``burst``.

    ``sustained`` first keeps the GPU busy for ``preload_s`` so its clocks settle where the power and
    thermal limits hold them under a long load (what a training step sees), then times ~20 ms batches.
    ``burst`` times ``burst_s`` of products in short batches and is meant to follow an idle pause: it reads
    the boost clocks, as a few-product timing loop does.
    """
    import torch

    if mode not in MODES:
        raise BenchError(f"unknown GEMM mode {mode!r}; choose from {', '.join(MODES)}")
    sets = _buffer_sets(dtype, shape, device)
    operands = _operands(dtype, shape, sets, device)
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        if dtype == "fp8":

            def op(i: int) -> object:
                a, b, scale = operands[i % sets]
                return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        else:

            def op(i: int) -> object:
                a, b = operands[i % sets]
                return torch.matmul(a, b)

        # One timed product sizes the batches, so event resolution and launch gaps vanish in them.
        probe = time_gpu(op, warmup=warmup, batches=1, inner=1, cuda=device.cuda)
        per_op = max(probe.median_s, 1e-7)
        if mode == "sustained":
            preload = int(preload_s / per_op)
            if preload:
                time_gpu(op, warmup=0, batches=1, inner=preload, cuda=device.cuda)
            inner = max(1, min(100, int(0.02 / per_op)))
        else:
            inner = max(1, min(100, int(burst_s / batches / per_op)))
        timing = time_gpu(op, warmup=0, batches=batches, inner=inner, cuda=device.cuda)
        # Read right after the last batch, while the clocks are still those of the load.
        state = sensor.read() if sensor is not None else {}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
    tflops = shape.flops / timing.median_s / 1e12
    return Measurement(
        bench="gemm",
        name=f"{dtype} {shape}" + (" burst" if mode == "burst" else ""),
        params={
            "dtype": dtype,
            "m": shape.m,
            "n": shape.n,
            "k": shape.k,
            "shape": shape.label,
            "mode": mode,
            "buffer_sets": sets,
        },
        value=tflops,
        unit="TFLOP/s",
        timing=timing,
        peak=_peak(device, dtype),
        extra={"gpu_state": state} if state else {},
    )


def run(
    device: Device,
    dtypes: Sequence[str],
    shapes: Sequence[Shape],
    *,
    batches: int = 10,
    cooldown_s: float = 0.0,
    preload_s: float = 0.5,
    sensor: Any = None,
    progress: Any = None,
) -> list[Measurement]:
    """Every dtype on every shape, sustained; then, per dtype, a burst at its best shape after an idle pause.

    Under a long GEMM load an H200 holds its power limit by lowering the SM clock (NVML says sw_power_cap):
    sustained and burst figures differ by about 10%, and both are real — the sustained one is what
    training sees. ``cooldown_s`` of idle comes before each burst; ``progress(done, total, label)``.
    """
    check_dtypes(dtypes, device)
    results: list[Measurement] = []
    total = len(dtypes) * (len(shapes) + 1)
    for dtype in dtypes:
        sustained = []
        for shape in shapes:
            sustained.append(
                measure(dtype, shape, device, batches=batches, preload_s=preload_s, sensor=sensor)
            )
            results.append(sustained[-1])
            if progress:
                progress(len(results), total, f"gemm {dtype} {shape}")
        best = max(sustained, key=lambda m: m.value)
        if cooldown_s > 0:
            time.sleep(cooldown_s)
        shape = Shape(best.params["shape"], best.params["m"], best.params["n"], best.params["k"])
        results.append(measure(dtype, shape, device, batches=5, mode="burst", sensor=sensor))
        if progress:
            progress(len(results), total, f"gemm {dtype} {shape} burst")
    return results


def best_per_dtype(measurements: Sequence[Measurement]) -> dict[str, dict[str, Any]]:
    """Per dtype: the best sustained figure and its shape, and the burst figure where one was taken."""
    best: dict[str, dict[str, Measurement]] = {}
    for m in measurements:
        mode = m.params.get("mode", "sustained")
        slot = best.setdefault(m.params["dtype"], {})
        if mode not in slot or m.value > slot[mode].value:
            slot[mode] = m
    summary: dict[str, dict[str, Any]] = {}
    for dtype, slot in best.items():
        main = slot.get("sustained") or slot["burst"]
        entry: dict[str, Any] = {
            "tflops": round(main.value, 2),
            "shape": f"{main.params['m']}x{main.params['n']}x{main.params['k']}",
            "pct_of_peak": None if main.pct_of_peak is None else round(main.pct_of_peak, 1),
            "sm_mhz": main.extra.get("gpu_state", {}).get("sm_mhz"),
        }
        if "burst" in slot:
            burst = slot["burst"]
            entry["burst_tflops"] = round(burst.value, 2)
            entry["burst_pct_of_peak"] = None if burst.pct_of_peak is None else round(burst.pct_of_peak, 1)
            entry["burst_sm_mhz"] = burst.extra.get("gpu_state", {}).get("sm_mhz")
        summary[dtype] = entry
    return summary
