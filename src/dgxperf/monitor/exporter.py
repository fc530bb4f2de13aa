"""`dgxperf exporter`: a Prometheus exporter that drops into dashboards built for NVIDIA's dcgm-exporter.

How it works (guide A §6.2, guide B §4.1):

- A background thread pulls a :class:`~dgxperf.samples.Sample` from a
  :class:`~dgxperf.monitor.sources.Source` every ``interval_s`` and publishes an immutable
  :class:`Snapshot` (the sample, XID history, the latest training record, self-metrics). Publishing is
  one reference assignment, so a scrape never takes a lock held by NVML and never waits on it.
- A scrape runs :class:`ExporterCollector` (a prometheus_client ``Collector``: no global mutable
  Gauges) over the current snapshot and formats the families with :func:`render_text`.
- ``/metrics`` is served by a small WSGI app on prometheus_client's threading WSGI server.

Why our own text formatter instead of ``prometheus_client.generate_latest``: dcgm-exporter writes its
counters without a ``_total`` suffix (``# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter``) and its
labels in a fixed order (``gpu, UUID, pci_bus_id, device, modelName, Hostname``); generate_latest
renames counters' metadata to ``<name>_total`` and sorts labels. Dashboards and recording rules written
for dcgm-exporter key on the exact names, so we print them exactly (text format 0.0.4, which is the only
format dcgm-exporter serves too).

Every metric this exporter can expose is listed by :func:`exporter_metrics` (name, type, unit, labels,
HELP); the Grafana dashboard and alert rules are validated against that list.
"""

from __future__ import annotations

import dataclasses
import errno
import http.client
import json
import math
import re
import signal
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from dgxperf import __version__
from dgxperf.hw.nvml import CLOCK_EVENT_REASONS
from dgxperf.monitor.sources import RecordingError, Source
from dgxperf.samples import GpuInfo, GpuSample, Header, Sample

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

DEFAULT_LISTEN = ":9400"  # dcgm-exporter's port, so existing scrape configs find us
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIB = 1024 * 1024
_POLL_S = 0.1  # how fast serve_forever notices shutdown(); socketserver's 0.5 s makes every stop slow

# dcgm-exporter's label names and order (internal/pkg/rendermetrics/render_metrics.go: gpu, UUID,
# pci_bus_id, device, modelName, then Hostname when it knows the host name; we always do).
GPU_LABELS: tuple[str, ...] = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
HOST_LABELS: tuple[str, ...] = ("Hostname",)


class ExporterError(Exception):
    """A problem a person can fix (address in use, bad --listen): one line, no traceback."""


class Printer(Protocol):
    """What run_exporter needs of a console: rich's Console fits, so does anything with print()."""

    def print(self, *objects: Any, **kwargs: Any) -> None: ...


# --------------------------------------------------------------------------------------------------
# The metric catalogue
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MetricInfo:
    """One exposed metric: what a dashboard author needs to know about it."""

    name: str
    type: str  # "gauge" or "counter"
    unit: str
    labels: tuple[str, ...]
    help: str


@dataclasses.dataclass(frozen=True)
class DcgmField:
    """A per-GPU sample metric exposed under its DCGM field name, converted to DCGM's unit."""

    name: str
    key: str  # the Sample metric (schema.GPU_METRICS)
    type: str
    unit: str
    scale: float
    help: str


