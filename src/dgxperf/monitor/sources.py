"""Where samples come from: one :class:`Source` interface, a live and a recorded implementation.

Every consumer (terminal view, exporter, advisor, report) takes a :class:`Source`, so all of them run on a
CPU machine from recordings made on real GPUs (the habit of optuna's samplers: one base class, every
implementation run through the same tests).

- :class:`LiveSource` samples this host: NVML (:class:`dgxperf.hw.telemetry.NvmlTelemetry`) and host
  counters (:class:`dgxperf.hw.hoststats.HostStats`), on a drift-free tick schedule.
- :class:`RecordedSource` replays a recording (see :mod:`dgxperf.samples` for the format) as fast
  as possible, at the original pace or N times faster, once or in a loop.

Bad input: a missing file or a bad header is a :class:`RecordingError` (nothing can be replayed without
the header); a bad *later* line (corrupt JSON, wrong types, a half-written last line after a crash) is
skipped and reported in ``source.warnings`` as ``"file:line: reason"``, and the rest of the recording
replays.
"""

from __future__ import annotations

import abc
import datetime
import gzip
import json
import math
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeGuard, TypeVar

from dgxperf.hw.hoststats import HostStats
from dgxperf.hw.telemetry import NvmlTelemetry
from dgxperf.samples import RECORDING_SCHEMA, Header, Sample

S = TypeVar("S", bound="Source")

SCHEMA_PREFIX = RECORDING_SCHEMA.split("/")[0] + "/"


class RecordingError(Exception):
    """A recording that cannot be read or written at all (missing file, bad header): one line for a person."""


