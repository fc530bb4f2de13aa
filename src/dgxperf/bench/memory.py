"""Device-memory bandwidth: copy (bytes read + bytes written), a read-only reduction and a write-only fill,
against the datasheet HBM bandwidth. Buffers are many times the L2, so every byte comes from HBM."""

from __future__ import annotations

from typing import Any

from dgxperf.bench.base import BenchError, Measurement, human_bytes, time_gpu
from dgxperf.bench.device import Device

KINDS = ("copy", "read", "write")
DEFAULT_BYTES = 4 << 30
QUICK_BYTES = 1 << 30


def measure(kind: str, size_bytes: int, device: Device, *, batches: int, warmup: int = 3) -> Measurement:
    import torch

    if kind not in KINDS:
        raise BenchError(f"unknown memory test {kind!r}; choose from {', '.join(KINDS)}")
    if device.cuda and 2 * size_bytes > 0.8 * device.memory_bytes:
        raise BenchError(f"{human_bytes(size_bytes)} x2 does not fit in {human_bytes(device.memory_bytes)}")
    count = size_bytes // 4
    src = torch.randn(count, device=device.torch_device, dtype=torch.float32)
    dst = torch.empty_like(src) if kind == "copy" else None
    if kind == "copy":
        assert dst is not None

        def op(i: int) -> object:
            return dst.copy_(src)

        moved = 2 * count * 4
    elif kind == "read":

        def op(i: int) -> object:
            return torch.sum(src)

        moved = count * 4
    else:

        def op(i: int) -> object:
            return src.fill_(float(i % 7) + 0.5)

        moved = count * 4
    probe = time_gpu(op, warmup=warmup, batches=1, inner=1, cuda=device.cuda)
    inner = max(1, min(200, int(0.02 / max(probe.median_s, 1e-7))))
    timing = time_gpu(op, warmup=1, batches=batches, inner=inner, cuda=device.cuda)
    peak = device.spec.hbm_bandwidth_gbs if device.spec else None
    return Measurement(
        bench="memory",
        name=f"{kind} {human_bytes(size_bytes)}",
        params={"kind": kind, "size_bytes": size_bytes, "bytes_moved": moved, "dtype": "fp32"},
        value=moved / timing.median_s / 1e9,
        unit="GB/s",
        timing=timing,
        peak=float(peak) if peak else None,
    )


def run(device: Device, size_bytes: int, *, batches: int = 10, progress: Any = None) -> list[Measurement]:
    results = []
    for kind in KINDS:
        results.append(measure(kind, size_bytes, device, batches=batches))
        if progress:
            progress(len(results), len(KINDS), f"memory {kind}")
    return results