# One row per schema.GPU_METRICS key (a test checks that none is forgotten): DCGM field name, sample key,
# type, DCGM's unit, the factor from our unit to DCGM's, HELP. Units follow DCGM, not our samples:
# framebuffer in MiB, energy in mJ, and DCGM_FI_PROF_* activities as ratios 0..1 (samples hold percents).
# fmt: off
_DCGM_TABLE: tuple[tuple[str, str, str, str, float, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", "gauge", "MHz", 1.0, "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz", "gauge", "MHz", 1.0, "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "temp_mem_c", "gauge", "C", 1.0, "Memory (HBM) temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "temp_gpu_c", "gauge", "C", 1.0, "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", "gauge", "W", 1.0, "Power draw (in W)."),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "power_limit_w", "gauge", "W", 1.0,
     "Power limit the driver enforces (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_j", "counter", "mJ", 1000.0,
     "Total energy consumption since the driver loaded (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "pcie_replay", "counter", "1", 1.0, "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gpu_util_pct", "gauge", "%", 1.0, "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "mem_copy_util_pct", "gauge", "%", 1.0,
     "Memory utilization: time device memory was read or written (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "fb_free_bytes", "gauge", "MiB", 1.0 / MIB, "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "fb_used_bytes", "gauge", "MiB", 1.0 / MIB, "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "fb_reserved_bytes", "gauge", "MiB", 1.0 / MIB,
     "Framebuffer memory reserved by the driver (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "ecc_sbe_volatile", "counter", "1", 1.0,
     "Total number of single-bit (corrected) volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe_volatile", "counter", "1", 1.0,
     "Total number of double-bit (uncorrected) volatile ECC errors."),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "remapped_pending", "gauge", "1", 1.0,
     "Whether a row remap is pending (1: the GPU needs a reset)."),
    ("DCGM_FI_PROF_SM_ACTIVE", "sm_active_pct", "gauge", "ratio", 0.01,
     "The ratio of cycles an SM has at least 1 warp assigned (0..1)."),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy_pct", "gauge", "ratio", 0.01,
     "The ratio of number of warps resident on an SM to the maximum (0..1)."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active_pct", "gauge", "ratio", 0.01,
     "Ratio of cycles any tensor pipe is active (0..1)."),
    ("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "hmma_active_pct", "gauge", "ratio", 0.01,
     "Ratio of cycles the FP16/BF16 tensor (HMMA) pipe is active (0..1)."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active_pct", "gauge", "ratio", 0.01,
     "Ratio of cycles the device memory interface is active sending or receiving data (0..1)."),
    ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "fp64_active_pct", "gauge", "ratio", 0.01,
     "Ratio of cycles the fp64 pipes are active (0..1)."),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "fp32_active_pct", "gauge", "ratio", 0.01,
     "Ratio of cycles the fp32 pipes are active (0..1)."),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "fp16_active_pct", "gauge", "ratio", 0.01,
     "Ratio of cycles the fp16 pipes are active (0..1)."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bytes_per_s", "gauge", "B/s", 1.0,
     "The rate of data transmitted over the PCIe bus, including protocol headers (in bytes per second)."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_bytes_per_s", "gauge", "B/s", 1.0,
     "The rate of data received over the PCIe bus, including protocol headers (in bytes per second)."),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "nvlink_tx_bytes_per_s", "gauge", "B/s", 1.0,
     "The rate of data transmitted over NVLink, all links (in bytes per second)."),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", "nvlink_rx_bytes_per_s", "gauge", "B/s", 1.0,
     "The rate of data received over NVLink, all links (in bytes per second)."),
)

_G, _H = GPU_LABELS, HOST_LABELS

