"""Host readers against fixture trees (tests/data/hosts/) and, once, against this real machine."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dgxperf.hw import host
from dgxperf.hw.host import (
    KMSG_DENIED,
    KMSG_MISSING,
    active_choice,
    collect_host,
    kmsg_line,
    normalise_bdf,
    parse_mounts,
    parse_size,
    pci_device,
    read_kmsg,
    unescape_octal,
)
from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import NA, to_jsonable
from tests.doctor.hostfixtures import host_tree, snapshot_of, write

CONTRACT_KEYS = {
    "root", "kernel", "sysctl", "block_devices", "mounts", "systemd", "services", "cpu_governors", "thp",
    "shm", "limits", "swap", "meminfo", "cpu", "numa_nodes", "modules", "kmsg", "nvidia_proc_version",
    "dev_nodes", "pci_nvidia", "infiniband", "nvidia_packages", "container", "is_root",
}  # fmt: skip


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hosts")
    return {name: host_tree(name, base) for name in ("tuned-dgx", "stock-server", "no-driver", "container")}


@pytest.fixture(scope="module")
def hosts(trees: dict[str, Path]) -> dict[str, dict[str, Any]]:
    return {name: collect_host(root) for name, root in trees.items()}


@pytest.fixture
def tuned(tmp_path: Path) -> Path:
    """A private copy of tuned-dgx that a test may change."""
    return host_tree("tuned-dgx", tmp_path)


# ------------------------------------------------------------------------------------------- contract


def test_every_fixture_has_the_contract_keys_and_is_json(hosts: dict[str, dict[str, Any]]) -> None:
    for name, section in hosts.items():
        assert set(section) == CONTRACT_KEYS, name
        json.dumps(to_jsonable(section))
        assert not any(isinstance(v, NA) and "dgxperf could not read" in v.reason for v in section.values())


def test_snapshot_round_trip_keeps_na(hosts: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    snap = Snapshot("", "t", {"reachable": False}, hosts["container"], {}, {})
    snap.save(tmp_path / "s.json")
    back = Snapshot.load(tmp_path / "s.json")
    assert back.host["kmsg"] == NA(KMSG_MISSING)
    assert back.host["sysctl"]["net.core.rmem_max"] == NA("no /proc/sys/net/core/rmem_max")


# ------------------------------------------------------------------------------------- kernel, sysctl


def test_kernel_headers_found_through_an_absolute_symlink_inside_root(
    hosts: dict[str, dict[str, Any]],
) -> None:
    kernel = hosts["tuned-dgx"]["kernel"]
    assert kernel == {"release": "5.15.0-1063-nvidia", "headers_dir": "/lib/modules/5.15.0-1063-nvidia/build"}


def test_kernel_headers_dangling_build_link_is_na(hosts: dict[str, dict[str, Any]]) -> None:
    headers = hosts["stock-server"]["kernel"]["headers_dir"]
    assert isinstance(headers, NA)
    assert "no kernel headers for 6.8.0-45-generic" in headers.reason
    assert "/usr/src/linux-headers-6.8.0-45-generic" in headers.reason


def test_kernel_headers_rhel_layout(tuned: Path) -> None:
    write(tuned, "proc/sys/kernel/osrelease", "5.14.0-427.el9.x86_64\n")
    write(tuned, "usr/src/kernels/5.14.0-427.el9.x86_64/Makefile", "")
    assert host.read_kernel(tuned)["headers_dir"] == "/usr/src/kernels/5.14.0-427.el9.x86_64"


def test_sysctl_whitespace_collapsed_and_missing_is_na(hosts: dict[str, dict[str, Any]]) -> None:
    assert hosts["tuned-dgx"]["sysctl"]["net.ipv4.tcp_rmem"] == "4096 87380 16777216"
    assert hosts["stock-server"]["sysctl"]["vm.max_map_count"] == "65530"
    assert hosts["container"]["sysctl"]["net.core.wmem_max"] == NA("no /proc/sys/net/core/wmem_max")


def test_unreadable_sysctl_is_na_not_an_exception(tuned: Path) -> None:
    write(tuned, "proc/sys/vm/swappiness", "")
    (tuned / "proc/sys/vm/swappiness").unlink()
    (tuned / "proc/sys/vm/swappiness").mkdir()  # a directory where a file is expected fails as root too
    value = host.read_sysctl(tuned)["vm.swappiness"]
    assert value == NA("cannot read /proc/sys/vm/swappiness: is a directory")


# --------------------------------------------------------------------------------------------- block


def test_block_devices_active_scheduler_and_skips(hosts: dict[str, dict[str, Any]]) -> None:
    devices = {d["name"]: d for d in hosts["stock-server"]["block_devices"]}
    assert set(devices) == {"nvme0n1", "nvme1n1", "sda"}  # sr0 skipped
    nvme = devices["nvme0n1"]
    assert nvme["nvme"] is True and devices["sda"]["nvme"] is False
    assert nvme["scheduler"] == "mq-deadline"
    assert nvme["schedulers"] == ["none", "mq-deadline", "kyber", "bfq"]
    assert nvme["nr_requests"] == 256 and nvme["rotational"] == 0 and nvme["hw_queue_depth"] == 1023
    assert nvme["size_bytes"] == 1875385008 * 512
    assert nvme["model"] == "INTEL SSDPF2KX019T1M"
    tuned = [d["name"] for d in hosts["tuned-dgx"]["block_devices"]]
    assert tuned == ["nvme0n1", "nvme1n1", "nvme2n1"]  # loop0 skipped


def test_block_device_garbage_and_missing_values_are_na(tuned: Path) -> None:
    write(tuned, "sys/block/nvme0n1/queue/nr_requests", "lots\n")
    write(tuned, "sys/block/nvme0n1/queue/scheduler", "none mq-deadline\n")
    (tuned / "sys/block/nvme0n1/device/model").unlink()
    devices = host.read_block_devices(tuned)
    assert isinstance(devices, list)
    dev = devices[0]
    assert dev["nr_requests"] == NA("unparseable /sys/block/nvme0n1/queue/nr_requests: 'lots'")
    assert isinstance(dev["scheduler"], NA) and "no [active] value" in dev["scheduler"].reason
    assert dev["model"] == NA("no /sys/block/nvme0n1/device/model")


def test_active_choice() -> None:
    assert active_choice("none [mq-deadline] kyber bfq") == (
        "mq-deadline",
        ["none", "mq-deadline", "kyber", "bfq"],
    )
    assert active_choice("[none] mq-deadline") == ("none", ["none", "mq-deadline"])
    assert active_choice("none") == ("none", ["none"])
    assert active_choice("always defer [defer+madvise] madvise never")[0] == "defer+madvise"
    assert active_choice("always madvise never")[0] is None


# -------------------------------------------------------------------------------------------- mounts


def test_mounts_decode_octal_escapes(hosts: dict[str, dict[str, Any]]) -> None:
    mounts = {m["mountpoint"]: m for m in hosts["tuned-dgx"]["mounts"]}
    scratch = mounts["/mnt/scratch space"]
    assert scratch["device"] == "/dev/nvme2n1" and scratch["fstype"] == "xfs"
    assert scratch["options"][:2] == ["rw", "noatime"]
    assert unescape_octal(r"/a\040b\011c\134d") == "/a b\tc\\d"
    assert parse_mounts("short line\n") == []


def test_mounts_fall_back_to_proc_self_mounts_then_na(tuned: Path) -> None:
    text = (tuned / "proc/mounts").read_text()
    (tuned / "proc/mounts").unlink()
    write(tuned, "proc/self/mounts", text)
    mounts = host.read_mounts(tuned)
    assert isinstance(mounts, list) and any(m["mountpoint"] == "/raid" for m in mounts)
    (tuned / "proc/self/mounts").unlink()
    assert host.read_mounts(tuned) == NA("no /proc/self/mounts")


# ------------------------------------------------------------------------------------------ services


def test_services_running_enabled_masked(hosts: dict[str, dict[str, Any]]) -> None:
    tuned = hosts["tuned-dgx"]
    assert tuned["systemd"] is True
    svc = tuned["services"]
    assert svc["tuned"]["masked"] is True and svc["tuned"]["installed"] is False
    assert svc["irqbalance"] == {"running": False, "enabled": False, "masked": False, "installed": False}
    # /proc/<pid>/comm is cut at 15 characters: nv-fabricmanage, nvidia-persiste
    assert svc["nvidia-fabricmanager"]["running"] is True and svc["nvidia-fabricmanager"]["enabled"] is True
    assert svc["nvidia-persistenced"]["running"] is True
    assert svc["nvidia-dcgm"]["running"] is True
    assert svc["dcgm-exporter"]["running"] is False
    assert svc["fstrim"]["enabled"] is True and isinstance(svc["fstrim"]["running"], NA)
    stock = hosts["stock-server"]["services"]
    assert stock["irqbalance"] == {"running": True, "enabled": True, "masked": False, "installed": True}
    assert stock["fstrim"]["enabled"] is False


def test_services_without_systemd(hosts: dict[str, dict[str, Any]]) -> None:
    section = hosts["container"]
    assert section["systemd"] is False
    irq = section["services"]["irqbalance"]
    assert (
        irq["running"] is False and irq["enabled"] == NA("no systemd") and irq["masked"] == NA("no systemd")
    )


# ------------------------------------------------------------------------------------ CPU, THP, NUMA


def test_cpu_governors(hosts: dict[str, dict[str, Any]]) -> None:
    assert hosts["tuned-dgx"]["cpu_governors"] == {"performance": 8}
    assert hosts["stock-server"]["cpu_governors"] == {"ondemand": 4}
    na = hosts["container"]["cpu_governors"]
    assert isinstance(na, NA) and na.reason.startswith("no cpufreq")


def test_thp_active_values(hosts: dict[str, dict[str, Any]]) -> None:
    assert hosts["tuned-dgx"]["thp"] == {"enabled": "madvise", "defrag": "defer+madvise"}
    assert hosts["stock-server"]["thp"] == {"enabled": "always", "defrag": "always"}


def test_cpu_and_numa(hosts: dict[str, dict[str, Any]]) -> None:
    assert hosts["tuned-dgx"]["cpu"] == {
        "count": 8,
        "model": "Intel(R) Xeon(R) Platinum 8480CL",
        "sockets": 2,
    }
    assert hosts["container"]["cpu"]["sockets"] == 1  # no physical id: from the sysfs topology
    assert hosts["tuned-dgx"]["numa_nodes"] == [{"id": 0, "cpulist": "0-3"}, {"id": 1, "cpulist": "4-7"}]
    assert hosts["container"]["numa_nodes"] == []


# ---------------------------------------------------------------------------- memory, shm, limits, swap


def test_meminfo_swap_limits(hosts: dict[str, dict[str, Any]]) -> None:
    stock = hosts["stock-server"]
    assert stock["meminfo"] == {"MemTotal": 263576500 * 1024, "MemAvailable": 250000000 * 1024}
    assert stock["swap"] == {"total_bytes": 8388604 * 1024, "devices": ["/swap.img"]}
    assert stock["limits"] == {"memlock_soft": 8388608, "memlock_hard": 8388608}
    assert hosts["tuned-dgx"]["limits"] == {"memlock_soft": "unlimited", "memlock_hard": "unlimited"}


def test_unreadable_meminfo_is_na(tuned: Path) -> None:
    write(tuned, "proc/meminfo", "")
    (tuned / "proc/meminfo").unlink()
    (tuned / "proc/meminfo").mkdir()
    section = collect_host(tuned)
    assert section["meminfo"]["MemTotal"] == NA("cannot read /proc/meminfo: is a directory")


def test_parse_size_suffixes() -> None:
    assert parse_size("65536k") == 64 << 20
    assert parse_size("32G") == 32 << 30
    assert parse_size("2m") == 2 << 20
    assert parse_size("1048576") == 1 << 20
    assert parse_size("50%", mem_total=8 << 30) == 4 << 30
    assert parse_size("50%") is None
    assert parse_size("lots") is None


def test_shm_sizes(hosts: dict[str, dict[str, Any]], tuned: Path) -> None:
    assert hosts["stock-server"]["shm"] == {"mounted": True, "size_bytes": 64 << 20}
    assert hosts["no-driver"]["shm"] == {"mounted": True, "size_bytes": 32 << 30}
    # no size= in /proc/mounts: the kernel default, half of RAM
    assert hosts["tuned-dgx"]["shm"] == {"mounted": True, "size_bytes": 2113440552 * 1024 // 2}
    mounts = (
        (tuned / "proc/mounts").read_text().replace("tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0\n", "")
    )
    write(tuned, "proc/mounts", mounts)
    assert collect_host(tuned)["shm"] == {"mounted": False, "size_bytes": NA("/dev/shm is not mounted")}


# ------------------------------------------------------------------------------------------ modules


def test_modules(hosts: dict[str, dict[str, Any]]) -> None:
    assert "nvidia_peermem" in hosts["tuned-dgx"]["modules"]
    assert "nvidia" not in hosts["no-driver"]["modules"]


def test_missing_modules_is_na(tuned: Path) -> None:
    (tuned / "proc/modules").unlink()
    modules = host.read_modules(tuned)
    assert isinstance(modules, NA) and modules.reason.startswith("no /proc/modules")


# --------------------------------------------------------------------------------------------- kmsg


def test_kmsg_line_record_format() -> None:
    assert kmsg_line("6,1,5234567,-;nvidia-nvlink: up\n") == "[    5.234567] nvidia-nvlink: up"
    assert kmsg_line("4,10,86400123456,-,caller=T1;NVRM: Xid 79") == "[86400.123456] NVRM: Xid 79"
    assert kmsg_line("6,2,0,-;first line\n SUBSYSTEM=pci\n") == "[    0.000000] first line"
    assert kmsg_line(" SUBSYSTEM=pci") is None
    assert kmsg_line("[  12.5] already dmesg text") == "[  12.5] already dmesg text"


def test_kmsg_regular_file_fallback(hosts: dict[str, dict[str, Any]]) -> None:
    lines = hosts["tuned-dgx"]["kmsg"]
    assert lines[0].startswith("[    0.000000] Linux version 5.15.0-1063-nvidia")
    assert (
        lines[4]
        == "[    5.345678] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build"
    )
    assert not any("SUBSYSTEM=" in line or "DEVICE=" in line for line in lines)  # continuation lines dropped
    assert len(lines) == 7


def test_kmsg_cap(tuned: Path) -> None:
    write(tuned, "dev/kmsg", "".join(f"6,{i},{i},-;line {i}\n" for i in range(host.KMSG_MAX_LINES + 10)))
    lines = read_kmsg(tuned)
    assert isinstance(lines, list) and len(lines) == host.KMSG_MAX_LINES
    assert lines[-1].endswith(f"line {host.KMSG_MAX_LINES + 9}")


def test_kmsg_missing_and_directory(tuned: Path, hosts: dict[str, dict[str, Any]]) -> None:
    assert hosts["container"]["kmsg"] == NA(KMSG_MISSING)
    (tuned / "dev/kmsg").unlink()
    (tuned / "dev/kmsg").mkdir()
    result = read_kmsg(tuned)
    assert isinstance(result, NA) and result.reason.startswith("cannot read /dev/kmsg")


class FakeKmsg:
    """Stands in for os.open/os.read/os.close on a /dev/kmsg character device."""

    def __init__(self, reads: list[bytes | OSError]) -> None:
        self.reads = reads
        self.closed = False

    def open(self, path: Any, flags: int) -> int:
        assert flags & os.O_NONBLOCK
        return 99

    def read(self, fd: int, size: int) -> bytes:
        item = self.reads.pop(0)
        if isinstance(item, OSError):
            raise item
        return item

    def close(self, fd: int) -> None:
        self.closed = True


def test_kmsg_character_device_read_record_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeKmsg(
        [
            b"6,0,1000000,-;first\n",
            BrokenPipeError(errno.EPIPE, "overwritten"),  # records lost while reading: go on
            b"3,5,2500000,-;NVRM: RmInitAdapter failed!\n SUBSYSTEM=pci\n",
            BlockingIOError(errno.EAGAIN, "no more"),
            b"6,9,9,-;never read\n",
        ]
    )
    monkeypatch.setattr(os, "open", fake.open)
    monkeypatch.setattr(os, "read", fake.read)
    monkeypatch.setattr(os, "close", fake.close)
    lines = host._read_kmsg_device(Path("/dev/kmsg"))
    assert lines == ["[    1.000000] first", "[    2.500000] NVRM: RmInitAdapter failed!"]
    assert fake.closed


def test_kmsg_character_device_permission_denied(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(path: Any, flags: int) -> int:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "open", denied)
    assert host._read_kmsg_device(Path("/dev/kmsg")) == NA(KMSG_DENIED)


def test_real_kmsg_when_present() -> None:
    if not Path("/dev/kmsg").is_char_device():
        pytest.skip("no /dev/kmsg character device here")
    lines = read_kmsg(Path("/"))
    if isinstance(lines, NA):
        assert lines.reason == KMSG_DENIED
    else:
        assert all(line.startswith("[") for line in lines)


# ------------------------------------------------------------------------------------ nvidia bits


def test_nvidia_proc_version_and_dev_nodes(hosts: dict[str, dict[str, Any]]) -> None:
    assert "Open Kernel Module for x86_64  580.159.04" in hosts["tuned-dgx"]["nvidia_proc_version"]
    missing = hosts["no-driver"]["nvidia_proc_version"]
    assert isinstance(missing, NA) and "not loaded" in missing.reason
    nodes = {n["path"]: n for n in hosts["stock-server"]["dev_nodes"]}
    assert nodes["/dev/nvidia0"] == {"path": "/dev/nvidia0", "mode": "0660", "char_device": False}
    tuned = [n["path"] for n in hosts["tuned-dgx"]["dev_nodes"]]
    assert "/dev/nvidia-caps/nvidia-cap1" in tuned and "/dev/nvidia-caps" not in tuned
    assert tuned.index("/dev/nvidia0") < tuned.index("/dev/nvidia1")
    assert hosts["no-driver"]["dev_nodes"] == []


def test_pci_nvidia(hosts: dict[str, dict[str, Any]]) -> None:
    pci = hosts["tuned-dgx"]["pci_nvidia"]
    assert [(d["bdf"], d["kind"]) for d in pci] == [
        ("0000:05:00.0", "nvswitch"),
        ("0000:18:00.0", "gpu"),
        ("0000:9a:00.0", "gpu"),
    ]
    gpu = pci[1]
    assert gpu == {
        "bdf": "0000:18:00.0",
        "class": "0x030200",
        "device": "0x2335",
        "kind": "gpu",
        "numa_node": 0,
        "local_cpulist": "0-3",
        "current_link_speed": "32.0 GT/s PCIe",
        "current_link_width": "16",
        "max_link_speed": "32.0 GT/s PCIe",
        "max_link_width": "16",
        "driver": "nvidia",
    }
    stock = hosts["stock-server"]["pci_nvidia"]
    assert [d["kind"] for d in stock] == ["gpu", "other"]  # the GPU's audio function is "other"
    assert isinstance(stock[0]["numa_node"], NA) and "numa_node = -1" in stock[0]["numa_node"].reason
    assert hosts["no-driver"]["pci_nvidia"][0]["driver"] == NA("no driver bound to 0000:3b:00.0")


def test_pci_device_takes_nvml_bus_ids(trees: dict[str, Path]) -> None:
    dev = pci_device(trees["tuned-dgx"], "00000000:9A:00.0")
    assert dev["bdf"] == "0000:9a:00.0" and dev["numa_node"] == 1 and dev["local_cpulist"] == "4-7"
    absent = pci_device(trees["tuned-dgx"], "0000:ff:00.0")
    assert absent["class"] == NA("no /sys/bus/pci/devices/0000:ff:00.0/class") and absent["kind"] == "other"


def test_normalise_bdf() -> None:
    assert normalise_bdf("00000000:18:00.0") == "0000:18:00.0"
    assert normalise_bdf("0000:18:00.0") == "0000:18:00.0"
    assert normalise_bdf("00000000:9A:00.0") == "0000:9a:00.0"
    assert normalise_bdf("18:00.0") == "0000:18:00.0"
    assert normalise_bdf(" 0001:C1:00.1 ") == "0001:c1:00.1"
    assert normalise_bdf("PCI:0000:3b:00.0") == "0000:3b:00.0"
    assert normalise_bdf("garbage") == "garbage"


def test_infiniband(hosts: dict[str, dict[str, Any]]) -> None:
    ib = hosts["tuned-dgx"]["infiniband"]
    assert [d["name"] for d in ib] == ["mlx5_0", "mlx5_1"]
    assert ib[0]["ports"] == [
        {"port": 1, "state": "4: ACTIVE", "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand"}
    ]
    assert hosts["container"]["infiniband"] == []


def test_nvidia_packages(hosts: dict[str, dict[str, Any]]) -> None:
    tuned = hosts["tuned-dgx"]["nvidia_packages"]
    assert tuned == {
        "manager": "dpkg",
        "open": ["nvidia-dkms-580-open", "nvidia-driver-580-open"],
        "proprietary": [],
    }
    stock = hosts["stock-server"]["nvidia_packages"]
    assert stock["proprietary"] == ["nvidia-dkms-580", "nvidia-driver-580", "nvidia-kernel-source-580"]
    assert hosts["no-driver"]["nvidia_packages"] == NA("rpm database not parsed")
    assert host.package_flavour("nvidia-kernel-open-580") == "open"
    assert host.package_flavour("nvidia-open") == "open"
    assert host.package_flavour("nvidia-driver-535-server") == "proprietary"
    assert host.package_flavour("nvidia-kernel-common-580") is None
    assert host.package_flavour("libnvidia-compute-580") is None


def test_no_package_database(tuned: Path) -> None:
    (tuned / "var/lib/dpkg/status").unlink()
    assert host.read_nvidia_packages(tuned) == NA("no dpkg or rpm package database")


def test_container_detection(hosts: dict[str, dict[str, Any]], tuned: Path) -> None:
    assert hosts["container"]["container"] == "docker"
    assert hosts["tuned-dgx"]["container"] is None
    write(tuned, "proc/1/environ", "PATH=/usr/bin\0container=lxc\0")
    assert host.detect_container(tuned) == "lxc"
    write(tuned, "run/.containerenv", "")
    assert host.detect_container(tuned) == "podman"
    write(tuned, "var/run/secrets/kubernetes.io/serviceaccount/token", "x")
    assert host.detect_container(tuned) == "kubernetes"


# ------------------------------------------------------------------------------------ real machine


def test_collect_host_on_this_machine_is_fast_and_does_not_raise() -> None:
    started = time.perf_counter()
    section = collect_host(Path("/"))
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0
    assert set(section) == CONTRACT_KEYS
    assert section["root"] == "/"
    assert section["is_root"] == (os.geteuid() == 0)
    json.dumps(to_jsonable(section))
    snapshot_of(Path("/"))  # the helper the check tests use works on a real root too


@pytest.mark.parametrize(
    ("cpuinfo", "expected"),
    [
        ("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n", False),  # AVX2 only: this CI machine's kind
        ("processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16\n", True),
        ("processor\t: 0\nflags\t\t: avx2 amx_tile amx_bf16\n", True),
        ("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n", True),  # Arm (Grace)
        ("processor\t: 0\nFeatures\t: fp asimd\n", False),
        ("processor\t: 0\n", None),  # no flags line: cannot tell
        (None, None),  # no /proc/cpuinfo
    ],
)
def test_native_bf16_reads_the_cpu_flags(tmp_path: Path, cpuinfo: str | None, expected: bool | None) -> None:
    if cpuinfo is not None:
        write(tmp_path, "proc/cpuinfo", cpuinfo)
    assert host.native_bf16(tmp_path) is expected


def test_native_bf16_on_this_machine() -> None:
    flags = " ".join(
        line
        for line in Path("/proc/cpuinfo").read_text().splitlines()
        if line.startswith(("flags", "Features"))
    ).split()
    assert host.native_bf16() is bool({"avx512_bf16", "amx_bf16", "bf16"} & set(flags))
