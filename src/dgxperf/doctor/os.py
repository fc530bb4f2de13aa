"""Operating-system checks: kernel parameters, services, CPU frequency, huge pages, shared memory, limits.

Guide A §2.2 (RHEL 8 tuning of a DGX A100: sysctl values, irqbalance and tuned) and guide B §2.3; the
rest (governor, THP defrag, /dev/shm, memlock, swap, NUMA balancing) are the usual causes of a training
node that is slower or less stable than its hardware. Every check reads only ``snap.host``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from typing import Any

from dgxperf.doctor.base import Check, context_reason, unknown
from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import NA, Finding, Fix, Status

AREA = "os"
GUIDE_SYSCTL = "A §2.2"
GUIDE_SERVICES = "A §2.2"

GIB = 1 << 30
MIB = 1 << 20
SOCKET_BUFFER = 16777216  # 16 MiB, guide A §2.2


def _host(snap: Snapshot, *keys: str) -> Any:
    """``snap.host[k1][k2]...``; a missing key is NA (an older snapshot, or a reader that failed)."""
    value: Any = snap.host
    for key in keys:
        if isinstance(value, NA):
            return value
        if not isinstance(value, dict) or key not in value:
            return NA(f"no host reading {'.'.join(keys)}")
        value = value[key]
    return value


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


# -------------------------------------------------------------------------------------------------- sysctl


def _tcp_fix(default: int) -> Callable[[str], str]:
    """Raise the third field (max) to 16 MiB; keep min and default, but never below the guide's values."""

    def fix(current: str) -> str:
        fields = [_int(f) for f in current.split()]
        low = fields[0] if len(fields) == 3 and fields[0] is not None else 4096
        mid = fields[1] if len(fields) == 3 and fields[1] is not None else default
        return f"{max(low, 4096)} {max(mid, default)} {SOCKET_BUFFER}"

    return fix


def _third_at_least(minimum: int) -> Callable[[str], bool | None]:
    def judge(value: str) -> bool | None:
        fields = value.split()
        top = _int(fields[2]) if len(fields) == 3 else None
        return None if top is None else top >= minimum

    return judge


def _at_least(minimum: int) -> Callable[[str], bool | None]:
    def judge(value: str) -> bool | None:
        number = _int(value)
        return None if number is None else number >= minimum

    return judge


def _equals(expected: str) -> Callable[[str], bool | None]:
    def judge(value: str) -> bool | None:
        number = _int(value)
        return None if number is None else str(number) == expected

    return judge


# key -> (title, recommended, judge(value) -> ok or None when unparseable, fix value from current value, why)
SYSCTL_RULES: dict[str, tuple[str, str, Callable[[str], bool | None], Callable[[str], str], str]] = {
    "vm.max_map_count": (
        "Memory map count limit",
        ">= 262144",
        _at_least(262144),
        lambda _: "262144",
        "Every mmap (DataLoader shared-memory tensors, memory-mapped datasets and checkpoints, CUDA and NCCL "
        "host allocations) takes one map entry; a process past vm.max_map_count gets ENOMEM. The kernel "
        "default is 65530; guide A §2.2 sets 262144.",
    ),
    "vm.overcommit_memory": (
        "Memory overcommit policy",
        "1",
        _equals("1"),
        lambda _: "1",
        "The kernel default 0 is a heuristic that refuses allocations it judges obviously too large; 1 never "
        "refuses, so fork() of DataLoader workers from a process with a large address space and large sparse "
        "mmaps always succeed. The price is that nothing is refused up front: the OOM killer is the only "
        "limit. Guide A §2.2 sets 1.",
    ),
    "net.core.rmem_max": (
        "Largest socket receive buffer",
        f">= {SOCKET_BUFFER}",
        _at_least(SOCKET_BUFFER),
        lambda _: str(SOCKET_BUFFER),
        "The largest receive buffer a program may ask for with SO_RCVBUF; NCCL's socket transport and data "
        "loading over TCP on 100 Gb/s links need more than the default. Guide A §2.2 sets 16 MiB. It does "
        "not affect InfiniBand verbs or NVLink traffic.",
    ),
    "net.core.wmem_max": (
        "Largest socket send buffer",
        f">= {SOCKET_BUFFER}",
        _at_least(SOCKET_BUFFER),
        lambda _: str(SOCKET_BUFFER),
        "The largest send buffer a program may ask for with SO_SNDBUF; NCCL's socket transport and data "
        "loading over TCP on 100 Gb/s links need more than the default. Guide A §2.2 sets 16 MiB. It does "
        "not affect InfiniBand verbs or NVLink traffic.",
    ),
    "net.ipv4.tcp_rmem": (
        "TCP receive buffer auto-tuning range",
        f"max (third field) >= {SOCKET_BUFFER}",
        _third_at_least(SOCKET_BUFFER),
        _tcp_fix(87380),
        "min, default and max of a TCP connection's receive buffer; auto-tuning never grows a buffer past "
        "the max, which caps one connection's throughput at max / round-trip time. Guide A §2.2 sets "
        "'4096 87380 16777216'; the fix keeps a larger min or default that the kernel already has.",
    ),
    "net.ipv4.tcp_wmem": (
        "TCP send buffer auto-tuning range",
        f"max (third field) >= {SOCKET_BUFFER}",
        _third_at_least(SOCKET_BUFFER),
        _tcp_fix(65536),
        "min, default and max of a TCP connection's send buffer; auto-tuning never grows a buffer past the "
        "max, which caps one connection's throughput at max / round-trip time. Guide A §2.2 sets "
        "'4096 65536 16777216'; the fix keeps a larger min or default that the kernel already has.",
    ),
}


