"""GPU-to-GPU copy bandwidth for every ordered pair: NVLink pairs stand out from PCIe ones (compare with
the pair matrix of `dgxperf doctor`). One direction at a time, so the figure is per-direction bandwidth."""

from __future__ import annotations

import time
from typing import Any

from dgxperf.bench.base import BenchError, Measurement, Timing, human_bytes
from dgxperf.hw.specs import match_spec

DEFAULT_BYTES = 256 << 20


def measure_pair(src: int, dst: int, size_bytes: int, *, batches: int, inner: int = 10) -> Measurement:
    import torch

    a = torch.empty(size_bytes, dtype=torch.uint8, device=f"cuda:{src}").random_(0, 255)
    b = torch.empty(size_bytes, dtype=torch.uint8, device=f"cuda:{dst}")
    for _ in range(3):
        b.copy_(a)
    per_op = []
    for _ in range(batches):
        # A copy between devices orders work on both; synchronising both before reading the host clock
        # is the simplest honest bracket.
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst)
        began = time.perf_counter()
        for _ in range(inner):
            b.copy_(a)
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst)
        per_op.append((time.perf_counter() - began) / inner)
    timing = Timing.of(per_op, inner)
    name = torch.cuda.get_device_properties(src).name
    spec = match_spec(name, int(torch.cuda.get_device_properties(src).total_memory))
    peak = spec.nvlink_bandwidth_gbs / 2 if spec and spec.nvlink_bandwidth_gbs else None
    return Measurement(
        bench="p2p",
        name=f"gpu{src} -> gpu{dst} {human_bytes(size_bytes)}",
        params={
            "src": src,
            "dst": dst,
            "size_bytes": size_bytes,
            "peer_access": bool(torch.cuda.can_device_access_peer(src, dst)),
        },
        value=size_bytes / timing.median_s / 1e9,
        unit="GB/s",
        timing=timing,
        peak=peak,
    )


def run(gpus: int, size_bytes: int, *, batches: int = 10, progress: Any = None) -> list[Measurement]:
    if gpus < 2:
        raise BenchError(f"p2p needs at least 2 GPUs; this node has {gpus}")
    pairs = [(i, j) for i in range(gpus) for j in range(gpus) if i != j]
    results = []
    for i, j in pairs:
        results.append(measure_pair(i, j, size_bytes, batches=batches))
        if progress:
            progress(len(results), len(pairs), f"p2p {i}->{j}")
    return results


def matrix(measurements: list[Measurement], gpus: int) -> list[list[float | None]]:
    """GB/s from row to column; the diagonal is None."""
    table: list[list[float | None]] = [[None] * gpus for _ in range(gpus)]
    for m in measurements:
        table[m.params["src"]][m.params["dst"]] = round(m.value, 1)
    return table
