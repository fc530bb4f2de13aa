"""NvmlTelemetry: the real NVML of this GPU-less machine (unavailable path), and the per-metric mapping
through a small stand-in library whose functions return fixed values or raise NOT_SUPPORTED.

The stand-in returns the same ctypes structures pynvml does where the mapping depends on their layout
(field values, GPM metric requests, memory info), so NvmlSession.query's conversion is exercised too.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pynvml
import pytest

from dgxperf.hw import telemetry
from dgxperf.hw.telemetry import NvmlTelemetry, throttle_names
from dgxperf.samples import GPU_METRICS

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
MIB = 1024 * 1024


class Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class EventData:
    def __init__(self, device: Handle, xid: int) -> None:
        self.device = device
        self.eventType = pynvml.nvmlEventTypeXidCriticalError
        self.eventData = xid


# GPM values the stand-in returns for GPU 0, by metric id (hw.nvml.GPM_METRICS); NVLink ids answer
# NOT_SUPPORTED, as on a PCIe card.
GPM_VALUES = {2: 95.5, 3: 14.0, 5: 93.0, 7: 92.0, 10: 17.5, 11: 0.0, 12: 1.5, 13: 0.5, 20: 4.0, 21: 12.0}


def _unsupported(*_args: Any) -> Any:
    raise pynvml.NVMLError(NOT_SUPPORTED)


class FakeNvml:
    """GPU 0: a Hopper with every feature; GPU 1: a bare GPU that supports only name/uuid/pci/memory v1."""

    NVMLError = pynvml.NVMLError

    def __init__(self, n_gpus: int = 2, *, lost: tuple[int, ...] = ()) -> None:
        for name in dir(pynvml):  # the constants the code reads with getattr(lib, ...)
            if name.startswith(("NVML_", "nvmlEventType", "nvmlMemory_v")):
                setattr(self, name, getattr(pynvml, name))
        self.n_gpus = n_gpus
        self.lost = lost
        self.calls: dict[str, int] = {}
        self.events: list[EventData] = []
        self.registered: list[int] = []
        self.shut_down = False
        self.gpm_samples = 0

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml"):
            calls = object.__getattribute__(self, "calls")
            calls[name] = calls.get(name, 0) + 1
        return object.__getattribute__(self, name)

    # -- library
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlDeviceGetCount(self) -> int:
        return self.n_gpus

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        if index in self.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return Handle(index)

    def nvmlDeviceGetIndex(self, handle: Handle) -> int:
        return handle.index

    # -- identity
    def nvmlDeviceGetName(self, handle: Handle) -> str:
        return "NVIDIA H200" if handle.index == 0 else "Bare GPU"

    def nvmlDeviceGetUUID(self, handle: Handle) -> str:
        return f"GPU-0000000{handle.index}-aaaa-bbbb-cccc-dddddddddddd"

    def nvmlDeviceGetPciInfo(self, handle: Handle) -> Any:
        pci = pynvml.nvmlPciInfo_t()
        pci.busId = f"00000000:{0x18 + handle.index:02X}:00.0".encode()
        return pci

    # -- plain metrics (GPU 0 answers, GPU 1 does not)
    def _gpu0(self, handle: Handle, value: Any) -> Any:
        if handle.index != 0:
            raise pynvml.NVMLError(NOT_SUPPORTED)
        return value

    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> Any:
        util = pynvml.c_nvmlUtilization_t()
        util.gpu, util.memory = 97, 41
        return self._gpu0(handle, util)

    def nvmlDeviceGetMemoryInfo(self, handle: Handle, version: int | None = None) -> Any:
        if version is not None:
            if handle.index != 0:  # an older driver: no nvmlDeviceGetMemoryInfo_v2
                raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            mem = pynvml.c_nvmlMemory_v2_t()
            mem.total, mem.reserved, mem.free, mem.used = 150 * 2**30, 2**30, 100 * 2**30, 49 * 2**30
            return mem
        mem1 = pynvml.c_nvmlMemory_t()
        mem1.total, mem1.free, mem1.used = 16 * 2**30, 12 * 2**30, 4 * 2**30
        return mem1

    def nvmlDeviceGetPowerUsage(self, handle: Handle) -> int:
        return int(self._gpu0(handle, 687_028))  # mW

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Handle) -> int:
        return int(self._gpu0(handle, 700_000))

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Handle) -> int:
        return int(self._gpu0(handle, 123_456_789))  # mJ

    def nvmlDeviceGetTemperature(self, handle: Handle, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return int(self._gpu0(handle, 60))

    def nvmlDeviceGetFieldValues(self, handle: Handle, ids: list[int]) -> Any:
        assert ids == [pynvml.NVML_FI_DEV_MEMORY_TEMP]
        values = (pynvml.c_nvmlFieldValue_t * 1)()
        values[0].fieldId = ids[0]
        if handle.index == 0:
            values[0].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            values[0].value.uiVal = 52
        else:  # the call succeeds, the field does not: NVML reports it per field
            values[0].nvmlReturn = NOT_SUPPORTED
        return values

    def nvmlDeviceGetClockInfo(self, handle: Handle, clock: int) -> int:
        return int(self._gpu0(handle, {pynvml.NVML_CLOCK_SM: 1500, pynvml.NVML_CLOCK_MEM: 3201}[clock]))

    def nvmlDeviceGetTotalEccErrors(self, handle: Handle, error_type: int, counter: int) -> int:
        assert counter == pynvml.NVML_VOLATILE_ECC
        return int(self._gpu0(handle, {0: 3, 1: 0}[error_type]))

    def nvmlDeviceGetRemappedRows(self, handle: Handle) -> tuple[int, int, int, int]:
        return (0, 0, int(self._gpu0(handle, 1)), 0)

    def nvmlDeviceGetPcieReplayCounter(self, handle: Handle) -> int:
        return int(self._gpu0(handle, 2))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Handle) -> int:
        return int(self._gpu0(handle, 0x4 | 0x1))

    def nvmlDeviceGetPcieThroughput(self, handle: Handle, counter: int) -> int:
        return int(self._gpu0(handle, {0: 1000, 1: 2000}[counter]))  # KB/s

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Handle) -> list[Any]:
        # pynvml's own wrapper of a process struct
        proc = pynvml.nvmlFriendlyObject({"pid": 4242, "usedGpuMemory": 8 * 2**30})
        return list(self._gpu0(handle, [proc]))

    # -- GPM (GPU 0 only)
    def nvmlGpmQueryDeviceSupport(self, handle: Handle) -> Any:
        support = pynvml.c_nvmlGpmSupport_t()
        support.isSupportedDevice = 1 if handle.index == 0 else 0
        return support

    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION

    def nvmlGpmSampleAlloc(self) -> Any:
        self.gpm_samples += 1
        return ctypes.pointer(pynvml.struct_c_nvmlGpmSample_t())

    def nvmlGpmSampleGet(self, handle: Handle, sample: Any) -> None:
        assert handle.index == 0

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self.gpm_samples -= 1

    def nvmlGpmMetricsGet(self, request: Any) -> None:
        for i in range(request.numMetrics):
            metric = request.metrics[i]
            if metric.metricId in GPM_VALUES:
                metric.value = GPM_VALUES[metric.metricId]
            else:
                metric.nvmlReturn = NOT_SUPPORTED

    # -- XID events (GPU 0 supports them)
    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceGetSupportedEventTypes(self, handle: Handle) -> int:
        return int(pynvml.nvmlEventTypeAll if handle.index == 0 else 0)

    def nvmlDeviceRegisterEvents(self, handle: Handle, types: int, event_set: str) -> None:
        assert types == pynvml.nvmlEventTypeXidCriticalError and event_set == "event-set"
        self.registered.append(handle.index)

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> EventData:
        assert timeout_ms == 0, "the tick must never block on events"
        if not self.events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return self.events.pop(0)

    def nvmlEventSetFree(self, event_set: str) -> None:
        pass


def open_fake(tmp_path: Path, lib: FakeNvml | None = None, **kw: Any) -> tuple[NvmlTelemetry, FakeNvml]:
    lib = lib or FakeNvml()
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True, exist_ok=True)
    (proc / "comm").write_text("python3\n")
    return NvmlTelemetry(lib, root=tmp_path, **kw), lib


# --------------------------------------------------------------------------------------------------


def test_real_nvml_unavailable_gives_no_gpus_and_the_error() -> None:
    with NvmlTelemetry() as tel:
        if tel.available:
            pytest.skip("this machine has a working NVML")
        assert tel.error is not None and "NVML_ERROR_" in tel.error
        assert tel.header_gpus() == []
        assert tel.read() == []
        assert tel.drain_events() == []
    tel.close()  # idempotent


def test_missing_library_module_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from dgxperf.results import NA

    monkeypatch.setattr(telemetry, "load_pynvml", lambda: NA("nvidia-ml-py is not installed"))
    tel = NvmlTelemetry()
    assert not tel.available and tel.error == "nvidia-ml-py is not installed" and tel.read() == []


def test_header_gpus_carry_the_dashboard_labels(tmp_path: Path) -> None:
    tel, _ = open_fake(tmp_path)
    with tel:
        gpus = tel.header_gpus()
    assert [(g.index, g.name, g.pci_bus_id) for g in gpus] == [
        (0, "NVIDIA H200", "00000000:18:00.0"),
        (1, "Bare GPU", "00000000:19:00.0"),
    ]
    assert gpus[1].uuid.startswith("GPU-00000001")


def test_every_metric_is_mapped_with_its_unit(tmp_path: Path) -> None:
    tel, lib = open_fake(tmp_path)
    with tel:
        gpu0, _ = tel.read()
    m = gpu0.metrics
    assert set(m) <= set(GPU_METRICS), set(m) - set(GPU_METRICS)
    expected = {
        "gpu_util_pct": 97.0,
        "mem_copy_util_pct": 41.0,
        "fb_used_bytes": 49.0 * 2**30,
        "fb_free_bytes": 100.0 * 2**30,
        "fb_reserved_bytes": 1.0 * 2**30,
        "power_w": 687.028,  # mW -> W
        "power_limit_w": 700.0,
        "energy_j": 123456.789,  # mJ -> J
        "temp_gpu_c": 60.0,
        "temp_mem_c": 52.0,
        "sm_clock_mhz": 1500.0,
        "mem_clock_mhz": 3201.0,
        "ecc_sbe_volatile": 3.0,
        "ecc_dbe_volatile": 0.0,
        "remapped_pending": 1.0,
        "pcie_replay": 2.0,
        "sm_active_pct": 95.5,  # GPM names -> schema names
        "sm_occupancy_pct": 14.0,
        "tensor_active_pct": 93.0,
        "hmma_active_pct": 92.0,
        "dram_active_pct": 17.5,
        "fp64_active_pct": 0.0,
        "fp32_active_pct": 1.5,
        "fp16_active_pct": 0.5,
        "pcie_tx_bytes_per_s": 4.0 * MIB,  # GPM MiB/s -> bytes/s
        "pcie_rx_bytes_per_s": 12.0 * MIB,
    }
    assert m == pytest.approx(expected)
    # NVLink answered NOT_SUPPORTED through GPM: absent, not zero.
    assert "nvlink_tx_bytes_per_s" not in m and "nvlink_rx_bytes_per_s" not in m
    assert gpu0.throttle == ("gpu_idle", "sw_power_cap")
    assert gpu0.processes == ({"pid": 4242, "name": "python3", "used_bytes": 8.0 * 2**30},)
    # GPM had GPU 0's rates: only GPU 1 (no GPM) was asked NVML's 20 ms PCIe counters (tx, rx).
    assert lib.calls["nvmlDeviceGetPcieThroughput"] == 2


def test_unsupported_metrics_are_absent_never_an_error(tmp_path: Path) -> None:
    tel, _ = open_fake(tmp_path)
    with tel:
        _, bare = tel.read()
    # The bare GPU answers only memory v1 (after v2 failed) and nothing else.
    assert bare.metrics == {"fb_used_bytes": 4.0 * 2**30, "fb_free_bytes": 12.0 * 2**30}
    assert bare.throttle == () and bare.processes == ()


def test_not_supported_is_asked_once_other_errors_every_tick(tmp_path: Path) -> None:
    tel, lib = open_fake(tmp_path, processes_every=1)
    with tel:
        for _ in range(3):
            tel.read()
    # GPU 0 answers each tick (3 calls), GPU 1 answered NOT_SUPPORTED once and was not asked again.
    assert lib.calls["nvmlDeviceGetPowerUsage"] == 3 + 1
    assert lib.calls["nvmlDeviceGetTotalEnergyConsumption"] == 3 + 1
    # memory v2 failed once on GPU 1 (FUNCTION_NOT_FOUND): from then on only v1 is asked there.
    assert lib.calls["nvmlDeviceGetMemoryInfo"] == 3 + 1 + 3


def test_pcie_falls_back_to_nvml_throughput_without_gpm(tmp_path: Path) -> None:
    class NoGpm(FakeNvml):
        def nvmlGpmQueryDeviceSupport(self, handle: Handle) -> Any:
            raise pynvml.NVMLError(NOT_SUPPORTED)

    tel, lib = open_fake(tmp_path, NoGpm())
    with tel:
        gpu0, _ = tel.read()
    assert gpu0.metrics["pcie_tx_bytes_per_s"] == 1000 * 1024  # KB/s -> bytes/s
    assert gpu0.metrics["pcie_rx_bytes_per_s"] == 2000 * 1024
    assert not any(k.endswith("_active_pct") for k in gpu0.metrics)
    assert lib.gpm_samples == 0


def test_gpm_primed_at_open_one_sample_per_tick_and_freed(tmp_path: Path) -> None:
    tel, lib = open_fake(tmp_path)
    assert lib.gpm_samples == 1  # primed: the first tick's window starts at open
    tel.read()
    tel.read()
    assert lib.gpm_samples == 1  # each read frees the previous sample
    tel.close()
    assert lib.gpm_samples == 0 and lib.shut_down


def test_gpm_failure_disables_gpm_but_not_the_monitor(tmp_path: Path) -> None:
    class BrokenGpm(FakeNvml):
        def nvmlGpmMetricsGet(self, request: Any) -> None:
            raise RuntimeError("ctypes layout mismatch")

    tel, _ = open_fake(tmp_path, BrokenGpm())
    with tel:
        gpu0, _ = tel.read()
        second, _ = tel.read()
    assert "sm_active_pct" not in gpu0.metrics and gpu0.metrics["power_w"] == 687.028
    assert second.metrics["pcie_tx_bytes_per_s"] == 1000 * 1024  # fell back to NVML's counter
    assert any("GPM read failed" in p for p in tel.problems)


def test_processes_are_read_every_nth_tick_and_repeated_between(tmp_path: Path) -> None:
    tel, lib = open_fake(tmp_path, processes_every=3)
    with tel:
        samples = [tel.read()[0] for _ in range(7)]
    assert lib.calls["nvmlDeviceGetComputeRunningProcesses"] == 3 + 1  # ticks 0, 3, 6 (+ GPU 1 once)
    assert all(s.processes and s.processes[0]["pid"] == 4242 for s in samples)


def test_processes_carry_their_cpu_share_from_the_second_read_on(tmp_path: Path) -> None:
    from dgxperf.hw.proccpu import ProcessCpu
    from tests.hw.test_proccpu import Clock, write_proc

    tel, _ = open_fake(tmp_path, processes_every=2)
    clock = Clock()
    tel._cpu = ProcessCpu(tmp_path, clock)
    tel._cpu.hz = 100
    write_proc(tmp_path, 4242, {4242: ("python3", 0), 4243: ("pt_autograd_0", 0)})
    with tel:
        first = tel.read()[0]  # processes read: primes the CPU counters
        clock.now = 2.0
        write_proc(tmp_path, 4242, {4242: ("python3", 120), 4243: ("pt_autograd_0", 80)})
        between = tel.read()[0]  # no process read: the list is repeated
        third = tel.read()[0]  # read again: 200 ticks over 2 s at 100 Hz
    assert "cpu_pct" not in first.processes[0] and between.processes == first.processes
    assert third.processes[0]["pid"] == 4242 and third.processes[0]["name"] == "python3"
    assert (third.processes[0]["cpu_pct"], third.processes[0]["busiest_thread_pct"]) == (100.0, 60.0)
    assert third.processes[0]["busiest_thread"] == "python3"
    assert tel.problems == []


def test_xid_events_drained_without_blocking(tmp_path: Path) -> None:
    tel, lib = open_fake(tmp_path)
    with tel:
        assert lib.registered == [0]  # only the GPU that supports XID events
        assert tel.drain_events() == []
        lib.events = [EventData(Handle(0), 79), EventData(Handle(0), 48)]
        events = tel.drain_events()
        assert [(e["type"], e["gpu"], e["xid"]) for e in events] == [("xid", 0, 79), ("xid", 0, 48)]
        assert all(isinstance(e["t"], float) for e in events)
        assert tel.drain_events() == []
    assert tel.problems == []


def test_a_lost_gpu_does_not_hide_the_others(tmp_path: Path) -> None:
    tel, _ = open_fake(tmp_path, FakeNvml(3, lost=(1,)))
    with tel:
        assert [g.index for g in tel.header_gpus()] == [0, 2]
        assert [s.index for s in tel.read()] == [0, 2]
    assert any("GPU 1" in p and "GPU_IS_LOST" in p for p in tel.problems)


def test_a_failing_query_bug_becomes_an_empty_sample(tmp_path: Path) -> None:
    class Mismatch(FakeNvml):
        # nvidia-ml-py raises NVMLLibraryMismatchError (not an NVMLError) for some version mismatches.
        def nvmlDeviceGetComputeRunningProcesses(self, handle: Handle) -> list[Any]:
            raise pynvml.NVMLLibraryMismatchError("mismatch")

    tel, _ = open_fake(tmp_path, Mismatch())
    with tel:
        gpu0, gpu1 = tel.read()
    assert gpu0.metrics == {} and gpu1.index == 1
    assert any("NVMLLibraryMismatchError" in p for p in tel.problems)


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        (0, ()),
        (0x1, ("gpu_idle",)),
        (0x4 | 0x40, ("sw_power_cap", "hw_thermal_slowdown")),
        (0x10000, ("unknown_0x10000",)),
    ],
)
def test_throttle_names(mask: int, names: tuple[str, ...]) -> None:
    assert throttle_names(mask) == names


def test_memory_temperature_zero_is_absent(tmp_path: Path) -> None:
    class NoSensor(FakeNvml):
        def nvmlDeviceGetFieldValues(self, handle: Handle, ids: list[int]) -> Any:
            values = (pynvml.c_nvmlFieldValue_t * 1)()
            values[0].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT  # value left 0
            return values

    tel, _ = open_fake(tmp_path, NoSensor())
    with tel:
        gpu0, _ = tel.read()
    assert "temp_mem_c" not in gpu0.metrics and gpu0.metrics["temp_gpu_c"] == 60.0


def test_gpm_table_covers_every_sampled_metric() -> None:
    from dgxperf.hw.nvml import GPM_METRICS

    assert set(telemetry.GPM_TO_SCHEMA) == set(GPM_METRICS)
    assert {name for name, _ in telemetry.GPM_TO_SCHEMA.values()} <= set(GPU_METRICS)
