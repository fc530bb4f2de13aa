"""Recorder: round trip, flushed lines, fsync cadence, a crash mid-recording; and the synthetic
recordings built with it (replicate, the H200-derived fixture)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dgxperf.monitor.recorder import Recorder
from dgxperf.monitor.sources import RecordingError, read_recording
from dgxperf.monitor.synthetic import derive_h200_fixture, replicate
from dgxperf.samples import RECORDING_SCHEMA, GpuInfo, GpuSample, Header, Sample

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "monitor" / "h200-derived-gemm.jsonl"

HEADER = Header(
    hostname="dgx-01",
    started_at="2026-12-02T10:00:00Z",
    interval_s=1.0,
    gpus=(
        GpuInfo(0, "NVIDIA H200", "GPU-a", "00000000:18:00.0"),
        GpuInfo(1, "NVIDIA H200", "GPU-b", "00000000:2A:00.0"),
    ),
    source="nvml",
    notes=("test",),
)


def samples(n: int) -> list[Sample]:
    out = []
    for i in range(n):
        gpus = (
            GpuSample(
                0,
                {"gpu_util_pct": 97.0 + i, "power_w": 687.028, "fb_used_bytes": 5.2e10},
                ("sw_power_cap",),
                ({"pid": 4242, "name": "python3", "used_bytes": 8.0e9},),
            ),
            GpuSample(1, {}),  # a GPU that gave nothing this tick
        )
        host = {
            "cpu_util_pct": 12.5,
            "disks": {"nvme0n1": {"read_bytes_per_s": 3.2e9, "write_bytes_per_s": 0.0, "busy_pct": 87.0}},
            "net": {"ib0": {"rx_bytes_per_s": 1.0, "tx_bytes_per_s": 2.0}},
        }
        events = ({"type": "xid", "gpu": 1, "xid": 79, "t": 1796200000.5},) if i == 2 else ()
        out.append(Sample(1796200000.0 + i, gpus, host, events))
    return out


def test_round_trip_gives_identical_samples(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    written = samples(5)
    with Recorder(path, HEADER) as rec:
        for sample in written:
            rec.write(sample)
    assert rec.samples_written == 5
    header, read, warnings = read_recording(path)
    assert warnings == []
    assert header == HEADER
    assert read == written
    first = json.loads(path.read_text().splitlines()[0])
    assert first["schema"] == RECORDING_SCHEMA


def test_every_line_is_flushed_before_close(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    rec = Recorder(path, HEADER)
    for sample in samples(3):
        rec.write(sample)
        # Another reader sees each complete line at once (what a crash leaves behind).
        _, read, warnings = read_recording(path)
        assert read[-1] == sample and warnings == []
    rec.close()
    rec.close()  # idempotent


def test_fsync_every_few_seconds_not_every_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    with Recorder(tmp_path / "a.jsonl", HEADER, fsync_every_s=3600) as rec:
        for sample in samples(10):
            rec.write(sample)
        assert len(synced) == 1  # the header only
    assert len(synced) == 2  # and at close
    synced.clear()
    with Recorder(tmp_path / "b.jsonl", HEADER, fsync_every_s=0) as rec:
        for sample in samples(10):
            rec.write(sample)
    assert len(synced) == 1 + 10 + 1


def test_non_finite_values_are_dropped_not_written(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    with Recorder(path, HEADER) as rec:
        rec.write(Sample(1.0, (GpuSample(0, {"power_w": float("nan"), "temp_gpu_c": 40.0}),)))
    _, read, warnings = read_recording(path)
    assert warnings == [] and read[0].gpus[0].metrics == {"temp_gpu_c": 40.0}
    assert "NaN" not in path.read_text()


def test_unwritable_path_and_parquet_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match=r"Parquet recording is not supported.*jsonl"):
        Recorder(tmp_path / "rec.parquet", HEADER)
    with pytest.raises(RecordingError, match=r"cannot write the recording .*No such file"):
        Recorder(tmp_path / "missing-dir" / "rec.jsonl", HEADER)


CRASHER = """
import sys, time
from pathlib import Path
from dgxperf.monitor.recorder import Recorder
from dgxperf.samples import GpuSample, Header, Sample
rec = Recorder(Path(sys.argv[1]), Header("h", "now", 0.01, ()))
i = 0
while True:
    rec.write(Sample(1000.0 + i, (GpuSample(0, {"gpu_util_pct": float(i % 100)}),)))
    i += 1
    if i == 20:
        print("ready", flush=True)
    time.sleep(0.01)
