"""The software stack doctor judges: PyTorch's build (CUDA, cuDNN, NCCL, arch list) and the environment.

Importing torch is the slow part of a doctor run (about a second); nothing here initialises CUDA
beyond ``torch.cuda.is_available()``, which creates no context.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
import sys
from collections.abc import Mapping
from typing import Any

from dgxperf import __version__
from dgxperf.results import NA

# Variables that change how NCCL, CUDA and PyTorch behave; the snapshot keeps only these, never secrets.
RELEVANT_ENV_PREFIXES = (
    "NCCL_",
    "CUDA_",
    "TORCH_",
    "PYTORCH_",
    "NVIDIA_",
    "CUBLAS_",
    "CUDNN_",
    "UCX_",
    "OMP_",
)
KEPT_SETTINGS = ("BUILD_TYPE", "CUDA_VERSION", "CUDNN_VERSION", "TORCH_VERSION")
RELEVANT_ENV_NAMES = ("LD_LIBRARY_PATH", "SLURM_JOB_ID", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in sorted(env.items()) if k.startswith(RELEVANT_ENV_PREFIXES) or k in RELEVANT_ENV_NAMES
    }


def _package_version(name: str) -> str | NA:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return NA(f"{name} is not installed")


def parse_build_settings(config_text: str) -> dict[str, str]:
    """``torch.__config__.show()``'s "Build settings: A=1, B=ON, ..." as a dict."""
    match = re.search(r"Build settings:\s*(.*?)(?:,\s*\n|\n\s*\n|\Z)", config_text, re.S)
    if not match:
        return {}
    settings: dict[str, str] = {}
    for item in re.split(r",\s*(?=[A-Z_][A-Z0-9_]*=)", match.group(1).strip()):
        key, _, value = item.partition("=")
        if key:
            settings[key.strip()] = value.strip().rstrip(",")
    return settings


def _collect_torch() -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:
        return {"installed": False, "error": str(exc)}
    except Exception as exc:  # a broken install (missing CUDA libraries) must not crash doctor
        return {"installed": False, "error": f"import torch failed: {type(exc).__name__}: {exc}"}
    info: dict[str, Any] = {"installed": True, "version": torch.__version__}
    info["cuda"] = torch.version.cuda or NA("CPU-only build of PyTorch")
    info["built_with_cuda"] = bool(torch.backends.cuda.is_built())
    try:
        info["cuda_available"] = bool(torch.cuda.is_available())
        info["device_count"] = int(torch.cuda.device_count())
    except Exception as exc:
        info["cuda_available"] = NA(f"{type(exc).__name__}: {exc}")
        info["device_count"] = NA("torch.cuda failed")
    cudnn_version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    info["cudnn"] = cudnn_version if cudnn_version is not None else NA("cuDNN not available to PyTorch")
    try:
        nccl = torch.cuda.nccl.version()
        info["nccl"] = ".".join(str(p) for p in nccl) if isinstance(nccl, tuple) else str(nccl)
    except Exception as exc:
        info["nccl"] = NA(f"NCCL not available to PyTorch ({type(exc).__name__})")
    try:
        import torch.distributed as dist

        info["nccl_backend"] = bool(dist.is_available() and dist.is_nccl_available())
        info["gloo_backend"] = bool(dist.is_available() and dist.is_gloo_available())
    except Exception as exc:
        info["nccl_backend"] = NA(str(exc))
        info["gloo_backend"] = NA(str(exc))
    # get_arch_list() answers [] when no GPU is visible; the build's own flags do not depend on that.
    arch_flags = getattr(torch._C, "_cuda_getArchFlags", None)
    flags = arch_flags() if arch_flags is not None and info["built_with_cuda"] else None
    info["arch_list"] = flags.split() if flags else NA("no CUDA arch list (CPU build)")
    try:
        settings = parse_build_settings(torch.__config__.show())
        info["build_settings"] = {
            k: v for k, v in settings.items() if k.startswith("USE_") or k in KEPT_SETTINGS
        }
    except Exception as exc:
        info["build_settings"] = NA(str(exc))
    return info


def collect_software() -> dict[str, Any]:
    """The ``software`` section of a node snapshot."""
    return {
        "dgxperf": __version__,
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "nvidia_ml_py": _package_version("nvidia-ml-py"),
        "torch": _collect_torch(),
    }
