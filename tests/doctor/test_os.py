"""doctor/os.py checks on the fixture trees: pass, warn/fail (with the fix), unknown and not applicable."""

from __future__ import annotations

from pathlib import Path

import pytest

from dgxperf.doctor import os as os_checks
from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import Finding, Status
from tests.doctor.hostfixtures import NVML_UP, host_tree, run_checks, snapshot, snapshot_of, write


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Finding]]:
    base = tmp_path_factory.mktemp("os")
    return {
        name: run_checks(os_checks.CHECKS, snapshot(name, base, NVML_UP))
        for name in ("tuned-dgx", "stock-server", "no-driver", "container")
    }


def check(findings: dict[str, Finding], fid: str, status: Status) -> Finding:
    finding = findings[fid]
    assert finding.status is status, (fid, finding.status, dict(finding.evidence))
    assert finding.area == "os"
    assert finding.why
    if status.needs_action:
        assert finding.fix is not None
    else:
        assert finding.fix is None
    return finding


def test_a_tuned_node_passes_everything(found: dict[str, dict[str, Finding]]) -> None:
    tuned = found["tuned-dgx"]
    assert {f.status for f in tuned.values()} == {Status.PASS}
    assert len(tuned) == 14


# -------------------------------------------------------------------------------------------- sysctl

SYSCTL_FIXES = {
    "vm.max_map_count": "262144",
    "vm.overcommit_memory": "1",
    "net.core.rmem_max": "16777216",
    "net.core.wmem_max": "16777216",
    # the max is raised to the guide's 16 MiB; the kernel's larger default 131072 is kept
    "net.ipv4.tcp_rmem": "4096 131072 16777216",
    "net.ipv4.tcp_wmem": "4096 65536 16777216",
}


@pytest.mark.parametrize("key", list(SYSCTL_FIXES))
def test_sysctl_stock_values_warn_with_the_guide_value(
    found: dict[str, dict[str, Finding]], key: str
) -> None:
    finding = check(found["stock-server"], f"os.sysctl.{key}", Status.WARN)
    assert finding.fix is not None
    assert finding.fix.sysctl == ((key, SYSCTL_FIXES[key]),)
    assert finding.guide == "A §2.2"
    passing = check(found["tuned-dgx"], f"os.sysctl.{key}", Status.PASS)
    assert passing.evidence["key"] == key


def test_sysctl_evidence(found: dict[str, dict[str, Finding]]) -> None:
    finding = found["stock-server"]["os.sysctl.net.ipv4.tcp_rmem"]
    assert finding.evidence["value"] == "4096 131072 6291456"
    assert found["tuned-dgx"]["os.sysctl.vm.max_map_count"].evidence["value"] == "262144"
    assert found["container"]["os.sysctl.vm.max_map_count"].status is Status.PASS  # 1048576 >= 262144
    overcommit = found["stock-server"]["os.sysctl.vm.overcommit_memory"].why
    assert "kernel default 0" in overcommit and "fork()" in overcommit and "OOM killer" in overcommit


def test_sysctl_tcp_fix_on_an_old_kernel_is_the_guide_line(tmp_path: Path) -> None:
    root = host_tree("stock-server", tmp_path)
    write(root, "proc/sys/net/ipv4/tcp_rmem", "4096\t87380\t6291456\n")
    finding = run_checks(os_checks.CHECKS, snapshot_of(root))["os.sysctl.net.ipv4.tcp_rmem"]
    assert finding.fix is not None and finding.fix.sysctl == (("net.ipv4.tcp_rmem", "4096 87380 16777216"),)


def test_sysctl_unreadable_is_unknown_with_the_container_reason(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["container"], "os.sysctl.net.core.rmem_max", Status.UNKNOWN)
    assert finding.evidence["reason"] == "running in a docker container: no /proc/sys/net/core/rmem_max"


def test_sysctl_garbage_is_unknown(tmp_path: Path) -> None:
    root = host_tree("tuned-dgx", tmp_path)
    write(root, "proc/sys/vm/max_map_count", "many\n")
    finding = run_checks(os_checks.CHECKS, snapshot_of(root))["os.sysctl.vm.max_map_count"]
    assert finding.status is Status.UNKNOWN and "unparseable" in finding.evidence["reason"]


# ------------------------------------------------------------------------------------------ services


