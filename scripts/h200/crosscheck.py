"""Cross-check dgxperf's three headline figures against the simplest code that measures the same thing.

For each figure, dgxperf's measurement (A) and a plain loop (B: synchronise, host clock, N operations,
synchronise, host clock) run alternately, A B A B A B, in one process on the same buffers' shapes, so
both see the same GPU state; the ratio is median(A) / median(B). B imports nothing from dgxperf.

    PYTHONPATH=src python3 scripts/h200/crosscheck.py > crosscheck.json
"""

import json
import statistics
import time

import torch

from dgxperf.bench import gemm, memory, pcie
from dgxperf.bench.device import open_device
from dgxperf.hw.nvml import GpuSensor, read_pcie_link

ROUNDS = 3


def plain_seconds_per_op(fn, seconds=0.2, preload=0.0):
    """The simplest honest timing: as many ops as fill about `seconds`, between two synchronisations.

    `preload` seconds of the same op first, for the sustained (power-limited) state."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = max(time.perf_counter() - start, 1e-6)
    for _ in range(int(preload / one)):
        fn()
    n = max(1, int(seconds / one))
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n


def plain_gemm(m, n, k, seconds, preload):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    return 2 * m * n * k / plain_seconds_per_op(lambda: a @ b, seconds, preload) / 1e12


def plain_copy(size_bytes):
    src = torch.randn(size_bytes // 4, device="cuda")
    dst = torch.empty_like(src)
    return 2 * size_bytes / plain_seconds_per_op(lambda: dst.copy_(src)) / 1e9


def plain_h2d(size_bytes):
    host = torch.empty(size_bytes, dtype=torch.uint8, pin_memory=True).random_(0, 255)
    dev = torch.empty(size_bytes, dtype=torch.uint8, device="cuda")
    return size_bytes / plain_seconds_per_op(lambda: dev.copy_(host, non_blocking=True)) / 1e9


def alternate(name, ours, plain):
    a, b, states = [], [], []
    for _ in range(ROUNDS):
        m = ours()
        a.append(m.value)
        states.append(m.extra.get("gpu_state"))
        b.append(plain())
    ratio = statistics.median(a) / statistics.median(b)
    return {
        "figure": name,
        "dgxperf": a,
        "plain": b,
        "dgxperf_median": statistics.median(a),
        "plain_median": statistics.median(b),
        "ratio": ratio,
        "within_3pct": abs(ratio - 1) <= 0.03,
        "gpu_state_after_dgxperf": states,
    }


def main():
    device = open_device("cuda", 0)
    link = read_pcie_link(0)
    peak = pcie.link_peak_gbs(link.get("gen_max"), link.get("width_max"))
    results = []
    with GpuSensor(0) as sensor:
        for size in (4096, 8192):
            shape = gemm.Shape("square", size, size, size)
            results.append(
                alternate(
                    f"bf16 GEMM {shape} sustained",
                    lambda shape=shape: gemm.measure(
                        "bf16", shape, device, batches=10, preload_s=0.5, sensor=sensor
                    ),
                    lambda size=size: plain_gemm(size, size, size, seconds=0.2, preload=0.5),
                )
            )

        def rested(fn):
            time.sleep(3)  # idle, so the boost clocks are back, as before dgxperf's burst measurement
            return fn()

        shape = gemm.Shape("square", 4096, 4096, 4096)
        results.append(
            alternate(
                f"bf16 GEMM {shape} burst",
                lambda: rested(
                    lambda: gemm.measure("bf16", shape, device, batches=5, mode="burst", sensor=sensor)
                ),
                lambda: rested(lambda: plain_gemm(4096, 4096, 4096, seconds=0.025, preload=0.0)),
            )
        )
        copy_bytes = 4 << 30
        results.append(
            alternate(
                "device copy 4 GiB",
                lambda: memory.measure("copy", copy_bytes, device, batches=10),
                lambda: plain_copy(copy_bytes),
            )
        )
        for size in (256 << 20, 1 << 30):
            results.append(
                alternate(
                    f"H2D pinned {size >> 20} MiB",
                    lambda size=size: pcie.measure("h2d", True, size, device, peak, batches=10),
                    lambda size=size: plain_h2d(size),
                )
            )
    print(json.dumps({"device": device.name, "torch": torch.__version__, "results": results}, indent=1))


if __name__ == "__main__":
    main()