# Every other metric: name, type, unit, labels, HELP.
_OTHER_TABLE: tuple[tuple[str, str, str, tuple[str, ...], str], ...] = (
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "bitmask", _G,
     "Current clock throttle (clocks-event) reasons as NVML's bitmask; dgxperf_throttle_reason names them."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "xid", _G,
     "Value of the last XID error encountered (0: none since the exporter started)."),
    ("dgxperf_throttle_reason", "gauge", "1", (*_G, "reason"),
     "1 while this clocks-event (throttle) reason holds the GPU's clocks down, else 0 (names as nvidia-smi's; "
     "sw_power_cap is normal under full load, hw_* and *_thermal_* are not)."),
    ("dgxperf_xid_errors_total", "counter", "1", (*_G, "xid"),
     "XID errors seen since the exporter started, by XID code."),
    ("dgxperf_gpu_process_memory_used_bytes", "gauge", "bytes", (*_G, "pid", "process"),
     "GPU memory used by one process (in bytes)."),
    ("dgxperf_gpu_process_cpu_ratio", "gauge", "ratio", (*_G, "pid", "process"),
     "CPU used by one GPU process, all its threads (1 = one core): near 1 with the GPU partly idle is "
     "launch bound."),
    ("dgxperf_host_cpu_utilization_ratio", "gauge", "ratio", _H, "Share of CPU time busy, all cores (0..1)."),
    ("dgxperf_host_iowait_ratio", "gauge", "ratio", _H,
     "Share of CPU time idle while waiting for I/O, all cores (0..1): storage I/O wait."),
    ("dgxperf_host_cpu_steal_ratio", "gauge", "ratio", _H,
     "Share of CPU time a VM's vCPUs were ready but the hypervisor ran others (0..1); Linux guests only."),
    ("dgxperf_host_memory_used_bytes", "gauge", "bytes", _H, "Host memory in use (in bytes)."),
    ("dgxperf_host_memory_total_bytes", "gauge", "bytes", _H, "Host memory (in bytes)."),
    ("dgxperf_host_load1", "gauge", "1", _H, "1-minute load average."),
    ("dgxperf_host_disk_read_bytes_per_second", "gauge", "B/s", (*_H, "disk"),
     "Bytes read from one block device per second."),
    ("dgxperf_host_disk_write_bytes_per_second", "gauge", "B/s", (*_H, "disk"),
     "Bytes written to one block device per second."),
    ("dgxperf_host_disk_busy_ratio", "gauge", "ratio", (*_H, "disk"),
     "Share of time one block device had I/O in flight (0..1, like iostat %util)."),
    ("dgxperf_host_network_receive_bytes_per_second", "gauge", "B/s", (*_H, "interface"),
     "Bytes received by one network interface per second."),
    ("dgxperf_host_network_transmit_bytes_per_second", "gauge", "B/s", (*_H, "interface"),
     "Bytes sent by one network interface per second."),
    ("dgxperf_train_samples_per_second", "gauge", "1/s", _H,
     "Training samples per second (all ranks) of the last window `dgxperf train` logged."),
    ("dgxperf_train_real_tokens_per_second", "gauge", "1/s", _H,
     "Non-padding tokens per second of the last logged training window."),
    ("dgxperf_train_mfu_ratio", "gauge", "ratio", _H,
     "Model FLOP utilisation of the last logged training window, against the GPUs' dense peak (0..1)."),
    ("dgxperf_train_loss", "gauge", "1", _H, "Mean training loss of the last logged window."),
    ("dgxperf_train_step", "gauge", "1", _H, "Optimizer step of the last logged window."),
    ("dgxperf_train_epoch", "gauge", "1", _H, "Epoch (1-based) of the last logged window."),
    ("dgxperf_train_dev_accuracy", "gauge", "ratio", _H, "Dev-set accuracy after the last finished epoch (0..1)."),
    ("dgxperf_exporter_info", "gauge", "1", (*_H, "version", "source"),
     "Always 1; the dgxperf version and the sample source (nvml, recording, ...) as labels."),
    ("dgxperf_exporter_nvml_available", "gauge", "1", _H,
     "1 when GPU metrics are served, 0 when NVML is missing and only host metrics are."),
    ("dgxperf_exporter_sample_age_seconds", "gauge", "s", _H,
     "Seconds since the sampler published the sample this scrape shows (grows when sampling is stuck)."),
    ("dgxperf_exporter_interval_seconds", "gauge", "s", _H, "Sampling interval, --interval (in s)."),
    ("dgxperf_exporter_samples_total", "counter", "1", _H, "Samples taken since the exporter started."),
    ("dgxperf_exporter_sampling_errors_total", "counter", "1", _H,
     "Sampling ticks that failed since the exporter started (the previous sample stays served)."),
    ("dgxperf_exporter_sampling_cpu_seconds_total", "counter", "s", _H,
     "CPU time the sampling thread spent since the exporter started (in s)."),
)
# fmt: on

DCGM_FIELDS: tuple[DcgmField, ...] = tuple(DcgmField(*row) for row in _DCGM_TABLE)
THROTTLE_BITS: dict[str, int] = {name: bit for bit, name in CLOCK_EVENT_REASONS.items()}
_UNKNOWN_REASON = re.compile(r"unknown_0x([0-9a-fA-F]+)")


def exporter_metrics() -> list[MetricInfo]:
    """Every metric the exporter can expose. A metric absent from a sample is absent from a scrape."""
    dcgm = [MetricInfo(f.name, f.type, f.unit, GPU_LABELS, f.help) for f in DCGM_FIELDS]
    return dcgm + [MetricInfo(*row) for row in _OTHER_TABLE]


_INFO: dict[str, MetricInfo] = {m.name: m for m in exporter_metrics()}


# --------------------------------------------------------------------------------------------------
# Sampler state
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TrainState:
    """The last "step" and "epoch" records of a `dgxperf train` metrics.jsonl."""

    step: Mapping[str, Any] | None = None
    epoch: Mapping[str, Any] | None = None


