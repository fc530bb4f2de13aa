"""`dgxperf validate` as the README's first command runs it on a machine without a GPU: the quick mode,
end to end, with real training processes, a real run store, and the HTML report opened in headless
Chromium. Also Ctrl-C (a valid partial report), --resume, and a failing phase."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dgxperf.report.validate import TRAIN_ORDER
from tests.report.browser import find_chromium, inspect_page

ROOT = Path(__file__).resolve().parents[2]
PROBE = """(() => {
  const imgs = [...document.querySelectorAll('img')];
  const table = document.querySelector('#recipes');
  return {
    images: imgs.map(i => ({id: i.id, w: i.naturalWidth, h: i.naturalHeight, complete: i.complete})),
    recipeRows: table ? table.querySelectorAll('tbody tr').length : 0,
    recipeText: table ? table.innerText : '',
    external: [...document.querySelectorAll('[src],[href]')]
      .map(e => e.getAttribute('src') || e.getAttribute('href'))
      .filter(u => !u.startsWith('data:') && !u.startsWith('#')),
    title: document.title,
  };
})()"""


def run_validate(home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DGXPERF_HOME": str(home), "COLUMNS": "120"}
    return subprocess.run(
        [sys.executable, "-m", "dgxperf", "validate", *args],
        capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT,
    )  # fmt: skip


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("home")
    out = home / "report"
    began = time.monotonic()
    result = run_validate(home, "--out", str(out), "--json")
    seconds = time.monotonic() - began
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 0, result.stderr[-3000:]
    return {"home": home, "out": out, "data": json.loads(result.stdout), "seconds": seconds}


@pytest.mark.timeout(900)
def test_quick_mode_runs_every_phase_within_five_minutes(quick_run: dict[str, Any]) -> None:
    data = quick_run["data"]
    print(f"\nquick mode took {quick_run['seconds']:.0f} s")
    assert quick_run["seconds"] < 300
    assert data["complete"] is True and data["plan"]["mode"] == "quick"
    states = {p["name"]: p["state"] for p in data["phases"]}
    assert states == {"doctor": "ok", "bench": "skipped", "pretrain": "skipped", "train": "ok", "advise": "ok",
                      "ablation": "ok", "report": "ok"}  # fmt: skip
    assert data["pretrain"] is None and data["recipes"]["guide"]["config"]["init_from"] is None
    assert data["recipes"]["guide"]["shape_warmup"] is None  # only optimized warms its shapes up
    assert data["recipes"]["optimized"]["shape_warmup"]["shapes"] >= 2
    for recipe in ("baseline", "guide", "optimized"):
        run = data["recipes"][recipe]
        assert run["summary"]["samples_per_s"] > 0 and run["epochs"] and run["steps"]
        assert data["advice"][recipe]["samples"] >= 2  # the monitor recorded while it trained
        # the n-gram model averaged in, in short: its score beside the encoder's, and their difference
        fusion = run["ngram_fusion"]
        assert fusion["test_accuracy"] == pytest.approx(
            run["summary"]["test_accuracy"] + fusion["difference"]
        )
    references = [r for r in data["ablation"] if r["vs_reference"] is None]
    assert {r["name"] for r in references} >= {"optimized", "guide"}
    assert all(r.get("samples_per_s") for r in data["ablation"])
    md = Path(data["report_md"]).read_text()
    assert "Quick mode" in md and "| baseline |" in md
    # baseline's and optimized's test answers paired with guide's, review by review
    assert set(data["paired"]) == {"baseline", "optimized"}
    for recipe, pair in data["paired"].items():
        assert pair["against"] == "guide" and pair["samples"] >= 64
        accuracy = data["recipes"][recipe]["summary"]["test_accuracy"]
        assert pair["accuracy_a"] == pytest.approx(accuracy)
        assert pair["difference"] == pytest.approx(
            accuracy - data["recipes"]["guide"]["summary"]["test_accuracy"]
        )
    assert "### Test accuracy paired with guide's" in md and "McNemar" in md
    assert "Every recipe started from scratch (--pretrain-epochs N" in md


def test_report_numbers_agree_with_the_run_store(quick_run: dict[str, Any]) -> None:
    from dgxperf.store import RunStore

    data = quick_run["data"]
    store = RunStore(quick_run["home"] / "runs.sqlite")
    for recipe, run in data["recipes"].items():
        record = store.get(run["run_id"])
        assert record.command == "train"
        assert record.result["summary"]["samples_per_s"] == run["summary"]["samples_per_s"], recipe
        assert record.result["summary"]["test_accuracy"] == run["summary"]["test_accuracy"], recipe
    for row in data["ablation"]:
        record = store.get(row["run_id"])
        summary = record.result["summary"]
        assert row["samples_per_s"] == (summary["steady_samples_per_s"] or summary["samples_per_s"])
        assert record.result["config"]["warm_shapes"] is False  # quick mode compiles nothing to warm up
    validate_record = store.get(data["run_id"])
    assert validate_record.command == "validate"
    html = Path(data["report_html"]).read_text()
    for run in data["recipes"].values():
        assert f"#{run['run_id']}" in html
        assert f"{run['summary']['samples_per_s']:,.0f}" in html


def test_html_report_loads_in_headless_chromium(
    quick_run: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must check the report in Chromium: .ci/run installs Debian's chromium")
        pytest.skip("no Chromium on this machine (.ci/run installs it)")
    page = Path(quick_run["data"]["report_html"])
    report = inspect_page(page.as_uri(), PROBE)
    probe = report.probe
    assert report.errors == [], report.errors
    assert probe["title"] == "dgxperf validate report"
    assert probe["external"] == []  # self-contained: nothing to fetch
    assert probe["recipeRows"] == 3 and "optimized" in probe["recipeText"]
    ids = {image["id"] for image in probe["images"]}
    assert {"fig-throughput", "fig-loss", "fig-accuracy", "fig-ablation", "fig-timeline-baseline"} <= ids
    for image in probe["images"]:
        assert image["complete"] and image["w"] > 100 and image["h"] > 50, image
    shot = quick_run["out"] / "report-screenshot.jpg"
    shot.write_bytes(report.screenshot)
    assert len(report.screenshot) > 5_000
    # The CI log is the artifact store: the screenshot travels in it, base64 between markers (printed past
    # pytest's capture, so it is in the log of a passing run too). Decode: base64 -d > report.jpg
    with capsys.disabled():
        print(
            f"\n-----BEGIN REPORT SCREENSHOT (JPEG, base64; quick mode took {quick_run['seconds']:.0f} s)-----"
        )
        print(base64.b64encode(report.screenshot).decode())
        print("-----END REPORT SCREENSHOT-----")


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _state(out: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((out / "validate.json").read_text())
        return data
    except (OSError, json.JSONDecodeError):
        return {}


@pytest.mark.timeout(600)
def test_ctrl_c_leaves_a_partial_report_and_resume_finishes_it(tmp_path: Path) -> None:
    out = tmp_path / "report"
    env = {**os.environ, "DGXPERF_HOME": str(tmp_path), "COLUMNS": "120"}
    args = ["--out", str(out), "--train-samples", "256", "--epochs", "1", "--skip", "ablation"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "dgxperf", "validate", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        first = TRAIN_ORDER[0]
        _wait_for(lambda: first in _state(out).get("recipes", {}), 240, f"the {first} run to finish")
        proc.send_signal(signal.SIGINT)  # only validate itself: it must stop its children
        _stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert proc.returncode == 130
    state = _state(out)
    assert state["complete"] is False and state["interrupted"] is True
    phases = {p["name"]: p["state"] for p in state["phases"]}
    assert phases["train"] == "interrupted" and phases["advise"] == "not run"
    assert phases["report"] == "ok"
    html = (out / "report.html").read_text()
    assert "INCOMPLETE REPORT" in html and html.rstrip().endswith("</html>")
    assert "INCOMPLETE REPORT" in (out / "report.md").read_text()
    first_id = state["recipes"][first]["run_id"]

    resumed = run_validate(tmp_path, "--out", str(out), "--resume", "--json", timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    data = json.loads(resumed.stdout)
    assert data["complete"] is True and data["resumed_from"] == state["started_at"]
    assert data["recipes"][first]["run_id"] == first_id  # kept, not trained again
    # Time is summed over both calls, and the interrupted train phase keeps the seconds it had spent.
    assert [c["started_at"] for c in data["calls"]] == [state["started_at"], data["started_at"]]
    assert data["total_seconds"] == pytest.approx(state["wall_seconds"] + data["wall_seconds"], abs=0.2)
    interrupted_train = {p["name"]: p["seconds"] for p in state["phases"]}["train"]
    assert {p["name"]: p["seconds"] for p in data["phases"]}["train"] > interrupted_train
    assert "in 2 calls" in (out / "report.md").read_text()
    assert set(data["recipes"]) == {"baseline", "guide", "optimized"}
    assert {p["name"]: p["state"] for p in data["phases"]}["ablation"] == "skipped"
    # Two validate runs in one store: `runs compare` puts them side by side.
    compare = subprocess.run(
        [sys.executable, "-m", "dgxperf", "runs", "compare", str(state["run_id"]), str(data["run_id"]), "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert compare.returncode == 0, compare.stderr
    diff = json.loads(compare.stdout)
    assert diff["same_command"] is True
    changed = {d["key"] for d in diff["result_diff"]}
    assert "complete" in changed and "interrupted" in changed


@pytest.mark.timeout(300)
def test_a_failing_phase_is_recorded_and_the_others_still_run(tmp_path: Path) -> None:
    empty = tmp_path / "no-data"
    empty.mkdir()
    result = run_validate(tmp_path, "--out", str(tmp_path / "r"), "--data-dir", str(empty), "--skip", "ablation",
                          "--json")  # fmt: skip
    assert "Traceback" not in result.stderr
    assert result.returncode == 1
    data = json.loads(result.stdout)
    phases = {p["name"]: p for p in data["phases"]}
    assert phases["doctor"]["state"] == "ok"
    assert phases["train"]["state"] == "failed" and "train baseline exited with 2" in phases["train"]["error"]
    assert phases["advise"]["state"] == "failed" and phases["report"]["state"] == "ok"
    assert data["complete"] is False
    assert "INCOMPLETE REPORT" in Path(data["report_html"]).read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resume"], "--resume needs --out DIR"),
        (["--skip", "nap"], "--skip nap: choose from"),
        (["--gpus", "2"], "--gpus 2: quick mode runs one CPU process"),
        (["--preset", "huge"], "--preset 'huge': choose from tiny, base, large"),
        (["--data-dir", "/nonexistent/x"], "--data-dir /nonexistent/x: no such folder"),
        (
            ["--init-from", "/nonexistent/enc"],
            "--init-from /nonexistent/enc: no encoder.pt or tokenizer.json",
        ),
        (["--pretrain-epochs", "2", "--init-from", "/tmp"], "give one"),
        (["--resume", "--out", "/tmp", "--pretrain-epochs", "2"], "--resume continues the saved plan"),
        (
            ["--skip", "pretrain", "--skip", "nap"],
            "--skip nap: choose from ablation, advise, bench, doctor, pretrain",
        ),
    ],
)
def test_bad_options_are_clear_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_validate(tmp_path, *args, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_report_only_renders_again_and_refuses_bad_folders(tmp_path: Path) -> None:
    source = ROOT / "tests" / "data" / "h200" / "validate" / "validate-large-1epoch-ablation.json"
    (tmp_path / "validate.json").write_text(source.read_text())
    result = run_validate(tmp_path, "--out", str(tmp_path), "--report-only", "--json", timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    paths = json.loads(result.stdout)
    assert paths["complete"] is True
    md = Path(paths["report_md"]).read_text()
    assert "689.7 s in 2 calls" in md and "| optimized - bf16 |" in md
    assert (tmp_path / "figures" / "ablation.png").read_bytes().startswith(b"\x89PNG")
    for args, message in (
        (["--report-only"], "--report-only needs --out DIR"),
        (["--report-only", "--out", str(tmp_path), "--resume"], "and no --resume"),
        (["--report-only", "--out", str(tmp_path / "nowhere")], "--report-only: cannot read"),
    ):
        bad = run_validate(tmp_path, *args, timeout=60)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_resume_of_a_folder_without_a_run_is_a_clear_error(tmp_path: Path) -> None:
    result = run_validate(tmp_path, "--out", str(tmp_path), "--resume", timeout=60)
    assert result.returncode == 2 and "cannot read" in result.stderr and "validate.json" in result.stderr
    (tmp_path / "validate.json").write_text("{not json")
    result = run_validate(tmp_path, "--out", str(tmp_path), "--resume", timeout=60)
    assert result.returncode == 2 and "is not valid JSON" in result.stderr


@pytest.mark.timeout(600)
def test_pretrain_phase_gives_every_recipe_one_encoder_and_init_from_reuses_it(tmp_path: Path) -> None:
    from tests.test_schemas import assert_valid

    out = tmp_path / "r"
    small = [
        "--train-samples",
        "256",
        "--epochs",
        "1",
        "--skip",
        "doctor",
        "--skip",
        "advise",
        "--skip",
        "ablation",
    ]
    result = run_validate(tmp_path, "--out", str(out), "--pretrain-epochs", "2", *small, "--json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert_valid("validate", data)
    phases = {p["name"]: p for p in data["phases"]}
    assert [p["name"] for p in data["phases"]][:4] == ["doctor", "bench", "pretrain", "train"]
    assert phases["pretrain"]["state"] == "ok" and "2 epochs, masked-LM loss" in phases["pretrain"]["note"]
    assert "% on dev" in phases["pretrain"]["note"] and 0 <= data["pretrain"]["probe_dev_accuracy"] <= 1
    assert "fine-tuned from the pretrained encoder" in phases["train"]["note"]
    pretrained = data["pretrain"]
    assert pretrained["epochs"] == 2 and pretrained["loss_last"] < pretrained["loss_first"]
    encoder = out / "pretrain"
    assert (encoder / "encoder.pt").is_file() and (encoder / "tokenizer.json").is_file()
    for recipe, run in data["recipes"].items():
        assert run["config"]["init_from"] == str(encoder), recipe
    report = Path(data["report_md"]).read_text()
    assert (
        "fine-tuned from one encoder pretrained here" in report
        and "A linear probe of the frozen encoder" in report
    )

    # The same encoder again, without pretraining: the phase is skipped and says where the weights come from.
    again = run_validate(tmp_path, "--out", str(tmp_path / "again"), "--init-from", str(encoder), *small,
                         "--skip", "train", "--json")  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    reused = json.loads(again.stdout)
    note = {p["name"]: p for p in reused["phases"]}["pretrain"]["note"]
    assert note == f"fine-tuning from {encoder} (--init-from)"
    assert reused["plan"]["init_from"] == str(encoder) and reused["pretrain"] is None
    assert f"fine-tuned from the pretrained encoder in {encoder}" in Path(reused["report_md"]).read_text()

    # An encoder of another shape is refused before anything runs.
    wrong = run_validate(tmp_path, "--out", str(tmp_path / "wrong"), "--init-from", str(encoder),
                         "--preset", "base", timeout=60)  # fmt: skip
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    said = " ".join(wrong.stderr.split())  # the console wraps long lines
    assert "its encoder has layers 2 (preset base: 12), hidden 64 (preset base: 768)" in said
