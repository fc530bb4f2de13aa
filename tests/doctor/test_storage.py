"""doctor/storage.py checks on the fixture trees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dgxperf.doctor import storage
from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import NA, Finding, Status
from tests.doctor.hostfixtures import host_tree, run_checks, snapshot, snapshot_of, write

UDEV_SCHEDULER = 'ACTION=="add|change", KERNEL=="nvme[0-9]*n[0-9]*", ATTR{queue/scheduler}="none"'
UDEV_ROTATIONAL = 'ACTION=="add|change", KERNEL=="nvme[0-9]*n[0-9]*", ATTR{queue/rotational}="0"'
UDEV_NR_REQUESTS = 'ACTION=="add|change", KERNEL=="nvme[0-9]*n[0-9]*", ATTR{queue/nr_requests}="1023"'


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Finding]]:
    base = tmp_path_factory.mktemp("storage")
    return {
        name: run_checks(storage.CHECKS, snapshot(name, base))
        for name in ("tuned-dgx", "stock-server", "no-driver", "container")
    }


def check(findings: dict[str, Finding], fid: str, status: Status) -> Finding:
    finding = findings[fid]
    assert finding.status is status, (fid, finding.status, dict(finding.evidence))
    assert finding.area == "storage" and finding.why
    assert (finding.fix is not None) == status.needs_action
    return finding


def test_tuned_node_passes(found: dict[str, dict[str, Finding]]) -> None:
    tuned = found["tuned-dgx"]
    assert {f.status for f in tuned.values()} == {Status.PASS}
    assert {
        f"storage.{kind}.nvme{i}n1" for kind in ("scheduler", "rotational", "nr_requests") for i in range(3)
    } < set(tuned)
    assert tuned["storage.scheduler.nvme0n1"].evidence["scheduler"] == "none"


def test_scheduler_mq_deadline_warns_with_udev_rule(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["stock-server"], "storage.scheduler.nvme1n1", Status.WARN)
    assert finding.evidence["scheduler"] == "mq-deadline"
    assert finding.fix is not None
    assert finding.fix.udev == (UDEV_SCHEDULER,)
    assert finding.fix.commands == ("echo none > /sys/block/nvme1n1/queue/scheduler",)
    assert "sda" not in " ".join(found["stock-server"])  # a spinning SATA disk is not judged


def test_nr_requests_warns_with_1023_and_explains_the_cap(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["stock-server"], "storage.nr_requests.nvme0n1", Status.WARN)
    assert finding.evidence["nr_requests"] == 256 and finding.evidence["target"] == 1023
    assert finding.fix is not None and finding.fix.udev == (UDEV_NR_REQUESTS,)
    assert finding.fix.commands[-1] == "echo 1023 > /sys/block/nvme0n1/queue/nr_requests"
    assert "1023" in finding.why and "1024" in finding.why


def test_nr_requests_target_follows_a_shallow_hardware_queue(tmp_path: Path) -> None:
    root = host_tree("stock-server", tmp_path)
    write(root, "sys/block/nvme0n1/mq/0/nr_tags", "511\n")
    findings = run_checks(storage.CHECKS, snapshot_of(root))
    finding = findings["storage.nr_requests.nvme0n1"]
    assert finding.status is Status.WARN and finding.evidence["target"] == 511
    assert finding.fix is not None
    assert finding.fix.udev == ('ACTION=="add|change", KERNEL=="nvme0n1", ATTR{queue/nr_requests}="511"',)
    write(root, "sys/block/nvme0n1/queue/nr_requests", "511\n")
    assert run_checks(storage.CHECKS, snapshot_of(root))["storage.nr_requests.nvme0n1"].status is Status.PASS


def test_rotational_one_warns(tmp_path: Path, found: dict[str, dict[str, Finding]]) -> None:
    check(found["stock-server"], "storage.rotational.nvme0n1", Status.PASS)
    root = host_tree("stock-server", tmp_path)
    write(root, "sys/block/nvme0n1/queue/rotational", "1\n")
    finding = run_checks(storage.CHECKS, snapshot_of(root))["storage.rotational.nvme0n1"]
    assert finding.status is Status.WARN and finding.evidence["rotational"] == 1
    assert finding.fix is not None and finding.fix.udev == (UDEV_ROTATIONAL,)
    assert finding.fix.commands == ("echo 0 > /sys/block/nvme0n1/queue/rotational",)


def test_unreadable_queue_attribute_is_unknown(tmp_path: Path) -> None:
    root = host_tree("tuned-dgx", tmp_path)
    (root / "sys/block/nvme0n1/queue/scheduler").unlink()
    (root / "sys/block/nvme0n1/queue/scheduler").mkdir()
    finding = run_checks(storage.CHECKS, snapshot_of(root))["storage.scheduler.nvme0n1"]
    assert finding.status is Status.UNKNOWN
    assert finding.evidence["reason"] == "cannot read /sys/block/nvme0n1/queue/scheduler: is a directory"


def test_no_nvme_is_not_applicable(tmp_path: Path) -> None:
    root = host_tree("no-driver", tmp_path)
    shutil.rmtree(root / "sys/block/nvme0n1")
    write(root, "sys/block/sda/queue/scheduler", "[mq-deadline] none\n")
    findings = run_checks(storage.CHECKS, snapshot_of(root))
    check(findings, "storage.nvme", Status.NOT_APPLICABLE)
    assert not any(fid.startswith("storage.scheduler.") for fid in findings)


def test_block_devices_unreadable_is_unknown() -> None:
    snap = Snapshot(
        "", "t", {}, {"block_devices": NA("no /sys/block"), "mounts": NA("no /proc/mounts")}, {}, {}
    )
    findings = run_checks(storage.CHECKS, snap)
    assert findings["storage.nvme"].status is Status.UNKNOWN
    assert findings["storage.noatime"].status is Status.UNKNOWN
    assert findings["storage.noatime"].evidence["reason"] == "no /proc/mounts"


# -------------------------------------------------------------------------------------------- mounts


def test_data_mounts_without_noatime_warn(found: dict[str, dict[str, Finding]]) -> None:
    stock = found["stock-server"]
    data = check(stock, "storage.noatime.data", Status.WARN)
    assert data.evidence["device"] == "/dev/nvme1n1" and data.evidence["fstype"] == "xfs"
    assert data.evidence["noatime"] is False and data.evidence["discard"] is False
    assert data.evidence["fstrim_timer_enabled"] is False
    assert data.fix is not None
    assert data.fix.commands[0] == "mount -o remount,noatime,nodiratime /data"
    assert all(line.startswith("# ") for line in data.fix.commands[1:])
    assert "/dev/nvme1n1 /data xfs defaults,noatime,nodiratime 0 0" in data.fix.commands[-1]
    check(stock, "storage.noatime.root", Status.WARN)  # / on NVMe
    check(stock, "storage.noatime.mnt.archive", Status.WARN)  # ext4 under /mnt, on a SATA disk
    assert "storage.noatime.boot.efi" not in stock  # vfat
    assert not any("nfs" in fid for fid in stock)


def test_data_mounts_with_noatime_pass(found: dict[str, dict[str, Finding]]) -> None:
    tuned = found["tuned-dgx"]
    raid = check(tuned, "storage.noatime.raid", Status.PASS)
    assert raid.evidence["discard"] is True and raid.evidence["fstrim_timer_enabled"] is True
    scratch = check(tuned, "storage.noatime.mnt.scratch_space", Status.PASS)
    assert scratch.evidence["mountpoint"] == "/mnt/scratch space"


def test_container_bind_mounts_are_not_data_mounts(found: dict[str, dict[str, Finding]]) -> None:
    container = found["container"]
    assert not any(fid.startswith("storage.noatime.etc") for fid in container)
    finding = check(container, "storage.noatime.workspace.data", Status.WARN)  # /dev/md1 volume
    assert finding.fix is not None and finding.fix.commands[0].startswith("# this is a docker container")


def test_no_data_mount_is_not_applicable(found: dict[str, dict[str, Finding]]) -> None:
    finding = check(found["no-driver"], "storage.noatime", Status.NOT_APPLICABLE)
    assert "no ext4/xfs/btrfs data volume" in finding.evidence["reason"]


def test_mountpoint_with_a_space_is_quoted_in_the_fix(tmp_path: Path) -> None:
    root = host_tree("tuned-dgx", tmp_path)
    text = (root / "proc/mounts").read_text().replace("xfs rw,noatime,attr2", "xfs rw,relatime,attr2")
    write(root, "proc/mounts", text)
    finding = run_checks(storage.CHECKS, snapshot_of(root))["storage.noatime.mnt.scratch_space"]
    assert finding.status is Status.WARN and finding.fix is not None
    assert finding.fix.commands[0] == "mount -o remount,noatime,nodiratime '/mnt/scratch space'"
    assert "/mnt/scratch\\040space" in finding.fix.commands[-1]
