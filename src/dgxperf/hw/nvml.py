"""NVML: one query helper, the per-GPU readings doctor judges, and a GPM sampler.

Habits copied from nvitop's ``libnvml.nvmlQuery``: every call goes through :meth:`NvmlSession.query`,
which turns an unsupported or failing query into :class:`~dgxperf.results.NA` carrying the NVML error
name, so callers never see an exception. dgxperf only reads: no NVML setter is ever called here
(persistence, power limits, clocks, MIG, GPM streaming all stay as the owner set them).

Readings per GPU (unit; the ``nvidia-smi`` equivalent):

=========================  ==========================================  ==========================================
key                        unit                                        nvidia-smi
=========================  ==========================================  ==========================================
name, uuid, pci_bus_id     text                                        ``-q`` Product Name, GPU UUID, Bus Id
compute_capability         [major, minor]                              ``--query-gpu=compute_cap``
memory_total/used_bytes    bytes                                       ``--query-gpu=memory.total,memory.used``
persistence_mode           0/1                                         ``--query-gpu=persistence_mode``
power_limit_w              W (enforced); default/min/max likewise      ``-q -d POWER``
clocks_event_reasons       list of names (bitmask in *_mask)           ``-q -d PERFORMANCE``
ecc_mode_current/pending   0/1                                         ``-q -d ECC``
ecc_*_uncorrected/...      counts (volatile since boot / aggregate)    ``-q -d ECC``
remapped_rows              dict (correctable, uncorrectable, pending)  ``-q -d ROW_REMAPPER``
pcie_gen/width_*           generation / lanes (current, max)           ``-q`` GPU Link Info
mig_mode_current/pending   0/1                                         ``--query-gpu=mig.mode.current``
compute_mode               name                                        ``--query-gpu=compute_mode``
processes                  [{pid, name, used_bytes}]                   ``--query-compute-apps``
nvlinks                    [{link, active, remote_bus_id, remote}]     ``nvlink -s``
gpm                        {metric: value} (% or MiB/s)                ``dmon --gpm-metrics`` (GPM, Hopper+)
=========================  ==========================================  ==========================================
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType
from typing import Any

from dgxperf.results import NA

# NVML's clocks-event (throttle) reason bits, named as nvidia-smi names them.
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}

# nvmlDeviceGetTopologyCommonAncestor levels, in nvidia-smi topo -m's words.
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

ARCHITECTURES = {
    2: "kepler",
    3: "maxwell",
    4: "pascal",
    5: "volta",
    6: "turing",
    7: "ampere",
    8: "ada",
    9: "hopper",
    10: "blackwell",
}

# GPM metric ids (nvmlGpmMetricId_t) dgxperf reads, with their names and units.
GPM_METRICS: dict[str, tuple[int, str]] = {
    "sm_util": (2, "%"),
    "sm_occupancy": (3, "%"),
    "any_tensor_util": (5, "%"),
    "hmma_tensor_util": (7, "%"),
    "dram_bw_util": (10, "%"),
    "fp64_util": (11, "%"),
    "fp32_util": (12, "%"),
    "fp16_util": (13, "%"),
    "pcie_tx_mib_s": (20, "MiB/s"),
    "pcie_rx_mib_s": (21, "MiB/s"),
    "nvlink_rx_mib_s": (60, "MiB/s"),
    "nvlink_tx_mib_s": (61, "MiB/s"),
}


def load_pynvml() -> ModuleType | NA:
    try:
        import pynvml
    except ImportError as exc:
        return NA(f"nvidia-ml-py is not installed ({exc})")
    module: ModuleType = pynvml
    return module


def error_text(lib: Any, exc: BaseException) -> str:
    """``NVML_ERROR_NOT_SUPPORTED: Not Supported`` from an NVMLError."""
    code = getattr(exc, "value", None)
    name = None
    if code is not None:
        for attr in dir(lib):
            if attr.startswith("NVML_ERROR_") and getattr(lib, attr) == code:
                name = attr
                break
    message = str(exc) or type(exc).__name__
    return f"{name}: {message}" if name else message


def plain(value: Any) -> Any:
    """NVML answers (ctypes structs, arrays, bytes) as plain Python values."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, ctypes.Array):
        return [plain(v) for v in value]
    fields = getattr(value, "_fields_", None)
    if fields is not None:
        return {name: plain(getattr(value, name)) for name, *_ in fields}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "__dict__"):
        return {k: plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return value


class NvmlSession:
    """An initialised NVML library. Every read goes through :meth:`query`."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def query(self, fn_name: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``lib.<fn_name>``; an NVML error or a function this library lacks becomes NA."""
        fn = getattr(self.lib, fn_name, None)
        if fn is None:
            return NA(f"{fn_name} is not in this nvidia-ml-py")
        try:
            return plain(fn(*args, **kwargs))
        except self.lib.NVMLError as exc:
            return NA(error_text(self.lib, exc))

    def first(self, names: Sequence[str], *args: Any) -> Any:
        """The first of several spellings of one query that answers (NVML renamed some over time)."""
        result: Any = NA("no query given")
        for name in names:
            result = self.query(name, *args)
            if not isinstance(result, NA) or "not in this nvidia-ml-py" not in result.reason:
                return result
        return result

    def handles(self) -> list[Any] | NA:
        count = self.query("nvmlDeviceGetCount")
        if isinstance(count, NA):
            return count
        handles = []
        for index in range(int(count)):
            try:
                handles.append(self.lib.nvmlDeviceGetHandleByIndex(index))
            except self.lib.NVMLError as exc:
                return NA(f"GPU {index}: {error_text(self.lib, exc)}")
        return handles


@contextmanager
def nvml_session(lib: Any = None) -> Iterator[NvmlSession | NA]:
    """Yield an initialised session, or NA with the NVML init error (no driver, no library...)."""
    if lib is None:
        loaded = load_pynvml()
        if isinstance(loaded, NA):
            yield loaded
            return
        lib = loaded
    try:
        lib.nvmlInit()
    except lib.NVMLError as exc:
        yield NA(error_text(lib, exc))
        return
    except OSError as exc:  # pragma: no cover - a broken libnvml.so
        yield NA(f"NVML could not be loaded: {exc}")
        return
    try:
        yield NvmlSession(lib)
    finally:
        with suppress(lib.NVMLError):
            lib.nvmlShutdown()


def _watts(milliwatts: Any) -> Any:
    return milliwatts if isinstance(milliwatts, NA) else round(milliwatts / 1000.0, 3)


def _reason_names(mask: Any) -> Any:
    if isinstance(mask, NA):
        return mask
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def read_gpu(nv: NvmlSession, handle: Any, index: int) -> dict[str, Any]:
    """Every per-GPU reading doctor judges, each a value or NA."""
    lib = nv.lib
    q = nv.query
    gpu: dict[str, Any] = {"index": index}
    gpu["name"] = q("nvmlDeviceGetName", handle)
    gpu["uuid"] = q("nvmlDeviceGetUUID", handle)
    pci = q("nvmlDeviceGetPciInfo", handle)
    gpu["pci_bus_id"] = pci if isinstance(pci, NA) else pci.get("busId", pci.get("busIdLegacy"))
    gpu["serial"] = q("nvmlDeviceGetSerial", handle)
    gpu["vbios_version"] = q("nvmlDeviceGetVbiosVersion", handle)
    arch = q("nvmlDeviceGetArchitecture", handle)
    gpu["architecture"] = arch if isinstance(arch, NA) else ARCHITECTURES.get(arch, f"unknown ({arch})")
    gpu["compute_capability"] = q("nvmlDeviceGetCudaComputeCapability", handle)
    gpu["virtualization_mode"] = q("nvmlDeviceGetVirtualizationMode", handle)

    memory = q("nvmlDeviceGetMemoryInfo", handle)
    gpu["memory_total_bytes"] = memory if isinstance(memory, NA) else memory["total"]
    gpu["memory_used_bytes"] = memory if isinstance(memory, NA) else memory["used"]

    gpu["persistence_mode"] = q("nvmlDeviceGetPersistenceMode", handle)
    gpu["power_limit_w"] = _watts(q("nvmlDeviceGetEnforcedPowerLimit", handle))
    gpu["power_limit_set_w"] = _watts(q("nvmlDeviceGetPowerManagementLimit", handle))
    gpu["power_default_w"] = _watts(q("nvmlDeviceGetPowerManagementDefaultLimit", handle))
    constraints = q("nvmlDeviceGetPowerManagementLimitConstraints", handle)
    gpu["power_min_w"] = _watts(constraints if isinstance(constraints, NA) else constraints[0])
    gpu["power_max_w"] = _watts(constraints if isinstance(constraints, NA) else constraints[1])
    gpu["power_draw_w"] = _watts(q("nvmlDeviceGetPowerUsage", handle))

    mask = nv.first(
        ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), handle
    )
    gpu["clocks_event_reasons_mask"] = mask
    gpu["clocks_event_reasons"] = _reason_names(mask)
    clock_sm, clock_mem = getattr(lib, "NVML_CLOCK_SM", 1), getattr(lib, "NVML_CLOCK_MEM", 2)
    gpu["clock_sm_mhz"] = q("nvmlDeviceGetClockInfo", handle, clock_sm)
    gpu["clock_mem_mhz"] = q("nvmlDeviceGetClockInfo", handle, clock_mem)
    gpu["clock_sm_max_mhz"] = q("nvmlDeviceGetMaxClockInfo", handle, clock_sm)
    gpu["clock_mem_max_mhz"] = q("nvmlDeviceGetMaxClockInfo", handle, clock_mem)
    gpu["temperature_c"] = q("nvmlDeviceGetTemperature", handle, getattr(lib, "NVML_TEMPERATURE_GPU", 0))
    gpu["temperature_slowdown_c"] = q(
        "nvmlDeviceGetTemperatureThreshold", handle, getattr(lib, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)
    )
    gpu["utilization"] = q("nvmlDeviceGetUtilizationRates", handle)

    ecc = q("nvmlDeviceGetEccMode", handle)
    gpu["ecc_mode_current"] = ecc if isinstance(ecc, NA) else ecc[0]
    gpu["ecc_mode_pending"] = ecc if isinstance(ecc, NA) else ecc[1]
    for err_name, err_type in (("corrected", 0), ("uncorrected", 1)):
        for counter_name, counter in (("volatile", 0), ("aggregate", 1)):
            gpu[f"ecc_{counter_name}_{err_name}"] = q(
                "nvmlDeviceGetTotalEccErrors", handle, err_type, counter
            )
    # Retired pages are the pre-Ampere mechanism, remapped rows the Ampere+ one; NVML answers one.
    sbe = q("nvmlDeviceGetRetiredPages", handle, 1)
    dbe = q("nvmlDeviceGetRetiredPages", handle, 2)
    gpu["retired_pages_sbe"] = sbe if isinstance(sbe, NA) else len(sbe)
    gpu["retired_pages_dbe"] = dbe if isinstance(dbe, NA) else len(dbe)
    gpu["retired_pages_pending"] = q("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    rows = q("nvmlDeviceGetRemappedRows", handle)
    gpu["remapped_rows"] = (
        rows
        if isinstance(rows, NA)
        else {"correctable": rows[0], "uncorrectable": rows[1], "pending": rows[2], "failure": rows[3]}
    )

    gpu["pcie_gen_current"] = q("nvmlDeviceGetCurrPcieLinkGeneration", handle)
    gpu["pcie_width_current"] = q("nvmlDeviceGetCurrPcieLinkWidth", handle)
    gpu["pcie_gen_max"] = q("nvmlDeviceGetMaxPcieLinkGeneration", handle)
    gpu["pcie_width_max"] = q("nvmlDeviceGetMaxPcieLinkWidth", handle)
    gpu["pcie_gen_gpu_max"] = q("nvmlDeviceGetGpuMaxPcieLinkGeneration", handle)
    gpu["pcie_replay_counter"] = q("nvmlDeviceGetPcieReplayCounter", handle)

    mig = q("nvmlDeviceGetMigMode", handle)
    gpu["mig_mode_current"] = mig if isinstance(mig, NA) else mig[0]
    gpu["mig_mode_pending"] = mig if isinstance(mig, NA) else mig[1]
    mode = q("nvmlDeviceGetComputeMode", handle)
    gpu["compute_mode"] = mode if isinstance(mode, NA) else COMPUTE_MODES.get(mode, f"unknown ({mode})")

    procs = q("nvmlDeviceGetComputeRunningProcesses", handle)
    gpu["processes"] = (
        procs
        if isinstance(procs, NA)
        else [{"pid": p.get("pid"), "used_bytes": p.get("usedGpuMemory")} for p in procs]
    )
    gpu["nvlinks"] = _read_nvlinks(nv, handle)
    gpu["fabric"] = _read_fabric(nv, handle)
    support = q("nvmlGpmQueryDeviceSupport", handle)
    gpu["gpm_supported"] = support if isinstance(support, NA) else bool(support.get("isSupportedDevice"))
    return gpu


def _read_fabric(nv: NvmlSession, handle: Any) -> dict[str, Any] | NA:
    """NVSwitch fabric registration (Hopper+): state 3 means the fabric manager finished training it."""
    struct = getattr(nv.lib, "c_nvmlGpuFabricInfo_t", None)
    if struct is None:
        return NA("nvmlDeviceGetGpuFabricInfo is not in this nvidia-ml-py")
    info = struct()
    answer = nv.query("nvmlDeviceGetGpuFabricInfo", handle, ctypes.byref(info))
    if isinstance(answer, NA):
        return answer
    states = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
    return {
        "state": states.get(info.state, str(info.state)),
        "status": info.status,
        "clique_id": info.cliqueId,
    }


def _read_nvlinks(nv: NvmlSession, handle: Any) -> list[dict[str, Any]] | NA:
    max_links = int(getattr(nv.lib, "NVML_NVLINK_MAX_LINKS", 18))
    links: list[dict[str, Any]] = []
    for link in range(max_links):
        state = nv.query("nvmlDeviceGetNvLinkState", handle, link)
        if isinstance(state, NA):
            if link == 0:
                return state  # no NVLink on this GPU (or NVML cannot say)
            break
        entry: dict[str, Any] = {"link": link, "active": bool(state)}
        if state:
            remote = nv.query("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            entry["remote_bus_id"] = remote if isinstance(remote, NA) else remote.get("busId")
            kind = nv.query("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
            entry["remote"] = (
                kind
                if isinstance(kind, NA)
                else {0: "gpu", 1: "ibmnpu", 2: "nvswitch"}.get(kind, f"unknown ({kind})")
            )
            entry["version"] = nv.query("nvmlDeviceGetNvLinkVersion", handle, link)
        links.append(entry)
    return links


def read_pairs(nv: NvmlSession, handles: list[Any]) -> list[dict[str, Any]]:
    """The GPU-pair matrix: PCIe path (nvidia-smi topo -m's PIX..SYS) and P2P read support."""
    pairs = []
    p2p_read = getattr(nv.lib, "NVML_P2P_CAPS_INDEX_READ", 0)
    for i, hi in enumerate(handles):
        for j, hj in enumerate(handles):
            if j <= i:
                continue
            level = nv.query("nvmlDeviceGetTopologyCommonAncestor", hi, hj)
            p2p = nv.query("nvmlDeviceGetP2PStatus", hi, hj, p2p_read)
            pairs.append(
                {
                    "a": i,
                    "b": j,
                    "pcie_path": level if isinstance(level, NA) else TOPOLOGY_LEVELS.get(level, str(level)),
                    "p2p_read": p2p if isinstance(p2p, NA) else p2p == 0,
                }
            )
    return pairs


class GpmSampler:
    """GPM metrics the way NVML documents them: two samples an interval apart, metrics computed between.

    Each :meth:`read` takes a new sample and computes the metrics over the time since the previous one,
    so a monitor calls it once a period and a one-shot reader calls :meth:`prime`, sleeps, then reads.
    """

    def __init__(self, nv: NvmlSession, handles: list[Any], metrics: Sequence[str] = tuple(GPM_METRICS)):
        self.nv = nv
        self.handles = handles
        self.metrics = list(metrics)
        self._previous: list[Any] = []
        self._error: NA | None = None

    def prime(self) -> None:
        self._previous = [self._take(h) for h in self.handles]

    def _take(self, handle: Any) -> Any:
        # Samples are opaque ctypes pointers: call NVML directly, query() would turn them into plain data.
        lib = self.nv.lib
        try:
            sample = lib.nvmlGpmSampleAlloc()
        except lib.NVMLError as exc:
            return NA(error_text(lib, exc))
        try:
            lib.nvmlGpmSampleGet(handle, sample)
        except lib.NVMLError as exc:
            lib.nvmlGpmSampleFree(sample)
            return NA(error_text(lib, exc))
        return sample

    def read(self) -> list[dict[str, Any] | NA]:
        if not self._previous:
            self.prime()
        current = [self._take(h) for h in self.handles]
        results = [self._metrics(a, b) for a, b in zip(self._previous, current, strict=False)]
        self._free(self._previous)
        self._previous = current
        return results

    def close(self) -> None:
        self._free(self._previous)
        self._previous = []

    def _free(self, samples: list[Any]) -> None:
        lib = self.nv.lib
        for sample in samples:
            if not isinstance(sample, NA):
                with suppress(lib.NVMLError):
                    lib.nvmlGpmSampleFree(sample)

    def _metrics(self, first: Any, second: Any) -> dict[str, Any] | NA:
        for sample in (first, second):
            if isinstance(sample, NA):
                return sample
        lib = self.nv.lib
        request = lib.c_nvmlGpmMetricsGet_t()
        request.version = lib.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(self.metrics)
        request.sample1 = first
        request.sample2 = second
        for i, name in enumerate(self.metrics):
            request.metrics[i].metricId = GPM_METRICS[name][0]
        try:
            lib.nvmlGpmMetricsGet(request)
        except lib.NVMLError as exc:
            return NA(error_text(lib, exc))
        values: dict[str, Any] = {}
        for i, name in enumerate(self.metrics):
            metric = request.metrics[i]
            if metric.nvmlReturn != 0:
                values[name] = NA(f"NVML return {metric.nvmlReturn}")
            else:
                values[name] = round(float(metric.value), 3)
        return values


def sample_gpm(nv: NvmlSession, handles: list[Any], interval_s: float) -> list[dict[str, Any] | NA]:
    sampler = GpmSampler(nv, handles)
    try:
        sampler.prime()
        time.sleep(interval_s)
        return sampler.read()
    finally:
        sampler.close()


def collect_nvml(root: Path, *, gpm_sample_s: float = 0.2, lib: Any = None) -> dict[str, Any]:
    """The ``nvml`` section of a node snapshot: reachability, versions, GPUs and GPU pairs."""
    from dgxperf.hw.host import pci_device

    with nvml_session(lib) as nv:
        if isinstance(nv, NA):
            return {"reachable": False, "error": nv.reason, "gpus": [], "pairs": []}
        started = time.perf_counter()
        section: dict[str, Any] = {
            "reachable": True,
            "error": None,
            "driver_version": nv.query("nvmlSystemGetDriverVersion"),
            "cuda_driver_version": nv.query("nvmlSystemGetCudaDriverVersion"),
            "nvml_version": nv.query("nvmlSystemGetNVMLVersion"),
        }
        handles = nv.handles()
        if isinstance(handles, NA):
            section.update(gpus=[], pairs=[], error=handles.reason)
            return section
        gpus = [read_gpu(nv, h, i) for i, h in enumerate(handles)]
        for gpu in gpus:
            if not isinstance(gpu["pci_bus_id"], NA):
                pci = pci_device(root, gpu["pci_bus_id"])
                gpu["numa_node"] = pci.get("numa_node", NA("no sysfs entry"))
                gpu["local_cpulist"] = pci.get("local_cpulist", NA("no sysfs entry"))
            for proc in gpu["processes"] if isinstance(gpu["processes"], list) else []:
                proc["name"] = _process_name(root, proc["pid"])
        supported = [h for h, g in zip(handles, gpus, strict=False) if g["gpm_supported"] is True]
        if supported and gpm_sample_s > 0:
            try:
                sampled = sample_gpm(nv, supported, gpm_sample_s)
            except Exception as exc:  # e.g. a ctypes mismatch with this nvidia-ml-py: report, do not crash
                sampled = [NA(f"GPM sampling failed: {type(exc).__name__}: {exc}") for _ in supported]
            samples = iter(sampled)
            for gpu in gpus:
                gpu["gpm"] = next(samples) if gpu["gpm_supported"] is True else NA("GPM not supported")
        else:
            for gpu in gpus:
                gpu["gpm"] = (
                    NA("GPM not supported") if gpu["gpm_supported"] is not True else NA("not sampled")
                )
        section["gpus"] = gpus
        section["pairs"] = read_pairs(nv, handles)
        section["collect_seconds"] = round(time.perf_counter() - started, 3)
        return section


def _process_name(root: Path, pid: Any) -> str | NA:
    try:
        return (root / "proc" / str(pid) / "comm").read_text().strip()
    except OSError as exc:
        return NA(f"cannot read /proc/{pid}/comm: {exc.strerror or exc}")


def read_pcie_link(index: int, lib: Any = None) -> dict[str, Any]:
    """One GPU's PCIe link (generation and width, max and current) for `bench pcie`'s peak; NA-safe."""
    with nvml_session(lib) as nv:
        if isinstance(nv, NA):
            return {"error": nv.reason}
        try:
            handle = nv.lib.nvmlDeviceGetHandleByIndex(index)
        except nv.lib.NVMLError as exc:
            return {"error": error_text(nv.lib, exc)}
        link = {
            "gen_max": nv.query("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            "width_max": nv.query("nvmlDeviceGetMaxPcieLinkWidth", handle),
            "gen_current": nv.query("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            "width_current": nv.query("nvmlDeviceGetCurrPcieLinkWidth", handle),
        }
        return {k: (None if isinstance(v, NA) else v) for k, v in link.items()}


class GpuSensor:
    """Clocks, temperature, power and throttle reasons of one GPU, read during a benchmark.

    A benchmark's figure depends on the clocks it ran at (power and thermal limits lower them under long
    loads), so bench records them next to each figure. One NVML session for the sensor's lifetime.
    """

    def __init__(self, index: int, lib: Any = None) -> None:
        self.index = index
        self._context = nvml_session(lib)
        self._nv = self._context.__enter__()
        self._handle: Any = None
        if not isinstance(self._nv, NA):
            try:
                self._handle = self._nv.lib.nvmlDeviceGetHandleByIndex(index)
            except self._nv.lib.NVMLError as exc:
                self._nv = NA(error_text(self._nv.lib, exc))

    def read(self) -> dict[str, Any]:
        if isinstance(self._nv, NA):
            return {"error": self._nv.reason}
        nv, h = self._nv, self._handle
        lib = nv.lib
        mask = nv.first(
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), h
        )
        reading = {
            "sm_mhz": nv.query("nvmlDeviceGetClockInfo", h, getattr(lib, "NVML_CLOCK_SM", 1)),
            "mem_mhz": nv.query("nvmlDeviceGetClockInfo", h, getattr(lib, "NVML_CLOCK_MEM", 2)),
            "temperature_c": nv.query("nvmlDeviceGetTemperature", h, getattr(lib, "NVML_TEMPERATURE_GPU", 0)),
            "power_w": _watts(nv.query("nvmlDeviceGetPowerUsage", h)),
            "throttle": _reason_names(mask),
        }
        return {k: (None if isinstance(v, NA) else v) for k, v in reading.items()}

    def close(self) -> None:
        self._context.__exit__(None, None, None)

    def __enter__(self) -> GpuSensor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
