"""Synthetic recordings for tests and for measuring the monitor at 8 GPUs on a machine that has fewer.

Two tools, both clearly labelled in the header they write (``source`` and ``notes``) so that nobody
mistakes their output for a recording of a real node:

- :func:`replicate` turns a one-GPU recording into an n-GPU one: GPU 0's metrics copied to every index
  with small deterministic per-GPU offsets, each GPU with its own UUID and PCI bus id.
- :func:`derive_h200_fixture` builds ``tests/data/monitor/h200-derived-gemm.jsonl`` from the numbers the
  lent H200 really printed (``tests/data/h200``): GPM windows measured idle / under a bf16 GEMM / under a
  device copy, one NVML snapshot, and the GPU state after each bf16 GEMM benchmark. It is a stand-in
  until real H200 recordings are committed; its notes say which file every value comes from.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dgxperf.hw.telemetry import GPM_TO_SCHEMA
from dgxperf.monitor.recorder import Recorder
from dgxperf.monitor.sources import read_recording

# measure_sampling_cost lives with the monitor loop it measures (view.py); scripts/h200/capture_monitor.sh
# imports it from here, next to the synthetic 8-GPU recordings it is also run on.
from dgxperf.monitor.view import measure_sampling_cost
from dgxperf.samples import GpuInfo, GpuSample, Header, Sample

__all__ = ["derive_h200_fixture", "measure_sampling_cost", "replicate"]

# PCI bus numbers of the eight GPUs of a DGX H100/H200 (nvidia-smi's Bus-Id on those systems), so a
# replicated recording looks like the node it stands for; more GPUs continue past them.
DGX_BUS_NUMBERS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)

# Metrics replicate() leaves exactly as recorded: clocks sit on discrete steps, memory sizes, limits and
# error counters are properties of the job or the board, not noise.
UNCHANGED = frozenset(
    {
        "sm_clock_mhz",
        "mem_clock_mhz",
        "fb_used_bytes",
        "fb_free_bytes",
        "fb_reserved_bytes",
        "power_limit_w",
        "ecc_sbe_volatile",
        "ecc_dbe_volatile",
        "remapped_pending",
        "pcie_replay",
    }
)
NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # uuid.NAMESPACE_URL: stable across runs


def _factor(index: int) -> float:
    """A per-GPU scale in [0.96, 1.04], deterministic: GPUs of one node differ by a few percent."""
    return 1.0 + 0.02 * ((index * 3) % 5 - 2)


def _offset_metric(name: str, value: float, index: int, limit_w: float | None) -> float:
    if index == 0 or name in UNCHANGED:
        return value
    if name.startswith("temp_"):
        return value + (index % 4)  # neighbouring GPUs run a degree or few apart
    scaled = value * _factor(index)
    if name.endswith("_pct"):
        scaled = min(100.0, scaled)
    if name == "power_w" and limit_w is not None:
        scaled = min(limit_w, scaled)  # the board cannot draw past its enforced limit for a whole tick
    return round(scaled, 3)


def _gpu_info(template: GpuInfo, index: int) -> GpuInfo:
    bus = DGX_BUS_NUMBERS[index] if index < len(DGX_BUS_NUMBERS) else 0xDC + index
    return GpuInfo(
        index=index,
        name=template.name,
        uuid="GPU-" + str(uuid.uuid5(NAMESPACE, f"{template.uuid}/{index}")),
        pci_bus_id=f"00000000:{bus:02X}:00.0",
    )


def _replicate_gpu(gpu: GpuSample, index: int) -> GpuSample:
    limit = gpu.get("power_limit_w")
    metrics = {k: _offset_metric(k, v, index, limit) for k, v in gpu.metrics.items()}
    processes = tuple({**p, "pid": int(p["pid"]) + index} if "pid" in p else dict(p) for p in gpu.processes)
    return GpuSample(index, metrics, gpu.throttle, processes)


def replicate(recording_path: Path | str, n_gpus: int, out_path: Path | str) -> Path:
    """Write an ``n_gpus`` recording at ``out_path`` from the first GPU of ``recording_path``.

    Every sample keeps its time, host and events (XIDs stay on the GPU they named); GPU i gets GPU 0's
    metrics with a per-GPU factor of 0.96..1.04 (percentages capped at 100, power at the limit),
    temperatures +0..3 C, clocks, memory, limits and error counters unchanged, process pids shifted by i.
    Skipped lines of the input are skipped here too. Returns ``out_path``.
    """
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be >= 1, got {n_gpus}")
    source = Path(recording_path)
    header, samples, _warnings = read_recording(source)
    if not header.gpus:
        raise ValueError(f"{source}: the recording has no GPU to replicate")
    template_index = header.gpus[0].index
    new_header = dataclasses.replace(
        header,
        gpus=tuple(_gpu_info(header.gpus[0], i) for i in range(n_gpus)),
        source="synthetic",
        notes=(
            *header.notes,
            f"SYNTHETIC: {n_gpus} GPUs replicated by dgxperf.monitor.synthetic.replicate from GPU "
            f"{template_index} of {source.name}; GPU i = that GPU's metrics x (0.96..1.04), temperatures "
            "+0..3 C; UUIDs and bus ids invented. Not a recording of a real node.",
        ),
    )
    out = Path(out_path)
    with Recorder(out, new_header) as recorder:
        for sample in samples:
            gpu = sample.gpu(template_index)
            gpus = tuple(_replicate_gpu(gpu, i) for i in range(n_gpus)) if gpu is not None else ()
            recorder.write(Sample(sample.t, gpus, sample.host, sample.events))
    return out


# --------------------------------------------------------------------------------------------------
# The H200-derived fixture
# --------------------------------------------------------------------------------------------------

FIXTURE_PHASES: tuple[tuple[str, int], ...] = (("idle", 10), ("gemm", 20), ("copy", 10))


def _gpm(window: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for name, value in window.items():
        if name in GPM_TO_SCHEMA and isinstance(value, (int, float)):
            metric, factor = GPM_TO_SCHEMA[name]
            out[metric] = round(float(value) * factor, 3)
    return out


def _gemm_states(bench: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """gpu_state after every sustained bf16 GEMM whose M, N and K are all >= 4096 (the shapes that fill
    the GPU and hold it at its power limit), in the order they were measured."""
    states = []
    for m in bench.get("measurements", []):
        params = m.get("params", {})
        state = m.get("extra", {}).get("gpu_state")
        if (
            params.get("dtype") == "bf16"
            and params.get("mode") == "sustained"
            and min(params.get("m", 0), params.get("n", 0), params.get("k", 0)) >= 4096
            and isinstance(state, Mapping)
        ):
            states.append(state)
    if not states:
        raise ValueError("no sustained bf16 GEMM gpu_state of shape >= 4096 in the bench file")
    return states


def _from_state(state: Mapping[str, Any]) -> tuple[dict[str, float], tuple[str, ...]]:
    metrics = {}
    for key, metric in (("sm_mhz", "sm_clock_mhz"), ("power_w", "power_w"), ("temperature_c", "temp_gpu_c")):
        if isinstance(state.get(key), (int, float)):
            metrics[metric] = float(state[key])
    return metrics, tuple(str(t) for t in state.get("throttle") or ())


def derive_h200_fixture(
    data_dir: Path | str,
    out_path: Path | str,
    phases: Sequence[tuple[str, int]] = FIXTURE_PHASES,
) -> Path:
    """Build the DERIVED H200 fixture from ``data_dir`` (``tests/data/h200``); see the notes it writes."""
    data = Path(data_dir)
    gpm = json.loads((data / "gpm_under_load.json").read_text())
    snapshot = json.loads((data / "snapshot.json").read_text())
    bench = json.loads((data / "bench" / "bench-gemm.json").read_text())
    gpu = snapshot["nvml"]["gpus"][0]
    states = _gemm_states(bench)
    started = datetime.datetime.strptime(snapshot["collected_at"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc
    )
    t0 = started.timestamp()
    header = Header(
        hostname=str(snapshot.get("hostname", "")),
        started_at=snapshot["collected_at"],
        interval_s=1.0,
        gpus=(GpuInfo(0, str(gpu["name"]), str(gpu["uuid"]), str(gpu["pci_bus_id"])),),
        source="derived",
        notes=(
            "DERIVED, NOT A RECORDING: built by dgxperf.monitor.synthetic.derive_h200_fixture from numbers "
            "the lent H200 printed; real H200 recordings will replace it.",
            "phases: " + ", ".join(f"{n} x {name}" for name, n in phases) + " ticks at 1 s.",
            "GPM metrics per phase: tests/data/h200/gpm_under_load.json (windows measured idle, under a "
            "bf16 GEMM, under a device copy).",
            "idle plain NVML metrics (utilisation, memory, power, clocks, temperature, ECC, replay, "
            "throttle): tests/data/h200/snapshot.json (one reading, repeated).",
            "gemm SM clock, power, temperature and throttle: tests/data/h200/bench/bench-gemm.json, the "
            "gpu_state after each sustained bf16 GEMM with M,N,K >= 4096, cycled in measurement order.",
            "gpu_util_pct = 100 under gemm and copy (back-to-back kernels; GPM SM activity 96-99%); "
            "mem_copy_util_pct, SM clock, power and temperature under copy, temp_mem_c, fb_reserved_bytes "
            "and energy_j were not measured and are absent; throttle reasons under copy were not measured and are "
            "left empty; framebuffer use is the idle snapshot's.",
            "host: memory from the snapshot's meminfo; CPU, disk and network were not measured and are absent.",
        ),
    )
    memory_total, memory_used = float(gpu["memory_total_bytes"]), float(gpu["memory_used_bytes"])
    common = {
        "fb_used_bytes": memory_used,
        "fb_free_bytes": memory_total - memory_used,
        "power_limit_w": float(gpu["power_limit_w"]),
        "mem_clock_mhz": float(gpu["clock_mem_mhz"]),
        "ecc_sbe_volatile": float(gpu["ecc_volatile_corrected"]),
        "ecc_dbe_volatile": float(gpu["ecc_volatile_uncorrected"]),
        "remapped_pending": float(gpu["remapped_rows"]["pending"]),
        "pcie_replay": float(gpu["pcie_replay_counter"]),
    }
    idle = {
        "gpu_util_pct": float(gpu["utilization"]["gpu"]),
        "mem_copy_util_pct": float(gpu["utilization"]["memory"]),
        "power_w": float(gpu["power_draw_w"]),
        "sm_clock_mhz": float(gpu["clock_sm_mhz"]),
        "temp_gpu_c": float(gpu["temperature_c"]),
    }
    idle_throttle = tuple(str(r) for r in gpu["clocks_event_reasons"])
    meminfo = snapshot["host"]["meminfo"]
    host = {
        "mem_used_bytes": float(meminfo["MemTotal"] - meminfo["MemAvailable"]),
        "mem_total_bytes": float(meminfo["MemTotal"]),
    }
    out = Path(out_path)
    with Recorder(out, header) as recorder:
        tick, gemm_tick = 0, 0
        for phase, count in phases:
            for _ in range(count):
                tick += 1
                metrics: dict[str, float] = dict(common)
                throttle: tuple[str, ...] = ()
                if phase == "idle":
                    metrics.update(idle)
                    throttle = idle_throttle
                elif phase == "gemm":
                    state_metrics, throttle = _from_state(states[gemm_tick % len(states)])
                    gemm_tick += 1
                    metrics.update(state_metrics)
                    metrics["gpu_util_pct"] = 100.0
                elif phase == "copy":
                    metrics["gpu_util_pct"] = 100.0
                else:
                    raise ValueError(f"unknown phase {phase!r} (idle, gemm, copy)")
                metrics.update(_gpm(gpm[phase]))
                recorder.write(Sample(t0 + tick, (GpuSample(0, metrics, throttle),), dict(host)))
    return out
