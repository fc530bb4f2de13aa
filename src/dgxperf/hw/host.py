"""Host readers: kernel, sysctl, disks, mounts, services, CPU, memory, NUMA, PCI, InfiniBand, kernel log.

Every reader takes ``root``, the directory that stands for ``/`` (the real ``Path("/")`` on a node, a
fixture tree in tests), and never raises: a file that is missing or unreadable becomes an :class:`NA`
with the reason, a file whose text makes no sense becomes ``NA("unparseable ...")``. Paths in reasons
and in readings are the node's own (``/proc/mounts``), never the fixture's location.

:func:`collect_host` gathers the ``host`` section of a snapshot; its layout is the contract the doctor
checks read (documented on the function).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from dgxperf.results import NA

T = TypeVar("T")

SYSCTL_KEYS: tuple[str, ...] = (
    "vm.max_map_count",
    "vm.overcommit_memory",
    "vm.swappiness",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "kernel.dmesg_restrict",
    "kernel.numa_balancing",
)

# service name -> (systemd unit, the daemon's process name or None for a timer)
SERVICES: dict[str, tuple[str, str | None]] = {
    "irqbalance": ("irqbalance.service", "irqbalance"),
    "tuned": ("tuned.service", "tuned"),
    "nvidia-fabricmanager": ("nvidia-fabricmanager.service", "nv-fabricmanager"),
    "nvidia-persistenced": ("nvidia-persistenced.service", "nvidia-persistenced"),
    "nvidia-dcgm": ("nvidia-dcgm.service", "nv-hostengine"),
    "dcgm-exporter": ("dcgm-exporter.service", "dcgm-exporter"),
    "fstrim": ("fstrim.timer", None),
}

# /proc/<pid>/comm holds at most 15 characters: "nvidia-persistenced" reads "nvidia-persiste".
COMM_LEN = 15

UNIT_DIRS = ("etc/systemd/system", "run/systemd/system", "lib/systemd/system", "usr/lib/systemd/system")
MASK_DIRS = ("etc/systemd/system", "run/systemd/system")

SKIPPED_BLOCK_PREFIXES = ("loop", "ram", "zram", "sr", "dm-", "md", "fd")
HIDDEN_NVME_PATH = re.compile(r"^nvme\d+c\d+n\d+$")  # multipath controller paths, hidden by the kernel

KMSG_MAX_LINES = 5000
KMSG_MAX_RECORDS = 1_000_000  # a guard against a log that fills faster than we read
KMSG_DENIED = "permission denied reading /dev/kmsg: run as root or set kernel.dmesg_restrict=0"
KMSG_MISSING = "no /dev/kmsg (container?)"

NVIDIA_VENDOR = "0x10de"

SIZE_SUFFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50, "e": 1 << 60}


# ----------------------------------------------------------------------------------------------- helpers


def _show(rel: str) -> str:
    """The node's own path for a path relative to root."""
    return "/" + rel.strip("/")


def _os_reason(exc: OSError, rel: str) -> NA:
    where = _show(rel)
    if isinstance(exc, FileNotFoundError):
        return NA(f"no {where}")
    if isinstance(exc, PermissionError):
        return NA(f"permission denied reading {where}")
    if isinstance(exc, IsADirectoryError):
        return NA(f"cannot read {where}: is a directory")
    return NA(f"cannot read {where}: {exc.strerror or exc}")


def read_text(root: Path, rel: str) -> str | NA:
    """The text of ``root/rel``, or NA saying why not."""
    try:
        return (root / rel).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return NA(f"unparseable {_show(rel)}: not UTF-8 text")
    except OSError as exc:
        return _os_reason(exc, rel)


def _read_value(root: Path, rel: str) -> str | NA:
    """A one-value file (sysfs attribute), stripped; an empty file is NA."""
    text = read_text(root, rel)
    if isinstance(text, NA):
        return text
    text = text.strip()
    return text if text else NA(f"{_show(rel)} is empty")