class TrainMetricsTail:
    """Follows ``OUT/metrics.jsonl`` as `dgxperf train` appends to it (like ``tail -F``).

    Reads only the bytes added since the last poll; a partial last line waits for its newline; a file
    that shrinks (``--resume`` truncates it) or is replaced is read again from the start. A line that is
    not JSON is skipped: the writer may be another version of dgxperf.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._inode: int | None = None
        self._partial = b""
        self.state = TrainState()

    def poll(self) -> TrainState:
        try:
            stat = self.path.stat()
        except OSError:
            return self.state  # not written yet: the job may start after the exporter
        if self._inode != stat.st_ino or stat.st_size < self._offset:
            self._offset, self._partial, self._inode = 0, b"", stat.st_ino
            self.state = TrainState()
        if stat.st_size == self._offset:
            return self.state
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except OSError:
            return self.state
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # b"" when the chunk ended with a newline
        step, epoch = self.state.step, self.state.epoch
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("type") == "step":
                step = record
            elif record.get("type") == "epoch":
                epoch = record
        self.state = TrainState(step, epoch)
        return self.state


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Everything a scrape shows, published whole by the sampler thread (never mutated afterwards)."""

    header: Header
    sample: Sample | None
    last_xid: Mapping[int, int]  # gpu index -> last XID code
    xid_counts: Mapping[tuple[int, int], int]  # (gpu index, xid) -> count
    train: TrainState
    published_at: float  # time.monotonic()
    seq: int


def _xid_events(events: Iterable[Mapping[str, Any]]) -> Iterator[tuple[int, int]]:
    """(gpu index, xid) for every XID event of a sample (hw.telemetry: ``{"type": "xid", "gpu", "xid"}``;
    gpu is -1 when NVML could not say which GPU)."""
    for event in events:
        if event.get("type") != "xid":
            continue
        gpu, xid = event.get("gpu"), event.get("xid")
        if isinstance(gpu, int) and isinstance(xid, int) and not isinstance(xid, bool):
            yield gpu, xid