def check_sysctl(snap: Snapshot) -> Iterable[Finding]:
    for key, (title, recommended, judge, fix_value, why) in SYSCTL_RULES.items():
        fid = f"os.sysctl.{key}"
        value = _host(snap, "sysctl", key)
        if isinstance(value, NA):
            yield unknown(fid, AREA, title, context_reason(snap, value.reason), why, GUIDE_SYSCTL, key=key)
            continue
        evidence = {"key": key, "value": value, "recommended": recommended}
        ok = judge(str(value))
        if ok is None:
            reason = f"unparseable value {value!r} of {key}"
            yield unknown(fid, AREA, title, reason, why, GUIDE_SYSCTL, **evidence)
        elif ok:
            yield Finding(fid, AREA, title, Status.PASS, evidence, why, guide=GUIDE_SYSCTL)
        else:
            target = fix_value(str(value))
            fix = Fix(summary=f"set {key} = {target}", sysctl=((key, target),))
            yield Finding(fid, AREA, title, Status.WARN, evidence, why, fix, guide=GUIDE_SYSCTL)


# ------------------------------------------------------------------------------------------------ services

IRQBALANCE_WHY = (
    "irqbalance moves device interrupts (NICs, NVMe, GPUs) between cores every few seconds. Guide A §2.2 "
    "stops and disables it so that interrupts stay where they are pinned by hand, on the cores of each "
    "device's own NUMA node. This is the guide's recommendation, not a universal rule: with irqbalance off "
    "and no pinning of your own (e.g. set_irq_affinity scripts from MLNX_OFED), interrupts stay where the "
    "kernel put them at boot, often all on one core."
)
TUNED_WHY = (
    "tuned applies a profile at boot and whenever it is restarted (CPU governor, transparent huge pages, "
    "sysctl values, disk settings) and can silently undo the tuning checked here; guide A §2.2 masks it so "
    "that nothing overrides the node's settings. Keeping tuned with a profile that contains these settings "
    "is an alternative."
)


