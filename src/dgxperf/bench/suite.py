"""A bench run as one result: what was measured, on which device, with which software, and the best figures.

``summarise`` condenses each family to the figures later commands compare against (train's MFU against
the measured GEMM ceiling, advise's memory-bound test against the measured copy bandwidth).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from dgxperf import __version__
from dgxperf.bench import gemm, launch, memory, p2p, pcie
from dgxperf.bench.base import BENCH_SCHEMA, BenchError, Measurement, human_bytes
from dgxperf.bench.device import Device, gpu_count, versions

Progress = Callable[[int, int, str], None]


@dataclasses.dataclass
class BenchReport:
    suite: str
    device: Device
    measurements: list[Measurement]
    settings: dict[str, Any]
    notes: list[str] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    created_at: str = dataclasses.field(
        default_factory=lambda: dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    )

    def summary(self) -> dict[str, Any]:
        return summarise(self.measurements, extra=self.extra)

    def summary_line(self) -> str:
        parts = []
        summary = self.summary()
        for dtype, best in summary.get("gemm", {}).items():
            if dtype in ("bf16", "fp8"):
                burst = f" ({best['burst_tflops']:.0f} burst)" if "burst_tflops" in best else ""
                parts.append(f"{dtype} {best['tflops']:.0f} TFLOP/s{burst}")
        if "copy" in summary.get("memory", {}):
            parts.append(f"copy {summary['memory']['copy']['gbs'] / 1000:.2f} TB/s")
        if "h2d_pinned" in summary.get("pcie", {}):
            parts.append(f"H2D {summary['pcie']['h2d_pinned']['gbs']:.1f} GB/s")
        if "eager" in summary.get("launch", {}):
            parts.append(f"eager launch {summary['launch']['eager']['us_per_op']:.1f} µs")
        for op, busbw in summary.get("nccl_avg_busbw", {}).items():
            if op == "all_reduce":
                parts.append(f"all_reduce avg busbw {busbw:.1f} GB/s")
        return ", ".join(parts) or f"{len(self.measurements)} measurements"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": BENCH_SCHEMA,
            "tool_version": __version__,
            "suite": self.suite,
            "created_at": self.created_at,
            "device": self.device.to_json(),
            "versions": versions(),
            "settings": self.settings,
            "summary": self.summary(),
            "measurements": [m.to_json() for m in self.measurements],
            "notes": self.notes,
            **({"nccl": self.extra["nccl"]} if "nccl" in self.extra else {}),
        }


def summarise(measurements: Sequence[Measurement], *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    by_bench: dict[str, list[Measurement]] = {}
    for m in measurements:
        by_bench.setdefault(m.bench, []).append(m)
    summary: dict[str, Any] = {}
    if "gemm" in by_bench:
        summary["gemm"] = gemm.best_per_dtype(by_bench["gemm"])
    if "memory" in by_bench:
        summary["memory"] = {
            m.params["kind"]: {"gbs": round(m.value, 1), "pct_of_peak": _pct(m)} for m in by_bench["memory"]
        }
    if "pcie" in by_bench:
        best: dict[str, Measurement] = {}
        for m in by_bench["pcie"]:
            key = f"{m.params['direction']}_{'pinned' if m.params['pinned'] else 'pageable'}"
            if key not in best or m.value > best[key].value:
                best[key] = m
        summary["pcie"] = {
            k: {"gbs": round(m.value, 2), "size": human_bytes(m.params["size_bytes"]), "pct_of_peak": _pct(m)}
            for k, m in best.items()
        }
    if "p2p" in by_bench:
        count = 1 + max(max(m.params["src"], m.params["dst"]) for m in by_bench["p2p"])
        summary["p2p_gbs"] = p2p.matrix(by_bench["p2p"], count)
    if "launch" in by_bench:
        summary["launch"] = launch.summarise(by_bench["launch"])
    if extra and "nccl" in extra:
        summary["nccl_avg_busbw"] = extra["nccl"].get("avg_busbw", {})
    return summary


def _pct(m: Measurement) -> float | None:
    pct = m.pct_of_peak
    return None if pct is None else round(pct, 1)


def run_all(
    device: Device, *, quick: bool, env: dict[str, str], progress: Progress | None = None
) -> BenchReport:
    """The whole suite on one node: GEMM, memory, PCIe, P2P (with >= 2 GPUs), NCCL collectives and the host's
    launch overhead."""
    from dgxperf.bench import nccl
    from dgxperf.hw.nvml import GpuSensor, read_pcie_link

    batches = 5 if quick else 10
    notes: list[str] = []
    measurements: list[Measurement] = []
    dtypes = [d for d in gemm.DTYPES if d != "fp8" or gemm.fp8_supported(device)]
    if "fp8" not in dtypes:
        notes.append("fp8 skipped: needs compute capability 8.9+")
    with GpuSensor(device.index) as sensor:
        measurements += gemm.run(
            device,
            dtypes,
            gemm.default_shapes(quick),
            batches=batches,
            cooldown_s=1.0 if quick else 3.0,
            preload_s=0.3 if quick else 0.5,
            sensor=sensor,
            progress=progress,
        )
    size = memory.QUICK_BYTES if quick else memory.DEFAULT_BYTES
    measurements += memory.run(device, size, batches=batches, progress=progress)
    link = read_pcie_link(device.index)
    sizes = pcie.QUICK_SIZES if quick else pcie.SIZES
    measurements += pcie.run(device, sizes, link, batches=batches, progress=progress)
    gpus = gpu_count()
    if gpus >= 2:
        measurements += p2p.run(gpus, p2p.DEFAULT_BYTES, batches=batches, progress=progress)
    else:
        notes.append(f"p2p skipped: {gpus} GPU on this node")
    config = nccl.NcclConfig(**nccl_quick_settings(quick))
    if gpus >= 2:
        result = nccl.launch(config, gpus, env, timeout_s=600)
    else:
        single = nccl.run_collectives(config, env)
        assert single is not None
        result = single
    notes += result.notes
    measurements += result.measurements
    measurements += launch_or_note(device, batches, progress, notes)
    report = BenchReport(
        suite="all",
        device=device,
        measurements=measurements,
        settings={"quick": quick, "batches": batches, "pcie_link": link, "nccl": dataclasses.asdict(config)},
        notes=notes,
        extra={"nccl": {k: v for k, v in result.to_json().items() if k not in ("measurements", "schema")}},
    )
    return report


def launch_or_note(
    device: Device, batches: int, progress: Progress | None, notes: list[str]
) -> list[Measurement]:
    """The launch figures, or a note saying why there are none: the host's figure sits beside the ceilings and
    never costs the suite them."""
    try:
        return launch.run(device, batches=batches, progress=progress)
    except (BenchError, RuntimeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        notes.append(f"launch skipped: {first}")
        return []


def nccl_quick_settings(quick: bool) -> dict[str, Any]:
    from dgxperf.bench import nccl

    return {
        "ops": list(nccl.OPS),
        "begin": 1 << 20 if quick else 8,
        "end": 256 << 20 if quick else 1 << 30,
        "factor": 4.0 if quick else 2.0,
        "dtype": "float32",
        "reduce_op": "sum",
        "warmup": 3 if quick else 5,
        "iters": 10 if quick else 20,
        "batches": 3 if quick else 5,
        "check": True,
        "backend": None,
    }
