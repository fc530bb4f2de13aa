"""Driver / CUDA / PyTorch stack checks (guide A §3.1-3.2) and the environment that steers NCCL and CUDA.

The driver floor table is NVIDIA's "CUDA Toolkit and Corresponding Driver Versions" (Linux x86_64,
CUDA release notes, Table 3) plus the minor-version-compatibility floor per major release
(docs.nvidia.com/deploy/cuda-compatibility). A framework wheel carries its own CUDA runtime; the only
host part it needs is a driver new enough for that runtime — which is what this area checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from dgxperf.doctor.base import read, unknown
from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import NA, Finding, Fix, Status

# CUDA toolkit (major, minor) -> the driver it ships with as its documented minimum.
TOOLKIT_DRIVER: dict[tuple[int, ...], str] = {
    (11, 0): "450.36.06", (11, 1): "455.23", (11, 2): "460.27.03", (11, 3): "465.19.01",
    (11, 4): "470.42.01", (11, 5): "495.29.05", (11, 6): "510.39.01", (11, 7): "515.43.04",
    (11, 8): "520.61.05",
    (12, 0): "525.60.13", (12, 1): "530.30.02", (12, 2): "535.54.03", (12, 3): "545.23.06",
    (12, 4): "550.54.14", (12, 5): "555.42.02", (12, 6): "560.28.03", (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06", (13, 1): "590.44.01",
}  # fmt: skip

# Minor version compatibility: any toolkit of the major runs (without PTX JIT of newer code) on these.
MINOR_COMPAT_DRIVER: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}

GUIDE_STACK = "guide A §3.1 used driver 525.85.12, CUDA 11.8, cuDNN 8.6.0.163, NCCL 2.16.2"


def version_tuple(text: str) -> tuple[int, ...]:
    """``"2.11.0+cu130"`` -> ``(2, 11, 0)``: the leading numeric fields, local suffixes dropped."""
    parts = []
    for piece in text.strip().split("+")[0].split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def _torch(snap: Snapshot) -> dict[str, Any]:
    torch: dict[str, Any] = snap.software.get("torch", {})
    return torch


def _gpus_present(snap: Snapshot) -> bool:
    if snap.gpus:
        return True
    pci = snap.host.get("pci_nvidia", [])
    return isinstance(pci, list) and any(dev.get("kind") == "gpu" for dev in pci)


def check_driver_cuda(snap: Snapshot) -> Iterable[Finding]:
    fid, area, title = "driver.cuda_compat", "driver", "Driver supports the CUDA runtime PyTorch uses"
    why = (
        "A PyTorch wheel brings its own CUDA runtime; the host driver must be at least that runtime's "
        "minimum, or CUDA initialisation fails."
    )
    torch = _torch(snap)
    runtime = torch.get("cuda")
    if not torch.get("installed"):
        yield Finding(fid, area, title, Status.NOT_APPLICABLE, {"torch": "not installed"}, why)
        return
    if isinstance(runtime, NA) or not runtime:
        yield Finding(fid, area, title, Status.NOT_APPLICABLE, {"torch_cuda": str(runtime)}, why)
        return
    if not snap.nvml_reachable:
        yield unknown(
            fid, area, title, f"NVML unreachable: {snap.nvml.get('error')}", why, torch_cuda=runtime
        )
        return
    driver = read(snap.nvml, "driver_version")
    driver_cuda = read(snap.nvml, "cuda_driver_version")
    if isinstance(driver, NA) or isinstance(driver_cuda, NA):
        yield unknown(fid, area, title, str(driver if isinstance(driver, NA) else driver_cuda), why)
        return
    rt = version_tuple(str(runtime))[:2]
    supported = (int(driver_cuda) // 1000, (int(driver_cuda) % 1000) // 10)
    evidence: dict[str, Any] = {
        "driver_version": driver,
        "driver_max_cuda": f"{supported[0]}.{supported[1]}",
        "torch_cuda_runtime": runtime,
        "toolkit_minimum_driver": TOOLKIT_DRIVER.get(rt, NA("not in dgxperf's table")),
        "guide": GUIDE_STACK,
    }
    if rt <= supported:
        yield Finding(fid, area, title, Status.PASS, evidence, why, guide="A §3.1")
        return
    floor = MINOR_COMPAT_DRIVER.get(rt[0])
    need = TOOLKIT_DRIVER.get(rt, floor or "a newer driver")
    fix = Fix(
        summary=f"install NVIDIA driver >= {need} (CUDA {runtime}), or a PyTorch build for CUDA "
        f"<= {supported[0]}.{supported[1]}",
        commands=(
            f"# e.g. pip install torch --index-url https://download.pytorch.org/whl/cu{supported[0]}{supported[1]}0",
        ),
        manual=True,
    )
    if floor and rt[0] == supported[0] and version_tuple(str(driver)) >= version_tuple(floor):
        why_minor = (
            why + " Minor version compatibility lets it run, but code needing PTX JIT of newer PTX fails."
        )
        yield Finding(fid, area, title, Status.WARN, evidence, why_minor, fix, guide="A §3.1")
    else:
        yield Finding(fid, area, title, Status.FAIL, evidence, why, fix, guide="A §3.1")


def check_torch(snap: Snapshot) -> Iterable[Finding]:
    fid, area, title = "framework.torch", "framework", "PyTorch is installed and built for this GPU"
    why = (
        "dgxperf train and bench run on PyTorch; a CPU-only build silently trains on the CPU (guide A §3.2)."
    )
    torch = _torch(snap)
    if not torch.get("installed"):
        fix = Fix("install PyTorch", commands=("python3 -m pip install torch",))
        yield Finding(fid, area, title, Status.FAIL, {"error": torch.get("error", "not installed")}, why, fix)
        return
    evidence = {
        "version": torch.get("version"),
        "cuda": torch.get("cuda"),
        "built_with_cuda": torch.get("built_with_cuda"),
        "cuda_available": torch.get("cuda_available"),
        "device_count": torch.get("device_count"),
        "build_settings": torch.get("build_settings"),
    }
    gpus = _gpus_present(snap)
    if not torch.get("built_with_cuda"):
        if gpus:
            fix = Fix(
                "install a CUDA build of PyTorch",
                commands=("python3 -m pip install --force-reinstall torch",),
            )
            yield Finding(fid, area, title, Status.FAIL, evidence, why, fix, guide="A §3.2")
        else:
            yield Finding(fid, area, title, Status.NOT_APPLICABLE, evidence, why + " (no GPU here)")
        return
    if gpus and torch.get("cuda_available") is not True:
        reason = "PyTorch cannot see the GPUs"
        if "CUDA_VISIBLE_DEVICES" in snap.env and not snap.env["CUDA_VISIBLE_DEVICES"].strip():
            reason += " (CUDA_VISIBLE_DEVICES is empty)"
        fix = Fix(
            "make the GPUs visible to PyTorch: check the driver findings above and CUDA_VISIBLE_DEVICES",
            manual=True,
        )
        yield Finding(
            fid, area, title, Status.FAIL, {**evidence, "problem": reason}, why, fix, guide="A §3.2"
        )
        return
    if not gpus:
        yield Finding(fid, area, title, Status.PASS, evidence, why + " (no GPU here to use it)")
        return
    yield Finding(fid, area, title, Status.PASS, evidence, why, guide="A §3.2")


def check_libraries(snap: Snapshot) -> Iterable[Finding]:
    fid, area, title = "framework.cudnn_nccl", "framework", "cuDNN and NCCL available to PyTorch"
    why = "Multi-GPU training needs NCCL (DDP's backend) and convolution/attention kernels need cuDNN (guide A §3.1)."
    torch = _torch(snap)
    if not torch.get("installed") or not torch.get("built_with_cuda"):
        yield Finding(fid, area, title, Status.NOT_APPLICABLE, {"torch_cuda": torch.get("cuda")}, why)
        return
    evidence = {
        "cudnn": torch.get("cudnn"),
        "nccl": torch.get("nccl"),
        "nccl_backend": torch.get("nccl_backend"),
        "guide": GUIDE_STACK,
    }
    missing = [
        name
        for name, ok in (
            ("cuDNN", not isinstance(torch.get("cudnn"), NA)),
            ("NCCL", torch.get("nccl_backend") is True),
        )
        if not ok
    ]
    if missing:
        fix = Fix(
            f"install a PyTorch build with {' and '.join(missing)} (USE_CUDNN=1 USE_NCCL=1)", manual=True
        )
        yield Finding(fid, area, title, Status.FAIL, evidence, why, fix, guide="A §3.2")
    else:
        yield Finding(fid, area, title, Status.PASS, evidence, why, guide="A §3.1")


def arch_coverage(arch_list: list[str], cc: tuple[int, int]) -> str:
    """ "native" (a cubin runs on it), "ptx" (only JIT from PTX) or "none" for compute capability ``cc``.

    A cubin for sm_XY runs on devices of the same major X with minor >= Y; PTX for compute_XY JITs on
    any device with capability >= XY. Arch-specific targets (sm_90a) run only on exactly that chip.
    """
    major, minor = cc
    native = ptx = False
    for entry in arch_list:
        kind, _, digits = entry.partition("_")
        specific = digits.endswith(("a", "f"))
        digits = digits.rstrip("af")
        if not digits.isdigit():
            continue
        number = int(digits)
        a_major, a_minor = number // 10, number % 10
        if kind == "sm" and a_major == major and (a_minor == minor if specific else a_minor <= minor):
            native = True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            ptx = True
    return "native" if native else "ptx" if ptx else "none"


def check_arch(snap: Snapshot) -> Iterable[Finding]:
    area, title = "framework", "PyTorch's CUDA arch list covers the GPU"
    why = "Kernels compiled for another architecture fail with 'no kernel image is available' (guide A §3.2)."
    torch = _torch(snap)
    arch_list = torch.get("arch_list")
    if not snap.gpus:
        yield Finding("framework.arch", area, title, Status.NOT_APPLICABLE, {"gpus": 0}, why)
        return
    if not isinstance(arch_list, list):
        yield unknown("framework.arch", area, title, str(arch_list), why)
        return
    seen: set[tuple[int, int]] = set()
    for gpu in snap.gpus:
        cc = gpu.get("compute_capability")
        if isinstance(cc, NA) or not cc:
            yield unknown(f"framework.arch.gpu{gpu['index']}", area, title, str(cc), why)
            continue
        key = (int(cc[0]), int(cc[1]))
        if key in seen:
            continue
        seen.add(key)
        coverage = arch_coverage(arch_list, key)
        evidence = {"compute_capability": f"{key[0]}.{key[1]}", "arch_list": arch_list, "coverage": coverage}
        fid = f"framework.arch.sm{key[0]}{key[1]}"
        if coverage == "native":
            yield Finding(fid, area, title, Status.PASS, evidence, why, guide="A §3.2")
        elif coverage == "ptx":
            fix = Fix(
                f"use a PyTorch build with sm_{key[0]}{key[1]} (or build with TORCH_CUDA_ARCH_LIST={key[0]}.{key[1]})",
                manual=True,
            )
            yield Finding(fid, area, title, Status.WARN, evidence, why + " Only PTX: JIT at start-up.", fix)
        else:
            fix = Fix(
                f"install a PyTorch build that includes sm_{key[0]}{key[1]} "
                f"(from source: TORCH_CUDA_ARCH_LIST={key[0]}.{key[1]})",
                manual=True,
            )
            yield Finding(fid, area, title, Status.FAIL, evidence, why, fix, guide="A §3.2")


def _ib_present(snap: Snapshot) -> bool:
    ib = snap.host.get("infiniband")
    return isinstance(ib, list) and bool(ib)


# NCCL variables that break or slow a DGX when set to these values: (value, status, reason).
NCCL_RISKY: dict[str, tuple[str, Status, str]] = {
    "NCCL_P2P_DISABLE": (
        "1",
        Status.FAIL,
        "disables NVLink/PCIe peer-to-peer: all traffic goes through host memory",
    ),
    "NCCL_SHM_DISABLE": ("1", Status.WARN, "disables shared-memory transport between processes of one node"),
    "NCCL_NVLS_ENABLE": (
        "0",
        Status.WARN,
        "disables NVLink SHARP on NVSwitch nodes (8x H100 all_reduce busbw: ~480 GB/s with NVLS, ~370 without, "
        "as nccl-tests users report)",
    ),
    "NCCL_BLOCKING_WAIT": ("1", Status.WARN, "makes every collective wait on the host (debug setting)"),
    "TORCH_NCCL_BLOCKING_WAIT": ("1", Status.WARN, "makes every collective wait on the host (debug setting)"),
}
NCCL_GUIDE_VALUES = {
    "NCCL_ALGO": "guide A §5.1: Tree; guide B §3.3: Tree",
    "NCCL_PROTO": "guide A §5.1: Simple; guide B §3.3: LL",
    "NCCL_NSOCKS_PERTHREAD": "guide A §5.1: 4; guide B §3.3: 8",
    "NCCL_SOCKET_NTHREADS": "guide A §5.1: 8",
}


def check_nccl_env(snap: Snapshot) -> Iterable[Finding]:
    fid, area, title = "framework.nccl_env", "framework", "NCCL environment variables"
    why = "NCCL variables change collectives for every job on the node; a forgotten debug setting costs bandwidth."
    nccl = {k: v for k, v in snap.env.items() if k.startswith("NCCL_") or k == "TORCH_NCCL_BLOCKING_WAIT"}
    problems: list[str] = []
    status = Status.PASS
    unset: list[str] = []
    for name, value in sorted(nccl.items()):
        if name == "NCCL_IB_DISABLE" and value.strip() == "1":
            bad = Status.FAIL if _ib_present(snap) else Status.PASS
            if bad is Status.FAIL:
                problems.append(
                    f"{name}=1 disables InfiniBand/RoCE: inter-node traffic falls back to TCP sockets"
                )
                status = Status.FAIL
                unset.append(name)
            continue
        risky = NCCL_RISKY.get(name)
        if name == "NCCL_NVLS_ENABLE" and len(snap.gpus) < 2:
            risky = None  # NVLS needs several GPUs on an NVSwitch; with one GPU the setting changes nothing
        if risky and value.strip() == risky[0]:
            problems.append(f"{name}={value}: {risky[2]}")
            status = max(status, risky[1], key=_severity)
            unset.append(name)
        if name == "NCCL_DEBUG" and value.strip().upper() in ("INFO", "TRACE"):
            problems.append(
                f"NCCL_DEBUG={value}: verbose logging on every rank (use for diagnosis, not production)"
            )
            status = max(status, Status.WARN, key=_severity)
            unset.append(name)
        if name in ("NCCL_ALGO", "NCCL_PROTO"):
            problems.append(
                f"{name}={value} forces one algorithm/protocol for all sizes ({NCCL_GUIDE_VALUES[name]}); "
                "NCCL's tuner usually does better — measure with `dgxperf bench nccl`"
            )
            status = max(status, Status.WARN, key=_severity)
    evidence: dict[str, Any] = {"set": nccl, "problems": problems}
    evidence["guide_values"] = {k: v for k, v in NCCL_GUIDE_VALUES.items() if k in nccl}
    fix = (
        Fix(
            f"unset {' '.join(sorted(set(unset)))} in the job's environment",
            commands=tuple(f"unset {n}" for n in sorted(set(unset))),
        )
        if unset
        else (
            Fix("measure both settings with `dgxperf bench nccl` before keeping them", manual=True)
            if problems
            else None
        )
    )
    yield Finding(
        fid, area, title, status, evidence, why, fix if status.needs_action else None, guide="A §5.1"
    )


def _severity(status: Status) -> int:
    return {Status.PASS: 0, Status.NOT_APPLICABLE: 0, Status.UNKNOWN: 1, Status.WARN: 2, Status.FAIL: 3}[
        status
    ]


def check_cuda_env(snap: Snapshot) -> Iterable[Finding]:
    fid, area, title = "framework.cuda_env", "framework", "CUDA and PyTorch environment variables"
    why = "Some debug variables serialise every kernel launch or disable PyTorch's caching allocator."
    env = snap.env
    evidence: dict[str, Any] = {
        k: env[k]
        for k in sorted(env)
        if k.startswith(("CUDA_", "PYTORCH_", "TORCH_")) and k != "TORCH_NCCL_BLOCKING_WAIT"
    }
    problems = []
    if env.get("CUDA_LAUNCH_BLOCKING", "").strip() == "1":
        problems.append("CUDA_LAUNCH_BLOCKING=1 makes every kernel launch synchronous (a debugging aid)")
    if env.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "").strip() == "1":
        problems.append("PYTORCH_NO_CUDA_MEMORY_CACHING=1 calls cudaMalloc/cudaFree for every tensor")
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        shown = [v for v in visible.split(",") if v.strip()]
        evidence["visible_devices"] = len(shown)
        if snap.gpus and len(shown) < len(snap.gpus):
            evidence["note"] = f"CUDA_VISIBLE_DEVICES shows {len(shown)} of {len(snap.gpus)} GPUs"
    evidence["problems"] = problems
    if problems:
        names = [p.split("=")[0] for p in problems]
        fix = Fix(f"unset {' '.join(names)}", commands=tuple(f"unset {n}" for n in names))
        yield Finding(fid, area, title, Status.FAIL, evidence, why, fix)
    else:
        yield Finding(fid, area, title, Status.PASS, evidence, why)


CHECKS = (check_driver_cuda, check_torch, check_libraries, check_arch, check_nccl_env, check_cuda_env)
