"""`dgxperf monitor`: the live terminal view and the loop the CLI calls.

:func:`render` draws one tick like ``nvidia-smi dmon -s pucvmet`` does, plus what dmon cannot show: GPM
activity (SM, tensor, DRAM) and clocks-event (throttle) reasons by name, and a host line (CPU, iowait,
memory, the busiest disk, network), because guide A §6's first question for an idle GPU is "is the host
feeding it?". An absent metric prints as ``-``.

:func:`run_monitor` pulls samples from any :class:`~dgxperf.monitor.sources.Source`, redraws each tick
(or prints one table with ``once``), records when asked, and stops at the duration, at the end of a
recording, or on Ctrl-C, always closing the recording properly.

:func:`measure_sampling_cost` measures what the monitor costs the host per tick (issue 5's budget:
<= 1% of one core per GPU at 1 Hz).
"""

from __future__ import annotations

import datetime
import io
import signal
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from dgxperf.monitor.recorder import Recorder, json_lines
from dgxperf.monitor.sources import Source
from dgxperf.samples import GpuSample, Header, Sample

GIB = 1024**3
ABSENT = "-"


def _fmt(value: float | None, digits: int = 0, scale: float = 1.0) -> str:
    return ABSENT if value is None else f"{value * scale:.{digits}f}"


def _pair(a: float | None, b: float | None, digits: int, scale: float = 1.0) -> str:
    if a is None and b is None:
        return ABSENT
    return f"{_fmt(a, digits, scale)}/{_fmt(b, digits, scale)}"


def _unit(value: float | None, unit: str, digits: int = 0, scale: float = 1.0) -> str:
    """A value with its unit, or a bare "-" when absent."""
    return ABSENT if value is None else _fmt(value, digits, scale) + unit


def _unit_pair(a: float | None, b: float | None, unit: str, digits: int, scale: float = 1.0) -> str:
    text = _pair(a, b, digits, scale)
    return text if text == ABSENT else text + unit


def _fb_total(gpu: GpuSample) -> float | None:
    used, free = gpu.get("fb_used_bytes"), gpu.get("fb_free_bytes")
    if used is None or free is None:
        return None
    return used + free + (gpu.get("fb_reserved_bytes") or 0.0)


# The GPU table's columns: (name, unit, width), in the order _row fills them. The table is fixed-width
# text like nvidia-smi dmon's, not a rich Table: the columns stay still from tick to tick, and it renders
# in about 1 ms for 8 GPUs where a rich Table took 15-25 ms (measured with measure_sampling_cost), which
# would have been most of the monitor's CPU cost. The last column (throttle names) is free width.
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("gpu", "idx", 3),
    ("util", "%", 4),
    ("SMact", "%", 5),
    ("tensor", "%", 6),
    ("DRAM", "%", 4),
    ("mcopy", "%", 5),
    ("FB used/total", "GiB", 13),
    ("power/limit", "W", 11),
    ("temp gpu/mem", "C", 12),
    ("SM", "MHz", 4),
    ("PCIe rx/tx", "GB/s", 11),
    ("NVLink rx/tx", "GB/s", 12),
    ("throttle", "reasons", 0),
)


def _line(cells: Sequence[str]) -> str:
    fixed = " ".join(f"{cell:>{width}}" for cell, (_, _, width) in zip(cells, COLUMNS[:-1], strict=False))
    return f"{fixed}  {cells[-1]}"


def _row(gpu: GpuSample) -> list[str]:
    g = gpu.get
    return [
        str(gpu.index),
        _fmt(g("gpu_util_pct")),
        _fmt(g("sm_active_pct")),
        _fmt(g("tensor_active_pct")),
        _fmt(g("dram_active_pct")),
        _fmt(g("mem_copy_util_pct")),
        _pair(g("fb_used_bytes"), _fb_total(gpu), 1, 1 / GIB),
        _pair(g("power_w"), g("power_limit_w"), 0),
        _pair(g("temp_gpu_c"), g("temp_mem_c"), 0),
        _fmt(g("sm_clock_mhz")),
        _pair(g("pcie_rx_bytes_per_s"), g("pcie_tx_bytes_per_s"), 2, 1e-9),
        _pair(g("nvlink_rx_bytes_per_s"), g("nvlink_tx_bytes_per_s"), 1, 1e-9),
        ",".join(gpu.throttle) if gpu.throttle else ABSENT,
    ]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


STEAL_SHOWN_PCT = 1.0


