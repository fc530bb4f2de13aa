"""Host rates for the monitor (guide A §6: CPU saturation and I/O wait explain many idle GPUs).

:class:`HostStats` reads cumulative kernel counters through psutil (``/proc/stat``, ``/proc/diskstats``,
``/proc/net/dev`` on Linux) and turns two readings into rates over the time between them. The first
:meth:`HostStats.read` primes the counters and returns only the instantaneous values (memory, load);
every later call returns rates over the elapsed monotonic time since the previous call.

A host sample (the ``host`` dict of :class:`dgxperf.samples.Sample`)::

    cpu_util_pct, iowait_pct          % of all CPU time since the last read (iowait: Linux only)
    steal_pct                         % of all CPU time a VM's vCPUs were ready but not run (Linux only;
                                      included in cpu_util_pct): a launch-bound job slows with it
    mem_used_bytes, mem_total_bytes   used = total - available (what cannot be had without swapping)
    load1                             1-minute load average
    disks: {name: {read_bytes_per_s, write_bytes_per_s, busy_pct}}   whole disks and md/dm volumes
    net:   {iface: {rx_bytes_per_s, tx_bytes_per_s}}                every interface but lo

A counter that goes backwards (a disk re-attached, an interface re-created) gives a rate of 0 for that
interval instead of a negative number.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

# Block devices that are never data disks: loop devices (snaps, images), RAM disks, optical drives,
# floppies. md (DGX's /raid is md0) and dm (LVM) volumes are kept: they are what a person recognises as
# "the data disk"; their member disks are listed too, so do not sum the rows.
SKIPPED_DISK_PREFIXES = ("loop", "ram", "zram", "sr", "fd")
HIDDEN_NVME_PATH = re.compile(r"^nvme\d+c\d+n\d+$")  # multipath controller paths, hidden by the kernel


def _whole_disks(sys_block: Path) -> set[str] | None:
    """Names of whole block devices (no partitions), or None where /sys/block does not exist."""
    try:
        return {entry.name for entry in sys_block.iterdir()}
    except OSError:
        return None


def _keep_disk(name: str, whole: set[str] | None) -> bool:
    if name.startswith(SKIPPED_DISK_PREFIXES) or HIDDEN_NVME_PATH.match(name):
        return False
    # psutil lists partitions too (sda1, nvme0n1p2); their I/O is already in the whole disk's counters.
    return whole is None or name in whole


def _rate(new: float, old: float, elapsed: float) -> float:
    return round(max(0.0, new - old) / elapsed, 1)


class HostStats:
    """CPU, memory, disk and network rates between successive :meth:`read` calls.

    ``sys_block`` is where whole block devices are listed (``/sys/block``; tests pass a folder);
    ``clock`` measures the elapsed time rates are divided by (tests pass their own).
    """

    def __init__(
        self, sys_block: Path = Path("/sys/block"), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.sys_block = sys_block
        self.clock = clock
        self._at: float | None = None
        self._cpu: Any = None
        self._disks: dict[str, Any] = {}
        self._net: dict[str, Any] = {}

    def prime(self) -> None:
        """Take the counters the first rates are computed from."""
        self._at = self.clock()
        self._cpu, self._disks, self._net = self._counters()

    def _counters(self) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        cpu = psutil.cpu_times()
        whole = _whole_disks(self.sys_block)
        try:
            disks = psutil.disk_io_counters(perdisk=True, nowrap=True) or {}
        except (OSError, RuntimeError):  # no /proc/diskstats (some containers)
            disks = {}
        try:
            net = psutil.net_io_counters(pernic=True, nowrap=True) or {}
        except OSError:
            net = {}
        disks = {name: c for name, c in disks.items() if _keep_disk(name, whole)}
        net = {name: c for name, c in net.items() if name != "lo"}
        return cpu, disks, net

    def read(self) -> dict[str, Any]:
        host: dict[str, Any] = {}
        memory = psutil.virtual_memory()
        host["mem_used_bytes"] = float(memory.total - memory.available)
        host["mem_total_bytes"] = float(memory.total)
        with contextlib.suppress(OSError, AttributeError):  # getloadavg is not on every platform
            host["load1"] = round(os.getloadavg()[0], 2)
        if self._at is None:
            self.prime()
            return host
        now = self.clock()
        cpu, disks, net = self._counters()
        elapsed = now - self._at
        if elapsed > 0:
            host.update(self._cpu_pct(self._cpu, cpu))
            host["disks"] = self._disk_rates(self._disks, disks, elapsed)
            host["net"] = {
                name: {
                    "rx_bytes_per_s": _rate(c.bytes_recv, old.bytes_recv, elapsed),
                    "tx_bytes_per_s": _rate(c.bytes_sent, old.bytes_sent, elapsed),
                }
                for name, c in net.items()
                if (old := self._net.get(name)) is not None
            }
        self._at, self._cpu, self._disks, self._net = now, cpu, disks, net
        return host

    @staticmethod
    def _cpu_pct(old: Any, new: Any) -> dict[str, float]:
        """Busy and iowait shares of all CPU time, computed like psutil.cpu_percent but from our own
        previous reading: psutil's module-level state is shared with every other caller in the process."""
        deltas = {f: max(0.0, getattr(new, f) - getattr(old, f)) for f in new._fields}
        total = sum(deltas.values())
        # On Linux guest time is already counted in user/nice: do not count it twice.
        total -= deltas.get("guest", 0.0) + deltas.get("guest_nice", 0.0)
        if total <= 0:
            return {}
        idle = deltas.get("idle", 0.0) + deltas.get("iowait", 0.0)
        out = {"cpu_util_pct": round(min(100.0, max(0.0, (total - idle) / total * 100)), 2)}
        if "iowait" in deltas:
            out["iowait_pct"] = round(deltas["iowait"] / total * 100, 2)
        if "steal" in deltas:  # a VM's vCPUs waiting while the hypervisor runs someone else (counted as busy)
            out["steal_pct"] = round(deltas["steal"] / total * 100, 2)
        return out

    @staticmethod
    def _disk_rates(old: dict[str, Any], new: dict[str, Any], elapsed: float) -> dict[str, dict[str, float]]:
        rates = {}
        for name, c in new.items():
            before = old.get(name)
            if before is None:
                continue
            row = {
                "read_bytes_per_s": _rate(c.read_bytes, before.read_bytes, elapsed),
                "write_bytes_per_s": _rate(c.write_bytes, before.write_bytes, elapsed),
            }
            # busy_time (ms the device had I/O in flight; Linux's "%util" in iostat) is Linux/FreeBSD only.
            if hasattr(c, "busy_time"):
                busy_ms = max(0.0, c.busy_time - before.busy_time)
                row["busy_pct"] = round(min(100.0, busy_ms / (elapsed * 1000) * 100), 2)
            rates[name] = row
        return rates