def test_irqbalance_running_and_enabled_warns(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["stock-server"], "os.service.irqbalance", Status.WARN)
    assert finding.evidence["running"] is True and finding.evidence["enabled"] is True
    assert finding.fix is not None and finding.fix.commands[0] == "systemctl disable --now irqbalance"
    assert "guide's recommendation" in finding.why
    check(found["tuned-dgx"], "os.service.irqbalance", Status.PASS)
    # installed but neither enabled nor running is fine
    assert found["no-driver"]["os.service.irqbalance"].status is Status.PASS


def test_tuned_not_masked_warns_masked_passes(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["stock-server"], "os.service.tuned", Status.WARN)
    assert finding.fix is not None and finding.fix.commands == ("systemctl mask --now tuned",)
    masked = check(found["tuned-dgx"], "os.service.tuned", Status.PASS)
    assert masked.evidence["masked"] is True


def test_tuned_installed_but_stopped_still_warns(tmp_path: Path) -> None:
    root = host_tree("stock-server", tmp_path)
    (root / "etc/systemd/system/multi-user.target.wants/tuned.service").unlink()
    (root / "proc/901/comm").unlink()
    finding = run_checks(os_checks.CHECKS, snapshot_of(root))["os.service.tuned"]
    assert finding.status is Status.WARN
    assert finding.evidence["installed"] is True and finding.evidence["running"] is False


def test_services_without_systemd(found: dict[str, dict[str, Finding]], tmp_path: Path) -> None:
    finding = check(found["container"], "os.service.irqbalance", Status.UNKNOWN)
    assert finding.evidence["reason"].startswith("running in a docker container: no systemd")
    root = host_tree("container", tmp_path)
    write(root, "proc/555/comm", "irqbalance\n")
    running = run_checks(os_checks.CHECKS, snapshot_of(root))["os.service.irqbalance"]
    assert running.status is Status.WARN
    assert running.fix is not None and "pkill -x irqbalance || true" in running.fix.commands


# ------------------------------------------------------------------------------------------ governor


def test_cpu_governor(found: dict[str, dict[str, Finding]]) -> None:
    passing = check(found["tuned-dgx"], "os.cpu_governor", Status.PASS)
    assert passing.evidence["governors"] == {"performance": 8}
    finding = check(found["stock-server"], "os.cpu_governor", Status.WARN)
    assert finding.evidence["governors"] == {"ondemand": 4}
    assert finding.fix is not None and finding.fix.commands[0] == "cpupower frequency-set -g performance"
    assert finding.fix.commands[1].startswith("# ")
    na = check(found["container"], "os.cpu_governor", Status.NOT_APPLICABLE)
    assert na.evidence["reason"].startswith("no cpufreq")


# ----------------------------------------------------------------------------------------------- THP


def test_thp(found: dict[str, dict[str, Finding]], tmp_path: Path) -> None:
    passing = check(found["tuned-dgx"], "os.thp", Status.PASS)
    assert passing.evidence == {"enabled": "madvise", "defrag": "defer+madvise"}
    finding = check(found["stock-server"], "os.thp", Status.WARN)
    assert finding.evidence["defrag"] == "always"
    assert finding.fix is not None
    assert finding.fix.commands[0] == "echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag"
    root = host_tree("stock-server", tmp_path)
    write(root, "sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n")
    assert run_checks(os_checks.CHECKS, snapshot_of(root))["os.thp"].status is Status.PASS
    (root / "sys/kernel/mm/transparent_hugepage/defrag").unlink()
    unknown = run_checks(os_checks.CHECKS, snapshot_of(root))["os.thp"]
    assert unknown.status is Status.UNKNOWN
    assert unknown.evidence["reason"] == "no /sys/kernel/mm/transparent_hugepage/defrag"


# ------------------------------------------------------------------------------------------ /dev/shm


def test_shm_docker_default_fails(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["stock-server"], "os.shm", Status.FAIL)
    assert finding.evidence["size_bytes"] == 64 << 20
    assert "bus error" in finding.why
    assert finding.fix is not None
    # half of 251 GiB of RAM
    assert finding.fix.commands[0] == "mount -o remount,size=125G /dev/shm"
    assert all(line.startswith("# ") for line in finding.fix.commands[1:])
    assert any("--shm-size" in line and "--ipc=host" in line for line in finding.fix.commands)
    in_container = check(found["container"], "os.shm", Status.FAIL)
    assert in_container.fix is not None and in_container.fix.commands[0].startswith(
        "# this is a docker container"
    )


