"""The command line as a user meets it: real processes, real NVML (absent here), a real run store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from dgxperf.cli_common import note_emulated_bf16
from dgxperf.hw import host
from dgxperf.hw.nvml import nvml_session
from dgxperf.results import NA

ROOT = Path(__file__).resolve().parent.parent
H200_SNAPSHOT = ROOT / "tests" / "data" / "h200" / "snapshot.json"


def schema(name: str) -> dict[str, object]:
    return json.loads((ROOT / "src" / "dgxperf" / "schemas" / f"{name}.v1.json").read_text())


def dgxperf(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "DGXPERF_HOME": str(home), "COLUMNS": "120", **(env or {})}
    full_env.pop("DGXPERF_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "dgxperf", *args], capture_output=True, text=True, env=full_env, timeout=120
    )


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stdout + result.stderr


def has_gpu() -> bool:
    with nvml_session() as nv:
        return not isinstance(nv, NA)


@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU")
def test_doctor_without_gpu_reports_the_driver_chain_and_exits_1(tmp_path: Path):
    result = dgxperf("doctor", home=tmp_path)
    no_traceback(result)
    assert result.returncode == 1
    assert "driver.nvml" in result.stdout
    assert "NVML_ERROR_LIBRARY_NOT_FOUND" in result.stdout
    assert "driver.pci" in result.stdout
    listing = dgxperf("runs", "list", home=tmp_path)
    assert listing.returncode == 0
    assert "doctor" in listing.stdout and "failed" in listing.stdout


def test_doctor_json_validates_against_its_schema_and_is_stored(tmp_path: Path):
    result = dgxperf("doctor", "--json", home=tmp_path)
    no_traceback(result)
    assert result.returncode in (0, 1)
    data = json.loads(result.stdout)
    jsonschema.validate(data, schema("doctor"))
    assert data["run_id"] == 1
    ids = [f["id"] for f in data["findings"]]
    assert len(ids) == len(set(ids)), "finding ids must be unique"
    assert not [i for i in ids if i.startswith("internal.")], "a check crashed"
    shown = json.loads(dgxperf("runs", "show", "1", "--json", home=tmp_path).stdout)
    jsonschema.validate(shown, schema("run"))
    assert shown["result"]["findings"] == data["findings"]
    assert shown["fingerprint"] == data["fingerprint"]
    assert shown["status"] == ("failed" if result.returncode == 1 else "ok")


def test_doctor_from_the_h200_snapshot(tmp_path: Path):
    fix = tmp_path / "fix.sh"
    result = dgxperf(
        "doctor", "--from-snapshot", str(H200_SNAPSHOT), "--json", "--fix-script", str(fix), home=tmp_path
    )
    no_traceback(result)
    data = json.loads(result.stdout)
    jsonschema.validate(data, schema("doctor"))
    assert data["fingerprint"]["gpus"][0]["name"] == "NVIDIA H200"
    assert result.returncode == (1 if data["summary"]["fail"] else 0)
    assert fix.read_text().startswith("#!/usr/bin/env bash")
    assert os.access(fix, os.X_OK)


def test_snapshot_round_trip_gives_the_same_findings(tmp_path: Path):
    saved = tmp_path / "snap.json"
    live = json.loads(
        dgxperf("doctor", "--json", "--save-snapshot", str(saved), "--no-save", home=tmp_path).stdout
    )
    jsonschema.validate(json.loads(saved.read_text()), schema("snapshot"))
    replay = json.loads(
        dgxperf("doctor", "--json", "--from-snapshot", str(saved), "--no-save", home=tmp_path).stdout
    )
    assert [(f["id"], f["status"]) for f in replay["findings"]] == [
        (f["id"], f["status"]) for f in live["findings"]
    ]
    assert replay["run_id"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["doctor", "--area", "bogus"], "unknown area bogus"),
        (["doctor", "--from-snapshot", "/nonexistent/snap.json"], "cannot read snapshot"),
        (["doctor", "--fix-script", "/nonexistent/dir/fix.sh"], "does not exist"),
        (["doctor", "--root", "/nonexistent"], "not a directory"),
        (["runs", "show", "999"], "999"),
        (["runs", "compare", "1", "2"], ""),
        (["schema", "bogus"], "unknown schema"),
        (["doctor", "--no-such-flag"], "No such option"),
        (["runs", "show", "abc"], "invalid value"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path: Path, args: list[str], message: str):
    result = dgxperf(*args, home=tmp_path)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message.lower() in (result.stdout + result.stderr).lower()


def test_corrupt_snapshot_is_a_usage_error(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "dgxperf.snapshot/1", ')
    result = dgxperf("doctor", "--from-snapshot", str(bad), home=tmp_path)
    no_traceback(result)
    assert result.returncode == 2 and "not JSON" in result.stderr
    other = tmp_path / "other.json"
    other.write_text('{"schema": "something/9"}')
    result = dgxperf("doctor", "--from-snapshot", str(other), home=tmp_path)
    assert result.returncode == 2 and "not a dgxperf snapshot" in result.stderr


def test_unusable_store_warns_but_doctor_still_reports(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = dgxperf("doctor", "--json", home=blocker / "sub")
    no_traceback(result)
    assert result.returncode in (0, 1)
    assert "run store unavailable" in result.stderr
    assert json.loads(result.stdout)["run_id"] is None


def test_runs_compare_two_doctor_runs(tmp_path: Path):
    dgxperf("doctor", "--no-save", "--json", home=tmp_path)
    dgxperf("doctor", "--from-snapshot", str(H200_SNAPSHOT), home=tmp_path)
    dgxperf("doctor", home=tmp_path)
    result = dgxperf("runs", "compare", "1", "2", "--json", home=tmp_path)
    no_traceback(result)
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["same_command"] is True and "paired_test" not in data  # only train runs have test answers
    keys = {d["key"] for d in data["fingerprint_diff"]}
    assert "gpu_count" in keys
    human = dgxperf("runs", "compare", "1", "2", home=tmp_path)
    assert human.returncode == 0 and "run 1" in human.stdout


def test_version_schema_and_help(tmp_path: Path):
    assert dgxperf("--version", home=tmp_path).stdout.startswith("dgxperf ")
    doctor_schema = json.loads(dgxperf("schema", "doctor", home=tmp_path).stdout)
    assert doctor_schema["properties"]["schema"]["const"] == "dgxperf.doctor/1"
    assert dgxperf("doctor", "--help", home=tmp_path).returncode == 0
    assert dgxperf(home=tmp_path).returncode in (0, 2)


def test_console_script_is_installed():
    script = Path(sys.executable).with_name("dgxperf")
    assert script.exists(), "install with ./dgx test (pip install -e .)"


@pytest.mark.parametrize(
    ("device", "precision", "native", "said"),
    [
        ("cpu", "bf16", False, True),
        ("cpu", "bf16", True, False),
        ("cpu", "bf16", None, False),  # cannot tell: say nothing
        ("cpu", "fp32", False, False),
        ("cuda", "bf16", False, False),
    ],
)
def test_a_cpu_run_in_emulated_bf16_is_told_how_to_run_faster(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    device: str,
    precision: str,
    native: bool | None,
    said: bool,
) -> None:
    monkeypatch.setattr(host, "native_bf16", lambda root=Path("/"): native)
    note_emulated_bf16(device, precision)
    captured = capsys.readouterr()
    text = " ".join(captured.err.split())  # Rich wraps at the terminal's width
    assert ("no native bf16" in text and "--set precision=fp32" in text) is said
    assert captured.out == ""  # stdout stays the --json document's
