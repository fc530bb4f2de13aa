"""The telemetry sample: what one sampling tick knows about every GPU and the host, and how a recording
stores a stream of them. Every consumer (terminal view, Prometheus exporter, advisor, report plots)
reads these types, so a recording made on a real H200 replays through all of them on a CPU machine.

A recording is JSON Lines (one JSON object a line, flushed each tick so a crash loses at most one):

- line 1, the header: ``{"schema": "dgxperf.recording/1", "hostname", "started_at", "interval_s",
  "gpus": [{"index", "name", "uuid", "pci_bus_id"}], "source"}``
- every later line, one :class:`Sample`: ``{"t": unix seconds, "gpus": [{...}], "host": {...},
  "events": [...]}``

A metric a GPU cannot give is absent from its dict, never null and never an error. Units are in the
names (``_pct``, ``_bytes``, ``_w``, ``_mhz``, ``_c``, ``_per_s``); the table below gives each metric's
source and its nvidia-smi / DCGM equivalent.

==========================  =====================================  =============================================
metric                      source                                 nvidia-smi dmon / DCGM field
==========================  =====================================  =============================================
gpu_util_pct                nvmlDeviceGetUtilizationRates.gpu      dmon sm% / DCGM_FI_DEV_GPU_UTIL
mem_copy_util_pct           nvmlDeviceGetUtilizationRates.memory   dmon mem% / DCGM_FI_DEV_MEM_COPY_UTIL
fb_used_bytes, fb_free_     nvmlDeviceGetMemoryInfo                fb / DCGM_FI_DEV_FB_USED, _FREE
power_w                     nvmlDeviceGetPowerUsage                pwr / DCGM_FI_DEV_POWER_USAGE
energy_j                    nvmlDeviceGetTotalEnergyConsumption    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ)
temp_gpu_c, temp_mem_c      nvmlDeviceGetTemperature / fields      gtemp, mtemp / DCGM_FI_DEV_GPU_TEMP
sm_clock_mhz, mem_clock_mhz nvmlDeviceGetClockInfo                 dmon pclk, mclk / DCGM_FI_DEV_SM_CLOCK
throttle                    clocks-event reasons, as names         DCGM_FI_DEV_CLOCK_THROTTLE_REASONS
ecc_sbe_volatile, _dbe_     nvmlDeviceGetTotalEccErrors            DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, _DBE_
remapped_pending            nvmlDeviceGetRemappedRows              DCGM_FI_DEV_ROW_REMAP_PENDING
pcie_replay                 nvmlDeviceGetPcieReplayCounter         DCGM_FI_DEV_PCIE_REPLAY_COUNTER
sm_active_pct               GPM SM util                            DCGM_FI_PROF_SM_ACTIVE (as a fraction there)
sm_occupancy_pct            GPM SM occupancy                       DCGM_FI_PROF_SM_OCCUPANCY
tensor_active_pct           GPM any-tensor util                    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
hmma_active_pct             GPM HMMA tensor util                   DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE
dram_active_pct             GPM DRAM bandwidth util                DCGM_FI_PROF_DRAM_ACTIVE
fp32_active_pct, fp16_, 64  GPM FP32/FP16/FP64 pipe util           DCGM_FI_PROF_PIPE_FP32_ACTIVE, ...
pcie_tx_bytes_per_s, rx     GPM PCIe MiB/s (else NVML PCIe KB/s)   DCGM_FI_PROF_PCIE_TX_BYTES, _RX_BYTES
nvlink_tx_bytes_per_s, rx   GPM NVLink MiB/s                       DCGM_FI_PROF_NVLINK_TX_BYTES, _RX_BYTES
==========================  =====================================  =============================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

RECORDING_SCHEMA = "dgxperf.recording/1"

# Every GPU metric a sample may hold, with its unit (documentation and the exporter's HELP text).
GPU_METRICS: Mapping[str, str] = {
    "gpu_util_pct": "% of time a kernel ran (NVML utilization.gpu)",
    "mem_copy_util_pct": "% of time device memory was read or written (NVML utilization.memory)",
    "fb_used_bytes": "framebuffer memory used, bytes",
    "fb_free_bytes": "framebuffer memory free, bytes",
    "fb_reserved_bytes": "framebuffer memory reserved by the driver, bytes",
    "power_w": "board power draw, W",
    "power_limit_w": "enforced power limit, W",
    "energy_j": "energy since the driver loaded, J",
    "temp_gpu_c": "GPU temperature, degrees C",
    "temp_mem_c": "HBM temperature, degrees C",
    "sm_clock_mhz": "SM clock, MHz",
    "mem_clock_mhz": "memory clock, MHz",
    "ecc_sbe_volatile": "corrected ECC errors since boot",
    "ecc_dbe_volatile": "uncorrected ECC errors since boot",
    "remapped_pending": "1 when a row remap waits for a GPU reset",
    "pcie_replay": "PCIe replay counter",
    "sm_active_pct": "GPM: % of SMs busy",
    "sm_occupancy_pct": "GPM: % of warp slots in use",
    "tensor_active_pct": "GPM: % of time any tensor pipe was busy",
    "hmma_active_pct": "GPM: % of time the FP16/BF16 tensor pipe was busy",
    "dram_active_pct": "GPM: % of DRAM bandwidth used",
    "fp32_active_pct": "GPM: % of time the FP32 pipe was busy",
    "fp16_active_pct": "GPM: % of time the FP16 pipe was busy (non-tensor)",
    "fp64_active_pct": "GPM: % of time the FP64 pipe was busy",
    "pcie_tx_bytes_per_s": "PCIe bytes/s sent by the GPU",
    "pcie_rx_bytes_per_s": "PCIe bytes/s received by the GPU",
    "nvlink_tx_bytes_per_s": "NVLink bytes/s sent (all links)",
    "nvlink_rx_bytes_per_s": "NVLink bytes/s received (all links)",
}

HOST_METRICS: Mapping[str, str] = {
    "cpu_util_pct": "% of CPU time busy (all cores)",
    "iowait_pct": "% of CPU time waiting for I/O",
    "steal_pct": "% of CPU time a VM's vCPUs were ready but the hypervisor ran others",
    "mem_used_bytes": "host memory in use, bytes",
    "mem_total_bytes": "host memory, bytes",
    "load1": "1-minute load average",
}


@dataclasses.dataclass(frozen=True)
class GpuSample:
    """One GPU at one tick: ``metrics`` holds only what the GPU could give; throttle reasons as names."""

    index: int
    metrics: Mapping[str, float]
    throttle: tuple[str, ...] = ()
    processes: tuple[Mapping[str, Any], ...] = ()

    def get(self, name: str) -> float | None:
        return self.metrics.get(name)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"index": self.index, **self.metrics}
        if self.throttle:
            data["throttle"] = list(self.throttle)
        if self.processes:
            data["processes"] = [dict(p) for p in self.processes]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GpuSample:
        metrics = {
            k: float(v)
            for k, v in data.items()
            if k not in ("index", "throttle", "processes")
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
        }
        return cls(
            index=int(data["index"]),
            metrics=metrics,
            throttle=tuple(str(t) for t in data.get("throttle", ())),
            processes=tuple(dict(p) for p in data.get("processes", ())),
        )


@dataclasses.dataclass(frozen=True)
class Sample:
    """Every GPU and the host at time ``t`` (Unix seconds). ``events``: XIDs and the like since the last tick."""

    t: float
    gpus: tuple[GpuSample, ...]
    host: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    events: tuple[Mapping[str, Any], ...] = ()

    def gpu(self, index: int) -> GpuSample | None:
        return next((g for g in self.gpus if g.index == index), None)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "t": round(self.t, 6),
            "gpus": [g.to_json() for g in self.gpus],
            "host": dict(self.host),
        }
        if self.events:
            data["events"] = [dict(e) for e in self.events]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sample:
        return cls(
            t=float(data["t"]),
            gpus=tuple(GpuSample.from_json(g) for g in data.get("gpus", ())),
            host=dict(data.get("host", {})),
            events=tuple(dict(e) for e in data.get("events", ())),
        )


@dataclasses.dataclass(frozen=True)
class GpuInfo:
    """What does not change during a recording: the labels a dashboard needs."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Header:
    hostname: str
    started_at: str
    interval_s: float
    gpus: tuple[GpuInfo, ...]
    source: str = "nvml"
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RECORDING_SCHEMA,
            "hostname": self.hostname,
            "started_at": self.started_at,
            "interval_s": self.interval_s,
            "gpus": [g.to_json() for g in self.gpus],
            "source": self.source,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Header:
        return cls(
            hostname=str(data.get("hostname", "")),
            started_at=str(data.get("started_at", "")),
            interval_s=float(data.get("interval_s", 1.0)),
            gpus=tuple(
                GpuInfo(
                    int(g["index"]),
                    str(g.get("name", "")),
                    str(g.get("uuid", "")),
                    str(g.get("pci_bus_id", "")),
                )
                for g in data.get("gpus", ())
            ),
            source=str(data.get("source", "nvml")),
            notes=tuple(str(n) for n in data.get("notes", ())),
        )


def series(samples: Sequence[Sample], gpu: int, metric: str) -> list[tuple[float, float]]:
    """``[(t, value)]`` of one GPU metric over samples, skipping ticks where it was absent."""
    out = []
    for sample in samples:
        g = sample.gpu(gpu)
        if g is not None and (value := g.get(metric)) is not None:
            out.append((sample.t, value))
    return out
