"""The NVML query helper on its own (a tiny stand-in library for one function), and the real NVML of
this machine, which has no GPU: every path must end in NA with the NVML error, never an exception."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pynvml
import pytest

from dgxperf.hw import nvml
from dgxperf.results import NA


class FakeLib:
    NVMLError = pynvml.NVMLError
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED

    def nvmlDeviceGetPersistenceMode(self, handle: object) -> int:
        return 1

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetName(self, handle: object) -> bytes:
        return b"NVIDIA H200"


def test_query_returns_value_or_na_with_error_name():
    nv = nvml.NvmlSession(FakeLib())
    assert nv.query("nvmlDeviceGetPersistenceMode", None) == 1
    assert nv.query("nvmlDeviceGetName", None) == "NVIDIA H200"
    na = nv.query("nvmlDeviceGetPowerUsage", None)
    assert isinstance(na, NA)
    assert na.reason.startswith("NVML_ERROR_NOT_SUPPORTED")
    missing = nv.query("nvmlDeviceGetSomethingNew", None)
    assert isinstance(missing, NA) and "not in this nvidia-ml-py" in missing.reason


def test_first_falls_back_to_the_old_spelling():
    class Old(FakeLib):
        def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: object) -> int:
            return 0x1

    nv = nvml.NvmlSession(Old())
    names = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
    assert nv.first(names, None) == 1


def test_plain_converts_ctypes_structs_and_arrays():
    class Pci(ctypes.Structure):
        _fields_ = [("busId", ctypes.c_char * 16), ("domain", ctypes.c_uint)]

    pci = Pci(b"00000000:18:00.0", 0)
    assert nvml.plain(pci) == {"busId": "00000000:18:00.0", "domain": 0}
    assert nvml.plain((ctypes.c_uint * 2)(3, 4)) == [3, 4]


def test_reason_names_decode_the_bitmask():
    assert nvml._reason_names(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
    assert nvml._reason_names(0x10000) == ["unknown_0x10000"]
    assert isinstance(nvml._reason_names(NA("x")), NA)


def test_real_nvml_on_a_machine_without_gpu_gives_na_not_an_exception(tmp_path: Path):
    with nvml.nvml_session() as nv:
        if not isinstance(nv, NA):
            pytest.skip("this machine has a working NVML")
        assert "NVML_ERROR_" in nv.reason
    section = nvml.collect_nvml(tmp_path)
    assert section["reachable"] is False
    assert section["gpus"] == [] and section["pairs"] == []
    assert "NVML_ERROR_" in section["error"]


def test_init_error_names_the_nvml_error():
    class NoDriver(FakeLib):
        def nvmlInit(self) -> None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    NoDriver.NVML_ERROR_DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED  # type: ignore[attr-defined]
    with nvml.nvml_session(NoDriver()) as nv:
        assert isinstance(nv, NA)
        assert nv.reason.startswith("NVML_ERROR_DRIVER_NOT_LOADED")