def _service_finding(snap: Snapshot, name: str, bad_when_installed: bool) -> Finding:
    fid, title = f"os.service.{name}", f"{name} service"
    why = IRQBALANCE_WHY if name == "irqbalance" else TUNED_WHY
    svc = _host(snap, "services", name)
    if isinstance(svc, NA) or not isinstance(svc, dict):
        reason = svc.reason if isinstance(svc, NA) else f"unparseable services entry for {name}"
        return unknown(fid, AREA, title, context_reason(snap, reason), why, GUIDE_SERVICES)
    systemd = _host(snap, "systemd") is True
    running = svc.get("running") is True
    enabled, masked, installed = (
        svc.get("enabled") is True,
        svc.get("masked") is True,
        svc.get("installed") is True,
    )
    evidence = {"systemd": systemd, **{k: svc.get(k) for k in ("running", "enabled", "masked", "installed")}}
    if name == "irqbalance":
        fix = Fix(
            summary="stop and disable irqbalance",
            commands=(
                "systemctl disable --now irqbalance",
                "# then pin NIC/NVMe interrupts to the cores of their NUMA node yourself (guide A §2.2)",
            ),
        )
    else:
        fix = Fix(summary="stop and mask tuned", commands=("systemctl mask --now tuned",))
    if not systemd:
        if running:
            stop = Fix(
                summary=f"stop {name}",
                commands=(
                    f"# no systemd on this node: stop {name} with its init system and keep it from starting",
                    f"pkill -x {shlex.quote(name)} || true",
                ),
            )
            return Finding(fid, AREA, title, Status.WARN, evidence, why, stop, guide=GUIDE_SERVICES)
        reason = context_reason(
            snap, f"no systemd: cannot tell whether {name} is enabled (it is not running here)"
        )
        return unknown(fid, AREA, title, reason, why, GUIDE_SERVICES, **evidence)
    if masked and not running:
        status = Status.PASS
    elif running or enabled or (bad_when_installed and installed and not masked):
        status = Status.WARN
    else:
        status = Status.PASS
    return Finding(
        fid, AREA, title, status, evidence, why, fix if status.needs_action else None, GUIDE_SERVICES
    )


def check_services(snap: Snapshot) -> Iterable[Finding]:
    yield _service_finding(snap, "irqbalance", bad_when_installed=False)
    yield _service_finding(snap, "tuned", bad_when_installed=True)


# --------------------------------------------------------------------------------------------- governor

GOVERNOR_WHY = (
    "With ondemand, schedutil or powersave the cores clock down between bursts and take time to ramp up "
    "again; the CPU side of training (data loading and augmentation, Python, kernel launches) then runs "
    "slower and GPU utilisation dips. performance keeps them at their highest frequency, at a cost in idle "
    "power."
)


