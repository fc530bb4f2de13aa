"""Live NVML telemetry for `dgxperf monitor` and `exporter`: one reader for every GPU of the host.

:class:`NvmlTelemetry` opens NVML once (``nvmlInit`` costs tens of milliseconds and a driver round trip,
far too much to pay every tick) and reads every metric of :data:`dgxperf.samples.GPU_METRICS` a
GPU can give. Every plain read goes through :meth:`NvmlSession.query`, so an unsupported or failing
metric is an *absent key* in the tick's :class:`GpuSample`, never an exception and never a made-up zero.

Where each metric comes from (see schema.py for units and DCGM/nvidia-smi names):

- plain NVML each tick: utilisation (gpu, memory copy), memory info (v2 when the driver has it, for
  ``fb_reserved_bytes``), power and the enforced limit (mW -> W), total energy (mJ -> J), GPU temperature,
  HBM temperature (field ``NVML_FI_DEV_MEMORY_TEMP``), SM/memory clocks, clocks-event (throttle) reasons
  as names (hw.nvml's table), volatile ECC counts, pending row remaps, PCIe replay counter;
- GPM (Hopper+) through :class:`dgxperf.hw.nvml.GpmSampler`: one ``read()`` a tick gives the metrics
  over the interval since the previous tick, the way NVML documents GPM (two samples, metrics between);
  MiB/s rates become bytes/s;
- PCIe rates fall back to ``nvmlDeviceGetPcieThroughput`` when GPM cannot give them;
- compute processes (pid, name, used bytes) every ``processes_every`` ticks (see :class:`NvmlTelemetry`),
  each with its CPU share since the previous process read (``cpu_pct``, 100 = one core; the busiest
  thread's share and name) from ``/proc`` (:mod:`dgxperf.hw.proccpu`);
- XID events from an NVML event set, drained without blocking each tick (:meth:`drain_events`).

A query that answers ``NVML_ERROR_NOT_SUPPORTED`` (or that this nvidia-ml-py lacks) once is not asked
again for that GPU: the answer cannot change while the driver is loaded, and skipping it keeps the
per-tick cost down on GPUs that lack many features. Other errors (e.g. a transient ``UNKNOWN``) are
retried on the next tick.

Layering note: this module returns :mod:`dgxperf.samples` dataclasses (pure data, no behaviour)
so that the live and recorded sources hand consumers the same types.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dgxperf.hw.nvml import (
    CLOCK_EVENT_REASONS,
    GPM_METRICS,
    GpmSampler,
    NvmlSession,
    error_text,
    load_pynvml,
)
from dgxperf.hw.proccpu import ProcessCpu
from dgxperf.results import NA
from dgxperf.samples import GpuInfo, GpuSample

MIB = 1024 * 1024
KIB = 1024

# GPM metric (hw.nvml.GPM_METRICS name) -> (schema metric, factor to the schema's unit).
GPM_TO_SCHEMA: dict[str, tuple[str, float]] = {
    "sm_util": ("sm_active_pct", 1.0),
    "sm_occupancy": ("sm_occupancy_pct", 1.0),
    "any_tensor_util": ("tensor_active_pct", 1.0),
    "hmma_tensor_util": ("hmma_active_pct", 1.0),
    "dram_bw_util": ("dram_active_pct", 1.0),
    "fp64_util": ("fp64_active_pct", 1.0),
    "fp32_util": ("fp32_active_pct", 1.0),
    "fp16_util": ("fp16_active_pct", 1.0),
    "pcie_tx_mib_s": ("pcie_tx_bytes_per_s", MIB),
    "pcie_rx_mib_s": ("pcie_rx_bytes_per_s", MIB),
    "nvlink_tx_mib_s": ("nvlink_tx_bytes_per_s", MIB),
    "nvlink_rx_mib_s": ("nvlink_rx_bytes_per_s", MIB),
}
assert set(GPM_TO_SCHEMA) == set(GPM_METRICS), "every GPM metric hw.nvml samples needs a schema name"

# nvmlValueType_t -> the member of the c_nvmlValue_t union that holds the value.
FIELD_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}

# How many XID events one tick drains at most: a guard against a GPU that floods events (a tick must
# stay cheap); the rest wait in NVML's queue for the next tick.
MAX_EVENTS_PER_TICK = 64

MAX_PROBLEMS = 50

# Errors that mean "this GPU or library will never answer this query": cached, not asked again.
_PERMANENT = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND", "not in this nvidia-ml-py")


def throttle_names(mask: int) -> tuple[str, ...]:
    """Clocks-event reason bitmask -> nvidia-smi's names (hw.nvml's table); unknown bits kept as hex."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return tuple(names)


