"""doctor/driver.py: guide B §5.1's chain and the XID check, on the fixture trees."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from dgxperf.doctor import driver
from dgxperf.hw.snapshot import Snapshot
from dgxperf.hw.xid import parse_xids
from dgxperf.results import NA, Finding, Status
from tests.doctor.hostfixtures import NVML_DOWN, NVML_UP, host_tree, run_checks, snapshot, snapshot_of, write

MISMATCH: dict[str, Any] = {
    "reachable": False,
    "error": "NVML_ERROR_LIB_RM_VERSION_MISMATCH: RM has detected an NVML/RM version mismatch.",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Finding]]:
    base = tmp_path_factory.mktemp("driver")
    nvml = {"tuned-dgx": NVML_UP, "stock-server": NVML_UP, "container": NVML_UP, "no-driver": NVML_DOWN}
    return {name: run_checks(driver.CHECKS, snapshot(name, base, nvml[name])) for name in nvml}


def check(findings: dict[str, Finding], fid: str, status: Status) -> Finding:
    finding = findings[fid]
    assert finding.status is status, (fid, finding.status, dict(finding.evidence))
    assert finding.area == ("gpu" if fid == "gpu.xid" else "driver") and finding.why
    assert (finding.fix is not None) == status.needs_action
    return finding


def variant(tmp_path: Path, name: str, nvml: dict[str, Any] | None = None) -> tuple[Path, Any]:
    root = host_tree(name, tmp_path)
    return root, lambda: run_checks(driver.CHECKS, snapshot_of(root, nvml))


def test_tuned_node_passes_the_whole_chain(found: dict[str, dict[str, Finding]]) -> None:
    tuned = found["tuned-dgx"]
    assert {f.status for f in tuned.values()} == {Status.PASS}
    assert set(tuned) == {
        "driver.pci", "driver.nvml", "driver.modules", "driver.kmsg", "driver.dev_nodes",
        "driver.kernel_headers", "driver.flavour", "driver.version_match", "gpu.xid",
    }  # fmt: skip


# ----------------------------------------------------------------------------------------------- PCI


def test_pci(found: dict[str, dict[str, Finding]], tmp_path: Path) -> None:
    finding = check(found["tuned-dgx"], "driver.pci", Status.PASS)
    assert finding.evidence["count"] == 2 and finding.evidence["bdfs"] == ["0000:18:00.0", "0000:9a:00.0"]
    assert finding.evidence["nvswitches"] == 1
    root, run = variant(tmp_path, "tuned-dgx")
    for bdf in ("0000:18:00.0", "0000:9a:00.0", "0000:05:00.0"):
        shutil.rmtree(root / "sys/bus/pci/devices" / bdf)
    none = run()
    failed = check(none, "driver.pci", Status.FAIL)
    assert failed.evidence["count"] == 0
    assert "no NVIDIA GPU is visible on this machine's PCI bus" in failed.why
    assert failed.fix is not None and failed.fix.manual
    assert "not passed through to this VM/container" in failed.fix.summary
    # without a GPU the later links do not fail on their own account
    assert none["driver.modules"].status is Status.PASS  # the module is loaded all the same
    assert none["driver.dev_nodes"].status is Status.NOT_APPLICABLE


def test_pci_unreadable_is_unknown() -> None:
    snap = Snapshot("", "t", NVML_DOWN, {"pci_nvidia": NA("no /sys/bus/pci/devices")}, {}, {})
    finding = run_checks(driver.CHECKS, snap)["driver.pci"]
    assert finding.status is Status.UNKNOWN and finding.evidence["reason"] == "no /sys/bus/pci/devices"


# ---------------------------------------------------------------------------------------------- NVML


def test_nvml(found: dict[str, dict[str, Finding]], tmp_path: Path) -> None:
    passing = check(found["tuned-dgx"], "driver.nvml", Status.PASS)
    assert passing.evidence["driver_version"] == "580.159.04"
    failed = check(found["no-driver"], "driver.nvml", Status.FAIL)
    assert failed.evidence["error"] == NVML_DOWN["error"]
    assert "libnvidia-ml.so.1 is not installed" in failed.evidence["meaning"]
    assert failed.fix is not None and failed.fix.manual
    _, run = variant(tmp_path, "container", NVML_DOWN)
    in_container = run()["driver.nvml"]
    assert "NVIDIA Container Toolkit" in in_container.evidence["meaning"]


@pytest.mark.parametrize(
    ("error", "meaning"),
    [
        ("NVML_ERROR_DRIVER_NOT_LOADED: Driver Not Loaded", "kernel module is not loaded"),
        (MISMATCH["error"], "reboot"),
        ("NVML_ERROR_NO_PERMISSION: Insufficient Permissions", "/dev/nvidia*"),
        ("nvidia-ml-py is not installed (No module named 'pynvml')", "pip install nvidia-ml-py"),
    ],
)
def test_nvml_error_meanings(error: str, meaning: str) -> None:
    assert meaning in driver.nvml_hint(error, gpus_on_pci=1)


def test_nvml_without_gpu_points_at_pci() -> None:
    assert "driver.pci" in driver.nvml_hint("NVML_ERROR_LIBRARY_NOT_FOUND: x", gpus_on_pci=0)


# ------------------------------------------------------------------------------------------- modules


def test_modules(found: dict[str, dict[str, Finding]]) -> None:
    passing = check(found["tuned-dgx"], "driver.modules", Status.PASS)
    assert "nvidia_peermem" in passing.evidence["loaded"]
    failed = check(found["no-driver"], "driver.modules", Status.FAIL)
    assert failed.evidence["missing"] == ["nvidia"]
    assert failed.fix is not None and failed.fix.commands[:2] == ("modprobe nvidia", "dkms status")
    warn = check(found["stock-server"], "driver.modules", Status.WARN)
    assert warn.evidence["missing"] == ["nvidia_uvm", "nvidia_peermem"]
    assert warn.fix is not None
    assert "nvidia-modprobe -u -c=0" in warn.fix.commands and "modprobe nvidia_peermem" in warn.fix.commands
    # no InfiniBand: nvidia_peermem is not needed
    assert check(found["container"], "driver.modules", Status.PASS).evidence["infiniband"] is False


def test_modules_unreadable_is_unknown(tmp_path: Path) -> None:
    root, run = variant(tmp_path, "container")
    (root / "proc/modules").unlink()
    finding = run()["driver.modules"]
    assert finding.status is Status.UNKNOWN
    assert finding.evidence["reason"].startswith("running in a docker container: no /proc/modules")


# ---------------------------------------------------------------------------------------------- kmsg


def test_kmsg_nvrm_errors_fail(found: dict[str, dict[str, Finding]]) -> None:
    failed = check(found["no-driver"], "driver.kmsg", Status.FAIL)
    assert failed.evidence["errors"]["API mismatch"] == 1
    assert failed.evidence["errors"]["RmInitAdapter failed"] == 1
    assert (
        failed.evidence["last_lines"][-1]
        == "[    3.400000] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."
    )
    assert not any("Xid" in line for line in failed.evidence["last_lines"])  # XIDs are gpu.xid's
    assert failed.fix is not None and failed.fix.manual


def test_kmsg_clean_passes_and_missing_is_unknown(found: dict[str, dict[str, Finding]]) -> None:
    passing = check(found["tuned-dgx"], "driver.kmsg", Status.PASS)
    assert passing.evidence["lines_read"] == 7 and passing.evidence["errors"] == {}
    unknown = check(found["container"], "driver.kmsg", Status.UNKNOWN)
    assert unknown.evidence["reason"] == "running in a docker container: no /dev/kmsg (container?)"


def test_kmsg_unsigned_module_alone_warns(tmp_path: Path) -> None:
    root, run = variant(tmp_path, "tuned-dgx")
    line = "4,9,3000000,-;nvidia: module verification failed: signature and/or required key missing\n"
    write(root, "dev/kmsg", (root / "dev/kmsg").read_text() + line)
    finding = run()["driver.kmsg"]
    assert finding.status is Status.WARN and "module_verification" in finding.evidence


# ----------------------------------------------------------------------------------------------- XID


def test_parse_xids() -> None:
    lines = [
        "[86400.123456] NVRM: Xid (PCI:0000:01:00): 31, pid=23817, name=python3, Ch 00000008, intr 0. "
        "MMU Fault",
        "[    3.300000] NVRM: Xid (PCI:0000:3B:00): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)",
        "NVRM: loading NVIDIA UNIX Open Kernel Module",
    ]
    xids = parse_xids(lines)
    assert [x["xid"] for x in xids] == [31, 79, 13]
    assert xids[0]["pid"] == 23817 and xids[0]["name"] == "python3" and xids[0]["seconds"] == 86400.123456
    assert xids[0]["pci"] == "0000:01:00" and xids[0]["message"].startswith("Ch 00000008")
    assert xids[1]["pid"] is None and xids[1]["name"] is None and xids[1]["pci"] == "0000:3b:00"
    assert xids[1]["message"] == "GPU has fallen off the bus."
    assert xids[2]["pid"] is None and xids[2]["seconds"] is None
    assert xids[2]["message"] == "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)"


def test_xid_hardware_fails(found: dict[str, dict[str, Finding]]) -> None:
    failed = check(found["no-driver"], "gpu.xid", Status.FAIL)
    assert failed.evidence["hardware"] == [79]
    assert failed.evidence["xids"]["79"]["count"] == 1
    assert failed.evidence["xids"]["79"]["last"].endswith("GPU has fallen off the bus.")
    assert failed.fix is not None and failed.fix.manual
    assert failed.fix.summary == "drain the node, collect nvidia-bug-report.sh, reset or RMA"


def test_xid_application_warns(found: dict[str, dict[str, Finding]]) -> None:
    warn = check(found["stock-server"], "gpu.xid", Status.WARN)
    assert warn.evidence["application"] == [13, 31] and warn.evidence["hardware"] == []
    assert warn.evidence["xids"]["31"]["count"] == 2
    assert "pid=30001" in warn.evidence["xids"]["31"]["last"]
    assert warn.evidence["xids"]["31"]["gpus"] == ["0000:01:00"]


def test_xid_none_passes_missing_kmsg_unknown(found: dict[str, dict[str, Finding]]) -> None:
    check(found["tuned-dgx"], "gpu.xid", Status.PASS)
    unknown = check(found["container"], "gpu.xid", Status.UNKNOWN)
    assert "running in a docker container" in unknown.evidence["reason"]


# ----------------------------------------------------------------------------------------- dev nodes


def test_dev_nodes(found: dict[str, dict[str, Finding]]) -> None:
    passing = check(found["tuned-dgx"], "driver.dev_nodes", Status.PASS)
    assert passing.evidence["nodes"]["/dev/nvidia1"] == "0666"
    assert passing.evidence["nodes"]["/dev/nvidia-caps/nvidia-cap1"] == "0400"  # 0400 by design, not judged
    failed = check(found["no-driver"], "driver.dev_nodes", Status.FAIL)
    assert failed.evidence["missing"] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0"]
    assert failed.fix is not None and failed.fix.commands[0] == "nvidia-modprobe -u -c=0"
    stock = check(found["stock-server"], "driver.dev_nodes", Status.FAIL)  # nvidia-uvm missing
    assert stock.evidence["missing"] == ["/dev/nvidia-uvm"] and stock.evidence["not_world_rw"] == [
        "/dev/nvidia0"
    ]


def test_dev_nodes_wrong_permissions_warn(tmp_path: Path) -> None:
    root, run = variant(tmp_path, "tuned-dgx")
    (root / "dev/nvidia1").chmod(0o660)
    finding = run()["driver.dev_nodes"]
    assert finding.status is Status.WARN and finding.evidence["not_world_rw"] == ["/dev/nvidia1"]
    assert finding.fix is not None and finding.fix.commands[0] == "chmod 0666 /dev/nvidia1"


def test_dev_nodes_one_per_gpu(tmp_path: Path) -> None:
    root, run = variant(tmp_path, "tuned-dgx")
    (root / "dev/nvidia1").unlink()
    finding = run()["driver.dev_nodes"]
    assert finding.status is Status.FAIL and finding.evidence["missing"] == ["/dev/nvidia1"]
    assert finding.fix is not None and "nvidia-modprobe -c=1" in finding.fix.commands


# ------------------------------------------------------------------------------------ kernel headers


def test_kernel_headers(found: dict[str, dict[str, Finding]]) -> None:
    passing = check(found["tuned-dgx"], "driver.kernel_headers", Status.PASS)
    assert passing.evidence["headers_dir"] == "/lib/modules/5.15.0-1063-nvidia/build"
    warn = check(found["stock-server"], "driver.kernel_headers", Status.WARN)
    assert warn.evidence["release"] == "6.8.0-45-generic"
    assert warn.fix is not None
    assert warn.fix.commands == (
        "apt-get install -y linux-headers-$(uname -r)",
        "# RHEL/Rocky: dnf install -y kernel-devel-$(uname -r) kernel-headers-$(uname -r)",
    )
    rhel = check(found["no-driver"], "driver.kernel_headers", Status.WARN)
    assert rhel.fix is not None and rhel.fix.commands[0].startswith("dnf install")
    unknown = check(found["container"], "driver.kernel_headers", Status.UNKNOWN)
    assert unknown.evidence["reason"].startswith("running in a docker container: the host's kernel headers")


# ------------------------------------------------------------------------------------------- flavour


def test_flavour(found: dict[str, dict[str, Finding]]) -> None:
    assert check(found["tuned-dgx"], "driver.flavour", Status.PASS).evidence["loaded"] == "open"
    stock = check(found["stock-server"], "driver.flavour", Status.PASS)
    assert stock.evidence["loaded"] == "proprietary"
    assert stock.evidence["proprietary_packages"] == [
        "nvidia-dkms-580",
        "nvidia-driver-580",
        "nvidia-kernel-source-580",
    ]
    unknown = check(found["no-driver"], "driver.flavour", Status.UNKNOWN)
    assert (
        "not loaded" in unknown.evidence["reason"] and "rpm database not parsed" in unknown.evidence["reason"]
    )


def test_flavour_mixed_packages_fail(tmp_path: Path) -> None:
    root, run = variant(tmp_path, "stock-server")
    status = (root / "var/lib/dpkg/status").read_text()
    write(
        root,
        "var/lib/dpkg/status",
        status + "\nPackage: nvidia-kernel-open-580\nStatus: install ok installed\n",
    )
    finding = run()["driver.flavour"]
    assert finding.status is Status.FAIL and finding.guide == "B §2.1"
    assert finding.evidence["open_packages"] == ["nvidia-kernel-open-580"]
    assert finding.fix is not None and finding.fix.manual
    assert any("apt-get purge nvidia-kernel-open-580" in line for line in finding.fix.commands)


def test_flavour_loaded_disagrees_with_installed_fails(tmp_path: Path) -> None:
    root, run = variant(tmp_path, "tuned-dgx")
    write(
        root,
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue\n",
    )
    finding = run()["driver.flavour"]
    assert finding.status is Status.FAIL
    assert finding.evidence["loaded"] == "proprietary" and finding.evidence["open_packages"]


# ------------------------------------------------------------------------------------ version match


def test_version_match(found: dict[str, dict[str, Finding]], tmp_path: Path) -> None:
    passing = check(found["tuned-dgx"], "driver.version_match", Status.PASS)
    assert passing.evidence == {"kernel_module": "580.159.04", "userspace": "580.159.04"}
    assert (
        check(found["stock-server"], "driver.version_match", Status.PASS).evidence["kernel_module"]
        == "580.159.04"
    )
    check(found["no-driver"], "driver.version_match", Status.UNKNOWN)
    _, run = variant(tmp_path, "tuned-dgx", {**NVML_UP, "driver_version": "580.95.05"})
    differ = run()["driver.version_match"]
    assert differ.status is Status.FAIL and differ.evidence["userspace"] == "580.95.05"
    assert differ.fix is not None and differ.fix.manual


def test_version_mismatch_reported_by_nvml_fails(tmp_path: Path) -> None:
    _, run = variant(tmp_path, "tuned-dgx", MISMATCH)
    finding = run()["driver.version_match"]
    assert finding.status is Status.FAIL and "mismatch" in finding.evidence["nvml_error"]


# ----------------------------------------------------------------------------------------- robustness


def test_an_empty_snapshot_does_not_crash() -> None:
    findings = run_checks(driver.CHECKS, Snapshot("", "t", {}, {}, {}, {}))
    assert findings["driver.kmsg"].status is Status.UNKNOWN
    assert findings["driver.version_match"].status is Status.UNKNOWN
    assert findings["driver.nvml"].status is Status.FAIL
