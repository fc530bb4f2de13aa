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
    ],
)
def test_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = dgxperf(*args, home=tmp_path)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message.lower() in (result.stdout + result.stderr).lower()
