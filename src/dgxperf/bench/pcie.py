"""Host<->device copy bandwidth, pinned and pageable, over sizes, against the PCIe link's own peak.

The peak per direction is the link's generation and width as NVML reports them (the most the slot and
GPU can train to): 8/16/32/64 GT/s per lane for Gen3/4/5/6, 128b/130b encoding up to Gen5. Pageable
copies go through a driver staging buffer, which is why guide A §6.1 asks for pin_memory=True.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dgxperf.bench.base import Measurement, human_bytes, time_gpu
from dgxperf.bench.device import Device
from dgxperf.hw.specs import link_peak_gbs

SIZES = (1 << 20, 16 << 20, 256 << 20, 1 << 30)
QUICK_SIZES = (16 << 20, 256 << 20)


def measure(
    direction: str, pinned: bool, size_bytes: int, device: Device, peak: float | None, *, batches: int
) -> Measurement:
    import torch

    host = torch.empty(size_bytes, dtype=torch.uint8, pin_memory=pinned)
    host.random_(0, 255)
    gpu = torch.empty(size_bytes, dtype=torch.uint8, device=device.torch_device)
    gpu.random_(0, 255)
    if direction == "h2d":

        def op(i: int) -> object:
            return gpu.copy_(host, non_blocking=pinned)
    else:

        def op(i: int) -> object:
            return host.copy_(gpu, non_blocking=pinned)

    probe = time_gpu(op, warmup=2, batches=1, inner=1, cuda=device.cuda)
    inner = max(1, min(100, int(0.05 / max(probe.median_s, 1e-7))))
    timing = time_gpu(op, warmup=1, batches=batches, inner=inner, cuda=device.cuda)
    kind = "pinned" if pinned else "pageable"
    return Measurement(
        bench="pcie",
        name=f"{direction} {kind} {human_bytes(size_bytes)}",
        params={"direction": direction, "pinned": pinned, "size_bytes": size_bytes},
        value=size_bytes / timing.median_s / 1e9,
        unit="GB/s",
        timing=timing,
        peak=peak,
    )


def run(
    device: Device,
    sizes: Sequence[int],
    link: dict[str, Any],
    *,
    batches: int = 10,
    progress: Any = None,
) -> list[Measurement]:
    """``link`` is hw.nvml.read_pcie_link's answer: generation/width (max and current)."""
    peak = link_peak_gbs(link.get("gen_max"), link.get("width_max"))
    results = []
    total = 4 * len(sizes)
    for direction in ("h2d", "d2h"):
        for pinned in (True, False):
            for size in sizes:
                results.append(measure(direction, pinned, size, device, peak, batches=batches))
                if progress:
                    progress(len(results), total, f"pcie {direction} {'pinned' if pinned else 'pageable'}")
    return results
