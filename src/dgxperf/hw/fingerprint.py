"""The node fingerprint stored with every run: which machine and which software produced a number."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from dgxperf.results import NA, to_jsonable


def _text(value: Any) -> Any:
    return None if isinstance(value, NA) else value


def fingerprint_from_snapshot(snap: Any) -> dict[str, Any]:
    """Fingerprint from a doctor snapshot (hostname, GPUs, driver, CUDA, torch, cuDNN, NCCL)."""
    return build_fingerprint(snap.hostname, snap.nvml, snap.software)


def build_fingerprint(hostname: str, nvml: Mapping[str, Any], software: Mapping[str, Any]) -> dict[str, Any]:
    torch = software.get("torch", {}) or {}
    gpus = [
        {"index": g.get("index"), "name": _text(g.get("name")), "uuid": _text(g.get("uuid"))}
        for g in nvml.get("gpus", [])
    ]
    cuda_driver = nvml.get("cuda_driver_version")
    fingerprint = {
        "hostname": hostname,
        "gpus": gpus,
        "gpu_count": len(gpus),
        "driver": _text(nvml.get("driver_version")),
        "cuda_driver": f"{cuda_driver // 1000}.{cuda_driver % 1000 // 10}"
        if isinstance(cuda_driver, int)
        else None,
        "cuda_runtime": _text(torch.get("cuda")),
        "torch": _text(torch.get("version")),
        "cudnn": _text(torch.get("cudnn")),
        "nccl": _text(torch.get("nccl")),
        "python": software.get("python"),
        "dgxperf": software.get("dgxperf"),
    }
    return dict(to_jsonable(fingerprint))


def collect_fingerprint() -> dict[str, Any]:
    """A fingerprint without a full doctor pass: names and UUIDs from NVML, versions from the stack."""
    from dgxperf.hw.nvml import nvml_session
    from dgxperf.hw.software import collect_software

    nvml: dict[str, Any] = {"gpus": []}
    with nvml_session() as nv:
        if not isinstance(nv, NA):
            nvml["driver_version"] = nv.query("nvmlSystemGetDriverVersion")
            nvml["cuda_driver_version"] = nv.query("nvmlSystemGetCudaDriverVersion")
            handles = nv.handles()
            if not isinstance(handles, NA):
                nvml["gpus"] = [
                    {
                        "index": i,
                        "name": nv.query("nvmlDeviceGetName", h),
                        "uuid": nv.query("nvmlDeviceGetUUID", h),
                    }
                    for i, h in enumerate(handles)
                ]
    return build_fingerprint(socket.gethostname(), nvml, collect_software())