class Source(abc.ABC):
    """A stream of samples with a fixed header. ``next_sample()`` returns None at the end of a recording
    (a live source never ends). ``warnings`` collects problems a person should hear about that did not
    stop the stream (skipped lines of a recording, NVML being unavailable)."""

    header: Header

    def __init__(self) -> None:
        self.warnings: list[str] = []

    @abc.abstractmethod
    def next_sample(self) -> Sample | None:
        """The next sample; blocks until it is due (live: the next tick; recorded: the replay pace)."""

    def close(self) -> None:  # noqa: B027 - optional hook: sources without resources need not override
        """Release what the source holds (NVML, a file). Idempotent."""

    def __iter__(self) -> Iterator[Sample]:
        while (sample := self.next_sample()) is not None:
            yield sample

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class LiveSource(Source):
    """This host, sampled every ``interval_s``.

    Ticks are scheduled on the monotonic clock at ``start + k * interval_s``: the time a tick's reads take
    is absorbed by the next wait, so the sampling rate never drifts (a fixed sleep *after* the work would
    stretch every interval by the work's duration). A caller that comes back late gets its sample at
    once; a caller that misses whole ticks (a stalled consumer) skips them instead of bursting to catch
    up (``missed_ticks`` counts them). The first sample is due one interval after construction, so its
    rates (GPM, disks, network) cover a full interval.

    ``host_only=True`` does not touch NVML. Without it, NVML being unavailable is not an error: the source
    has no GPUs, ``nvml_available`` is False, ``nvml_error`` says why, and the header's notes say so.
    ``lib`` replaces pynvml (tests); ``processes_every``: see :class:`NvmlTelemetry`.
    """

    def __init__(
        self,
        interval_s: float,
        host_only: bool = False,
        *,
        lib: Any = None,
        processes_every: int = 5,
    ) -> None:
        super().__init__()
        if not interval_s > 0 or not math.isfinite(interval_s):
            raise ValueError(f"interval must be a positive number of seconds, got {interval_s}")
        self.interval_s = float(interval_s)
        self.host_only = host_only
        self.telemetry: NvmlTelemetry | None = None
        notes: list[str] = []
        if not host_only:
            self.telemetry = NvmlTelemetry(lib, processes_every=processes_every)
            if not self.telemetry.available:
                message = f"NVML is not available ({self.telemetry.error}); host metrics only"
                notes.append(message)
                self.warnings.append(message)
            self.warnings.extend(self.telemetry.problems)
        self.hoststats = HostStats()
        self.hoststats.prime()
        gpus = tuple(self.telemetry.header_gpus()) if self.telemetry is not None else ()
        self.header = Header(
            hostname=socket.gethostname(),
            started_at=_utc_now(),
            interval_s=self.interval_s,
            gpus=gpus,
            source="host" if host_only else "nvml",
            notes=tuple(notes),
        )
        self.missed_ticks = 0
        self._next_at = time.monotonic() + self.interval_s
        self._closed = False

    @property
    def nvml_available(self) -> bool:
        return self.telemetry is not None and self.telemetry.available

    @property
    def nvml_error(self) -> str | None:
        if self.host_only:
            return "host-only mode"
        return self.telemetry.error if self.telemetry is not None else None

    def next_sample(self) -> Sample | None:
        if self._closed:
            return None
        now = time.monotonic()
        if now < self._next_at:
            time.sleep(self._next_at - now)
        elif now - self._next_at >= self.interval_s:
            skipped = int((now - self._next_at) // self.interval_s)
            self.missed_ticks += skipped
            self._next_at += skipped * self.interval_s
        self._next_at += self.interval_s
        return self.read_now()

    def read_now(self) -> Sample:
        """One sample at once, off the tick schedule (rates cover the time since the previous read)."""
        t = time.time()
        gpus: tuple[Any, ...] = ()
        events: tuple[Mapping[str, Any], ...] = ()
        if self.telemetry is not None:
            gpus = tuple(self.telemetry.read())
            events = tuple(self.telemetry.drain_events())
        return Sample(t, gpus, self.hoststats.read(), events)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.telemetry is not None:
            self.telemetry.close()


# ------------------------------------------------------------------------------------------------------
# Recordings
# ------------------------------------------------------------------------------------------------------


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_header(text: str, where: str) -> Header:
    """The header line of a recording, or :class:`RecordingError` naming ``where`` (``file:1``)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordingError(f"{where}: the header is not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise RecordingError(f"{where}: the header is not a JSON object")
    schema = data.get("schema")
    if schema != RECORDING_SCHEMA:
        if isinstance(schema, str) and schema.startswith(SCHEMA_PREFIX):
            raise RecordingError(
                f"{where}: recording schema {schema!r} is not one this dgxperf reads ({RECORDING_SCHEMA})"
            )
        raise RecordingError(
            f"{where}: not a dgxperf recording (schema {schema!r}, expected {RECORDING_SCHEMA})"
        )
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or not all(
        isinstance(g, dict) and isinstance(g.get("index"), int) and not isinstance(g.get("index"), bool)
        for g in gpus
    ):
        raise RecordingError(
            f"{where}: the header's 'gpus' must be a list of objects with an integer 'index'"
        )
    interval = data.get("interval_s")
    if not _is_number(interval) or interval <= 0:
        raise RecordingError(
            f"{where}: the header's 'interval_s' must be a positive number, got {interval!r}"
        )
    try:
        return Header.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordingError(f"{where}: bad header ({type(exc).__name__}: {exc})") from None


def _check_gpu(gpu: Any) -> str | None:
    if not isinstance(gpu, dict):
        return "a GPU entry is not an object"
    index = gpu.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        return f"GPU index {index!r} is not an integer"
    for key, value in gpu.items():
        if key == "throttle":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return f"GPU {index}: 'throttle' is not a list of names"
        elif key == "processes":
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                return f"GPU {index}: 'processes' is not a list of objects"
        elif key != "index" and not _is_number(value):
            return f"GPU {index}: metric {key!r} is not a finite number ({value!r})"
    return None


def parse_sample(text: str) -> Sample | str:
    """One sample line, or the reason it is unusable (a string)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # A half-written last line (a crash mid-write) lands here too.
        return f"not JSON ({exc.msg} at column {exc.colno}; truncated line?)"
    if not isinstance(data, dict):
        return "not a JSON object"
    if not _is_number(data.get("t")):
        return f"'t' is not a finite number ({data.get('t')!r})"
    gpus = data.get("gpus", [])
    if not isinstance(gpus, list):
        return "'gpus' is not a list"
    for gpu in gpus:
        if (problem := _check_gpu(gpu)) is not None:
            return problem
    if not isinstance(data.get("host", {}), dict):
        return "'host' is not an object"
    events = data.get("events", [])
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        return "'events' is not a list of objects"
    try:
        return Sample.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:  # the checks above should catch these; be sure
        return f"{type(exc).__name__}: {exc}"


GZIP_MAGIC = b"\x1f\x8b"


def _check_readable(path: Path) -> None:
    if path.suffix == ".parquet":
        raise RecordingError(f"{path}: Parquet recordings are not supported by this dgxperf; use .jsonl")


class RecordedSource(Source):
    """Replays a recording.

    ``speed``: 0 (default) returns samples as fast as the caller asks; 1.0 at the original pace (waits
    by the recorded time gaps); N, N times faster. The pace is scheduled on the monotonic clock from the
    first sample, so it does not drift either. ``loop=True`` starts again at the end, with timestamps
    shifted forward by the recording's span plus one interval, so time keeps increasing (the exporter
    serves a recording indefinitely this way). Lines are read as they are replayed: a long recording
    starts at once. Warnings (skipped lines) are collected on the first pass only.
    """

    def __init__(self, path: Path | str, speed: float = 0.0, loop: bool = False) -> None:
        super().__init__()
        if not speed >= 0 or not math.isfinite(speed):
            raise ValueError(f"speed must be >= 0 (0 = as fast as possible), got {speed}")
        self.path = Path(path)
        self.speed = float(speed)
        self.loop = loop
        _check_readable(self.path)
        self._file: IO[str] | None = None
        self._line_no = 0
        self.header = self._open()
        self._pass = 0
        self._offset = 0.0  # added to every timestamp of the current pass (loop)
        self._first_t: float | None = None  # first recorded t of the recording (unshifted)
        self._last_t: float | None = None  # last good recorded t of this pass (unshifted)
        self._good_this_pass = 0
        self._anchor: tuple[float, float] | None = None  # (monotonic, shifted t) of the first sample
        self.samples_read = 0

    def _open(self) -> Header:
        try:
            with self.path.open("rb") as raw:
                compressed = raw.read(2) == GZIP_MAGIC
            # a recording kept gzipped (docs/benchmarks/ commits some that way) reads as it is
            self._file = (
                gzip.open(self.path, "rt", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed by close())
                if compressed
                else self.path.open(encoding="utf-8", errors="replace")
            )
        except OSError as exc:
            raise RecordingError(f"cannot read the recording {self.path}: {exc.strerror or exc}") from None
        self._line_no = 1
        try:
            first = self._file.readline()
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
            self.close()
            raise RecordingError(f"{self.path}: not a readable gzip file ({exc})") from None
        if not first.strip():
            self.close()
            raise RecordingError(f"{self.path}:1: empty recording (no header line)")
        try:
            return parse_header(first, f"{self.path}:1")
        except RecordingError:
            self.close()
            raise

    def _warn(self, reason: str) -> None:
        if self._pass == 0:
            self.warnings.append(f"{self.path}:{self._line_no}: {reason}")

    def _next_recorded(self) -> Sample | None:
        """The next good sample of the file (timestamps as recorded), looping if asked."""
        while True:
            try:
                line = self._file.readline() if self._file is not None else ""
            except (OSError, EOFError) as exc:  # a gzipped recording cut short
                self._warn(f"the rest is unreadable ({exc}); the samples before it are kept")
                self.close()
                line = ""
            if not line:
                if (
                    not self.loop
                    or self._good_this_pass == 0
                    or self._first_t is None
                    or self._last_t is None
                ):
                    return None
                # Start again: shift time so the new pass begins one interval after the last sample.
                self._offset += (self._last_t - self._first_t) + self.header.interval_s
                self._pass += 1
                self._good_this_pass = 0
                self._last_t = None
                if self._file is not None:
                    self._file.seek(0)
                    self._file.readline()
                self._line_no = 1
                continue
            self._line_no += 1
            if not line.strip():
                continue  # a blank line carries nothing; not worth a warning
            parsed = parse_sample(line)
            if isinstance(parsed, str):
                # No newline at the end: the last line of a file cut short by a crash (or still being written).
                cut = "" if line.endswith("\n") else "half-written last line; "
                self._warn(f"line skipped: {cut}{parsed}")
                continue
            if self._last_t is not None and parsed.t < self._last_t:
                self._warn(f"line skipped: time goes backwards (t={parsed.t} after {self._last_t})")
                continue
            if self._first_t is None:
                self._first_t = parsed.t
            self._last_t = parsed.t
            self._good_this_pass += 1
            return parsed

    def next_sample(self) -> Sample | None:
        recorded = self._next_recorded()
        if recorded is None:
            return None
        sample = recorded
        if self._offset:
            sample = Sample(recorded.t + self._offset, recorded.gpus, recorded.host, recorded.events)
        if self.speed > 0:
            now = time.monotonic()
            if self._anchor is None:
                self._anchor = (now, sample.t)
            else:
                due = self._anchor[0] + (sample.t - self._anchor[1]) / self.speed
                if due > now:
                    time.sleep(due - now)
        self.samples_read += 1
        return sample

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_recording(path: Path | str) -> tuple[Header, list[Sample], list[str]]:
    """A whole recording at once: its header, every good sample, and the warnings for skipped lines."""
    with RecordedSource(path) as source:
        samples = list(source)
        return source.header, samples, list(source.warnings)
