"""Sources: one suite every implementation passes (optuna's habit), then each implementation's own
behaviour: replay pace and loop, bad recordings, live ticks that do not drift."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dgxperf.monitor.sources import LiveSource, RecordedSource, RecordingError, Source, read_recording
from dgxperf.samples import RECORDING_SCHEMA, Header, Sample
from tests.hw.test_telemetry import FakeNvml

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "monitor" / "h200-derived-gemm.jsonl"


def write_recording(
    path: Path, samples: list[dict[str, Any]], *, interval_s: float = 1.0, raw: str = ""
) -> Path:
    header = {
        "schema": RECORDING_SCHEMA,
        "hostname": "node",
        "started_at": "2026-12-02T10:00:00Z",
        "interval_s": interval_s,
        "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-0", "pci_bus_id": "00000000:18:00.0"}],
        "source": "test",
    }
    lines = [json.dumps(header)] + [json.dumps(s) for s in samples]
    path.write_text("\n".join(lines) + "\n" + raw)
    return path


def tick(t: float, util: float = 50.0) -> dict[str, Any]:
    return {"t": t, "gpus": [{"index": 0, "gpu_util_pct": util}], "host": {"cpu_util_pct": 10.0}}


# --------------------------------------------------------------------------------------------------
# The shared suite: every Source implementation
# --------------------------------------------------------------------------------------------------

SOURCES: dict[str, Callable[[Path], Source]] = {
    "live-host-only": lambda tmp: LiveSource(0.02, host_only=True),
    "live-fake-nvml": lambda tmp: LiveSource(0.02, lib=FakeNvml()),
    "recorded": lambda tmp: RecordedSource(FIXTURE),
    "recorded-loop": lambda tmp: RecordedSource(FIXTURE, loop=True),
}


@pytest.fixture(params=sorted(SOURCES))
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Source]:
    src = SOURCES[request.param](tmp_path)
    yield src
    src.close()


def test_contract_header_and_samples(source: Source) -> None:
    assert isinstance(source.header, Header)
    assert source.header.interval_s > 0
    header_indices = {g.index for g in source.header.gpus}
    samples = [source.next_sample() for _ in range(3)]
    assert all(isinstance(s, Sample) for s in samples)
    times = [s.t for s in samples if s is not None]
    assert times == sorted(times) and len(set(times)) == 3
    for sample in samples:
        assert sample is not None
        assert {g.index for g in sample.gpus} <= header_indices
        assert isinstance(sample.host, dict)
        for gpu in sample.gpus:
            assert all(isinstance(v, float) and math.isfinite(v) for v in gpu.metrics.values())
        # Every sample survives the recording format unchanged.
        assert Sample.from_json(json.loads(json.dumps(sample.to_json()))).to_json() == sample.to_json()


def test_contract_close_is_idempotent_and_context_manager(source: Source) -> None:
    with source as same:
        assert same is source
        assert same.next_sample() is not None
    source.close()
    assert source.next_sample() is None  # a closed source ends


def test_contract_warnings_is_a_list_of_strings(source: Source) -> None:
    assert isinstance(source.warnings, list) and all(isinstance(w, str) for w in source.warnings)


# --------------------------------------------------------------------------------------------------
# RecordedSource
# --------------------------------------------------------------------------------------------------


def test_fixture_reads_without_warnings() -> None:
    header, samples, warnings = read_recording(FIXTURE)
    assert warnings == []
    assert len(samples) == 40 and header.source == "derived"
    assert any("DERIVED" in n for n in header.notes)


def test_speed_zero_is_instant_and_iteration_ends(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "r.jsonl", [tick(1000.0 + i * 100) for i in range(3)])
    started = time.monotonic()
    with RecordedSource(path) as src:
        samples = list(src)
    assert time.monotonic() - started < 0.5  # 200 recorded seconds, no waiting
    assert [s.t for s in samples] == [1000.0, 1100.0, 1200.0]


@pytest.mark.parametrize(("speed", "expected_s"), [(1.0, 0.4), (2.0, 0.2)])
def test_replay_at_recorded_pace(tmp_path: Path, speed: float, expected_s: float) -> None:
    path = write_recording(tmp_path / "r.jsonl", [tick(1000.0), tick(1000.2), tick(1000.4)], interval_s=0.2)
    with RecordedSource(path, speed=speed) as src:
        started = time.monotonic()
        samples = list(src)
        elapsed = time.monotonic() - started
    assert len(samples) == 3
    assert expected_s - 0.01 <= elapsed <= expected_s + 0.15


def test_loop_keeps_time_increasing(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "r.jsonl", [tick(1000.0, 1), tick(1001.0, 2), tick(1002.0, 3)])
    with RecordedSource(path, loop=True) as src:
        samples = [src.next_sample() for _ in range(8)]
    times = [s.t for s in samples if s is not None]
    # Each pass starts one interval after the previous one's last sample.
    assert times == [1000.0, 1001.0, 1002.0, 1003.0, 1004.0, 1005.0, 1006.0, 1007.0]
    assert [s.gpus[0].metrics["gpu_util_pct"] for s in samples if s is not None] == [1, 2, 3, 1, 2, 3, 1, 2]


def test_loop_over_a_recording_without_samples_ends(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "r.jsonl", [], raw="not json\n")
    with RecordedSource(path, loop=True) as src:
        assert src.next_sample() is None


def test_corrupt_and_truncated_lines_are_skipped_and_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    write_recording(path, [tick(1.0)])
    with path.open("a") as f:
        f.write("{not json\n")  # line 3
        f.write(json.dumps({"t": "soon", "gpus": []}) + "\n")  # line 4: t not a number
        f.write(json.dumps({"t": 2.0, "gpus": [{"index": 0, "power_w": "high"}]}) + "\n")  # line 5
        f.write(json.dumps({"t": 2.5, "gpus": {"index": 0}}) + "\n")  # line 6: gpus not a list
        f.write("\n")  # line 7: blank, harmless
        f.write(json.dumps(tick(3.0)) + "\n")  # line 8: good
        f.write(json.dumps(tick(0.5)) + "\n")  # line 9: time goes backwards
        f.write(json.dumps(tick(4.0)) + "\n")  # line 10: good
        f.write(json.dumps(tick(5.0))[:25])  # line 11: a crash mid-write
    _, samples, warnings = read_recording(path)
    assert [s.t for s in samples] == [1.0, 3.0, 4.0]
    assert [w.split(": ")[0] for w in warnings] == [f"{path}:{n}" for n in (3, 4, 5, 6, 9, 11)]
    assert "not JSON" in warnings[0]
    assert "'t' is not a finite number" in warnings[1]
    assert "metric 'power_w'" in warnings[2]
    assert "'gpus' is not a list" in warnings[3]
    assert "time goes backwards" in warnings[4]
    assert "half-written last line" in warnings[5]


def test_warnings_are_reported_once_when_looping(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "r.jsonl", [tick(1.0), tick(2.0)], raw="garbage\n")
    with RecordedSource(path, loop=True) as src:
        for _ in range(7):
            src.next_sample()
        assert src.warnings == [
            f"{path}:4: line skipped: not JSON (Expecting value at column 1; truncated line?)"
        ]


@pytest.mark.parametrize(
    ("first_line", "message"),
    [
        ("", "empty recording"),
        ("{oops", "the header is not JSON"),
        ("[1, 2]", "the header is not a JSON object"),
        (json.dumps({"schema": "something/else"}), "not a dgxperf recording"),
        (
            json.dumps({"schema": "dgxperf.recording/9", "gpus": [], "interval_s": 1}),
            "not one this dgxperf reads",
        ),
        (json.dumps({"schema": RECORDING_SCHEMA, "gpus": "0", "interval_s": 1}), "'gpus' must be a list"),
        (
            json.dumps({"schema": RECORDING_SCHEMA, "gpus": [{"index": "0"}], "interval_s": 1}),
            "integer 'index'",
        ),
        (
            json.dumps({"schema": RECORDING_SCHEMA, "gpus": [], "interval_s": 0}),
            "'interval_s' must be a positive",
        ),
    ],
)
def test_bad_header_is_a_recording_error_naming_line_1(tmp_path: Path, first_line: str, message: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(first_line + "\n" + json.dumps(tick(1.0)) + "\n")
    with pytest.raises(RecordingError, match=message) as info:
        RecordedSource(path)
    assert str(info.value).startswith(f"{path}:1: ")


def test_missing_file_and_parquet_are_recording_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match=r"cannot read the recording .*missing\.jsonl: No such file"):
        RecordedSource(tmp_path / "missing.jsonl")
    with pytest.raises(RecordingError, match="Parquet"):
        RecordedSource(tmp_path / "r.parquet")
    with pytest.raises(ValueError, match="speed"):
        RecordedSource(FIXTURE, speed=-1)


# --------------------------------------------------------------------------------------------------
# LiveSource
# --------------------------------------------------------------------------------------------------


def test_live_host_only_has_host_metrics_and_no_gpus() -> None:
    with LiveSource(0.05, host_only=True) as src:
        assert src.header.gpus == () and src.header.source == "host"
        sample = src.next_sample()
    assert sample is not None and sample.gpus == ()
    for key in ("cpu_util_pct", "mem_used_bytes", "mem_total_bytes", "disks", "net"):
        assert key in sample.host, key
    assert abs(sample.t - time.time()) < 5


def test_live_without_nvml_says_so_and_serves_host_metrics() -> None:
    with LiveSource(0.05) as src:
        if src.nvml_available:
            pytest.skip("this machine has a working NVML")
        assert src.header.gpus == () and src.header.source == "nvml"
        assert src.nvml_error is not None and "NVML_ERROR_" in src.nvml_error
        assert any("NVML is not available" in n for n in src.header.notes)
        assert any("NVML is not available" in w for w in src.warnings)
        sample = src.next_sample()
    assert sample is not None and sample.gpus == () and "cpu_util_pct" in sample.host


def test_live_with_gpus_from_nvml() -> None:
    with LiveSource(0.02, lib=FakeNvml()) as src:
        assert [g.index for g in src.header.gpus] == [0, 1]
        sample = src.next_sample()
    assert sample is not None
    assert sample.gpus[0].metrics["sm_active_pct"] == 95.5 and "cpu_util_pct" in sample.host


def test_live_ticks_do_not_drift() -> None:
    """10 ticks at 0.05 s take ~0.5 s, even when the caller works 20 ms after each one (a schedule that
    slept a fixed interval after the work would take 0.7 s)."""
    with LiveSource(0.05, host_only=True) as src:
        started = time.monotonic()
        stamps = []
        for _ in range(10):
            sample = src.next_sample()
            assert sample is not None
            stamps.append(time.monotonic() - started)
            busy_until = time.monotonic() + 0.02
            while time.monotonic() < busy_until:
                pass
    # The 10th sample is due 10 intervals after the source was made (the first covers a full interval).
    assert 0.45 <= stamps[-1] <= 0.6, stamps
    assert src.missed_ticks == 0


def test_live_skips_ticks_a_slow_caller_missed() -> None:
    with LiveSource(0.05, host_only=True) as src:
        src.next_sample()
        time.sleep(0.18)  # misses three ticks
        started = time.monotonic()
        src.next_sample()  # due already: at once
        assert time.monotonic() - started < 0.04
        assert src.missed_ticks >= 2
        started = time.monotonic()
        src.next_sample()  # back on the grid: waits for the next boundary, no burst of catch-up samples
        assert 0.005 <= time.monotonic() - started <= 0.06


def test_live_rejects_a_bad_interval() -> None:
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="interval"):
            LiveSource(bad, host_only=True)


# --------------------------------------------------------------------------------------------------
# Gzipped recordings (docs/benchmarks/ keeps some monitor recordings that way)
# --------------------------------------------------------------------------------------------------

GZIPPED = ROOT / "docs" / "benchmarks" / "2026-12-04-h200-encoder-h" / "monitor" / "call4.jsonl.gz"


def test_a_gzipped_recording_reads_as_its_plain_copy(tmp_path: Path) -> None:
    import gzip

    plain = tmp_path / "call4.jsonl"
    plain.write_bytes(gzip.decompress(GZIPPED.read_bytes()))
    assert read_recording(GZIPPED) == read_recording(plain)
    header, samples, warnings = read_recording(GZIPPED)
    assert header.gpus[0].name == "NVIDIA H200" and len(samples) == 171 and warnings == []
    renamed = tmp_path / "no-suffix.jsonl"  # the bytes say gzip, whatever the name
    renamed.write_bytes(GZIPPED.read_bytes())
    assert read_recording(renamed)[1] == samples


def test_a_gzipped_recording_loops(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "r.jsonl.gz"
    plain = write_recording(tmp_path / "r.jsonl", [tick(1000.0, 1), tick(1001.0, 2)])
    path.write_bytes(gzip.compress(plain.read_bytes()))
    with RecordedSource(path, loop=True) as src:
        samples = [src.next_sample() for _ in range(5)]
    assert [s.t for s in samples if s is not None] == [1000.0, 1001.0, 1002.0, 1003.0, 1004.0]


def test_a_gzipped_recording_cut_short_keeps_what_it_holds(tmp_path: Path) -> None:
    import gzip

    plain = write_recording(tmp_path / "r.jsonl", [tick(1000.0 + i) for i in range(2000)])
    whole = gzip.compress(plain.read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])  # a copy stopped part-way
    _header, samples, warnings = read_recording(cut)
    assert 0 < len(samples) < 2000 and [s.t for s in samples] == [1000.0 + i for i in range(len(samples))]
    assert (
        len(warnings) == 1
        and "the rest is unreadable" in warnings[0]
        and "samples before it are kept" in warnings[0]
    )


def test_a_broken_gzip_or_a_gzipped_non_recording_is_a_recording_error(tmp_path: Path) -> None:
    import gzip

    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(b"\x1f\x8b" + b"not really gzip")
    with pytest.raises(RecordingError, match="not a readable gzip file"):
        RecordedSource(broken)
    text = tmp_path / "text.jsonl.gz"
    text.write_bytes(gzip.compress(b"hello\n"))
    with pytest.raises(RecordingError, match="header is not JSON"):
        RecordedSource(text)