def _read_int(root: Path, rel: str) -> int | NA:
    text = _read_value(root, rel)
    if isinstance(text, NA):
        return text
    try:
        return int(text, 0) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return NA(f"unparseable {_show(rel)}: {text[:40]!r}")


def _listdir(root: Path, rel: str) -> list[str] | NA:
    try:
        return sorted((name for name in os.listdir(root / rel) if not name.startswith(".")), key=natural_key)
    except OSError as exc:
        return _os_reason(exc, rel)


def _lexists(path: Path) -> bool:
    return os.path.lexists(path)


def natural_key(text: str) -> tuple[tuple[str, int], ...]:
    """Sort "nvidia2" before "nvidia10"."""
    pieces = re.split(r"(\d+)", text)
    pairs = [(pieces[i], int(pieces[i + 1])) for i in range(0, len(pieces) - 1, 2)]
    pairs.append((pieces[-1], -1))
    return tuple(pairs)


def _resolve_in_root(root: Path, rel: str, depth: int = 0) -> Path | None:
    """Follow ``root/rel`` (and the symlinks along it) without leaving ``root``; None when it dangles."""
    path = root / rel
    if depth > 8:
        return None
    if path.is_symlink():
        try:
            target = os.readlink(path)
        except OSError:
            return None
        if target.startswith("/"):
            new_rel = target.lstrip("/")
        else:
            new_rel = os.path.normpath(os.path.join(os.path.dirname(rel), target)).lstrip("/")
        if new_rel.startswith(".."):
            return None
        return _resolve_in_root(root, new_rel, depth + 1)
    return path if path.exists() else None


def active_choice(text: str) -> tuple[str | None, list[str]]:
    """``"none [mq-deadline] kyber"`` -> ("mq-deadline", ["none", "mq-deadline", "kyber"]).

    A lone choice without brackets (a queue with no scheduler support says just ``none``) is the active one.
    """
    words = text.split()
    choices = [w.strip("[]") for w in words]
    active = [w.strip("[]") for w in words if w.startswith("[") and w.endswith("]")]
    if len(active) == 1:
        return active[0], choices
    if len(words) == 1 and not active:
        return choices[0], choices
    return None, choices


def _read_choice(root: Path, rel: str) -> tuple[str | NA, list[str]]:
    text = _read_value(root, rel)
    if isinstance(text, NA):
        return text, []
    active, choices = active_choice(text)
    if active is None:
        return NA(f"unparseable {_show(rel)}: no [active] value in {text[:60]!r}"), choices
    return active, choices


def parse_size(text: str, mem_total: int | None = None) -> int | None:
    """A size as mount options write it: ``65536k``, ``16G``, ``1048576``; ``50%`` needs ``mem_total``."""
    text = text.strip()
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            return None
        return int(mem_total * percent / 100) if mem_total is not None else None
    match = re.fullmatch(r"(\d+)([kmgtpeKMGTPE]?)", text)
    if not match:
        return None
    return int(match.group(1)) * SIZE_SUFFIXES[match.group(2).lower()]


_OCTAL = re.compile(r"\\([0-7]{3})")


