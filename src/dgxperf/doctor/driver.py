"""Driver checks: guide B §5.1's "nvidia-smi has failed" chain, one finding per link, plus GPU XIDs.

The chain: is there a GPU on the PCI bus; does NVML answer; is the kernel module loaded; what did the
driver write to the kernel log; are the /dev/nvidia* nodes there and usable; are the kernel headers there
for the next DKMS build; is one driver flavour installed and loaded; do the kernel module and the userspace
library agree on the version. These run whether NVML answers or not: they matter most when it does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from dgxperf.doctor.base import Check, context_reason, unknown
from dgxperf.hw.snapshot import Snapshot
from dgxperf.hw.xid import APPLICATION_XIDS, HARDWARE_XIDS, XID_LINE, parse_xids
from dgxperf.results import NA, Finding, Fix, Status

AREA = "driver"
GUIDE_CHAIN = "B §5.1"


# lines of the kernel log that mean the driver could not start or lost a GPU
NVRM_ERRORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("API mismatch", re.compile(r"API mismatch", re.I)),
    ("RmInitAdapter failed", re.compile(r"RmInitAdapter failed", re.I)),
    ("failed to allocate", re.compile(r"failed to allocate", re.I)),
    ("fallen off the bus", re.compile(r"fallen off the bus", re.I)),
    ("GPU has fallen", re.compile(r"GPU has fallen", re.I)),
    ("No NVIDIA GPU found", re.compile(r"No NVIDIA GPU found", re.I)),
)
MODULE_VERIFICATION = re.compile(r"module verification failed", re.I)
NVIDIA_LINE = re.compile(r"NVRM|nvidia", re.I)
KERNEL_MODULE_VERSION = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")


def _gpus_on_pci(snap: Snapshot) -> list[dict[str, Any]] | NA:
    pci = snap.host.get("pci_nvidia", NA("no PCI readings"))
    if isinstance(pci, NA):
        return pci
    return [d for d in pci if isinstance(d, dict) and d.get("kind") == "gpu"]


# ---------------------------------------------------------------------------------------------- PCI

PCI_WHY = "Every other link of the chain needs an NVIDIA GPU that the kernel can see on the PCI bus."


def check_pci(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "driver.pci", "NVIDIA GPUs on the PCI bus"
    pci = snap.host.get("pci_nvidia", NA("no PCI readings"))
    if isinstance(pci, NA):
        yield unknown(fid, AREA, title, context_reason(snap, pci.reason), PCI_WHY, GUIDE_CHAIN)
        return
    gpus = [d for d in pci if isinstance(d, dict) and d.get("kind") == "gpu"]
    switches = [d for d in pci if isinstance(d, dict) and d.get("kind") == "nvswitch"]
    evidence = {
        "count": len(gpus),
        "bdfs": [d.get("bdf") for d in gpus],
        "device_ids": sorted({str(d.get("device")) for d in gpus}),
        "nvswitches": len(switches),
    }
    if gpus:
        yield Finding(fid, AREA, title, Status.PASS, evidence, PCI_WHY, guide=GUIDE_CHAIN)
        return
    fix = Fix(
        summary="this machine has no NVIDIA GPU, or it is not passed through to this VM/container",
        commands=("# check with: lspci -d 10de: ; a VM needs the GPU attached with PCI passthrough",),
        manual=True,
    )
    why = "no NVIDIA GPU is visible on this machine's PCI bus. " + PCI_WHY
    yield Finding(fid, AREA, title, Status.FAIL, evidence, why, fix, GUIDE_CHAIN)


# --------------------------------------------------------------------------------------------- NVML

NVML_WHY = (
    "NVML (libnvidia-ml) is what nvidia-smi, DCGM, PyTorch's device queries and dgxperf read GPUs through."
)


def nvml_hint(error: str, gpus_on_pci: int | None, container: str | None = None) -> str:
    """What an NVML initialisation error usually means on a node."""
    text = error.lower()
    if "not installed" in text and "nvidia-ml-py" in text:
        return (
            "the nvidia-ml-py package is not installed in this Python environment: pip install nvidia-ml-py"
        )
    if gpus_on_pci == 0:
        return "there is no NVIDIA GPU on this machine's PCI bus (see driver.pci)"
    if "library_not_found" in text or "library not found" in text or "libnvidia-ml" in text:
        if container:
            return (
                f"this {container} container was started without the NVIDIA Container Toolkit (docker run "
                "--gpus all), which mounts the driver's libnvidia-ml.so.1 into it"
            )
        return (
            "the driver's userspace library libnvidia-ml.so.1 is not installed: the NVIDIA driver is missing"
        )
    if "driver_not_loaded" in text or "driver not loaded" in text:
        return "the nvidia kernel module is not loaded (see driver.modules and driver.kmsg)"
    if "mismatch" in text:
        return (
            "the userspace driver and the loaded kernel module have different versions, usually after a "
            "driver upgrade without a reboot: reboot, or reload the nvidia modules (see driver.version_match)"
        )
    if "no_permission" in text or "permission" in text:
        return "this user cannot open /dev/nvidia* (see driver.dev_nodes)"
    return "see the driver.* findings below for the link of the chain that is broken"


def check_nvml(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "driver.nvml", "NVML answers"
    reachable = snap.nvml_reachable
    error = snap.nvml.get("error")
    version = snap.nvml.get("driver_version", NA("not read"))
    evidence: dict[str, Any] = {"reachable": reachable, "error": error, "driver_version": version}
    if reachable:
        yield Finding(fid, AREA, title, Status.PASS, evidence, NVML_WHY, guide=GUIDE_CHAIN)
        return
    gpus = _gpus_on_pci(snap)
    container = snap.host.get("container")
    hint = nvml_hint(
        str(error or "unknown error"),
        len(gpus) if isinstance(gpus, list) else None,
        container if isinstance(container, str) else None,
    )
    evidence["meaning"] = hint
    fix = Fix(summary=hint, manual=True)
    why = f"NVML did not start ({error}): {hint}. {NVML_WHY}"
    yield Finding(fid, AREA, title, Status.FAIL, evidence, why, fix, GUIDE_CHAIN)


# ------------------------------------------------------------------------------------------ modules

MODULES_WHY = (
    "nvidia is the driver itself; nvidia_uvm provides the unified memory CUDA needs to start; "
    "nvidia_peermem lets the InfiniBand adapters read and write GPU memory directly (GPUDirect RDMA), "
    "without it NCCL stages inter-node traffic through host memory."
)


def check_modules(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "driver.modules", "NVIDIA kernel modules loaded"
    modules = snap.host.get("modules", NA("no module readings"))
    gpus = _gpus_on_pci(snap)
    if isinstance(modules, NA):
        yield unknown(fid, AREA, title, context_reason(snap, modules.reason), MODULES_WHY, GUIDE_CHAIN)
        return
    loaded = sorted(m for m in modules if m.startswith(("nvidia", "nv_peer_mem")))
    ib = snap.host.get("infiniband")
    has_ib = isinstance(ib, list) and bool(ib)
    evidence: dict[str, Any] = {"loaded": loaded, "infiniband": has_ib}
    if isinstance(gpus, list) and not gpus and "nvidia" not in modules:
        evidence["reason"] = "no NVIDIA GPU on the PCI bus"
        yield Finding(fid, AREA, title, Status.NOT_APPLICABLE, evidence, MODULES_WHY)
        return
    if "nvidia" not in modules:
        evidence["missing"] = ["nvidia"]
        fix = Fix(
            summary="load the nvidia kernel module",
            commands=(
                "modprobe nvidia",
                "dkms status",
                "# if dkms lists no nvidia module built for $(uname -r): install the kernel headers "
                "(driver.kernel_headers) and run dkms autoinstall; with Secure Boot on, the module must be "
                "signed with an enrolled key (mokutil --sb-state); the kernel log says why it failed",
            ),
        )
        yield Finding(fid, AREA, title, Status.FAIL, evidence, MODULES_WHY, fix, GUIDE_CHAIN)
        return
    missing, commands = [], []
    if "nvidia_uvm" not in modules:
        missing.append("nvidia_uvm")
        commands.append("nvidia-modprobe -u -c=0")
    if has_ib and not ({"nvidia_peermem", "nv_peer_mem"} & set(modules)):
        missing.append("nvidia_peermem")
        commands += [
            "modprobe nvidia_peermem",
            "echo nvidia_peermem > /etc/modules-load.d/nvidia-peermem.conf",
        ]
    evidence["missing"] = missing
    if not missing:
        yield Finding(fid, AREA, title, Status.PASS, evidence, MODULES_WHY, guide=GUIDE_CHAIN)
        return
    fix = Fix(summary="load " + " and ".join(missing), commands=tuple(commands))
    yield Finding(fid, AREA, title, Status.WARN, evidence, MODULES_WHY, fix, GUIDE_CHAIN)


# --------------------------------------------------------------------------------------------- kmsg

KMSG_WHY = (
    "The driver reports why it could not start or lost a GPU in the kernel log (dmesg | grep NVRM, guide "
    "B §5.1); the log covers the time since boot, so an error from before a fix stays until the next reboot."
)


def _kmsg(snap: Snapshot) -> list[str] | NA:
    lines = snap.host.get("kmsg", NA("no kernel log reading"))
    if isinstance(lines, NA):
        return lines
    return [str(line) for line in lines]


def check_kmsg(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "driver.kmsg", "NVIDIA driver errors in the kernel log"
    lines = _kmsg(snap)
    if isinstance(lines, NA):
        yield unknown(fid, AREA, title, context_reason(snap, lines.reason), KMSG_WHY, GUIDE_CHAIN)
        return
    errors: list[str] = []
    kinds: dict[str, int] = {}
    verification: list[str] = []
    for line in lines:
        if not NVIDIA_LINE.search(line) or XID_LINE.search(line):
            continue
        matched = [name for name, pattern in NVRM_ERRORS if pattern.search(line)]
        if matched:
            errors.append(line)
            for name in matched:
                kinds[name] = kinds.get(name, 0) + 1
        elif MODULE_VERIFICATION.search(line):
            verification.append(line)
    evidence: dict[str, Any] = {"lines_read": len(lines), "errors": kinds, "last_lines": errors[-5:]}
    if verification:
        evidence["module_verification"] = verification[-1]
    if errors:
        fix = Fix(
            summary="read the driver's errors",
            commands=(
                "# API mismatch: userspace and kernel module versions differ — reboot after a driver upgrade",
                "# RmInitAdapter failed, fallen off the bus: firmware, power, hardware — reset, reseat, RMA",
                "# No NVIDIA GPU found: the module does not support this GPU, or the GPU is bound to another "
                "driver (vfio-pci, nouveau)",
                "dmesg | grep -E 'NVRM|nvidia' | tail -50",
            ),
            manual=True,
        )
        yield Finding(fid, AREA, title, Status.FAIL, evidence, KMSG_WHY, fix, GUIDE_CHAIN)
        return
    if verification:
        why = (
            "The nvidia module is not signed with a key the kernel trusts; it loaded anyway and tainted the "
            "kernel. With Secure Boot enforcing, it would not load at all. " + KMSG_WHY
        )
        fix = Fix(
            summary="sign the nvidia module, or accept the taint",
            commands=(
                "# check Secure Boot with: mokutil --sb-state ; DKMS can sign with an enrolled MOK key",
            ),
            manual=True,
        )
        yield Finding(fid, AREA, title, Status.WARN, evidence, why, fix, GUIDE_CHAIN)
        return
    yield Finding(fid, AREA, title, Status.PASS, evidence, KMSG_WHY, guide=GUIDE_CHAIN)


# ---------------------------------------------------------------------------------------------- XID

XID_WHY = (
    "An XID is the driver's report of a GPU error. Hardware XIDs (double-bit ECC, row-remap failure, GPU "
    "off the bus, NVLink, GSP errors) mean the GPU needs a reset or replacement; application XIDs (illegal "
    "memory access, MMU fault) point at the program that ran. The kernel log covers the time since boot."
)


def _xid_summary(xids: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for entry in xids:
        code = str(entry["xid"])
        item = summary.setdefault(code, {"count": 0, "gpus": [], "last": ""})
        item["count"] += 1
        item["last"] = entry["line"]
        if entry["pci"] not in item["gpus"]:
            item["gpus"].append(entry["pci"])
    return dict(sorted(summary.items(), key=lambda kv: int(kv[0])))


def check_xid(snap: Snapshot) -> Iterable[Finding]:
    fid, area, title = "gpu.xid", "gpu", "GPU errors (XIDs) since boot"
    lines = _kmsg(snap)
    if isinstance(lines, NA):
        yield unknown(fid, area, title, context_reason(snap, lines.reason), XID_WHY)
        return
    xids = parse_xids(lines)
    codes = {entry["xid"] for entry in xids}
    hardware = sorted(codes & HARDWARE_XIDS)
    application = sorted(codes & APPLICATION_XIDS)
    other = sorted(codes - HARDWARE_XIDS - APPLICATION_XIDS)
    evidence = {"xids": _xid_summary(xids), "hardware": hardware, "application": application, "other": other}
    if hardware:
        gpus = sorted({e["pci"] for e in xids if e["xid"] in HARDWARE_XIDS})
        fix = Fix(
            summary="drain the node, collect nvidia-bug-report.sh, reset or RMA",
            commands=(
                "# drain this node from the scheduler first",
                "nvidia-bug-report.sh",
                f"# then reset the GPU(s) {', '.join(gpus)} (nvidia-smi -r -i <bus id>, with no process on "
                "it) or reboot; if the XID comes back, RMA the GPU",
            ),
            manual=True,
        )
        yield Finding(fid, area, title, Status.FAIL, evidence, XID_WHY, fix)
        return
    if application or other:
        fix = Fix(
            summary="look at the program named in the XID lines",
            commands=(
                "# XID 13/31/43: a kernel faulted (out-of-bounds access, illegal address): run the program "
                "under compute-sanitizer; XID 45: a context was cleaned up after an earlier error",
                "# other XIDs: look the code up in NVIDIA's XID catalogue: docs.nvidia.com/deploy/xid-errors",
            ),
            manual=True,
        )
        yield Finding(fid, area, title, Status.WARN, evidence, XID_WHY, fix)
        return
    yield Finding(fid, area, title, Status.PASS, evidence, XID_WHY)


# ----------------------------------------------------------------------------------------- dev nodes

DEV_NODES_WHY = (
    "CUDA opens /dev/nvidiactl, /dev/nvidia-uvm and one /dev/nvidiaN per GPU (ls -l /dev/nvidia*, guide "
    "B §5.1); a missing node makes the GPU invisible, a node without read/write permission for other users "
    "limits the GPUs to root or one group."
)


def check_dev_nodes(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "driver.dev_nodes", "/dev/nvidia* device nodes"
    gpus = _gpus_on_pci(snap)
    nodes = snap.host.get("dev_nodes", NA("no device node readings"))
    if isinstance(gpus, NA) or isinstance(nodes, NA):
        reason = gpus.reason if isinstance(gpus, NA) else str(getattr(nodes, "reason", nodes))
        yield unknown(fid, AREA, title, context_reason(snap, reason), DEV_NODES_WHY, GUIDE_CHAIN)
        return
    modes = {str(n.get("path")): str(n.get("mode")) for n in nodes if isinstance(n, dict)}
    if not gpus:
        none = {"nodes": modes, "reason": "no NVIDIA GPU on the PCI bus"}
        yield Finding(fid, AREA, title, Status.NOT_APPLICABLE, none, DEV_NODES_WHY)
        return
    numbered = sorted(p for p in modes if re.fullmatch(r"/dev/nvidia\d+", p))
    expected_numbered = [f"/dev/nvidia{i}" for i in range(len(gpus))]
    required = ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    missing = [p for p in required if p not in modes]
    if len(numbered) < len(gpus):
        missing += [p for p in expected_numbered if p not in modes]
    checked = [p for p in (*required, *numbered) if p in modes]
    closed = [p for p in checked if not _world_rw(modes[p])]
    evidence: dict[str, Any] = {
        "gpus_on_pci": len(gpus),
        "nodes": modes,
        "missing": missing,
        "not_world_rw": closed,
    }
    in_container = snap.host.get("container")
    chmod = ["chmod 0666 " + " ".join(closed)] if closed else []
    if missing:
        commands = ["nvidia-modprobe -u -c=0"]
        commands += [
            f"nvidia-modprobe -c={p.removeprefix('/dev/nvidia')}" for p in missing if p[-1].isdigit()
        ]
        if in_container:
            note = (
                f"# this is a {in_container} container: start it with --gpus all (NVIDIA Container Toolkit)"
            )
            commands.insert(0, note + " so that the runtime passes the nodes in")
        commands.append("# the nodes appear when the nvidia module is loaded and nvidia-persistenced starts")
        commands += chmod
        fix = Fix(summary="create the missing /dev/nvidia* nodes", commands=tuple(dict.fromkeys(commands)))
        yield Finding(fid, AREA, title, Status.FAIL, evidence, DEV_NODES_WHY, fix, GUIDE_CHAIN)
        return
    if closed:
        fix = Fix(
            summary="let every user open the GPU device nodes",
            commands=(
                *chmod,
                "# the driver creates them with NVreg_DeviceFileMode (default 0666): look for it in "
                "/etc/modprobe.d/; 0660 with NVreg_DeviceFileGID is a deliberate restriction to one group",
            ),
        )
        yield Finding(fid, AREA, title, Status.WARN, evidence, DEV_NODES_WHY, fix, GUIDE_CHAIN)
        return
    yield Finding(fid, AREA, title, Status.PASS, evidence, DEV_NODES_WHY, guide=GUIDE_CHAIN)


def _world_rw(mode: str) -> bool:
    try:
        return int(mode, 8) & 0o666 == 0o666
    except ValueError:
        return False


# ------------------------------------------------------------------------------------ kernel headers

HEADERS_WHY = (
    "The nvidia module is built by DKMS against the running kernel's headers (uname -r vs linux-headers, "
    "guide B §5.1); without them the build fails on the next kernel update and the node boots without a "
    "GPU driver."
)


def check_kernel_headers(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "driver.kernel_headers", "Kernel headers for the running kernel"
    kernel = snap.host.get("kernel", {})
    release = kernel.get("release", NA("not read")) if isinstance(kernel, dict) else kernel
    headers = kernel.get("headers_dir", NA("not read")) if isinstance(kernel, dict) else kernel
    evidence = {"release": release, "headers_dir": headers}
    if isinstance(release, NA):
        yield unknown(fid, AREA, title, context_reason(snap, release.reason), HEADERS_WHY, GUIDE_CHAIN)
        return
    if not isinstance(headers, NA):
        yield Finding(fid, AREA, title, Status.PASS, evidence, HEADERS_WHY, guide=GUIDE_CHAIN)
        return
    container = snap.host.get("container")
    if container:
        reason = context_reason(snap, f"the host's kernel headers are not visible here ({headers.reason})")
        yield unknown(fid, AREA, title, reason, HEADERS_WHY, GUIDE_CHAIN, **evidence)
        return
    apt = "apt-get install -y linux-headers-$(uname -r)"
    dnf = "dnf install -y kernel-devel-$(uname -r) kernel-headers-$(uname -r)"
    packages = snap.host.get("nvidia_packages")
    rpm = isinstance(packages, NA) and "rpm" in packages.reason
    commands = (dnf, f"# Debian/Ubuntu: {apt}") if rpm else (apt, f"# RHEL/Rocky: {dnf}")
    fix = Fix(summary=f"install the kernel headers for {release}", commands=commands)
    yield Finding(fid, AREA, title, Status.WARN, evidence, HEADERS_WHY, fix, GUIDE_CHAIN)


# ----------------------------------------------------------------------------------------- flavour

FLAVOUR_WHY = (
    "NVIDIA ships two kernel modules, the open one and the proprietary one, with one userspace; guide B "
    "§2.1 warns never to install both: packages fight over the same files and the module that loads may "
    "not be the one the userspace was installed with, and nvidia-smi then fails."
)


def loaded_flavour(version_text: Any) -> str | NA:
    """ "open" or "proprietary" from /proc/driver/nvidia/version."""
    if isinstance(version_text, NA):
        return version_text
    text = str(version_text)
    if "Open Kernel Module" in text:
        return "open"
    if "Kernel Module" in text:
        return "proprietary"
    return NA(f"unparseable /proc/driver/nvidia/version: {text[:60]!r}")


def check_flavour(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "driver.flavour", "One driver flavour, open or proprietary"
    loaded = loaded_flavour(snap.host.get("nvidia_proc_version", NA("not read")))
    packages = snap.host.get("nvidia_packages", NA("not read"))
    open_pkgs = list(packages.get("open", [])) if isinstance(packages, dict) else []
    prop_pkgs = list(packages.get("proprietary", [])) if isinstance(packages, dict) else []
    installed = [f for f, pkgs in (("open", open_pkgs), ("proprietary", prop_pkgs)) if pkgs]
    evidence = {"loaded": loaded, "open_packages": open_pkgs, "proprietary_packages": prop_pkgs}
    if open_pkgs and prop_pkgs:
        keep = loaded if isinstance(loaded, str) else None
        drop = (prop_pkgs if keep == "open" else open_pkgs) if keep else None
        commands = ["# remove one flavour's packages, then reboot"]
        if drop:
            commands.append(f"# e.g. keep the loaded {keep} flavour: apt-get purge {' '.join(drop)}")
        fix = Fix(summary="keep one driver flavour", commands=tuple(commands), manual=True)
        yield Finding(fid, AREA, title, Status.FAIL, evidence, FLAVOUR_WHY, fix, "B §2.1")
        return
    if isinstance(loaded, str) and len(installed) == 1 and installed[0] != loaded:
        fix = Fix(
            summary=f"the loaded {loaded} module is not the installed {installed[0]} driver",
            commands=(
                "# a runfile install, or a reboot pending after switching flavour: reboot; if it persists, "
                "reinstall the driver packages",
            ),
            manual=True,
        )
        yield Finding(fid, AREA, title, Status.FAIL, evidence, FLAVOUR_WHY, fix, "B §2.1")
        return
    if isinstance(loaded, NA) and not installed:
        reason = loaded.reason
        if isinstance(packages, NA):
            reason = f"{loaded.reason}; {packages.reason}"
        yield unknown(fid, AREA, title, context_reason(snap, reason), FLAVOUR_WHY, "B §2.1", **evidence)
        return
    yield Finding(fid, AREA, title, Status.PASS, evidence, FLAVOUR_WHY, guide="B §2.1")


# ------------------------------------------------------------------------------------ version match

VERSION_WHY = (
    "The kernel module and the userspace driver (libnvidia-ml, libcuda) must be the same version; after "
    "an upgrade without a reboot the old module stays loaded and NVML fails with 'Driver/library version "
    "mismatch'."
)


def kernel_module_version(version_text: Any) -> str | NA:
    if isinstance(version_text, NA):
        return version_text
    match = KERNEL_MODULE_VERSION.search(str(version_text))
    return match.group(1) if match else NA("unparseable /proc/driver/nvidia/version: no module version")


def check_version_match(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "driver.version_match", "Kernel module and userspace driver versions agree"
    kernel = kernel_module_version(snap.host.get("nvidia_proc_version", NA("not read")))
    error = str(snap.nvml.get("error") or "")
    user: Any = snap.nvml.get("driver_version") if snap.nvml_reachable else NA(f"NVML unreachable: {error}")
    if user is None:
        user = NA("NVML gave no driver version")
    evidence = {"kernel_module": kernel, "userspace": user}
    fix = Fix(
        summary="reboot, or reload the nvidia kernel modules",
        commands=(
            "# with no GPU process running: systemctl stop nvidia-persistenced nvidia-fabricmanager "
            "nvidia-dcgm; rmmod nvidia_peermem nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia",
            "# or simply reboot",
        ),
        manual=True,
    )
    if not snap.nvml_reachable and "mismatch" in error.lower():
        yield Finding(
            fid, AREA, title, Status.FAIL, {**evidence, "nvml_error": error}, VERSION_WHY, fix, GUIDE_CHAIN
        )
        return
    if isinstance(kernel, NA) or isinstance(user, NA):
        reason = "; ".join(v.reason for v in (kernel, user) if isinstance(v, NA))
        yield unknown(fid, AREA, title, context_reason(snap, reason), VERSION_WHY, GUIDE_CHAIN, **evidence)
        return
    if str(kernel) == str(user):
        yield Finding(fid, AREA, title, Status.PASS, evidence, VERSION_WHY, guide=GUIDE_CHAIN)
        return
    yield Finding(fid, AREA, title, Status.FAIL, evidence, VERSION_WHY, fix, GUIDE_CHAIN)


CHECKS: tuple[Check, ...] = (
    check_pci,
    check_nvml,
    check_modules,
    check_kmsg,
    check_dev_nodes,
    check_kernel_headers,
    check_flavour,
    check_version_match,
    check_xid,
)