def test_shm_pass_and_small_machine_gets_16g(found: dict[str, dict[str, Finding]], tmp_path: Path) -> None:
    passing = check(found["no-driver"], "os.shm", Status.PASS)
    assert passing.evidence["size_bytes"] == 32 << 30
    root = host_tree("stock-server", tmp_path)
    write(root, "proc/meminfo", "MemTotal: 8000000 kB\nMemAvailable: 7000000 kB\nSwapTotal: 0 kB\n")
    small = run_checks(os_checks.CHECKS, snapshot_of(root))["os.shm"]
    assert small.fix is not None and small.fix.commands[0] == "mount -o remount,size=16G /dev/shm"


def test_shm_not_mounted_fails(tmp_path: Path) -> None:
    root = host_tree("stock-server", tmp_path)
    text = (root / "proc/mounts").read_text()
    write(root, "proc/mounts", "".join(line + "\n" for line in text.splitlines() if "/dev/shm" not in line))
    finding = run_checks(os_checks.CHECKS, snapshot_of(root))["os.shm"]
    assert finding.status is Status.FAIL and finding.evidence["mounted"] is False
    assert finding.fix is not None and finding.fix.commands[0].startswith(
        "mountpoint -q /dev/shm || mount -t tmpfs"
    )


# ------------------------------------------------------------------------------------------- memlock


def test_memlock(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["stock-server"], "os.memlock", Status.WARN)
    assert finding.evidence["memlock_soft"] == 8388608 and finding.evidence["ib_devices"] == ["mlx5_0"]
    assert finding.fix is not None
    assert finding.fix.limits[:2] == ("* soft memlock unlimited", "* hard memlock unlimited")
    check(found["tuned-dgx"], "os.memlock", Status.PASS)
    check(found["no-driver"], "os.memlock", Status.NOT_APPLICABLE)


def test_memlock_unreadable_is_unknown(tmp_path: Path) -> None:
    root = host_tree("tuned-dgx", tmp_path)
    (root / "proc/self/limits").unlink()
    finding = run_checks(os_checks.CHECKS, snapshot_of(root))["os.memlock"]
    assert finding.status is Status.UNKNOWN and finding.evidence["reason"] == "no /proc/self/limits"


# ---------------------------------------------------------------------------------------------- swap


def test_swap(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["stock-server"], "os.swap", Status.WARN)
    assert finding.evidence["swap_devices"] == ["/swap.img"] and finding.evidence["vm.swappiness"] == "60"
    assert finding.fix is not None and finding.fix.sysctl == (("vm.swappiness", "10"),)
    passing = check(found["no-driver"], "os.swap", Status.PASS)  # swappiness 30 but no swap
    assert passing.evidence["swap_total_bytes"] == 0


def test_swap_unknown(tmp_path: Path) -> None:
    root = host_tree("stock-server", tmp_path)
    write(root, "proc/meminfo", "MemTotal: 8000000 kB\n")
    finding = run_checks(os_checks.CHECKS, snapshot_of(root))["os.swap"]
    assert finding.status is Status.UNKNOWN and finding.evidence["reason"] == "no SwapTotal in /proc/meminfo"


# ------------------------------------------------------------------------------------ NUMA balancing


def test_numa_balancing(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["stock-server"], "os.numa_balancing", Status.WARN)
    assert finding.evidence == {"numa_nodes": 2, "kernel.numa_balancing": "1"}
    assert finding.fix is not None and finding.fix.sysctl == (("kernel.numa_balancing", "0"),)
    check(found["tuned-dgx"], "os.numa_balancing", Status.PASS)
    check(found["no-driver"], "os.numa_balancing", Status.NOT_APPLICABLE)


# ----------------------------------------------------------------------------------- robustness


def test_an_empty_host_section_gives_unknowns_not_crashes() -> None:
    snap = Snapshot("", "t", {"reachable": False}, {}, {}, {})
    findings = run_checks(os_checks.CHECKS, snap)
    assert findings["os.sysctl.vm.max_map_count"].status is Status.UNKNOWN
    assert findings["os.shm"].status is Status.UNKNOWN
    assert all(isinstance(f, Finding) for f in findings.values())