def unescape_octal(text: str) -> str:
    r"""Undo the kernel's octal escapes in /proc/mounts and /proc/swaps (``\040`` is a space)."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


def normalise_bdf(bus_id: str) -> str:
    """``00000000:18:00.0`` (NVML) or ``18:00.0`` -> ``0000:18:00.0`` (sysfs); unparseable text comes back
    stripped and lower-cased."""
    text = bus_id.strip().lower()
    if text.startswith("pci:"):
        text = text[4:]
    match = re.fullmatch(r"(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])", text)
    if not match:
        return text
    domain, bus, dev, fn = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


# ----------------------------------------------------------------------------------------------- readers


def read_kernel(root: Path) -> dict[str, Any]:
    release = _read_value(root, "proc/sys/kernel/osrelease")
    headers: str | NA
    if isinstance(release, NA):
        headers = NA(f"kernel release unknown: {release.reason}")
    else:
        candidates = (
            f"lib/modules/{release}/build",
            f"usr/src/linux-headers-{release}",
            f"usr/src/kernels/{release}",
        )
        found = next((c for c in candidates if _resolve_in_root(root, c) is not None), None)
        if found is not None:
            headers = _show(found)
        else:
            looked = ", ".join(_show(c) for c in candidates)
            headers = NA(f"no kernel headers for {release} (looked in {looked})")
    return {"release": release, "headers_dir": headers}


def read_sysctl(root: Path, keys: Iterable[str] = SYSCTL_KEYS) -> dict[str, str | NA]:
    values: dict[str, str | NA] = {}
    for key in keys:
        text = read_text(root, "proc/sys/" + key.replace(".", "/"))
        if isinstance(text, NA):
            values[key] = text
        else:
            collapsed = " ".join(text.split())
            values[key] = collapsed if collapsed else NA(f"/proc/sys/{key.replace('.', '/')} is empty")
    return values


def read_block_devices(root: Path) -> list[dict[str, Any]] | NA:
    names = _listdir(root, "sys/block")
    if isinstance(names, NA):
        return names
    devices = []
    for name in names:
        if name.startswith(SKIPPED_BLOCK_PREFIXES) or HIDDEN_NVME_PATH.match(name):
            continue
        base = f"sys/block/{name}"
        scheduler, schedulers = _read_choice(root, f"{base}/queue/scheduler")
        sectors = _read_int(root, f"{base}/size")
        devices.append(
            {
                "name": name,
                "nvme": name.startswith("nvme"),
                "rotational": _read_int(root, f"{base}/queue/rotational"),
                "scheduler": scheduler,
                "schedulers": schedulers,
                "nr_requests": _read_int(root, f"{base}/queue/nr_requests"),
                "hw_queue_depth": _read_int(root, f"{base}/mq/0/nr_tags"),
                "size_bytes": sectors * 512 if isinstance(sectors, int) else sectors,
                "model": _read_value(root, f"{base}/device/model"),
            }
        )
    return devices


def parse_mounts(text: str) -> list[dict[str, Any]]:
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mounts.append(
            {
                "device": unescape_octal(fields[0]),
                "mountpoint": unescape_octal(fields[1]),
                "fstype": unescape_octal(fields[2]),
                "options": [unescape_octal(o) for o in fields[3].split(",") if o],
            }
        )
    return mounts


def read_mounts(root: Path) -> list[dict[str, Any]] | NA:
    text = read_text(root, "proc/mounts")
    if isinstance(text, NA):
        text = read_text(root, "proc/self/mounts")
    if isinstance(text, NA):
        return text
    return parse_mounts(text)


def running_processes(root: Path) -> set[str]:
    """The process names (``/proc/<pid>/comm``) running on this node."""
    names: set[str] = set()
    try:
        pids = [p for p in os.listdir(root / "proc") if p.isdigit()]
    except OSError:
        return names
    for pid in pids:
        try:
            names.add((root / "proc" / pid / "comm").read_text(encoding="utf-8", errors="replace").strip())
        except OSError:
            continue
    return names


def _is_mask(path: Path) -> bool:
    try:
        return path.is_symlink() and os.readlink(path) == "/dev/null"
    except OSError:
        return False


def _masked(root: Path, unit: str) -> bool:
    return any(_is_mask(root / d / unit) for d in MASK_DIRS)


def _enabled(root: Path, unit: str) -> bool:
    base = root / "etc/systemd/system"
    try:
        wants = [d for d in os.listdir(base) if d.endswith((".wants", ".requires"))]
    except OSError:
        return False
    return any(_lexists(base / d / unit) for d in wants)


def read_services(root: Path, systemd: bool, processes: set[str]) -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = {}
    for name, (unit, daemon) in SERVICES.items():
        running: bool | NA = (
            daemon[:COMM_LEN] in processes if daemon else NA(f"{unit} is a timer, not a daemon")
        )
        if not systemd:
            no = NA("no systemd")
            services[name] = {"running": running, "enabled": no, "masked": no, "installed": no}
            continue
        masked = _masked(root, unit)
        installed = any(_lexists(root / d / unit) and not _is_mask(root / d / unit) for d in UNIT_DIRS)
        services[name] = {
            "running": running,
            "enabled": _enabled(root, unit),
            "masked": masked,
            "installed": installed,
        }
    return services


def read_cpu_governors(root: Path) -> dict[str, int] | NA:
    cpus = _listdir(root, "sys/devices/system/cpu")
    if isinstance(cpus, NA):
        return NA(f"no cpufreq: {cpus.reason}")
    counts: dict[str, int] = {}
    first_error: NA | None = None
    for cpu in cpus:
        if not re.fullmatch(r"cpu\d+", cpu):
            continue
        rel = f"sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor"
        if not _lexists(root / rel):
            continue
        governor = _read_value(root, rel)
        if isinstance(governor, NA):
            first_error = first_error or governor
            continue
        counts[governor] = counts.get(governor, 0) + 1
    if counts:
        return dict(sorted(counts.items()))
    if first_error is not None:
        return first_error
    return NA(
        "no cpufreq in /sys/devices/system/cpu (frequency scaling is not exposed: a VM, a container "
        "or no cpufreq driver)"
    )


def read_thp(root: Path) -> dict[str, str | NA]:
    base = "sys/kernel/mm/transparent_hugepage"
    return {
        "enabled": _read_choice(root, f"{base}/enabled")[0],
        "defrag": _read_choice(root, f"{base}/defrag")[0],
    }


def read_meminfo(root: Path) -> dict[str, int | NA]:
    keys = ("MemTotal", "MemAvailable", "SwapTotal")
    text = read_text(root, "proc/meminfo")
    if isinstance(text, NA):
        return dict.fromkeys(keys, text)
    values: dict[str, int | NA] = {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if sep:
            found[key.strip()] = rest.strip()
    for key in keys:
        raw = found.get(key)
        if raw is None:
            values[key] = NA(f"no {key} in /proc/meminfo")
            continue
        match = re.fullmatch(r"(\d+)(?:\s*kB)?", raw)
        values[key] = (
            int(match.group(1)) * (1024 if raw.endswith("kB") else 1)
            if match
            else NA(f"unparseable {key} in /proc/meminfo: {raw!r}")
        )
    return values


def read_shm(root: Path, mounts: list[dict[str, Any]] | NA, mem_total: int | NA) -> dict[str, Any]:
    if isinstance(mounts, NA):
        return {"mounted": False, "size_bytes": NA(f"mounts unknown: {mounts.reason}")}
    shm = [m for m in mounts if m["mountpoint"] == "/dev/shm"]
    if not shm:
        return {"mounted": False, "size_bytes": NA("/dev/shm is not mounted")}
    mount = shm[-1]  # the last mount on a mountpoint is the one in use
    total = mem_total if isinstance(mem_total, int) else None
    size: int | NA
    option = next((o.partition("=")[2] for o in mount["options"] if o.startswith("size=")), None)
    if option is not None:
        parsed = parse_size(option, total)
        if parsed is None:
            size = NA(f"unparseable size= option on /dev/shm: {option!r}")
        elif parsed == 0:  # size=0: a tmpfs with no limit; memory bounds it
            size = total if total is not None else NA("/dev/shm has no size limit and MemTotal is unknown")
        else:
            size = parsed
    elif root == Path("/"):
        try:
            vfs = os.statvfs("/dev/shm")
            size = vfs.f_blocks * vfs.f_frsize
        except OSError as exc:
            size = NA(f"cannot statvfs /dev/shm: {exc.strerror or exc}")
    elif total is not None and mount["fstype"] == "tmpfs":
        size = total // 2  # a tmpfs mounted without size= gets half of RAM, and /proc/mounts omits it
    else:
        size = NA("no size= option on /dev/shm")
    return {"mounted": True, "size_bytes": size}


def read_limits(root: Path) -> dict[str, int | str | NA]:
    text = read_text(root, "proc/self/limits")
    if isinstance(text, NA):
        return {"memlock_soft": text, "memlock_hard": text}
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            fields = line[len("Max locked memory") :].split()
            if len(fields) >= 2:
                return {"memlock_soft": _limit(fields[0]), "memlock_hard": _limit(fields[1])}
    missing = NA("unparseable /proc/self/limits: no 'Max locked memory' line")
    return {"memlock_soft": missing, "memlock_hard": missing}


def _limit(text: str) -> int | str | NA:
    if text == "unlimited":
        return text
    return int(text) if text.isdigit() else NA(f"unparseable limit {text!r}")


def read_swap(root: Path, swap_total: int | NA) -> dict[str, Any]:
    text = read_text(root, "proc/swaps")
    devices: list[str] | NA
    if isinstance(text, NA):
        devices = text
    else:
        devices = [unescape_octal(line.split()[0]) for line in text.splitlines()[1:] if line.split()]
    return {"total_bytes": swap_total, "devices": devices}


def read_cpu(root: Path) -> dict[str, Any]:
    text = read_text(root, "proc/cpuinfo")
    if isinstance(text, NA):
        return {"count": text, "model": text, "sockets": text}
    count = 0
    model: str | NA = NA("no model name in /proc/cpuinfo")
    packages: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            count += 1
        elif key in ("model name", "Model", "cpu model") and isinstance(model, NA) and value:
            model = value
        elif key == "physical id":
            packages.add(value)
    sockets: int | NA
    if packages:
        sockets = len(packages)
    else:
        topo = set()
        cpus = _listdir(root, "sys/devices/system/cpu")
        for cpu in cpus if isinstance(cpus, list) else []:
            if re.fullmatch(r"cpu\d+", cpu):
                pkg = _read_value(root, f"sys/devices/system/cpu/{cpu}/topology/physical_package_id")
                if not isinstance(pkg, NA):
                    topo.add(pkg)
        sockets = len(topo) if topo else NA("no physical id in /proc/cpuinfo nor CPU topology in /sys")
    count_value: int | NA = count if count else NA("unparseable /proc/cpuinfo: no processor lines")
    return {"count": count_value, "model": model, "sockets": sockets}


def native_bf16(root: Path = Path("/")) -> bool | None:
    """Whether the CPU computes bf16 natively (x86: ``avx512_bf16`` or ``amx_bf16``; Arm: ``bf16``), or None
    when /proc/cpuinfo does not say. Without it PyTorch's CPU bf16 kernels convert to fp32 and back: on the
    2-core AMD EPYC (AVX2) this project's CI runs on, a tiny pretraining epoch took >10x longer in bf16."""
    text = read_text(root, "proc/cpuinfo")
    if isinstance(text, NA):
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return bool(set(value.split()) & {"avx512_bf16", "amx_bf16", "bf16"})
    return None