class Sampler:
    """Pulls samples from a Source on a background thread and publishes :class:`Snapshot` objects."""

    def __init__(
        self,
        source: Source,
        interval_s: float,
        train_metrics: Path | None = None,
        *,
        nvml_available: bool = True,
    ) -> None:
        if interval_s <= 0:
            raise ExporterError(f"--interval must be > 0 s, got {interval_s}")
        self.source = source
        self.interval_s = interval_s
        self.nvml_available = nvml_available
        self.header: Header = source.header
        self._tail = TrainMetricsTail(train_metrics) if train_metrics is not None else None
        self._last_xid: dict[int, int] = {}
        self._xid_counts: dict[tuple[int, int], int] = {}
        self.samples_taken = 0
        self.errors = 0
        self.cpu_seconds = 0.0
        self.last_error: str | None = None
        self.ended = False  # a recording without --loop ran out: the last sample stays served
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.snapshot = Snapshot(self.header, None, {}, {}, TrainState(), time.monotonic(), 0)

    def tick(self) -> bool:
        """Take one sample and publish it; False when the source has ended. Runs on the sampler thread."""
        cpu0 = time.thread_time()
        try:
            sample = self.source.next_sample()
        except Exception as exc:  # a failing tick must not kill the exporter: serve the last sample
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.cpu_seconds += time.thread_time() - cpu0
            return True
        if sample is None:
            self.ended = True
            self.cpu_seconds += time.thread_time() - cpu0
            return False
        for gpu, xid in _xid_events(sample.events):
            self._last_xid[gpu] = xid
            self._xid_counts[(gpu, xid)] = self._xid_counts.get((gpu, xid), 0) + 1
        train = self._tail.poll() if self._tail is not None else TrainState()
        self.samples_taken += 1
        self.snapshot = Snapshot(
            self.header,
            sample,
            dict(self._last_xid),
            dict(self._xid_counts),
            train,
            time.monotonic(),
            self.snapshot.seq + 1,
        )
        self.cpu_seconds += time.thread_time() - cpu0
        return True

    def _run(self) -> None:
        next_at = time.monotonic()  # start() took the first sample just now
        while True:
            # Fixed-rate schedule: a slow tick shortens the next wait instead of drifting the clock, and
            # a tick slower than the interval starts the next one at once rather than bunching up.
            next_at = max(next_at + self.interval_s, time.monotonic())
            if self._stop.wait(next_at - time.monotonic()) or not self.tick():
                break

    def start(self) -> None:
        self.tick()  # the first scrape already has data
        self._thread = threading.Thread(target=self._run, name="dgxperf-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
        self.source.close()


# --------------------------------------------------------------------------------------------------
# Collector and exposition
# --------------------------------------------------------------------------------------------------


def _family(name: str) -> Metric:
    info = _INFO[name]
    return Metric(name, info.help, info.type)


def _gpu_labels(info: GpuInfo | None, index: int, hostname: str) -> dict[str, str]:
    # Insertion order is dcgm-exporter's label order; render_text keeps it. A negative index is an XID
    # NVML could not attribute: empty GPU labels, so the alert still fires for the host.
    known = index >= 0
    return {
        "gpu": str(index) if known else "",
        "UUID": info.uuid if info else "",
        "pci_bus_id": info.pci_bus_id if info else "",
        "device": f"nvidia{index}" if known else "",  # DCGM uses the minor number: the index on DGX
        "modelName": info.name if info else "",
        "Hostname": hostname,
    }


def throttle_mask(reasons: Iterable[str]) -> int:
    """NVML's clocks-event bitmask from reason names (inverse of hw.nvml's naming, unknown bits kept)."""
    mask = 0
    for reason in reasons:
        bit = THROTTLE_BITS.get(reason)
        if bit is not None:
            mask |= bit
        elif match := _UNKNOWN_REASON.fullmatch(reason):
            mask |= int(match.group(1), 16)
    return mask


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _rows(value: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``{name: {...}}`` (hw.hoststats' ``disks`` and ``net``) as (name, row) pairs; anything else: none."""
    if isinstance(value, Mapping):
        for name, row in value.items():
            if isinstance(row, Mapping):
                yield str(name), row


class ExporterCollector(Collector):
    """Formats the sampler's current snapshot as metric families; does no I/O and never blocks."""

    def __init__(self, sampler: Sampler, source_name: str) -> None:
        self.sampler = sampler
        self.source_name = source_name

    def collect(self) -> Iterator[Metric]:
        snap = self.sampler.snapshot  # one read: the whole scrape sees one consistent snapshot
        header = snap.header
        host = {"Hostname": header.hostname}
        if snap.sample is not None:
            yield from self._gpu_families(snap, header)
            yield from self._host_families(snap.sample.host, header.hostname)
        yield from self._train_families(snap.train, host)
        yield from self._self_families(snap, host)

    def _gpu_families(self, snap: Snapshot, header: Header) -> Iterator[Metric]:
        sample = snap.sample
        assert sample is not None
        infos = {g.index: g for g in header.gpus}
        gpus: list[tuple[GpuSample, dict[str, str]]] = [
            (g, _gpu_labels(infos.get(g.index), g.index, header.hostname)) for g in sample.gpus
        ]
        if not gpus:
            return
        for field in DCGM_FIELDS:
            family = Metric(field.name, field.help, field.type)
            for gpu, labels in gpus:
                value = gpu.metrics.get(field.key)
                if value is not None:
                    family.add_sample(field.name, labels, value * field.scale)
            if family.samples:
                yield family
        throttle = _family("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
        reasons = _family("dgxperf_throttle_reason")
        xid_last = _family("DCGM_FI_DEV_XID_ERRORS")
        for gpu, labels in gpus:
            throttle.add_sample(throttle.name, labels, float(throttle_mask(gpu.throttle)))
            held = set(gpu.throttle)
            for reason in THROTTLE_BITS:
                reasons.add_sample(reasons.name, {**labels, "reason": reason}, 1.0 if reason in held else 0.0)
            for reason in sorted(held - THROTTLE_BITS.keys()):
                reasons.add_sample(reasons.name, {**labels, "reason": reason}, 1.0)
            xid_last.add_sample(xid_last.name, labels, float(snap.last_xid.get(gpu.index, 0)))
        yield throttle
        yield reasons
        yield xid_last
        by_index = dict((g.index, labels) for g, labels in gpus)
        if snap.xid_counts:
            counts = _family("dgxperf_xid_errors_total")
            for (index, xid), count in sorted(snap.xid_counts.items()):
                labels = by_index.get(index) or _gpu_labels(infos.get(index), index, header.hostname)
                counts.add_sample(counts.name, {**labels, "xid": str(xid)}, float(count))
            yield counts
        procs = _family("dgxperf_gpu_process_memory_used_bytes")
        cpus = _family("dgxperf_gpu_process_cpu_ratio")
        for gpu, labels in gpus:
            for proc in gpu.processes:
                pid = proc.get("pid")
                if pid is None:
                    continue
                process_labels = {**labels, "pid": str(pid), "process": str(proc.get("name", ""))}
                if (used := _number(proc.get("used_bytes"))) is not None:
                    procs.add_sample(procs.name, process_labels, used)
                if (cpu := _number(proc.get("cpu_pct"))) is not None:
                    cpus.add_sample(cpus.name, process_labels, cpu / 100)
        if procs.samples:
            yield procs
        if cpus.samples:
            yield cpus

    def _host_families(self, host: Mapping[str, Any], hostname: str) -> Iterator[Metric]:
        labels = {"Hostname": hostname}
        scalars = (
            ("dgxperf_host_cpu_utilization_ratio", "cpu_util_pct", 0.01),
            ("dgxperf_host_iowait_ratio", "iowait_pct", 0.01),
            ("dgxperf_host_cpu_steal_ratio", "steal_pct", 0.01),
            ("dgxperf_host_memory_used_bytes", "mem_used_bytes", 1.0),
            ("dgxperf_host_memory_total_bytes", "mem_total_bytes", 1.0),
            ("dgxperf_host_load1", "load1", 1.0),
        )
        for name, key, scale in scalars:
            value = _number(host.get(key))
            if value is not None:
                family = _family(name)
                family.add_sample(name, labels, value * scale)
                yield family
        # hw.hoststats: disks {name: {read_bytes_per_s, write_bytes_per_s, busy_pct}},
        # net {iface: {rx_bytes_per_s, tx_bytes_per_s}}; absent on the first read (no rates yet).
        per_row = (
            ("dgxperf_host_disk_read_bytes_per_second", "disks", "disk", "read_bytes_per_s", 1.0),
            ("dgxperf_host_disk_write_bytes_per_second", "disks", "disk", "write_bytes_per_s", 1.0),
            ("dgxperf_host_disk_busy_ratio", "disks", "disk", "busy_pct", 0.01),
            ("dgxperf_host_network_receive_bytes_per_second", "net", "interface", "rx_bytes_per_s", 1.0),
            ("dgxperf_host_network_transmit_bytes_per_second", "net", "interface", "tx_bytes_per_s", 1.0),
        )
        for name, group, label, key, scale in per_row:
            family = _family(name)
            for row_name, row in _rows(host.get(group)):
                value = _number(row.get(key))
                if value is not None:
                    family.add_sample(name, {**labels, label: row_name}, value * scale)
            if family.samples:
                yield family

    def _train_families(self, train: TrainState, labels: dict[str, str]) -> Iterator[Metric]:
        fields: list[tuple[str, Mapping[str, Any] | None, str]] = [
            ("dgxperf_train_samples_per_second", train.step, "samples_per_s"),
            ("dgxperf_train_real_tokens_per_second", train.step, "real_tokens_per_s"),
            ("dgxperf_train_mfu_ratio", train.step, "mfu"),
            ("dgxperf_train_loss", train.step, "loss"),
            ("dgxperf_train_step", train.step, "step"),
            ("dgxperf_train_epoch", train.step, "epoch"),
            ("dgxperf_train_dev_accuracy", train.epoch, "dev_accuracy"),
        ]
        for name, record, key in fields:
            value = _number(record.get(key)) if record is not None else None
            if value is not None:  # mfu is null on CPU runs: absent, never a made-up 0
                family = _family(name)
                family.add_sample(name, labels, value)
                yield family

    def _self_families(self, snap: Snapshot, labels: dict[str, str]) -> Iterator[Metric]:
        sampler = self.sampler
        values: list[tuple[str, float]] = [
            ("dgxperf_exporter_nvml_available", 1.0 if sampler.nvml_available else 0.0),
            ("dgxperf_exporter_sample_age_seconds", max(0.0, time.monotonic() - snap.published_at)),
            ("dgxperf_exporter_interval_seconds", sampler.interval_s),
            ("dgxperf_exporter_samples_total", float(sampler.samples_taken)),
            ("dgxperf_exporter_sampling_errors_total", float(sampler.errors)),
            ("dgxperf_exporter_sampling_cpu_seconds_total", sampler.cpu_seconds),
        ]
        info = _family("dgxperf_exporter_info")
        info.add_sample(info.name, {**labels, "version": __version__, "source": self.source_name}, 1.0)
        yield info
        for name, value in values:
            family = _family(name)
            family.add_sample(name, labels, value)
            yield family


def _escape_label(value: str) -> str:
    # Label values are almost always plain (indices, UUIDs, bus ids): skip the three replaces for them.
    if "\\" not in value and '"' not in value and "\n" not in value:
        return value
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _format_value(value: float) -> str:
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def render_text(families: Iterable[Metric]) -> bytes:
    """Prometheus text format 0.0.4, metric and label names exactly as given (see the module docstring)."""
    out: list[str] = []
    # Each GPU's label dict is shared by ~30 families: format it once per scrape. The dict is kept in
    # the cache beside its text so its id() cannot be reused by another dict during this call.
    formatted: dict[int, tuple[Mapping[str, str], str]] = {}
    for family in families:
        if not family.samples:
            continue  # a metric no GPU could give is absent, with no dangling HELP/TYPE either
        name = family.name
        doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {family.type}\n")
        for sample in family.samples:
            if sample.labels:
                hit = formatted.get(id(sample.labels))
                if hit is None:
                    text = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sample.labels.items())
                    hit = formatted[id(sample.labels)] = (sample.labels, text)
                out.append(f"{sample.name}{{{hit[1]}}} {_format_value(sample.value)}\n")
            else:
                out.append(f"{sample.name} {_format_value(sample.value)}\n")
    return "".join(out).encode()


# --------------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------------


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr: Prometheus scrapes every few seconds."""

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's signature
        pass


def make_app(registry: CollectorRegistry) -> Callable[[WSGIEnvironment, StartResponse], list[bytes]]:
    """``/metrics`` (and ``/``, which points at it); anything else is 404."""

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            body = render_text(registry.collect())
            start_response("200 OK", [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body)))])
            return [body]
        if path == "/":
            body = b'<html><body><h1>dgxperf exporter</h1><a href="/metrics">/metrics</a></body></html>\n'
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: try /metrics\n"]

    return app


def parse_listen(listen: str) -> tuple[str, int]:
    """``:9400``, ``0.0.0.0:9400``, ``127.0.0.1:0``, ``[::1]:9400``, ``localhost:9400`` -> (host, port)."""
    text = listen.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ExporterError(f"--listen {listen!r}: expected [IPv6]:PORT")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise ExporterError(f"--listen {listen!r}: expected ADDR:PORT or :PORT (e.g. :9400)")
    try:
        port = int(port_text)
    except ValueError:
        raise ExporterError(f"--listen {listen!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ExporterError(f"--listen {listen!r}: port must be 0..65535")
    return host or "0.0.0.0", port


def serve(registry: CollectorRegistry, listen: str) -> ThreadingWSGIServer:
    """Bind ``listen`` and return the server (not yet serving); a clear ExporterError if it cannot bind."""
    host, port = parse_listen(listen)
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    except socket.gaierror as exc:
        raise ExporterError(f"--listen {listen!r}: cannot resolve {host!r} ({exc.strerror})") from None

    class Server(ThreadingWSGIServer):
        address_family = family

    try:
        return make_server(host, port, make_app(registry), Server, handler_class=_QuietHandler)
    except OSError as exc:
        where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise ExporterError(
                f"cannot listen on {where}: the address is already in use — is dcgm-exporter (or another "
                f"dgxperf exporter) already running? use --listen :{port + 1 if port else 9401}"
            ) from None
        if exc.errno == errno.EACCES:
            raise ExporterError(
                f"cannot listen on {where}: permission denied (ports below 1024 need root)"
            ) from None
        raise ExporterError(f"cannot listen on {where}: {exc.strerror or exc}") from None


class Exporter:
    """A running exporter: the sampler thread, the collector and the HTTP server (for tests and the CLI)."""

    def __init__(
        self,
        source: Source,
        listen: str = DEFAULT_LISTEN,
        interval_s: float = 1.0,
        train_metrics: Path | None = None,
        *,
        nvml_available: bool = True,
        registry: CollectorRegistry | None = None,
        server: ThreadingWSGIServer | None = None,
    ) -> None:
        """``registry`` and ``server`` (from :func:`serve` over that registry) let a caller bind the port
        before opening the source, as run_exporter does; by default both are made here."""
        self.sampler = Sampler(source, interval_s, train_metrics, nvml_available=nvml_available)
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self.collector = ExporterCollector(self.sampler, source.header.source)
        self.registry.register(self.collector)
        self.server = server if server is not None else serve(self.registry, listen)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); port 0 in --listen picks a free one."""
        host, port = self.server.server_address[:2]
        return host.decode() if isinstance(host, bytes) else str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if host == "0.0.0.0" else "::1"
        return f"http://{host if ':' not in host else f'[{host}]'}:{port}/metrics"

    def start(self) -> Exporter:
        """Sample once, then serve on a background thread (tests); the CLI uses serve_forever()."""
        self.sampler.start()
        self._thread = threading.Thread(
            target=self.server.serve_forever, args=(_POLL_S,), name="dgxperf-http", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.sampler.start()
        self.server.serve_forever(_POLL_S)

    def close(self) -> None:
        if self._thread is not None:
            self.server.shutdown()
            self._thread.join(timeout=5)
        self.server.server_close()
        self.sampler.stop()

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def scrape(self) -> bytes:
        """The body of /metrics, without HTTP (tests, `--once`-style checks)."""
        return render_text(self.registry.collect())


# --------------------------------------------------------------------------------------------------
# Entry point and measurement
# --------------------------------------------------------------------------------------------------


def run_exporter(
    source_factory: Callable[[], Source],
    listen: str,
    interval_s: float,
    train_metrics: Path | None,
    console: Printer,
    *,
    on_ready: Callable[[Exporter], None] | None = None,
) -> int:
    """`dgxperf exporter`: serve until SIGINT/SIGTERM. Returns the exit code: 0, or 2 when it cannot start
    (bad --listen or --interval, the port in use, an unreadable recording), with one line on ``console``
    (give it a stderr console) and no traceback.

    ``source_factory()`` makes the sample source: ``LiveSource(interval_s)`` -- which, without NVML, has
    no GPUs and says why (``nvml_available``, ``nvml_error``); the exporter then serves host metrics and
    says so once -- or ``RecordedSource(path, speed=1.0, loop=True)`` to serve a recording.
    ``on_ready(exporter)`` is called once the port is bound (tests stop it with exporter.server.shutdown).
    """
    # Bind first: a busy port or a typo in --listen fails in one line, before NVML is opened.
    registry = CollectorRegistry(auto_describe=False)
    try:
        if not interval_s > 0:
            raise ExporterError(f"--interval must be > 0 s, got {interval_s}")
        server = serve(registry, listen)
    except ExporterError as exc:
        console.print(f"error: {exc}", highlight=False)
        return 2
    try:
        source = source_factory()
    except (RecordingError, OSError, ValueError) as exc:
        server.server_close()
        console.print(f"error: {exc}", highlight=False)
        return 2
    header = source.header
    live_nvml = getattr(source, "nvml_available", None)  # LiveSource only
    nvml_available = bool(header.gpus) and live_nvml is not False
    if not nvml_available:
        why = getattr(source, "nvml_error", None) or (
            "no GPU answers through NVML" if live_nvml is not None else "the recording has no GPU"
        )
        console.print(
            f"warning: NVML is not available ({why}); serving host metrics only "
            "(dgxperf_exporter_nvml_available 0)",
            highlight=False,
        )
    for warning in source.warnings:
        if warning not in header.notes and "NVML is not available" not in warning:  # said just above
            console.print(f"warning: {warning}", highlight=False)
    warned = len(source.warnings)
    exporter = Exporter(
        source,
        listen,
        interval_s,
        train_metrics,
        nvml_available=nvml_available,
        registry=registry,
        server=server,
    )
    host, port = exporter.address
    console.print(
        f"dgxperf exporter: {len(header.gpus)} GPU(s) on {header.hostname or 'this host'}, sampling every "
        f"{interval_s:g} s ({header.source}); serving http://{host}:{port}/metrics — Ctrl-C stops",
        highlight=False,
    )
    previous = _install_sigterm(exporter)
    if on_ready is not None:
        on_ready(exporter)
    try:
        exporter.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        exporter.server.server_close()
        exporter.sampler.stop()
    # Problems met while serving, said once at the end instead of on every tick.
    later = source.warnings[warned:]
    if later:
        console.print(f"note: {len(later)} problem(s) while sampling; first: {later[0]}", highlight=False)
    if exporter.sampler.last_error:
        console.print(
            f"note: {exporter.sampler.errors} sampling tick(s) failed; last: {exporter.sampler.last_error}",
            highlight=False,
        )
    return 0


def _install_sigterm(exporter: Exporter) -> Any:
    """SIGTERM (systemd, docker stop) stops serving like Ctrl-C does; only the main thread may install it."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, frame: FrameType | None) -> None:
        # shutdown() blocks until serve_forever returns, and serve_forever runs on this very thread.
        threading.Thread(target=exporter.server.shutdown, daemon=True).start()

    return signal.signal(signal.SIGTERM, stop)


def measure_scrape_latency(url: str, n: int = 500, timeout_s: float = 5.0) -> dict[str, float]:
    """GET ``url`` ``n`` times from the calling thread and time each one whole: connect, request, read the
    full body (a new connection each time: our server speaks HTTP/1.0). Returns p50, p99 and max in
    seconds (nearest-rank quantiles) and n. A failed or non-200 GET raises ExporterError."""
    if n < 1:
        raise ValueError("n must be >= 1")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None:
        raise ValueError(f"not an http:// URL: {url!r}")
    path = parts.path or "/"
    times: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout_s)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
        finally:
            conn.close()
        times.append(time.perf_counter() - started)
        if response.status != 200:
            raise ExporterError(f"GET {url}: HTTP {response.status}")
    times.sort()

    def quantile(q: float) -> float:
        return times[min(len(times) - 1, max(0, math.ceil(q * len(times)) - 1))]

    return {"p50": quantile(0.50), "p99": quantile(0.99), "max": times[-1], "n": float(n)}