def check_cpu_governor(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "os.cpu_governor", "CPU frequency governor"
    counts = _host(snap, "cpu_governors")
    if isinstance(counts, NA):
        yield Finding(fid, AREA, title, Status.NOT_APPLICABLE, {"reason": counts.reason}, GOVERNOR_WHY)
        return
    if not isinstance(counts, dict) or not counts:
        yield Finding(
            fid, AREA, title, Status.NOT_APPLICABLE, {"reason": "no CPU reports a governor"}, GOVERNOR_WHY
        )
        return
    evidence = {"governors": dict(counts)}
    if set(counts) == {"performance"}:
        yield Finding(fid, AREA, title, Status.PASS, evidence, GOVERNOR_WHY)
        return
    fix = Fix(
        summary="set every CPU's frequency governor to performance",
        commands=(
            "cpupower frequency-set -g performance",
            "# this does not survive a reboot: run it from a systemd oneshot unit at boot (or set "
            "GOVERNOR=performance in /etc/default/cpufrequtils on Debian/Ubuntu)",
        ),
    )
    yield Finding(fid, AREA, title, Status.WARN, evidence, GOVERNOR_WHY, fix)


# ------------------------------------------------------------------------------------------------- THP

THP_WHY = (
    "With transparent huge page defrag 'always', a page fault that finds no free 2 MiB page compacts "
    "memory synchronously, stalling that allocation (and the training step or DataLoader worker behind it) "
    "for milliseconds or more; 'defer+madvise' compacts in the background and stalls only regions that "
    "asked for huge pages with madvise."
)


def check_thp(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "os.thp", "Transparent huge pages defrag"
    enabled, defrag = _host(snap, "thp", "enabled"), _host(snap, "thp", "defrag")
    evidence = {"enabled": enabled, "defrag": defrag}
    if isinstance(defrag, NA):
        yield unknown(fid, AREA, title, context_reason(snap, defrag.reason), THP_WHY, enabled=enabled)
        return
    if defrag == "always" and enabled != "never":  # with THP off, defrag has nothing to do
        path = "/sys/kernel/mm/transparent_hugepage/defrag"
        fix = Fix(
            summary="let THP compaction happen in the background",
            commands=(
                f"echo defer+madvise > {path}",
                f"echo 'w {path} - - - - defer+madvise' > /etc/tmpfiles.d/dgxperf-thp.conf",
            ),
        )
        yield Finding(fid, AREA, title, Status.WARN, evidence, THP_WHY, fix)
        return
    yield Finding(fid, AREA, title, Status.PASS, evidence, THP_WHY)


# --------------------------------------------------------------------------------------------- /dev/shm

SHM_WHY = (
    "PyTorch DataLoader workers pass every batch to the training process through shared memory in "
    "/dev/shm; when it is full the workers die with 'bus error' or 'unable to write to file </torch_...>'. "
    "Docker's default is 64 MB."
)
SHM_MINIMUM = GIB


def _gib(value: Any) -> float | None:
    return round(value / GIB, 2) if isinstance(value, int) else None


def check_shm(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "os.shm", "/dev/shm size"
    mounted = _host(snap, "shm", "mounted")
    size = _host(snap, "shm", "size_bytes")
    mem_total = _host(snap, "meminfo", "MemTotal")
    target_gib = max(16, mem_total // GIB // 2) if isinstance(mem_total, int) else 16
    evidence = {"mounted": mounted, "size_bytes": size, "size_gib": _gib(size), "minimum_bytes": SHM_MINIMUM}
    if not isinstance(mounted, bool) or (mounted and isinstance(size, NA)):
        missing = mounted if isinstance(mounted, NA) else size
        reason = missing.reason if isinstance(missing, NA) else "unparseable shm reading"
        yield unknown(fid, AREA, title, context_reason(snap, reason), SHM_WHY, **evidence)
        return
    if mounted is True and isinstance(size, int) and size >= SHM_MINIMUM:
        yield Finding(fid, AREA, title, Status.PASS, evidence, SHM_WHY)
        return
    if mounted is True:
        command = f"mount -o remount,size={target_gib}G /dev/shm"
    else:
        command = (
            f"mountpoint -q /dev/shm || mount -t tmpfs -o rw,nosuid,nodev,size={target_gib}G tmpfs /dev/shm"
        )
    container = snap.host.get("container")
    lines = [
        command,
        f"# persist it in /etc/fstab: tmpfs /dev/shm tmpfs rw,nosuid,nodev,size={target_gib}G 0 0",
        f"# in a container, start it with --shm-size={target_gib}g or --ipc=host (Kubernetes: an emptyDir "
        "with medium: Memory mounted at /dev/shm)",
    ]
    if container:
        lines.insert(0, f"# this is a {container} container: restart it with a larger /dev/shm (see below)")
    fix = Fix(summary=f"give /dev/shm {target_gib} GiB (half of RAM, at least 16G)", commands=tuple(lines))
    yield Finding(fid, AREA, title, Status.FAIL, evidence, SHM_WHY, fix)


# ---------------------------------------------------------------------------------------------- memlock

MEMLOCK_WHY = (
    "RDMA (InfiniBand or RoCE verbs, used by NCCL's IB transport and GPUDirect RDMA) pins the memory it "
    "registers, and the locked-memory limit caps how much a process may pin; when registration is refused "
    "NCCL fails or falls back to slower paths. This reading is the limit of the process that ran dgxperf; "
    "services and containers have their own."
)


def check_memlock(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "os.memlock", "Locked-memory limit for RDMA"
    ib = _host(snap, "infiniband")
    if isinstance(ib, NA) or not ib:
        reason = ib.reason if isinstance(ib, NA) else "no InfiniBand/RoCE devices in /sys/class/infiniband"
        yield Finding(fid, AREA, title, Status.NOT_APPLICABLE, {"reason": reason}, MEMLOCK_WHY)
        return
    soft, hard = _host(snap, "limits", "memlock_soft"), _host(snap, "limits", "memlock_hard")
    evidence = {"memlock_soft": soft, "memlock_hard": hard, "ib_devices": [d.get("name") for d in ib]}
    missing = next((v.reason for v in (soft, hard) if isinstance(v, NA)), None)
    if missing is not None:
        yield unknown(fid, AREA, title, context_reason(snap, missing), MEMLOCK_WHY, **evidence)
        return
    if soft == "unlimited" and hard == "unlimited":
        yield Finding(fid, AREA, title, Status.PASS, evidence, MEMLOCK_WHY)
        return
    fix = Fix(
        summary="lift the locked-memory limit",
        limits=(
            "* soft memlock unlimited",
            "* hard memlock unlimited",
            "root soft memlock unlimited",
            "root hard memlock unlimited",
        ),
        commands=(
            "# limits.d applies to new login sessions ('*' does not cover root, hence the root lines); "
            "systemd services need LimitMEMLOCK=infinity, containers --ulimit memlock=-1:-1",
        ),
    )
    yield Finding(fid, AREA, title, Status.WARN, evidence, MEMLOCK_WHY, fix)


# ------------------------------------------------------------------------------------------------- swap

SWAP_WHY = (
    "With swap present and a high vm.swappiness (the default is 60) the kernel swaps out idle anonymous "
    "memory of the training process to keep page cache for dataset reads; touching a swapped-out page "
    "costs a disk read and stalls the step. 10 keeps swap for real memory pressure."
)


def check_swap(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "os.swap", "Swap and swappiness"
    total = _host(snap, "swap", "total_bytes")
    devices = _host(snap, "swap", "devices")
    swappiness = _host(snap, "sysctl", "vm.swappiness")
    evidence = {"swap_total_bytes": total, "swap_devices": devices, "vm.swappiness": swappiness}
    if isinstance(total, NA):
        yield unknown(fid, AREA, title, context_reason(snap, total.reason), SWAP_WHY, **evidence)
        return
    if not total:
        yield Finding(fid, AREA, title, Status.PASS, evidence, SWAP_WHY)
        return
    value = None if isinstance(swappiness, NA) else _int(str(swappiness))
    if value is None:
        reason = (
            swappiness.reason if isinstance(swappiness, NA) else f"unparseable vm.swappiness {swappiness!r}"
        )
        yield unknown(fid, AREA, title, context_reason(snap, reason), SWAP_WHY, **evidence)
        return
    if value > 10:
        fix = Fix(summary="set vm.swappiness = 10", sysctl=(("vm.swappiness", "10"),))
        yield Finding(fid, AREA, title, Status.WARN, evidence, SWAP_WHY, fix)
        return
    yield Finding(fid, AREA, title, Status.PASS, evidence, SWAP_WHY)


# ---------------------------------------------------------------------------------------- NUMA balancing

NUMA_WHY = (
    "Automatic NUMA balancing periodically unmaps pages to learn which node touches them and migrates them; "
    "the hinting faults and migrations stall threads, and memory pinned for DMA (CUDA pinned host buffers, "
    "RDMA registrations) cannot move anyway. Training processes are bound to their GPU's NUMA node on "
    "purpose, so the balancer only adds jitter."
)


def check_numa_balancing(snap: Snapshot) -> Iterable[Finding]:
    fid, title = "os.numa_balancing", "Automatic NUMA balancing"
    nodes = _host(snap, "numa_nodes")
    count = len(nodes) if isinstance(nodes, list) else 0
    value = _host(snap, "sysctl", "kernel.numa_balancing")
    evidence = {"numa_nodes": count, "kernel.numa_balancing": value}
    if count <= 1:
        reason = nodes.reason if isinstance(nodes, NA) else f"{count} NUMA node(s): nothing to balance"
        yield Finding(fid, AREA, title, Status.NOT_APPLICABLE, {**evidence, "reason": reason}, NUMA_WHY)
        return
    number = None if isinstance(value, NA) else _int(str(value))
    if number is None:
        reason = value.reason if isinstance(value, NA) else f"unparseable kernel.numa_balancing {value!r}"
        yield unknown(fid, AREA, title, context_reason(snap, reason), NUMA_WHY, **evidence)
        return
    if number & 1:
        fix = Fix(summary="turn automatic NUMA balancing off", sysctl=(("kernel.numa_balancing", "0"),))
        yield Finding(fid, AREA, title, Status.WARN, evidence, NUMA_WHY, fix)
        return
    yield Finding(fid, AREA, title, Status.PASS, evidence, NUMA_WHY)


CHECKS: tuple[Check, ...] = (
    check_sysctl,
    check_services,
    check_cpu_governor,
    check_thp,
    check_shm,
    check_memlock,
    check_swap,
    check_numa_balancing,
)