def read_numa_nodes(root: Path) -> list[dict[str, Any]]:
    names = _listdir(root, "sys/devices/system/node")
    nodes = []
    for name in names if isinstance(names, list) else []:
        match = re.fullmatch(r"node(\d+)", name)
        if match:
            nodes.append(
                {
                    "id": int(match.group(1)),
                    "cpulist": _read_value(root, f"sys/devices/system/node/{name}/cpulist"),
                }
            )
    return nodes


def read_modules(root: Path) -> list[str] | NA:
    text = read_text(root, "proc/modules")
    if isinstance(text, NA):
        if text.reason == "no /proc/modules":
            return NA("no /proc/modules (a kernel without loadable modules, or a container that hides it)")
        return text
    return [line.split()[0] for line in text.splitlines() if line.split()]


def kmsg_line(record: str) -> str | None:
    """One /dev/kmsg record ``prio,seq,usec,flags;message`` as ``[seconds] message``.

    Continuation lines (`` KEY=value`` after the record) are dropped; text that is not a record (a dmesg
    log saved as a file) is kept as it is.
    """
    first = record.split("\n", 1)[0].rstrip("\r")
    if not first.strip() or first.startswith(" "):
        return None
    header, sep, message = first.partition(";")
    fields = header.split(",")
    if sep and len(fields) >= 3 and fields[0].isdigit() and fields[2].isdigit():
        usec = int(fields[2])
        return f"[{usec // 1_000_000:5d}.{usec % 1_000_000:06d}] {message}"
    return first


