"""Recording samples to a file (``dgxperf monitor --record FILE``) in the versioned format of schema.py.

JSON Lines: the header (``"schema": "dgxperf.recording/1"``) on line 1, then one sample a line.

Durability: every line is flushed to the kernel as it is written, so a crash of dgxperf (an exception,
kill -9, an OOM kill) loses at most the sample being written; that half line is skipped with a warning
when the recording is read back. ``fsync`` (which protects against the *machine* crashing or losing
power) runs every ``fsync_every_s`` seconds (default 5) and at close, not every line: an fsync forces a
disk write and a journal commit, and at 1 Hz on a node whose disks are busy feeding a training job it
would add I/O to exactly the disks we are watching and can stall the sampling thread for tens of
milliseconds. A power loss therefore costs at most the last few seconds.

Parquet is not written: it needs pyarrow, which dgxperf does not depend on. A ``.parquet`` path gets a
clear error; any other name is written as JSON Lines.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from dgxperf.monitor.sources import RecordingError
from dgxperf.samples import Header, Sample

DEFAULT_FSYNC_EVERY_S = 5.0


def _finite(value: Any) -> Any:
    """The value with non-finite floats dropped: JSON has no NaN/Infinity, and other readers reject them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: v for k, v in ((k, _finite(v)) for k, v in value.items()) if v is not None}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _dumps(data: dict[str, Any]) -> str:
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a NaN from somewhere: drop it rather than write a line no reader accepts
        return json.dumps(_finite(data), separators=(",", ":"), allow_nan=False)


def json_lines(stream: IO[str], header: Header) -> Any:
    """``monitor --json``: the recording format (header line, then a sample a line) on ``stream``, each
    line flushed, so ``dgxperf monitor --json | jq`` or a pipe into another program sees every tick."""

    def line(data: dict[str, Any]) -> None:
        stream.write(_dumps(data) + "\n")
        stream.flush()

    line(header.to_json())
    return lambda sample: line(sample.to_json())


class Recorder:
    """Writes ``header`` and then every :meth:`write` sample to ``path`` (replacing an existing file).

    Use as a context manager, or call :meth:`close`: it flushes and fsyncs the tail.
    """

    def __init__(
        self, path: Path | str, header: Header, *, fsync_every_s: float = DEFAULT_FSYNC_EVERY_S
    ) -> None:
        self.path = Path(path)
        if self.path.suffix == ".parquet":
            raise RecordingError(
                f"{self.path}: Parquet recording is not supported (it would need pyarrow); "
                "record to a .jsonl file instead"
            )
        self.header = header
        self.fsync_every_s = fsync_every_s
        self.samples_written = 0
        try:
            self._file: IO[str] | None = self.path.open("w", encoding="utf-8")
        except OSError as exc:
            raise RecordingError(f"cannot write the recording {self.path}: {exc.strerror or exc}") from None
        self._last_sync = time.monotonic()
        self._line(header.to_json())
        self._sync()

    def _line(self, data: dict[str, Any]) -> None:
        if self._file is None:
            raise RecordingError(f"{self.path}: the recorder is closed")
        try:
            self._file.write(_dumps(data) + "\n")
            self._file.flush()
        except OSError as exc:  # disk full, the file system went away
            raise RecordingError(f"cannot write the recording {self.path}: {exc.strerror or exc}") from None

    def _sync(self) -> None:
        if self._file is None:
            return
        try:
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise RecordingError(f"cannot write the recording {self.path}: {exc.strerror or exc}") from None
        self._last_sync = time.monotonic()

    def write(self, sample: Sample) -> None:
        self._line(sample.to_json())
        self.samples_written += 1
        if time.monotonic() - self._last_sync >= self.fsync_every_s:
            self._sync()

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self._sync()
        finally:
            self._file.close()
            self._file = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
