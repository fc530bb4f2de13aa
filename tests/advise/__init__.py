"""Windows for the advisor's tests, built from what the lent H200 really printed.

Real H200 recordings now exist (tests/data/h200/monitor/: idle, bf16 GEMM loop, copy loop, input-starved
loop, pageable host-to-device loop, and the three recipes of a validate run); test_real_recordings.py
judges every rule on each. The rules none of them triggers (guide A's swing, CPU-bound, I/O wait, the two
PCIe rules, near capacity, hardware errors, guide B's memory-bound) are still tested here on the windows
below. The base windows are DERIVED from real readings by
:func:`dgxperf.monitor.synthetic.derive_h200_fixture` (the monitor's own derivation, so advise and the
exporter judge the same numbers), read back with :func:`dgxperf.monitor.sources.read_recording`:

- ``idle``: NVML from ``tests/data/h200/snapshot.json`` (util 0 %, 0.6 GiB used of 140.4 GiB, 81.6 W,
  345 MHz, ``gpu_idle``) and GPM from ``tests/data/h200/gpm_under_load.json["idle"]``.
- ``gemm``: GPM from ``gpm_under_load.json["gemm"]`` (SM 95.8 %, tensor 93.0 %, DRAM 17.1 %), SM clock,
  power, temperature and throttle (``sw_power_cap``) from ``tests/data/h200/bench/bench-gemm.json``'s
  sustained bf16 GEMMs; utilization.gpu 100 % (back-to-back kernels; not measured, an assumption).
- ``copy``: GPM from ``gpm_under_load.json["copy"]`` (SM 99.4 %, tensor 0 %, DRAM 89.0 %).

Two more are derived here: ``h2d_pinned`` / ``h2d_pageable`` are idle ticks whose PCIe RX is the
host-to-device rate ``tests/data/h200/bench/bench-pcie.json`` measured (55.33 / 14.61 GB/s; GPM's RX
reading during such a copy was not captured, so this assumes it would read the payload rate).

Everything else a rule needs to fire (SM below 60 % with DRAM above 80 %, an fp32 GEMM's tensor
activity, a saturated host CPU, I/O wait, a full framebuffer, hardware errors) was never measured on the
H200: those windows are SYNTHETIC edits of the derived ones, made with :func:`edit` and named as such in
each test. Real recordings will replace both kinds.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dgxperf.advise.base import Window
from dgxperf.monitor.sources import read_recording
from dgxperf.monitor.synthetic import derive_h200_fixture
from dgxperf.samples import GpuInfo, GpuSample, Header, Sample

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "h200"
ADVISE_DATA = ROOT / "tests" / "data" / "advise"
MONITOR_FIXTURE = ROOT / "tests" / "data" / "monitor" / "h200-derived-gemm.jsonl"
GiB = 1024**3

Phases = tuple[tuple[str, int], ...]


@functools.cache
def _derived(phases: Phases) -> tuple[Header, tuple[Sample, ...]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = derive_h200_fixture(H200, Path(tmp) / "derived.jsonl", phases)
        header, samples, warnings = read_recording(path)
    assert not warnings, warnings
    return header, tuple(samples)


def derived(*phases: tuple[str, int]) -> tuple[Header, list[Sample]]:
    """Header and samples of a derived H200 recording with these ``(phase, ticks)`` phases (1 s apart)."""
    header, samples = _derived(tuple(phases))
    return header, list(samples)


def h2d_rates_gbs() -> dict[str, float]:
    """The H200's measured host-to-device rates (GB/s): pinned and pageable, best size (bench pcie)."""
    summary = json.loads((H200 / "bench" / "bench-pcie.json").read_text())["summary"]["pcie"]
    return {"pinned": float(summary["h2d_pinned"]["gbs"]), "pageable": float(summary["h2d_pageable"]["gbs"])}