def _read_kmsg_device(path: Path) -> list[str] | NA:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except PermissionError:
        return NA(KMSG_DENIED)
    except FileNotFoundError:
        return NA(KMSG_MISSING)
    except OSError as exc:
        return NA(f"cannot open /dev/kmsg: {exc.strerror or exc}")
    lines: deque[str] = deque(maxlen=KMSG_MAX_LINES)
    try:
        for _ in range(KMSG_MAX_RECORDS):
            try:
                record = os.read(fd, 16384)
            except BlockingIOError:
                break  # EAGAIN: the end of the log
            except (BrokenPipeError, InterruptedError):
                continue  # EPIPE: records overwritten while we read; the next read goes on from the oldest
            except PermissionError:
                if not lines:
                    return NA(KMSG_DENIED)
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue
                if not lines:
                    return NA(f"cannot read /dev/kmsg: {exc.strerror or exc}")
                break
            if not record:
                break
            line = kmsg_line(record.decode("utf-8", "replace"))
            if line is not None:
                lines.append(line)
    finally:
        os.close(fd)
    return list(lines)


def read_kmsg(root: Path) -> list[str] | NA:
    """The kernel log, oldest first, at most the last :data:`KMSG_MAX_LINES` lines."""
    path = root / "dev/kmsg"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return NA(KMSG_MISSING)
    except PermissionError:
        return NA(KMSG_DENIED)
    except OSError as exc:
        return NA(f"cannot read /dev/kmsg: {exc.strerror or exc}")
    if stat.S_ISCHR(st.st_mode):
        return _read_kmsg_device(path)
    if not stat.S_ISREG(st.st_mode):
        return NA("cannot read /dev/kmsg: not a character device nor a file")
    text = read_text(root, "dev/kmsg")
    if isinstance(text, NA):
        return NA(KMSG_DENIED) if text.reason.startswith("permission denied") else text
    lines: deque[str] = deque(maxlen=KMSG_MAX_LINES)
    for raw in text.splitlines():
        line = kmsg_line(raw)
        if line is not None:
            lines.append(line)
    return list(lines)


