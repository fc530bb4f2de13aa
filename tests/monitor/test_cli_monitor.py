"""`dgxperf monitor`, `exporter`, `grafana` and `advise` as a user meets them on a machine without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import ROOT, dgxperf, no_traceback

FIXTURE = ROOT / "tests" / "data" / "monitor" / "h200-derived-gemm.jsonl"


def test_monitor_replays_a_recording_and_records_it_again(tmp_path: Path) -> None:
    out = tmp_path / "again.jsonl"
    result = dgxperf("monitor", "--replay", str(FIXTURE), "--speed", "0", "--duration", "5", "--record", str(out),
                     home=tmp_path)  # fmt: skip
    no_traceback(result)
    assert result.returncode == 0
    assert "NVIDIA H200" in result.stdout and "SMact" in result.stdout
    lines = out.read_text().splitlines()
    assert json.loads(lines[0])["schema"] == "dgxperf.recording/1" and len(lines) >= 5


def test_monitor_json_is_the_recording_format_on_stdout(tmp_path: Path) -> None:
    result = dgxperf(
        "monitor", "--replay", str(FIXTURE), "--speed", "0", "--duration", "3", "--json", home=tmp_path
    )
    no_traceback(result)
    assert result.returncode == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]  # every line JSON: no view mixed in
    assert lines[0]["schema"] == "dgxperf.recording/1" and lines[0]["gpus"][0]["name"] == "NVIDIA H200"
    assert len(lines) >= 4 and all("t" in sample and sample["gpus"] for sample in lines[1:])
    once = dgxperf("monitor", "--once", "--interval", "0.2", "--json", home=tmp_path)  # live, no GPU here
    assert once.returncode == 0
    header, sample = (json.loads(line) for line in once.stdout.splitlines())
    assert header["schema"] == "dgxperf.recording/1" and "cpu_util_pct" in sample["host"]


def test_exporter_json_says_where_it_serves(tmp_path: Path) -> None:
    """Also: --train-metrics given a run folder follows the metrics.jsonl inside it."""
    import signal
    import subprocess
    import sys
    import urllib.request

    run = tmp_path / "run"
    run.mkdir()
    step = {
        "type": "step",
        "step": 7,
        "epoch": 1,
        "loss": 0.5,
        "samples_per_s": 10.0,
        "real_tokens_per_s": 1e3,
    }
    (run / "metrics.jsonl").write_text(json.dumps(step) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "dgxperf", "exporter", "--listen", "127.0.0.1:0", "--replay", str(FIXTURE), "--json",
         "--train-metrics", str(run)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        text = ""
        while not text.rstrip().endswith("}"):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "exporter ended"
            text += line
        ready = json.loads(text)
        assert ready["gpus"] == ["NVIDIA H200"] and ready["nvml_available"] is True
        with urllib.request.urlopen(ready["url"], timeout=10) as response:
            body = response.read().decode()
        assert "DCGM_FI_DEV_GPU_UTIL" in body and 'dgxperf_train_step{Hostname="' in body
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert proc.returncode == 0


def test_monitor_live_once_without_gpu_shows_the_host(tmp_path: Path) -> None:
    result = dgxperf("monitor", "--once", "--interval", "0.2", home=tmp_path)
    no_traceback(result)
    assert result.returncode == 0 and "host" in result.stdout


def test_advise_on_a_recording_as_json(tmp_path: Path) -> None:
    result = dgxperf("advise", str(FIXTURE), "--json", home=tmp_path)
    no_traceback(result)
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["schema"] == "dgxperf.advice/1"
    assert {s["rule"] for s in data["suggestions"]} >= {"health.throttling"}  # the H200's power cap
    assert {n["rule"] for n in data["not_evaluated"]} >= {"input.iowait"}  # no host readings in it


def test_advise_reads_a_gzipped_recording_and_names_the_host_that_slowed(tmp_path: Path) -> None:
    import gzip

    recording = tmp_path / "guide-host-slowed.jsonl.gz"
    recording.write_bytes(
        gzip.compress((ROOT / "tests/data/h100/monitor/guide-host-slowed.jsonl").read_bytes())
    )
    result = dgxperf("advise", str(recording), home=tmp_path)
    no_traceback(result)
    assert result.returncode == 0
    assert "The host's CPU slowed in the middle of a host-bound run" in result.stdout
    assert "launch.host_slowed" in result.stdout


def test_grafana_writes_three_files(tmp_path: Path) -> None:
    result = dgxperf("grafana", "--out", str(tmp_path / "g"), "--json", home=tmp_path)
    assert result.returncode == 0
    files = {Path(p).name for p in json.loads(result.stdout)["files"]}
    assert files == {"dashboard.json", "prometheus.yml", "alerts.yml"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["advise"], "give a RECORDING or --live"),
        (["advise", "/nonexistent.jsonl"], "cannot read"),
        (
            ["advise", str(FIXTURE), "--thresholds", str(ROOT / "tests/data/advise/thresholds-typo.yaml")],
            "has no threshold",
        ),
        (["monitor", "--replay", "/nonexistent.jsonl"], "cannot read"),
        (["monitor", "--interval", "0"], "must be > 0"),
        (["monitor", "--record", "/nonexistent/dir/r.jsonl", "--once"], "does not exist"),
        (["exporter", "--listen", "nonsense:port"], "listen"),
        (["exporter", "--replay", "/nonexistent.jsonl"], "cannot read"),
        (["exporter", "--train-metrics", "/nonexistent/metrics.jsonl"], "folder /nonexistent does not exist"),
    ],
)
def test_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = dgxperf(*args, home=tmp_path)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message.lower() in (result.stdout + result.stderr).lower()