"""


def test_a_killed_recorder_leaves_a_readable_recording(tmp_path: Path) -> None:
    path = tmp_path / "crash.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", CRASHER, str(path)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    _, read, warnings = read_recording(path)
    assert len(read) >= 20  # everything written before the kill (at most a half line is lost)
    assert [s.t for s in read] == [1000.0 + i for i in range(len(read))]
    assert len(warnings) <= 1


# --------------------------------------------------------------------------------------------------
# Synthetic recordings
# --------------------------------------------------------------------------------------------------


def test_replicate_makes_an_n_gpu_recording(tmp_path: Path) -> None:
    out = replicate(FIXTURE, 8, tmp_path / "x8.jsonl")
    _, src_samples, _ = read_recording(FIXTURE)
    header, read, warnings = read_recording(out)
    assert warnings == [] and len(read) == len(src_samples)
    assert [g.index for g in header.gpus] == list(range(8))
    assert len({g.uuid for g in header.gpus}) == 8 and len({g.pci_bus_id for g in header.gpus}) == 8
    assert header.gpus[0].pci_bus_id == "00000000:18:00.0"  # DGX H100/H200 bus numbers
    assert header.source == "synthetic"
    assert any("SYNTHETIC" in n and FIXTURE.name in n for n in header.notes)
    for original, copy in zip(src_samples, read, strict=True):
        assert copy.t == original.t and copy.host == original.host
        assert [g.index for g in copy.gpus] == list(range(8))
        assert copy.gpus[0].metrics == original.gpus[0].metrics  # GPU 0 is the recorded one
        for gpu in copy.gpus:
            assert set(gpu.metrics) == set(original.gpus[0].metrics)
            assert gpu.throttle == original.gpus[0].throttle
            for name, value in gpu.metrics.items():
                if name.endswith("_pct"):
                    assert 0 <= value <= 100
            if "power_w" in gpu.metrics:
                assert gpu.metrics["power_w"] <= gpu.metrics["power_limit_w"]
    # GPUs differ a little, deterministically.
    busy = read[15]
    assert len({g.metrics["sm_active_pct"] for g in busy.gpus}) > 1
    assert replicate(FIXTURE, 8, tmp_path / "again.jsonl").read_bytes() == out.read_bytes()


def test_replicate_rejects_nonsense(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="n_gpus"):
        replicate(FIXTURE, 0, tmp_path / "x.jsonl")
    empty = tmp_path / "empty.jsonl"
    with Recorder(empty, Header("h", "now", 1.0, ())):
        pass
    with pytest.raises(ValueError, match="no GPU"):
        replicate(empty, 2, tmp_path / "x.jsonl")


def test_committed_fixture_is_what_derive_h200_fixture_builds(tmp_path: Path) -> None:
    """The fixture is reproducible from the H200 data files (and labelled as derived, not recorded)."""
    built = derive_h200_fixture(ROOT / "tests" / "data" / "h200", tmp_path / "derived.jsonl")
    assert built.read_bytes() == FIXTURE.read_bytes()
    header, read, _ = read_recording(FIXTURE)
    assert header.source == "derived" and header.notes[0].startswith("DERIVED, NOT A RECORDING")
    gpm = json.loads((ROOT / "tests" / "data" / "h200" / "gpm_under_load.json").read_text())
    idle, gemm, copy = read[0].gpus[0], read[10].gpus[0], read[30].gpus[0]
    assert idle.metrics["sm_active_pct"] == gpm["idle"]["sm_util"] and idle.throttle == ("gpu_idle",)
    assert gemm.metrics["tensor_active_pct"] == gpm["gemm"]["any_tensor_util"]
    assert gemm.throttle == ("sw_power_cap",) and gemm.metrics["power_w"] > 600
    assert copy.metrics["dram_active_pct"] == gpm["copy"]["dram_bw_util"]
    assert "power_w" not in copy.metrics  # not measured under copy: absent, not invented