def read_dev_nodes(root: Path) -> list[dict[str, Any]]:
    names = _listdir(root, "dev")
    paths: list[str] = []
    for name in names if isinstance(names, list) else []:
        if not name.startswith("nvidia"):
            continue
        if (root / "dev" / name).is_dir() and not (root / "dev" / name).is_symlink():
            caps = _listdir(root, f"dev/{name}")
            paths.extend(f"dev/{name}/{c}" for c in (caps if isinstance(caps, list) else []))
        else:
            paths.append(f"dev/{name}")
    nodes = []
    for rel in paths:
        try:
            st = os.stat(root / rel)
        except OSError:
            try:
                st = os.lstat(root / rel)
            except OSError:
                continue
        nodes.append(
            {
                "path": _show(rel),
                "mode": f"{stat.S_IMODE(st.st_mode):04o}",
                "char_device": stat.S_ISCHR(st.st_mode),
            }
        )
    return nodes


def pci_kind(pci_class: str | NA) -> str:
    if isinstance(pci_class, NA):
        return "other"
    value = pci_class.lower()
    if value.startswith("0x03"):
        return "gpu"
    if value.startswith("0x0680"):
        return "nvswitch"
    return "other"


def pci_device(root: Path, bdf: str) -> dict[str, Any]:
    """What sysfs says about one PCI function: class, device id, NUMA node, link, bound driver."""
    bdf = normalise_bdf(bdf)
    base = f"sys/bus/pci/devices/{bdf}"
    pci_class = _read_value(root, f"{base}/class")
    numa = _read_int(root, f"{base}/numa_node")
    if isinstance(numa, int) and numa < 0:
        numa = NA(f"the firmware reports no NUMA node for {bdf} (numa_node = {numa})")
    driver: str | NA
    try:
        driver = os.path.basename(os.readlink(root / base / "driver"))
    except FileNotFoundError:
        driver = NA(f"no driver bound to {bdf}")
    except OSError as exc:
        driver = _os_reason(exc, f"{base}/driver")
    return {
        "bdf": bdf,
        "class": pci_class,
        "device": _read_value(root, f"{base}/device"),
        "kind": pci_kind(pci_class),
        "numa_node": numa,
        "local_cpulist": _read_value(root, f"{base}/local_cpulist"),
        "current_link_speed": _read_value(root, f"{base}/current_link_speed"),
        "current_link_width": _read_value(root, f"{base}/current_link_width"),
        "max_link_speed": _read_value(root, f"{base}/max_link_speed"),
        "max_link_width": _read_value(root, f"{base}/max_link_width"),
        "driver": driver,
    }