def _number(value: Any) -> float | None:
    """A finite number or None: NVML never yields NaN, but a broken struct must not poison a recording."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _field_value(answer: Any, lib: Any) -> float | NA:
    """One entry of nvmlDeviceGetFieldValues (as plain data): its value, or NA with the per-field error."""
    if not isinstance(answer, list) or not answer or not isinstance(answer[0], Mapping):
        return NA("no field value returned")
    field = answer[0]
    status = field.get("nvmlReturn", 0)
    if status != 0:
        if status == getattr(lib, "NVML_ERROR_NOT_SUPPORTED", 3):
            return NA("NVML_ERROR_NOT_SUPPORTED: field not supported")
        return NA(f"NVML return {status}")
    member = FIELD_VALUE_MEMBERS.get(int(field.get("valueType", -1)))
    value = field.get("value", {})
    number = _number(value.get(member)) if member and isinstance(value, Mapping) else None
    return NA("unknown field value type") if number is None else number


@dataclasses.dataclass(frozen=True)
class _Query:
    """One plain NVML read: ``fn(handle, *args)`` turned into schema metrics by ``convert``."""

    key: str
    fn: str
    args: tuple[Any, ...]
    convert: Callable[[Any], dict[str, float | None]]


def _plain_queries(lib: Any) -> tuple[_Query, ...]:
    """The per-tick plain NVML reads, as a table (constants resolved once against this nvidia-ml-py)."""

    def const(name: str, default: int) -> int:
        return int(getattr(lib, name, default))

    def scaled(metric: str, factor: float) -> Callable[[Any], dict[str, float | None]]:
        return lambda v: {metric: None if (n := _number(v)) is None else round(n * factor, 3)}

    def memory_temp(v: Any) -> dict[str, float | None]:
        value = _field_value(v, lib)
        # GPUs without an HBM sensor answer 0 rather than an error (nvidia-smi shows N/A for them); a real
        # HBM temperature of 0 C is impossible on a running GPU, so 0 counts as absent.
        return {"temp_mem_c": None if isinstance(value, NA) or value == 0 else value}

    def remapped(v: Any) -> dict[str, float | None]:
        # nvmlDeviceGetRemappedRows -> (correctable, uncorrectable, pending, failure)
        pending = _number(v[2]) if isinstance(v, list) and len(v) >= 3 else None
        return {"remapped_pending": pending}

    def utilization(v: Any) -> dict[str, float | None]:
        if not isinstance(v, Mapping):
            return {}
        return {"gpu_util_pct": _number(v.get("gpu")), "mem_copy_util_pct": _number(v.get("memory"))}

    corrected = const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    uncorrected = const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    volatile = const("NVML_VOLATILE_ECC", 0)
    return (
        _Query("utilization", "nvmlDeviceGetUtilizationRates", (), utilization),
        _Query("power", "nvmlDeviceGetPowerUsage", (), scaled("power_w", 1e-3)),  # mW
        _Query("power_limit", "nvmlDeviceGetEnforcedPowerLimit", (), scaled("power_limit_w", 1e-3)),  # mW
        _Query("energy", "nvmlDeviceGetTotalEnergyConsumption", (), scaled("energy_j", 1e-3)),  # mJ
        _Query(
            "temp_gpu",
            "nvmlDeviceGetTemperature",
            (const("NVML_TEMPERATURE_GPU", 0),),
            scaled("temp_gpu_c", 1.0),
        ),
        _Query(
            "temp_mem",
            "nvmlDeviceGetFieldValues",
            ([const("NVML_FI_DEV_MEMORY_TEMP", 82)],),
            memory_temp,
        ),
        _Query(
            "sm_clock", "nvmlDeviceGetClockInfo", (const("NVML_CLOCK_SM", 1),), scaled("sm_clock_mhz", 1.0)
        ),
        _Query(
            "mem_clock", "nvmlDeviceGetClockInfo", (const("NVML_CLOCK_MEM", 2),), scaled("mem_clock_mhz", 1.0)
        ),
        _Query(
            "ecc_sbe",
            "nvmlDeviceGetTotalEccErrors",
            (corrected, volatile),
            scaled("ecc_sbe_volatile", 1.0),
        ),
        _Query(
            "ecc_dbe",
            "nvmlDeviceGetTotalEccErrors",
            (uncorrected, volatile),
            scaled("ecc_dbe_volatile", 1.0),
        ),
        _Query("remapped", "nvmlDeviceGetRemappedRows", (), remapped),
        _Query("pcie_replay", "nvmlDeviceGetPcieReplayCounter", (), scaled("pcie_replay", 1.0)),
    )


@dataclasses.dataclass
class _Gpu:
    """Per-GPU state kept between ticks."""

    index: int
    handle: Any
    info: GpuInfo
    gpm: bool = False
    unsupported: set[str] = dataclasses.field(default_factory=set)
    memory_v2: bool = True
    processes: tuple[Mapping[str, Any], ...] = ()


class NvmlTelemetry:
    """Every GPU of the host, read once a tick. Use as a context manager; :meth:`close` shuts NVML down.

    ``available`` is False (with ``error``, the NVML error) when NVML cannot be initialised: then
    :meth:`header_gpus` and :meth:`read` return no GPUs, so a caller serves host metrics only.

    Processes: ``nvmlDeviceGetComputeRunningProcesses`` makes the driver walk every context on the GPU
    (and we read ``/proc/<pid>/comm`` for names), so it is the costliest query of a tick; it runs every
    ``processes_every`` ticks (first tick included) and the list is repeated in between: a process list
    at most ``processes_every`` intervals old is plenty for "who holds this GPU's memory".
    """

    def __init__(self, lib: Any = None, *, processes_every: int = 5, root: Path = Path("/")) -> None:
        if processes_every < 1:
            raise ValueError(f"processes_every must be >= 1, got {processes_every}")
        self.processes_every = processes_every
        self.root = root
        self.available = False
        self.error: str | None = None
        self.problems: list[str] = []  # non-fatal: a GPU that could not be opened, GPM or events failing
        self.ticks = 0
        self._stack = contextlib.ExitStack()
        self._nv: NvmlSession | None = None
        self._gpus: list[_Gpu] = []
        self._gpm: GpmSampler | None = None
        self._event_set: Any = None
        self._queries: tuple[_Query, ...] = ()
        self._cpu = ProcessCpu(root)
        self._open(lib)

    # ------------------------------------------------------------------------------------------ setup

    def _problem(self, text: str) -> None:
        # A failure that repeats every tick is reported once; the list stays small over days of sampling.
        if text not in self.problems and len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    def _open(self, lib: Any) -> None:
        if lib is None:
            loaded = load_pynvml()
            if isinstance(loaded, NA):
                self.error = loaded.reason
                return
            lib = loaded
        try:
            lib.nvmlInit()
        except lib.NVMLError as exc:
            self.error = error_text(lib, exc)
            return
        except OSError as exc:  # a broken libnvml.so
            self.error = f"NVML could not be loaded: {exc}"
            return
        self._stack.callback(self._shutdown, lib)
        nv = NvmlSession(lib)
        self._nv = nv
        self.available = True
        self._queries = _plain_queries(lib)
        count = nv.query("nvmlDeviceGetCount")
        if isinstance(count, NA):
            self.available = False
            self.error = count.reason
            return
        for index in range(int(count)):
            # One GPU that cannot be opened (fallen off the bus) must not hide the others.
            try:
                handle = lib.nvmlDeviceGetHandleByIndex(index)
            except lib.NVMLError as exc:
                self._problem(f"GPU {index}: {error_text(lib, exc)}")
                continue
            self._gpus.append(_Gpu(index, handle, self._info(nv, handle, index)))
        self._open_gpm(nv)
        self._open_events(nv)

    @staticmethod
    def _info(nv: NvmlSession, handle: Any, index: int) -> GpuInfo:
        name = nv.query("nvmlDeviceGetName", handle)
        uuid = nv.query("nvmlDeviceGetUUID", handle)
        pci = nv.query("nvmlDeviceGetPciInfo", handle)
        bus_id = "" if isinstance(pci, NA) else str(pci.get("busId", pci.get("busIdLegacy", "")))
        return GpuInfo(
            index,
            "" if isinstance(name, NA) else str(name),
            "" if isinstance(uuid, NA) else str(uuid),
            bus_id,
        )

    def _open_gpm(self, nv: NvmlSession) -> None:
        for gpu in self._gpus:
            support = nv.query("nvmlGpmQueryDeviceSupport", gpu.handle)
            gpu.gpm = isinstance(support, Mapping) and bool(support.get("isSupportedDevice"))
        handles = [g.handle for g in self._gpus if g.gpm]
        if not handles:
            return
        self._gpm = GpmSampler(nv, handles)
        try:
            # Prime now so the first tick's metrics cover the first interval, not a zero-length window.
            self._gpm.prime()
        except Exception as exc:  # e.g. a ctypes layout this nvidia-ml-py disagrees on: report, go without
            self._disable_gpm(f"GPM priming failed: {type(exc).__name__}: {exc}")

    def _disable_gpm(self, problem: str) -> None:
        self._problem(problem)
        if self._gpm is not None:
            with contextlib.suppress(Exception):
                self._gpm.close()
        self._gpm = None
        for gpu in self._gpus:
            gpu.gpm = False

    def _open_events(self, nv: NvmlSession) -> None:
        """One event set for XID (critical error) events of every GPU that supports them."""
        lib = nv.lib
        xid = int(getattr(lib, "nvmlEventTypeXidCriticalError", 0x8))
        try:
            event_set = lib.nvmlEventSetCreate()
        except (lib.NVMLError, AttributeError) as exc:
            self._problem(f"no XID events: nvmlEventSetCreate: {error_text(lib, exc)}")
            return
        registered = 0
        for gpu in self._gpus:
            supported = nv.query("nvmlDeviceGetSupportedEventTypes", gpu.handle)
            if isinstance(supported, NA) or not int(supported) & xid:
                continue
            try:
                lib.nvmlDeviceRegisterEvents(gpu.handle, xid, event_set)
                registered += 1
            except lib.NVMLError as exc:  # e.g. not permitted in some containers / VMs
                self._problem(f"GPU {gpu.index}: no XID events: {error_text(lib, exc)}")
        if registered:
            self._event_set = event_set
            self._stack.callback(self._free_events, lib, event_set)
        else:
            with contextlib.suppress(lib.NVMLError):
                lib.nvmlEventSetFree(event_set)

    # ------------------------------------------------------------------------------------------- reads

    def header_gpus(self) -> list[GpuInfo]:
        return [g.info for g in self._gpus]

    def read(self) -> list[GpuSample]:
        """One tick: every GPU's metrics (absent where unsupported), throttle names and processes."""
        if self._nv is None or not self._gpus:
            return []
        gpm = self._read_gpm()
        want_processes = self.ticks % self.processes_every == 0
        self.ticks += 1
        samples = []
        for gpu in self._gpus:
            try:
                samples.append(self._read_gpu(self._nv, gpu, gpm.get(gpu.index, {}), want_processes))
            except Exception as exc:  # a bug or library mismatch in one query must not stop the monitor
                self._problem(f"GPU {gpu.index}: read failed: {type(exc).__name__}: {exc}")
                samples.append(GpuSample(gpu.index, {}))
        if want_processes:
            self._add_process_cpu(samples)
        return samples

    def _add_process_cpu(self, samples: list[GpuSample]) -> None:
        """Each process's CPU share since the previous process read, sampled once for all GPUs' pids (a
        process on two GPUs is read once) so every rate covers the same interval."""
        pids = {int(p["pid"]) for sample in samples for p in sample.processes}
        try:
            cpu = self._cpu.sample(sorted(pids))
        except Exception as exc:  # /proc in an unexpected shape must not stop the monitor
            self._problem(f"process CPU read failed: {type(exc).__name__}: {exc}")
            return
        if not cpu:
            return
        by_index = {}
        for gpu in self._gpus:
            gpu.processes = tuple(dict(p) | cpu.get(int(p["pid"]), {}) for p in gpu.processes)
            by_index[gpu.index] = gpu.processes
        for n, sample in enumerate(samples):
            if sample.processes:
                samples[n] = dataclasses.replace(
                    sample, processes=by_index.get(sample.index, sample.processes)
                )

    def _read_gpm(self) -> dict[int, dict[str, float]]:
        if self._gpm is None:
            return {}
        try:
            results = self._gpm.read()
        except Exception as exc:  # see _open_gpm
            self._disable_gpm(f"GPM read failed: {type(exc).__name__}: {exc}")
            return {}
        out: dict[int, dict[str, float]] = {}
        for gpu, result in zip((g for g in self._gpus if g.gpm), results, strict=False):
            metrics: dict[str, float] = {}
            if isinstance(result, Mapping):
                for name, value in result.items():
                    schema_name, factor = GPM_TO_SCHEMA[name]
                    if (number := _number(value)) is not None:  # per-metric NA -> absent
                        metrics[schema_name] = round(number * factor, 3)
            out[gpu.index] = metrics
        return out

    def _ask(self, nv: NvmlSession, gpu: _Gpu, key: str, fn: str, *args: Any) -> Any:
        """query() with the per-GPU cache of permanently unsupported queries."""
        if key in gpu.unsupported:
            return NA("not supported")
        answer = nv.query(fn, gpu.handle, *args)
        if isinstance(answer, NA) and any(p in answer.reason for p in _PERMANENT):
            gpu.unsupported.add(key)
        return answer

    def _read_gpu(
        self, nv: NvmlSession, gpu: _Gpu, gpm: Mapping[str, float], want_processes: bool
    ) -> GpuSample:
        metrics: dict[str, float] = {}
        for query in self._queries:
            answer = self._ask(nv, gpu, query.key, query.fn, *query.args)
            if isinstance(answer, NA):
                continue
            for name, value in query.convert(answer).items():
                if value is not None:
                    metrics[name] = value
        metrics.update(self._memory(nv, gpu))
        metrics.update(gpm)
        if "pcie_tx_bytes_per_s" not in gpm or "pcie_rx_bytes_per_s" not in gpm:
            metrics.update(self._pcie_throughput(nv, gpu))
        mask = nv.first(
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
            gpu.handle,
        )
        throttle = throttle_names(int(mask)) if _number(mask) is not None else ()
        if want_processes:
            gpu.processes = self._processes(nv, gpu)
        return GpuSample(gpu.index, metrics, throttle, gpu.processes)

    def _memory(self, nv: NvmlSession, gpu: _Gpu) -> dict[str, float]:
        lib = nv.lib
        answer: Any = NA("not asked")
        version = getattr(lib, "nvmlMemory_v2", None)
        if gpu.memory_v2 and version is not None:
            # v2 also reports the memory the driver reserves (what nvidia-smi shows as "Reserved").
            answer = nv.query("nvmlDeviceGetMemoryInfo", gpu.handle, version)
            if isinstance(answer, NA):
                gpu.memory_v2 = False  # an older driver: v1 from now on
        if isinstance(answer, NA):
            answer = self._ask(nv, gpu, "memory", "nvmlDeviceGetMemoryInfo")
        if not isinstance(answer, Mapping):
            return {}
        out = {}
        for key, metric in (
            ("used", "fb_used_bytes"),
            ("free", "fb_free_bytes"),
            ("reserved", "fb_reserved_bytes"),
        ):
            if (number := _number(answer.get(key))) is not None:
                out[metric] = number
        return out

    def _pcie_throughput(self, nv: NvmlSession, gpu: _Gpu) -> dict[str, float]:
        """PCIe rates without GPM. NVML samples these counters over a 20 ms window and reports KB/s (1024
        bytes, as nvitop reads them): a short glimpse, not an average over the tick, so they are noisy."""
        lib = nv.lib
        out = {}
        for metric, counter in (
            ("pcie_tx_bytes_per_s", int(getattr(lib, "NVML_PCIE_UTIL_TX_BYTES", 0))),
            ("pcie_rx_bytes_per_s", int(getattr(lib, "NVML_PCIE_UTIL_RX_BYTES", 1))),
        ):
            answer = self._ask(nv, gpu, f"pcie_throughput_{counter}", "nvmlDeviceGetPcieThroughput", counter)
            if (number := _number(answer)) is not None:
                out[metric] = number * KIB
        return out

    def _processes(self, nv: NvmlSession, gpu: _Gpu) -> tuple[Mapping[str, Any], ...]:
        answer = self._ask(nv, gpu, "processes", "nvmlDeviceGetComputeRunningProcesses")
        if not isinstance(answer, list):
            return ()
        procs = []
        for proc in answer:
            if not isinstance(proc, Mapping) or proc.get("pid") is None:
                continue
            pid = int(proc["pid"])
            entry: dict[str, Any] = {"pid": pid, "name": self._process_name(pid)}
            if (used := _number(proc.get("usedGpuMemory"))) is not None:
                entry["used_bytes"] = used
            procs.append(entry)
        return tuple(procs)

    def _process_name(self, pid: int) -> str:
        try:
            return (self.root / "proc" / str(pid) / "comm").read_text().strip()
        except OSError:
            return ""  # another container's process, or it just exited: the pid still says who

    def drain_events(self) -> list[dict[str, Any]]:
        """XID events since the last call, without blocking (``nvmlEventSetWait_v2(set, 0)``).

        NVML events carry no timestamp, so ``t`` is when this tick drained them (at most one interval late).
        """
        if self._event_set is None or self._nv is None:
            return []
        lib = self._nv.lib
        wait = getattr(lib, "nvmlEventSetWait_v2", None) or lib.nvmlEventSetWait
        timeout = getattr(lib, "NVML_ERROR_TIMEOUT", 10)
        events: list[dict[str, Any]] = []
        for _ in range(MAX_EVENTS_PER_TICK):
            try:
                data = wait(self._event_set, 0)
            except lib.NVMLError as exc:
                if getattr(exc, "value", None) != timeout:  # TIMEOUT just means "no event waiting"
                    self._problem(f"XID event wait failed: {error_text(lib, exc)}")
                break
            index = self._nv.query("nvmlDeviceGetIndex", data.device)
            events.append(
                {
                    "type": "xid",
                    "gpu": -1 if isinstance(index, NA) else int(index),
                    "xid": int(data.eventData),
                    "t": round(time.time(), 3),
                }
            )
        return events

    # --------------------------------------------------------------------------------------- lifecycle

    @staticmethod
    def _shutdown(lib: Any) -> None:
        with contextlib.suppress(lib.NVMLError):
            lib.nvmlShutdown()

    @staticmethod
    def _free_events(lib: Any, event_set: Any) -> None:
        with contextlib.suppress(lib.NVMLError):
            lib.nvmlEventSetFree(event_set)

    def close(self) -> None:
        if self._gpm is not None:
            with contextlib.suppress(Exception):
                self._gpm.close()
            self._gpm = None
        self._event_set = None
        self._nv = None
        self._stack.close()  # frees the event set, then shuts NVML down (callbacks run in reverse)

    def __enter__(self) -> NvmlTelemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