def host_line(host: Mapping[str, Any]) -> str:
    """CPU, iowait, memory, load, the busiest disk and the network total, on one line."""
    parts = [
        f"CPU {_unit(_number(host.get('cpu_util_pct')), '%')}",
        f"iowait {_unit(_number(host.get('iowait_pct')), '%', 1)}",
        "mem "
        + _unit_pair(
            _number(host.get("mem_used_bytes")), _number(host.get("mem_total_bytes")), " GiB", 1, 1 / GIB
        ),
        f"load {_fmt(_number(host.get('load1')), 1)}",
    ]
    steal = _number(host.get("steal_pct"))
    if steal is not None and steal >= STEAL_SHOWN_PCT:  # only a VM whose hypervisor takes CPU from it
        parts.insert(2, f"steal {steal:.1f}%")
    disks = host.get("disks")
    if isinstance(disks, Mapping) and disks:

        def moved(row: Any) -> float:
            if not isinstance(row, Mapping):
                return 0.0
            return (_number(row.get("read_bytes_per_s")) or 0.0) + (
                _number(row.get("write_bytes_per_s")) or 0.0
            )

        name = max(disks, key=lambda n: moved(disks[n]))
        row = disks[name] if isinstance(disks[name], Mapping) else {}
        rw = _pair(_number(row.get("read_bytes_per_s")), _number(row.get("write_bytes_per_s")), 1, 1e-6)
        parts.append(f"disk {name} r/w {rw} MB/s busy {_unit(_number(row.get('busy_pct')), '%')}")
    else:
        parts.append(f"disk {ABSENT}")
    net = host.get("net")
    if isinstance(net, Mapping) and net:
        rows = [r for r in net.values() if isinstance(r, Mapping)]
        rx = sum(_number(r.get("rx_bytes_per_s")) or 0.0 for r in rows)
        tx = sum(_number(r.get("tx_bytes_per_s")) or 0.0 for r in rows)
        parts.append(f"net rx/tx {rx * 1e-6:.1f}/{tx * 1e-6:.1f} MB/s")
    else:
        parts.append(f"net {ABSENT}")
    return "  ".join(parts)


def _alerts(sample: Sample, previous: Sample | None) -> list[str]:
    """Events of this tick, and error counters that rose since the previous one."""
    lines = []
    for event in sample.events:
        if event.get("type") == "xid":
            lines.append(f"XID {event.get('xid')} on GPU {event.get('gpu')}")
        else:
            lines.append(f"event {dict(event)}")
    if previous is not None:
        for gpu in sample.gpus:
            before = previous.gpu(gpu.index)
            if before is None:
                continue
            for metric, what in (
                ("ecc_dbe_volatile", "uncorrected ECC errors"),
                ("ecc_sbe_volatile", "corrected ECC errors"),
                ("pcie_replay", "PCIe replays"),
            ):
                now, then = gpu.get(metric), before.get(metric)
                if now is not None and then is not None and now > then:
                    lines.append(f"GPU {gpu.index}: +{now - then:.0f} {what}")
    return lines