def read_pci_nvidia(root: Path) -> list[dict[str, Any]] | NA:
    names = _listdir(root, "sys/bus/pci/devices")
    if isinstance(names, NA):
        return names
    return [
        pci_device(root, name)
        for name in sorted(names)
        if str(_read_value(root, f"sys/bus/pci/devices/{name}/vendor")).lower() == NVIDIA_VENDOR
    ]


def read_infiniband(root: Path) -> list[dict[str, Any]]:
    names = _listdir(root, "sys/class/infiniband")
    devices = []
    for name in names if isinstance(names, list) else []:
        ports = []
        port_names = _listdir(root, f"sys/class/infiniband/{name}/ports")
        for port in port_names if isinstance(port_names, list) else []:
            if not port.isdigit():
                continue
            base = f"sys/class/infiniband/{name}/ports/{port}"
            ports.append(
                {
                    "port": int(port),
                    "state": _read_value(root, f"{base}/state"),
                    "rate": _read_value(root, f"{base}/rate"),
                    "link_layer": _read_value(root, f"{base}/link_layer"),
                }
            )
        devices.append({"name": name, "ports": ports})
    return devices


_OPEN_PACKAGE = re.compile(r"^nvidia-(?:kernel-open|open)(?:-.*)?$|^nvidia-.*-open$")
_PROPRIETARY_PACKAGE = re.compile(
    r"^nvidia-(?:dkms|kernel-source|driver)-\d+(?:-server)?$|^nvidia-kernel-(?:dkms|source)$"
)


def package_flavour(name: str) -> str | None:
    """Flavour ("open" or "proprietary") of an NVIDIA kernel-module or driver package, else None."""
    if _OPEN_PACKAGE.match(name):
        return "open"
    if _PROPRIETARY_PACKAGE.match(name):
        return "proprietary"
    return None


def parse_dpkg_status(text: str) -> list[str]:
    """The names of installed packages in a dpkg ``status`` file."""
    installed = []
    for stanza in text.split("\n\n"):
        name = status = None
        for line in stanza.splitlines():
            if line.startswith("Package:"):
                name = line[8:].strip()
            elif line.startswith("Status:"):
                status = line[7:].split()
        if name and status and status[-1] == "installed":
            installed.append(name)
    return installed


def read_nvidia_packages(root: Path) -> dict[str, Any] | NA:
    if _lexists(root / "var/lib/dpkg/status"):
        text = read_text(root, "var/lib/dpkg/status")
        if isinstance(text, NA):
            return text
        names = parse_dpkg_status(text)
        return {
            "manager": "dpkg",
            "open": sorted(n for n in names if package_flavour(n) == "open"),
            "proprietary": sorted(n for n in names if package_flavour(n) == "proprietary"),
        }
    if _lexists(root / "var/lib/rpm") or _lexists(root / "usr/lib/sysimage/rpm"):
        return NA("rpm database not parsed")
    return NA("no dpkg or rpm package database")


def detect_container(root: Path) -> str | None:
    if _lexists(root / "var/run/secrets/kubernetes.io") or _lexists(root / "run/secrets/kubernetes.io"):
        return "kubernetes"
    if _lexists(root / ".dockerenv"):
        return "docker"
    if _lexists(root / "run/.containerenv"):
        return "podman"
    try:
        environ = (root / "proc/1/environ").read_bytes()
    except OSError:
        environ = b""
    for entry in environ.split(b"\0"):
        if entry.startswith(b"container="):
            value = entry[len(b"container=") :].decode("utf-8", "replace").strip()
            return value or "container"
    return None


