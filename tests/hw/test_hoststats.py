"""HostStats: real psutil readings are non-negative and plausible; rates from controlled counters exact."""

from __future__ import annotations

import collections
import os
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest

from dgxperf.hw.hoststats import HostStats

Disk = collections.namedtuple("Disk", "read_bytes write_bytes busy_time")
Nic = collections.namedtuple("Nic", "bytes_recv bytes_sent")
Cpu = collections.namedtuple("Cpu", "user nice system idle iowait irq softirq steal guest guest_nice")


def test_first_read_primes_later_reads_give_plausible_rates(tmp_path: Path) -> None:
    stats = HostStats()
    first = stats.read()
    assert "cpu_util_pct" not in first and "disks" not in first  # nothing to compute a rate from yet
    assert 0 < first["mem_used_bytes"] <= first["mem_total_bytes"]
    # Some CPU work and some disk writes between the two reads.
    data = tmp_path / "blob"
    with data.open("wb") as f:
        f.write(os.urandom(4 << 20))
        f.flush()
        os.fsync(f.fileno())
    sum(i * i for i in range(200_000))
    second = stats.read()
    assert 0 <= second["cpu_util_pct"] <= 100
    assert 0 <= second["iowait_pct"] <= 100  # Linux has iowait
    assert 0 <= second["steal_pct"] <= second["cpu_util_pct"]  # and steal, a part of busy time
    assert second["load1"] >= 0
    assert second["mem_total_bytes"] == psutil.virtual_memory().total
    assert isinstance(second["disks"], dict) and isinstance(second["net"], dict)
    assert "lo" not in second["net"]
    for row in second["disks"].values():
        assert row["read_bytes_per_s"] >= 0 and row["write_bytes_per_s"] >= 0
        assert 0 <= row["busy_pct"] <= 100
    for row in second["net"].values():
        assert row["rx_bytes_per_s"] >= 0 and row["tx_bytes_per_s"] >= 0
    # No partitions: their bytes are already in the whole disk's row.
    whole = set(os.listdir("/sys/block")) if Path("/sys/block").is_dir() else None
    if whole is not None:
        assert set(second["disks"]) <= whole


class FakeCounters:
    """psutil's counter functions, scripted; the clock is ours too, so rates are exact."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 100.0
        self.cpu = Cpu(100, 0, 50, 800, 10, 0, 0, 0, 0, 0)
        self.disks: dict[str, Any] = {}
        self.nics: dict[str, Any] = {}
        monkeypatch.setattr(psutil, "cpu_times", lambda: self.cpu)
        monkeypatch.setattr(psutil, "disk_io_counters", lambda **kw: dict(self.disks))
        monkeypatch.setattr(psutil, "net_io_counters", lambda **kw: dict(self.nics))


def test_rates_are_deltas_over_elapsed_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeCounters(monkeypatch)
    sys_block = tmp_path / "block"
    for name in ("nvme0n1", "md0", "loop0"):
        (sys_block / name).mkdir(parents=True)
    fake.disks = {
        "nvme0n1": Disk(0, 0, 0),
        "nvme0n1p1": Disk(0, 0, 0),  # a partition: not in /sys/block
        "md0": Disk(0, 0, 0),
        "loop0": Disk(0, 0, 0),  # a loop device: never a data disk
    }
    fake.nics = {"lo": Nic(0, 0), "ib0": Nic(0, 0)}
    stats = HostStats(sys_block, clock=lambda: fake.now)
    stats.read()
    fake.now += 2.0
    fake.cpu = Cpu(100 + 60, 0, 50 + 20, 800 + 100, 10 + 20, 0, 0, 0, 0, 0)  # 200 ticks: 80 busy, 20 iowait
    fake.disks = {
        "nvme0n1": Disk(6e9, 2e9, 1500),
        "nvme0n1p1": Disk(6e9, 2e9, 1500),
        "md0": Disk(6e9, 0, 500),
        "loop0": Disk(1, 1, 1),
    }
    fake.nics = {"lo": Nic(9e9, 9e9), "ib0": Nic(50e9, 48e9)}
    host = stats.read()
    assert host["cpu_util_pct"] == 40.0 and host["iowait_pct"] == 10.0
    assert host["disks"] == {
        "nvme0n1": {"read_bytes_per_s": 3e9, "write_bytes_per_s": 1e9, "busy_pct": 75.0},
        "md0": {"read_bytes_per_s": 3e9, "write_bytes_per_s": 0.0, "busy_pct": 25.0},
    }
    assert host["net"] == {"ib0": {"rx_bytes_per_s": 25e9, "tx_bytes_per_s": 24e9}}


def test_counters_that_go_backwards_give_zero_not_negative(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeCounters(monkeypatch)
    fake.disks = {"sda": Disk(5e9, 5e9, 9000)}
    fake.nics = {"eth0": Nic(5e9, 5e9)}
    stats = HostStats(tmp_path / "no-sys-block", clock=lambda: fake.now)  # no /sys/block: every device kept
    stats.read()
    fake.now += 1.0
    fake.disks = {"sda": Disk(0, 0, 0)}  # the disk was re-attached: counters restart
    fake.nics = {"eth0": Nic(0, 0), "eth1": Nic(7, 7)}  # eth1 is new: no rate until next time
    host = stats.read()
    assert host["disks"] == {"sda": {"read_bytes_per_s": 0.0, "write_bytes_per_s": 0.0, "busy_pct": 0.0}}
    assert host["net"] == {"eth0": {"rx_bytes_per_s": 0.0, "tx_bytes_per_s": 0.0}}


def test_guest_time_is_not_counted_twice() -> None:
    old = Cpu(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    # 100 ticks: 50 user of which 50 guest (a VM), 50 idle -> 50% busy, not 66%.
    new = Cpu(50, 0, 0, 50, 0, 0, 0, 0, 50, 0)
    assert HostStats._cpu_pct(old, new) == {"cpu_util_pct": 50.0, "iowait_pct": 0.0, "steal_pct": 0.0}


def test_steal_time_is_reported_and_counted_as_busy() -> None:
    old = Cpu(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    # 200 ticks on a VM: 60 user, 20 stolen by the hypervisor, 120 idle
    new = Cpu(60, 0, 0, 120, 0, 0, 0, 20, 0, 0)
    assert HostStats._cpu_pct(old, new) == {"cpu_util_pct": 40.0, "iowait_pct": 0.0, "steal_pct": 10.0}
