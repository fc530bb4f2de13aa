"""CPU use of the processes that hold a GPU, from their threads' counters in ``/proc/<pid>/task``.

Why per process: the all-cores CPU share cannot show a training loop whose Python threads keep one core
busy while its GPU waits for kernel launches. On the H200's 16-core host, guide A's recipe ran its GPU
at ~57% utilisation with the host at 6.6-7.0% busy (1.06-1.12 cores;
``docs/benchmarks/2026-12-04-h200-encoder-g/validate/recordings/guide.jsonl``). PyTorch's forward and
optimizer launches run on the main thread and backward's on an autograd thread ("pt_autograd_0"), which
hand the work to each other. So the process as a whole, not any one thread, is what reaches one core;
``cpu_pct`` is the sum over its threads (100 = one core).

:meth:`ProcessCpu.sample` returns, per pid, the CPU share since that pid's previous sample; the first
sample of a pid only primes its counters. A pid that cannot be read (exited, another user's or another
PID namespace's process) is left out. A recycled pid is caught by its start time and primed again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def clock_ticks_per_second() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):  # not Linux: /proc is absent there anyway
        return 100


def parse_stat(text: str) -> tuple[int, int] | None:
    """(utime + stime, starttime) in clock ticks from a ``/proc/<pid>[/task/<tid>]/stat`` line.

    The command name (field 2) is in parentheses and may itself hold spaces or ')', so the fields are
    counted from the last ')'. After it come field 3 (state) onward: utime is field 14, stime 15,
    starttime 22."""
    _, paren, rest = text.rpartition(")")
    fields = rest.split()
    if not paren or len(fields) < 20:
        return None
    try:
        return int(fields[11]) + int(fields[12]), int(fields[19])
    except ValueError:
        return None


@dataclass(frozen=True)
class _Reading:
    at: float
    start: int  # the process's start time: a different one means the pid was reused
    threads: dict[int, int]  # tid -> utime + stime (ticks)


class ProcessCpu:
    """Per-process CPU share between successive :meth:`sample` calls (``root`` replaces ``/`` in tests)."""

    def __init__(self, root: Path = Path("/"), clock: Callable[[], float] = time.monotonic) -> None:
        self.proc = root / "proc"
        self.clock = clock
        self.hz = clock_ticks_per_second()
        self._last: dict[int, _Reading] = {}

    def _read(self, pid: int) -> _Reading | None:
        at = self.clock()
        try:
            own = parse_stat((self.proc / str(pid) / "stat").read_text())
            tids = [
                int(entry.name) for entry in (self.proc / str(pid) / "task").iterdir() if entry.name.isdigit()
            ]
        except (OSError, ValueError):
            return None
        if own is None:
            return None
        threads: dict[int, int] = {}
        for tid in tids:
            try:
                parsed = parse_stat((self.proc / str(pid) / "task" / str(tid) / "stat").read_text())
            except OSError:
                continue  # the thread ended between the listing and the read
            if parsed is not None:
                threads[tid] = parsed[0]
        return _Reading(at, own[1], threads)

    def _thread_name(self, pid: int, tid: int) -> str:
        try:
            return (self.proc / str(pid) / "task" / str(tid) / "comm").read_text().strip()
        except OSError:
            return ""

    def sample(self, pids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """{pid: {cpu_pct, busiest_thread_pct, busiest_thread}} over the time since each pid's last sample.

        Threads that started since then count from zero; threads that ended are gone from both the sum and
        the busiest, so a short-lived thread's last slice is lost (a few percent at most)."""
        out: dict[int, dict[str, Any]] = {}
        seen: dict[int, _Reading] = {}
        for pid in pids:
            now = self._read(pid)
            if now is None:
                continue
            seen[pid] = now
            before = self._last.get(pid)
            elapsed = now.at - before.at if before else 0.0
            if before is None or before.start != now.start or elapsed <= 0:
                continue
            deltas = {tid: max(0, ticks - before.threads.get(tid, 0)) for tid, ticks in now.threads.items()}
            if not deltas:
                continue
            scale = 100.0 / (self.hz * elapsed)
            busiest = max(deltas, key=lambda tid: deltas[tid])
            out[pid] = {
                "cpu_pct": round(sum(deltas.values()) * scale, 1),
                "busiest_thread_pct": round(deltas[busiest] * scale, 1),
                "busiest_thread": self._thread_name(pid, busiest),
            }
        self._last = seen  # pids gone from the GPU are forgotten
        return out