def read_nvidia_proc_version(root: Path) -> str | NA:
    text = _read_value(root, "proc/driver/nvidia/version")
    if isinstance(text, NA) and text.reason == "no /proc/driver/nvidia/version":
        return NA("no /proc/driver/nvidia/version (the nvidia kernel module is not loaded)")
    return text


def _guard(key: str, reader: Callable[[], T]) -> T | NA:
    """A reader that raised is a dgxperf bug; the snapshot still gets taken."""
    try:
        return reader()
    except Exception as exc:
        return NA(f"dgxperf could not read {key}: {type(exc).__name__}: {exc}")


def collect_host(root: Path) -> dict[str, Any]:
    """The ``host`` section of a node snapshot. Never raises.

    Keys: root, kernel {release, headers_dir}, sysctl {key: text}, block_devices [{name, nvme, rotational,
    scheduler, schedulers, nr_requests, hw_queue_depth, size_bytes, model}], mounts [...], systemd,
    services {name: {running, enabled, masked, installed}}, cpu_governors {governor: count},
    thp {enabled, defrag}, shm {mounted, size_bytes}, limits {memlock_soft, memlock_hard},
    swap {total_bytes, devices}, meminfo {MemTotal, MemAvailable}, cpu {count, model, sockets},
    numa_nodes [{id, cpulist}], modules [name], kmsg [line], nvidia_proc_version, dev_nodes [...],
    pci_nvidia [...], infiniband [...], nvidia_packages {manager, open, proprietary}, container, is_root.
    Any value that cannot be read is an NA with the reason.
    """
    root = Path(root)
    mounts = _guard("mounts", lambda: read_mounts(root))
    meminfo = _guard("meminfo", lambda: read_meminfo(root))
    mem = meminfo if isinstance(meminfo, dict) else {}
    systemd = _lexists(root / "run/systemd/system")
    processes = _guard("processes", lambda: running_processes(root))
    return {
        "root": str(root),
        "kernel": _guard("kernel", lambda: read_kernel(root)),
        "sysctl": _guard("sysctl", lambda: read_sysctl(root)),
        "block_devices": _guard("block_devices", lambda: read_block_devices(root)),
        "mounts": mounts,
        "systemd": systemd,
        "services": _guard(
            "services",
            lambda: read_services(root, systemd, processes if isinstance(processes, set) else set()),
        ),
        "cpu_governors": _guard("cpu_governors", lambda: read_cpu_governors(root)),
        "thp": _guard("thp", lambda: read_thp(root)),
        "shm": _guard("shm", lambda: read_shm(root, mounts, mem.get("MemTotal", NA("no meminfo")))),
        "limits": _guard("limits", lambda: read_limits(root)),
        "swap": _guard("swap", lambda: read_swap(root, mem.get("SwapTotal", NA("no meminfo")))),
        "meminfo": {k: mem.get(k, meminfo) for k in ("MemTotal", "MemAvailable")},
        "cpu": _guard("cpu", lambda: read_cpu(root)),
        "numa_nodes": _guard("numa_nodes", lambda: read_numa_nodes(root)),
        "modules": _guard("modules", lambda: read_modules(root)),
        "kmsg": _guard("kmsg", lambda: read_kmsg(root)),
        "nvidia_proc_version": _guard("nvidia_proc_version", lambda: read_nvidia_proc_version(root)),
        "dev_nodes": _guard("dev_nodes", lambda: read_dev_nodes(root)),
        "pci_nvidia": _guard("pci_nvidia", lambda: read_pci_nvidia(root)),
        "infiniband": _guard("infiniband", lambda: read_infiniband(root)),
        "nvidia_packages": _guard("nvidia_packages", lambda: read_nvidia_packages(root)),
        "container": _guard("container", lambda: detect_container(root)),
        "is_root": os.geteuid() == 0,
    }
