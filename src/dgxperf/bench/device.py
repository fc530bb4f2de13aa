"""Which device a benchmark runs on, and the peaks it is measured against (from hw.specs and NVML)."""

from __future__ import annotations

import dataclasses
from typing import Any

from dgxperf.bench.base import BenchError
from dgxperf.hw.specs import GpuSpec, match_spec


@dataclasses.dataclass(frozen=True)
class Device:
    kind: str  # "cuda" or "cpu"
    index: int
    name: str
    spec: GpuSpec | None
    l2_bytes: int
    memory_bytes: int
    compute_capability: tuple[int, int] | None

    @property
    def cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def torch_device(self) -> str:
        return f"cuda:{self.index}" if self.cuda else "cpu"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "index": self.index,
            "name": self.name,
            "spec": self.spec.key if self.spec else None,
            "l2_bytes": self.l2_bytes,
            "memory_bytes": self.memory_bytes,
            "compute_capability": list(self.compute_capability) if self.compute_capability else None,
        }


def open_device(kind: str = "cuda", index: int = 0) -> Device:
    """The device to benchmark; a clear BenchError when it is not there."""
    import torch

    if kind == "cpu":
        return Device("cpu", 0, "CPU", None, 32 << 20, 0, None)
    if kind != "cuda":
        raise BenchError(f"unknown device {kind!r}: use cuda or cpu")
    if not torch.cuda.is_available():
        raise BenchError(
            "no CUDA GPU is visible to PyTorch (see `dgxperf doctor`); "
            "`--device cpu` runs the benchmark code on the CPU, for testing only"
        )
    count = torch.cuda.device_count()
    if index >= count:
        raise BenchError(f"asked for GPU {index}, this node has {count} (indices 0..{count - 1})")
    props = torch.cuda.get_device_properties(index)
    spec = match_spec(props.name, int(props.total_memory))
    return Device(
        "cuda",
        index,
        props.name,
        spec,
        int(getattr(props, "L2_cache_size", 50 << 20)),
        int(props.total_memory),
        (int(props.major), int(props.minor)),
    )


def gpu_count() -> int:
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def versions() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        info["cublas"] = getattr(torch.backends.cuda, "preferred_blas_library", lambda: None)()
        info["cublas"] = str(info["cublas"]) if info["cublas"] is not None else None
        try:
            info["nccl"] = ".".join(str(p) for p in torch.cuda.nccl.version())
        except Exception:
            info["nccl"] = None
    return info