def render(header: Header, sample: Sample, previous: Sample | None = None) -> RenderableType:
    """One tick: a row per GPU, the host line, and any XID / rising error counters."""
    when = datetime.datetime.fromtimestamp(sample.t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    names = sorted({g.name for g in header.gpus if g.name})
    title = f"{header.hostname or 'host'} — {len(sample.gpus)} GPU(s)"
    if names:
        title += f" ({', '.join(names)})"
    title += f" — {when} — every {header.interval_s:g} s from {header.source}"
    body = Text(no_wrap=True, overflow="ellipsis")
    body.append(title + "\n", style="bold")
    body.append(_line([name for name, _, _ in COLUMNS]) + "\n", style="bold")
    body.append(_line([unit for _, unit, _ in COLUMNS]) + "\n", style="dim")
    for gpu in sample.gpus:
        cells = _row(gpu)
        body.append(_line([*cells[:-1], ""]))
        # gpu_idle is the normal state of an idle GPU; every other reason slows a busy one down.
        slowed = [r for r in gpu.throttle if r != "gpu_idle"]
        body.append(cells[-1] + "\n", style="yellow" if slowed else "")
    body.rstrip()
    parts: list[RenderableType] = [body, Text("host  " + host_line(sample.host))]
    if not sample.gpus:
        parts.append(Text("no GPU metrics (" + ("; ".join(header.notes) or "no GPU in this sample") + ")"))
    for alert in _alerts(sample, previous):
        parts.append(Text(alert, style="bold red"))
    return Group(*parts)


def _duration_reached(sample: Sample, first: Sample, interval_s: float, duration_s: float) -> bool:
    """Whether the samples so far cover ``duration_s``. Judged on sample time, not wall time, so that
    ``--duration 10`` at 1 s means ten samples live and ten seconds of a recording replayed at any speed;
    the first sample stands for the interval before it."""
    covered = sample.t - first.t + interval_s
    return covered >= duration_s - interval_s / 2


def sigterm_as_ctrl_c() -> Callable[[], None]:
    """Make SIGTERM end the loop as Ctrl-C does, and return what undoes it. A script stops its background
    recording with `kill`: a non-interactive shell starts background jobs with SIGINT ignored, so
    `kill -INT` cannot. Only the main thread may install a handler; elsewhere SIGTERM keeps its default."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def run_monitor(
    source: Source,
    *,
    once: bool = False,
    duration_s: float | None = None,
    record: Path | None = None,
    console: Console,
    json_stream: IO[str] | None = None,
) -> int:
    """The `dgxperf monitor` loop. Returns the number of samples shown (and recorded).

    With ``json_stream`` every sample goes there as JSON Lines in the recording format instead of the view.

    The caller owns ``source`` (and closes it); the recording, if any, is always closed here, also on
    Ctrl-C or SIGTERM (either ends the loop cleanly) and on errors. Warnings the source gathered (skipped lines of a
    recording, NVML unavailable) are printed at the end. Raises RecordingError when ``record`` cannot be
    written, ValueError for a duration <= 0.
    """
    if duration_s is not None and not duration_s > 0:
        raise ValueError(f"duration must be > 0 s, got {duration_s}")
    recorder = Recorder(record, source.header) if record is not None else None
    emit = json_lines(json_stream, source.header) if json_stream is not None else None
    count = 0
    interval = source.header.interval_s
    restore_sigterm = sigterm_as_ctrl_c()
    try:
        if once:
            sample = source.next_sample()
            if sample is not None:
                if recorder is not None:
                    recorder.write(sample)
                count = 1
                if emit is not None:
                    emit(sample)
                else:
                    console.print(render(source.header, sample))
        else:
            # On a terminal, one frame redrawn in place each tick; piped into a file or `tee`, Live would
            # keep only the last frame, so every tick is printed instead (as nvidia-smi dmon does).
            live = (
                Live(console=console, auto_refresh=False, redirect_stdout=False)
                if console.is_terminal and emit is None
                else None
            )
            first: Sample | None = None
            previous: Sample | None = None
            if live is not None:
                live.start()
            try:
                while (sample := source.next_sample()) is not None:
                    if recorder is not None:
                        recorder.write(sample)
                    count += 1
                    if emit is not None:
                        emit(sample)
                    elif live is not None:
                        live.update(render(source.header, sample, previous), refresh=True)
                    else:
                        console.print(render(source.header, sample, previous))
                    first = first or sample
                    previous = sample
                    if duration_s is not None and _duration_reached(sample, first, interval, duration_s):
                        break
            finally:
                if live is not None:
                    live.stop()  # restores the cursor, also on Ctrl-C
    except KeyboardInterrupt:
        pass  # Ctrl-C: the normal way to stop the monitor; the samples so far count and stay recorded
    finally:
        restore_sigterm()
        if recorder is not None:
            recorder.close()
    for warning in source.warnings:
        console.print(f"warning: {warning}", highlight=False, markup=False)
    if recorder is not None:
        console.print(f"recorded {recorder.samples_written} sample(s) to {record}", highlight=False)
    return count


def measure_sampling_cost(
    source: Source,
    ticks: int,
    *,
    record: Path | None = None,
    render_view: bool = True,
) -> dict[str, Any]:
    """CPU time of this process per tick: the source's read, plus recording and rendering when asked.

    ``time.process_time`` counts CPU only (a live source's wait for the next tick costs nothing) but
    counts every thread of the process, so measure in a process that does nothing else. At 1 Hz one tick
    a second, so CPU seconds per tick equal the fraction of one core; ``core_pct_per_gpu_at_1hz`` is
    issue 5's figure (budget <= 1%).
    """
    if ticks < 1:
        raise ValueError("ticks must be >= 1")
    console = Console(file=io.StringIO(), width=200, color_system="truecolor", force_terminal=True)
    recorder = Recorder(record, source.header) if record is not None else None
    costs: list[float] = []
    previous: Sample | None = None
    wall0 = time.perf_counter()
    try:
        for _ in range(ticks):
            cpu0 = time.process_time()
            sample = source.next_sample()
            if sample is None:
                break
            if recorder is not None:
                recorder.write(sample)
            if render_view:
                console.print(render(source.header, sample, previous))
                console.file = io.StringIO()  # do not let the measurement grow a buffer
            previous = sample
            costs.append(time.process_time() - cpu0)
    finally:
        if recorder is not None:
            recorder.close()
    wall = time.perf_counter() - wall0
    gpus = len(source.header.gpus)
    mean = statistics.fmean(costs) if costs else 0.0
    return {
        "ticks": len(costs),
        "gpus": gpus,
        "recorded": record is not None,
        "rendered": render_view,
        "cpu_s_total": round(sum(costs), 6),
        "wall_s": round(wall, 3),
        "cpu_s_per_tick": mean,
        "cpu_s_per_tick_p50": _quantile(costs, 0.5),
        "cpu_s_per_tick_p99": _quantile(costs, 0.99),
        "cpu_s_per_tick_per_gpu": mean / gpus if gpus else None,
        "core_pct_at_1hz": mean * 100,
        "core_pct_per_gpu_at_1hz": mean * 100 / gpus if gpus else None,
    }


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
