"""Storage checks: NVMe queue settings and data-volume mount options (guide A §2.2, guide B §2.3).

The queue settings persist through one udev rule file (the fix script gathers the ``udev`` lines into
/etc/udev/rules.d/60-dgxperf.rules); the ``echo`` commands apply them now. The order matters: the
scheduler must be ``none`` before ``nr_requests`` may reach the hardware queue depth.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from typing import Any

from dgxperf.doctor.base import Check, context_reason, unknown
from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import NA, Finding, Fix, Status

AREA = "storage"
GUIDE_NVME = "A §2.2, B §2.3"
GUIDE_MOUNTS = "B §2.3"

NVME_MATCH = 'ACTION=="add|change", KERNEL=="nvme[0-9]*n[0-9]*"'
UDEV_SCHEDULER = f'{NVME_MATCH}, ATTR{{queue/scheduler}}="none"'
UDEV_ROTATIONAL = f'{NVME_MATCH}, ATTR{{queue/rotational}}="0"'
NR_REQUESTS = 1023  # the guides write 1024; with scheduler none the kernel caps it at the queue depth, 1023

DATA_FSTYPES = frozenset({"ext4", "ext3", "ext2", "xfs", "btrfs", "f2fs"})
DATA_PREFIXES = ("/raid", "/data", "/mnt")
SYSTEM_PREFIXES = ("/etc", "/proc", "/sys", "/dev", "/run", "/boot")
RAID_OR_NVME_DEVICE = re.compile(r"^/dev/(?:nvme\d+n\d+(?:p\d+)?|md\d+(?:p\d+)?|md/.+)$")

SCHEDULER_WHY = (
    "NVMe drives have many deep hardware queues and order requests themselves; an I/O scheduler "
    "(mq-deadline, bfq, kyber) adds locking and per-request CPU work that caps IOPS on fast drives. "
    "Guides A §2.2 and B §2.3 set none."
)
ROTATIONAL_WHY = (
    "rotational=1 tells the block layer, md RAID1 read balancing, btrfs and swap that the device is a "
    "spinning disk, so they optimise for seeks; NVMe is never rotational. Guide A §2.2 writes 0."
)
NR_REQUESTS_WHY = (
    "nr_requests is how many requests the block layer queues for the device; many concurrent reads "
    "(DataLoader workers, checkpoint writes) need a deep queue to keep NVMe busy. Guides A §2.2 and B §2.3 "
    "write 1024, but with scheduler none the kernel caps nr_requests at the device's hardware queue depth "
    "— 1023 for most NVMe drives (the driver's 1024-entry queues less one) — and refuses 1024 with "
    "'Invalid argument'; 1023 is the most it can be. With scheduler none it is already the queue depth by "
    "default; mq-deadline's default is 256."
)
NOATIME_WHY = (
    "Without noatime every read of a file also writes its access time, so reading a dataset of many small "
    "files turns into metadata writes. The default relatime already limits this to about once a day per "
    "file, so the gain is modest; guide B §2.3 mounts data volumes with noatime,nodiratime (noatime implies "
    "nodiratime on Linux; writing both is harmless)."
)


def _nvme_devices(snap: Snapshot) -> list[dict[str, Any]] | NA:
    devices = snap.host.get("block_devices", NA("no block device readings"))
    if isinstance(devices, NA):
        return devices
    return [d for d in devices if isinstance(d, dict) and d.get("nvme") is True]


def _scheduler(snap: Snapshot, dev: dict[str, Any]) -> Finding:
    name = dev["name"]
    fid, title = f"storage.scheduler.{name}", f"I/O scheduler of {name}"
    active = dev.get("scheduler", NA("not read"))
    evidence = {"device": name, "scheduler": active, "schedulers": dev.get("schedulers", [])}
    if isinstance(active, NA):
        return unknown(
            fid, AREA, title, context_reason(snap, active.reason), SCHEDULER_WHY, GUIDE_NVME, **evidence
        )
    if active == "none":
        return Finding(fid, AREA, title, Status.PASS, evidence, SCHEDULER_WHY, guide=GUIDE_NVME)
    fix = Fix(
        summary=f"use no I/O scheduler on {name}",
        commands=(f"echo none > /sys/block/{name}/queue/scheduler",),
        udev=(UDEV_SCHEDULER,),
    )
    return Finding(fid, AREA, title, Status.WARN, evidence, SCHEDULER_WHY, fix, GUIDE_NVME)


def _rotational(snap: Snapshot, dev: dict[str, Any]) -> Finding:
    name = dev["name"]
    fid, title = f"storage.rotational.{name}", f"{name} is marked non-rotational"
    value = dev.get("rotational", NA("not read"))
    evidence = {"device": name, "rotational": value}
    if isinstance(value, NA):
        return unknown(
            fid, AREA, title, context_reason(snap, value.reason), ROTATIONAL_WHY, "A §2.2", **evidence
        )
    if value == 0:
        return Finding(fid, AREA, title, Status.PASS, evidence, ROTATIONAL_WHY, guide="A §2.2")
    fix = Fix(
        summary=f"mark {name} non-rotational",
        commands=(f"echo 0 > /sys/block/{name}/queue/rotational",),
        udev=(UDEV_ROTATIONAL,),
    )
    return Finding(fid, AREA, title, Status.WARN, evidence, ROTATIONAL_WHY, fix, "A §2.2")


def _nr_requests(snap: Snapshot, dev: dict[str, Any]) -> Finding:
    name = dev["name"]
    fid, title = f"storage.nr_requests.{name}", f"Request queue depth of {name}"
    value = dev.get("nr_requests", NA("not read"))
    depth = dev.get("hw_queue_depth", NA("not read"))
    target = min(NR_REQUESTS, depth) if isinstance(depth, int) and depth > 0 else NR_REQUESTS
    evidence = {"device": name, "nr_requests": value, "hw_queue_depth": depth, "target": target}
    if isinstance(value, NA):
        return unknown(
            fid, AREA, title, context_reason(snap, value.reason), NR_REQUESTS_WHY, GUIDE_NVME, **evidence
        )
    if value >= target:
        return Finding(fid, AREA, title, Status.PASS, evidence, NR_REQUESTS_WHY, guide=GUIDE_NVME)
    kernel = 'KERNEL=="nvme[0-9]*n[0-9]*"' if target == NR_REQUESTS else f'KERNEL=="{name}"'
    fix = Fix(
        summary=f"queue up to {target} requests on {name}",
        commands=(
            f"echo none > /sys/block/{name}/queue/scheduler",
            f"echo {target} > /sys/block/{name}/queue/nr_requests",
        ),
        udev=(f'ACTION=="add|change", {kernel}, ATTR{{queue/nr_requests}}="{target}"',),
    )
    return Finding(fid, AREA, title, Status.WARN, evidence, NR_REQUESTS_WHY, fix, GUIDE_NVME)


def check_nvme_queues(snap: Snapshot) -> Iterable[Finding]:
    devices = _nvme_devices(snap)
    if isinstance(devices, NA):
        yield unknown(
            "storage.nvme", AREA, "NVMe queue settings", context_reason(snap, devices.reason), SCHEDULER_WHY
        )
        return
    if not devices:
        evidence = {"reason": "no NVMe block devices in /sys/block"}
        yield Finding(
            "storage.nvme", AREA, "NVMe queue settings", Status.NOT_APPLICABLE, evidence, SCHEDULER_WHY
        )
        return
    for dev in devices:
        yield _scheduler(snap, dev)
        yield _rotational(snap, dev)
        yield _nr_requests(snap, dev)


def _slug(mountpoint: str) -> str:
    slug = mountpoint.strip("/").replace("/", ".") or "root"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", slug)


def is_data_mount(mount: dict[str, Any]) -> bool:
    """A filesystem holding datasets or checkpoints: on NVMe or md RAID, or under /raid, /data, /mnt."""
    mountpoint, fstype = str(mount.get("mountpoint", "")), str(mount.get("fstype", ""))
    if fstype not in DATA_FSTYPES:
        return False
    if any(mountpoint == p or mountpoint.startswith(p + "/") for p in SYSTEM_PREFIXES):
        return False  # /boot, and files a container runtime bind-mounts (/etc/hosts ...)
    if RAID_OR_NVME_DEVICE.match(str(mount.get("device", ""))):
        return True
    return any(mountpoint == p or mountpoint.startswith(p + "/") for p in DATA_PREFIXES)


def check_data_mounts(snap: Snapshot) -> Iterable[Finding]:
    title = "Data volume mount options"
    mounts = snap.host.get("mounts", NA("no mount readings"))
    if isinstance(mounts, NA):
        yield unknown(
            "storage.noatime", AREA, title, context_reason(snap, mounts.reason), NOATIME_WHY, GUIDE_MOUNTS
        )
        return
    data = {m["mountpoint"]: m for m in mounts if isinstance(m, dict) and is_data_mount(m)}  # last mount wins
    if not data:
        none = {"reason": "no ext4/xfs/btrfs data volume on NVMe, md RAID, /raid, /data or /mnt"}
        yield Finding("storage.noatime", AREA, title, Status.NOT_APPLICABLE, none, NOATIME_WHY)
        return
    fstrim = snap.host.get("services", {})
    fstrim_enabled = fstrim.get("fstrim", {}).get("enabled") if isinstance(fstrim, dict) else fstrim
    for mountpoint, mount in data.items():
        options = list(mount.get("options", []))
        fid = f"storage.noatime.{_slug(mountpoint)}"
        evidence: dict[str, Any] = {
            "device": mount.get("device"),
            "mountpoint": mountpoint,
            "fstype": mount.get("fstype"),
            "options": options,
            "noatime": "noatime" in options,
            "discard": "discard" in options,
            "fstrim_timer_enabled": fstrim_enabled,
        }
        mtitle = f"Mount options of {mountpoint}"
        in_fstab = mountpoint.replace(" ", "\\040").replace("\t", "\\011")
        if "noatime" in options:
            yield Finding(fid, AREA, mtitle, Status.PASS, evidence, NOATIME_WHY, guide=GUIDE_MOUNTS)
            continue
        container = snap.host.get("container")
        note = (f"# this is a {container} container: remount the volume on the host",) if container else ()
        fix = Fix(
            summary=f"mount {mountpoint} with noatime,nodiratime",
            commands=(
                *note,
                f"mount -o remount,noatime,nodiratime {shlex.quote(mountpoint)}",
                f"# to keep it, add noatime,nodiratime to the options (4th field) of {mountpoint} in fstab:",
                f"# {mount.get('device')} {in_fstab} {mount.get('fstype')} defaults,noatime,nodiratime 0 0",
            ),
        )
        yield Finding(fid, AREA, mtitle, Status.WARN, evidence, NOATIME_WHY, fix, GUIDE_MOUNTS)


CHECKS: tuple[Check, ...] = (check_nvme_queues, check_data_mounts)