def edit(
    samples: Sequence[Sample],
    *,
    gpu: int | None = None,
    metrics: Mapping[str, float | None] | None = None,
    throttle: tuple[str, ...] | None = None,
    host: Mapping[str, float] | None = None,
    events: Sequence[Mapping[str, Any]] | None = None,
    ticks: slice | None = None,
) -> list[Sample]:
    """A SYNTHETIC edit: set (or, with ``None``, remove) metrics, throttle reasons, host readings or
    events on ``ticks`` (default all) of one GPU (default every GPU)."""
    chosen = set(range(len(samples))[ticks or slice(None)])
    out = []
    for n, sample in enumerate(samples):
        if n not in chosen:
            out.append(sample)
            continue
        gpus = []
        for g in sample.gpus:
            if gpu is not None and g.index != gpu:
                gpus.append(g)
                continue
            changed = dict(g.metrics)
            for k, v in (metrics or {}).items():
                if v is None:
                    changed.pop(k, None)
                else:
                    changed[k] = float(v)
            gpus.append(
                dataclasses.replace(g, metrics=changed, throttle=g.throttle if throttle is None else throttle)
            )
        out.append(
            dataclasses.replace(
                sample,
                gpus=tuple(gpus),
                host={**sample.host, **(host or {})},
                events=tuple(events) if events is not None else sample.events,
            )
        )
    return out


def stack(header: Header, per_gpu: Sequence[Sequence[Sample]]) -> tuple[Header, list[Sample]]:
    """An n-GPU recording whose GPU i is GPU 0 of ``per_gpu[i]`` (same length, same tick times)."""
    template = header.gpus[0]
    infos = tuple(
        GpuInfo(i, template.name, f"{template.uuid[:-2]}{i:02d}", f"00000000:{0x18 + i:02X}:00.0")
        for i in range(len(per_gpu))
    )
    samples = []
    for ticks in zip(*per_gpu, strict=True):
        gpus = tuple(
            GpuSample(i, t.gpus[0].metrics, t.gpus[0].throttle, t.gpus[0].processes)
            for i, t in enumerate(ticks)
        )
        samples.append(dataclasses.replace(ticks[0], gpus=gpus))
    return dataclasses.replace(header, gpus=infos), samples


def window(header: Header | None, samples: Sequence[Sample]) -> Window:
    return Window(samples, header)


def stripped(samples: Sequence[Sample]) -> list[Sample]:
    """The same ticks and GPUs with every metric, throttle reason, host reading and event removed."""
    return [Sample(s.t, tuple(GpuSample(g.index, {}) for g in s.gpus), {}, ()) for s in samples]


# ---------------------------------------------------------------------------- the named real windows


def idle(ticks: int = 30) -> tuple[Header, list[Sample]]:
    return derived(("idle", ticks))


def gemm(ticks: int = 30) -> tuple[Header, list[Sample]]:
    return derived(("gemm", ticks))


def copy(ticks: int = 30) -> tuple[Header, list[Sample]]:
    return derived(("copy", ticks))


def h2d(kind: str, ticks: int = 30) -> tuple[Header, list[Sample]]:
    """Idle ticks with PCIe RX at the H200's measured ``pinned`` or ``pageable`` H2D rate."""
    header, samples = idle(ticks)
    return header, edit(samples, metrics={"pcie_rx_bytes_per_s": h2d_rates_gbs()[kind] * 1e9})


def swing(cycles: int = 6, busy: int = 3, stall: int = 2) -> tuple[Header, list[Sample]]:
    """A GEMM loop that stops for input: ``busy`` gemm ticks then ``stall`` idle ticks, ``cycles`` times."""
    return derived(*((("gemm", busy), ("idle", stall)) * cycles))


def job_start(idle_ticks: int = 10, busy_ticks: int = 20) -> tuple[Header, list[Sample]]:
    """Idle, then a steady GEMM loop: one climb from low to high, which is not a swing."""
    return derived(("idle", idle_ticks), ("gemm", busy_ticks))


REAL_WINDOWS: dict[str, Callable[[], tuple[Header, list[Sample]]]] = {
    "idle": idle,
    "gemm": gemm,
    "copy": copy,
    "h2d_pinned": lambda: h2d("pinned"),
    "h2d_pageable": lambda: h2d("pageable"),
    "swing": swing,
    "job_start": job_start,
}
