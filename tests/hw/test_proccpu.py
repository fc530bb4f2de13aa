"""hw/proccpu.py: the CPU share of a process, summed over its threads, measured on real processes here and
checked for its edge cases (pid reuse, unreadable and vanishing processes) on a /proc tree built for them."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dgxperf.hw.proccpu import ProcessCpu, parse_stat

LINUX = Path("/proc/self/task").is_dir()
needs_proc = pytest.mark.skipif(not LINUX, reason="needs Linux /proc")

SPIN = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"
SPIN_TWO_THREADS = (
    "import threading, time\n"
    "def spin():\n    end = time.monotonic() + 60\n    while time.monotonic() < end: pass\n"
    "threading.Thread(target=spin, name='second', daemon=True).start()\nspin()\n"
)


@pytest.fixture
def process(request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", request.param])
    time.sleep(0.3)  # past the interpreter's start-up
    yield proc
    proc.kill()
    proc.wait()


def comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def measure(pid: int, seconds: float = 1.0) -> dict[str, object]:
    cpu = ProcessCpu()
    assert cpu.sample([pid]) == {}  # the first sample only primes
    time.sleep(seconds)
    return cpu.sample([pid])[pid]


@needs_proc
@pytest.mark.parametrize("process", [SPIN], indirect=True)
def test_a_spinning_process_uses_about_one_core(process: subprocess.Popen[bytes]) -> None:
    reading = measure(process.pid)
    assert 50 <= float(reading["cpu_pct"]) <= 110  # type: ignore[arg-type]  # shared CI cores: not exactly 100
    assert reading["busiest_thread_pct"] == reading["cpu_pct"]  # one thread does it all
    assert reading["busiest_thread"] == comm(process.pid)  # the main thread carries the process's name


@needs_proc
@pytest.mark.parametrize("process", ["import time; time.sleep(60)"], indirect=True)
def test_a_sleeping_process_uses_next_to_nothing(process: subprocess.Popen[bytes]) -> None:
    assert float(measure(process.pid)["cpu_pct"]) < 10  # type: ignore[arg-type]


@needs_proc
@pytest.mark.parametrize("process", [SPIN_TWO_THREADS], indirect=True)
def test_the_share_is_summed_over_threads(process: subprocess.Popen[bytes]) -> None:
    reading = measure(process.pid)
    total, busiest = float(reading["cpu_pct"]), float(reading["busiest_thread_pct"])  # type: ignore[arg-type]
    assert total >= busiest + 20  # two spinning threads: the sum is well above either one
    assert reading["busiest_thread"] in {"second", comm(process.pid)}


@needs_proc
def test_processes_that_cannot_be_read_are_left_out() -> None:
    cpu = ProcessCpu()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    cpu.sample([gone.pid])
    assert cpu.sample([gone.pid, 2**22 + 12345]) == {}


def stat_line(comm: str, ticks: int, start: int) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ... starttime
    fields = ["S"] + ["0"] * 10 + [str(ticks), "0"] + ["0"] * 6 + [str(start)] + ["0"] * 10
    return f"42 ({comm}) " + " ".join(fields)


def write_proc(root: Path, pid: int, threads: dict[int, tuple[str, int]], start: int = 1000) -> None:
    base = root / "proc" / str(pid)
    base.mkdir(parents=True, exist_ok=True)
    (base / "stat").write_text(stat_line("python3", sum(t for _, t in threads.values()), start))
    task = base / "task"
    if task.exists():
        for old in task.iterdir():
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
    for tid, (name, ticks) in threads.items():
        (task / str(tid)).mkdir(parents=True)
        (task / str(tid) / "stat").write_text(stat_line(name, ticks, start))
        (task / str(tid) / "comm").write_text(name + "\n")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_parse_stat_counts_fields_from_the_last_parenthesis() -> None:
    assert parse_stat(stat_line("odd) name (x", 250, 77)) == (250, 77)
    assert parse_stat("42 (python3) S 1 2") is None  # too short
    assert parse_stat("no parenthesis at all") is None
    assert parse_stat(stat_line("python3", 1, 2).replace(" 1 0 ", " x 0 ", 1)) is None  # not a number


def test_rates_threads_and_the_busiest_thread_by_name(tmp_path: Path) -> None:
    clock = Clock()
    cpu = ProcessCpu(tmp_path, clock)
    cpu.hz = 100
    write_proc(tmp_path, 7, {7: ("python3", 1000), 8: ("pt_autograd_0", 500)})
    assert cpu.sample([7]) == {}
    clock.now = 5.0
    # in 5 s: main thread +300 ticks (60% of a core), autograd +200 (40%), a new thread +50 (10%)
    write_proc(tmp_path, 7, {7: ("python3", 1300), 8: ("pt_autograd_0", 700), 9: ("pin_memory", 50)})
    assert cpu.sample([7]) == {7: {"cpu_pct": 110.0, "busiest_thread_pct": 60.0, "busiest_thread": "python3"}}


def test_a_reused_pid_is_primed_again_not_compared(tmp_path: Path) -> None:
    clock = Clock()
    cpu = ProcessCpu(tmp_path, clock)
    write_proc(tmp_path, 7, {7: ("python3", 5000)}, start=1000)
    cpu.sample([7])
    clock.now = 1.0
    write_proc(tmp_path, 7, {7: ("bash", 10)}, start=9999)  # another process with the same pid
    assert cpu.sample([7]) == {}
    clock.now = 2.0
    write_proc(tmp_path, 7, {7: ("bash", 60)}, start=9999)
    assert cpu.sample([7])[7]["cpu_pct"] == pytest.approx(50.0 * 100 / cpu.hz)


def test_a_pid_off_the_gpu_is_forgotten(tmp_path: Path) -> None:
    clock = Clock()
    cpu = ProcessCpu(tmp_path, clock)
    write_proc(tmp_path, 7, {7: ("python3", 0)})
    cpu.sample([7])
    clock.now = 1.0
    assert cpu.sample([]) == {}  # not on any GPU this time
    clock.now = 2.0
    write_proc(tmp_path, 7, {7: ("python3", 100)})
    assert cpu.sample([7]) == {}  # back: primed again rather than averaged over the gap
