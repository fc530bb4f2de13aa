"""Snapshots for check tests: the H200 recording from the test machine, and small hand-made ones."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from dgxperf.hw.snapshot import Snapshot

DATA = Path(__file__).resolve().parent.parent / "data"
H200_SNAPSHOT = DATA / "h200" / "snapshot.json"

_h200_cache: Snapshot | None = None


def h200() -> Snapshot:
    """A fresh copy of the snapshot recorded on the lent H200 (tests may modify it)."""
    global _h200_cache
    if _h200_cache is None:
        _h200_cache = Snapshot.load(H200_SNAPSHOT)
    return copy.deepcopy(_h200_cache)


def torch_info(**overrides: Any) -> dict[str, Any]:
    info = {
        "installed": True,
        "version": "2.11.0+cu130",
        "cuda": "13.0",
        "built_with_cuda": True,
        "cuda_available": True,
        "device_count": 1,
        "cudnn": 91400,
        "nccl": "2.28.9",
        "nccl_backend": True,
        "gloo_backend": True,
        "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
        "build_settings": {"USE_CUDA": "1", "USE_NCCL": "ON"},
    }
    info.update(overrides)
    return info


def make(
    *,
    gpus: list[dict[str, Any]] | None = None,
    nvml: dict[str, Any] | None = None,
    torch: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    host: dict[str, Any] | None = None,
) -> Snapshot:
    section = {
        "reachable": True,
        "error": None,
        "driver_version": "580.159.04",
        "cuda_driver_version": 13000,
        "gpus": gpus
        if gpus is not None
        else [{"index": 0, "name": "NVIDIA H200", "compute_capability": [9, 0]}],
        "pairs": [],
    }
    section.update(nvml or {})
    return Snapshot(
        collected_at="2026-12-02T00:00:00Z",
        hostname="test",
        nvml=section,
        host=host or {},
        software={"torch": torch if torch is not None else torch_info()},
        env=env or {},
    )
