"""A recipe cut (Ctrl-C, a call's time limit) or failed after whole epochs keeps what those epochs measured
in the report, marked as cut; replayed from the H200 run whose baseline was cut 74 steps before the end of
its third epoch (docs/benchmarks/2026-12-04-h200-validate-table/)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dgxperf.report import document, validate
from dgxperf.report.validate import choose_plan

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "h200" / "validate"
CUT_RESULT = DATA / "validate-large-init-from-cut.json"  # guide and optimized finished, baseline cut
CUT_METRICS = DATA / "metrics-baseline-cut-in-epoch-3.jsonl"  # what that baseline run had written
SCHEMA = json.loads((ROOT / "src" / "dgxperf" / "schemas" / "validate.v1.json").read_text())


def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child: Any) -> validate.Runner:
    """A runner of 3 epochs whose `dgxperf train` child is ``child`` and whose monitor is a process that
    exits at once."""
    plan = choose_plan(gpu_count=0, quick=False, gpus=1, preset=None, epochs=3, train_samples=None,
                       ablation_steps=None, data_dir=None, skip=[])  # fmt: skip
    run = validate.Runner(plan, tmp_path)
    monkeypatch.setattr(run, "_spawn", lambda args, log_name: subprocess.Popen(["true"]))
    monkeypatch.setattr(run, "_dgxperf_json", child)
    return run


def cut_child(error: BaseException, metrics: Path | None = CUT_METRICS) -> Any:
    def child(
        args: list[str], log_name: str, *, what: str, metrics_dir: Path | None = None, **kw: Any
    ) -> Any:
        out = Path(args[args.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        if metrics is not None:
            shutil.copy(metrics, out / "metrics.jsonl")
        raise error

    return child


def test_a_recipe_cut_after_two_epochs_keeps_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = runner(tmp_path, monkeypatch, cut_child(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        run._train_one("baseline")
    cut = run.data["unfinished"]["baseline"]
    assert cut["how"] == "interrupted" and cut["epochs_done"] == 2 and cut["epochs_planned"] == 3
    assert round(cut["last_epoch"]["samples_per_s"], 2) == 189.77
    assert round(cut["last_epoch"]["epoch_seconds"], 1) == 73.2
    assert cut["last_epoch"]["peak_memory_bytes"] == 17_348_335_616
    assert [round(a, 4) for a in cut["dev_accuracy_per_epoch"]] == [0.8497, 0.8635]

    result = json.loads(CUT_RESULT.read_text()) | {"unfinished": run.data["unfinished"]}
    jsonschema.Draft202012Validator(SCHEMA).validate(result)
    headers, rows = document.recipe_table(result)
    assert [row[0] for row in rows] == ["baseline", "guide", "optimized"]
    by = {row[0]: dict(zip(headers, row, strict=True)) for row in rows}
    assert by["baseline"]["test acc"] == "cut after epoch 2 of 3" and by["baseline"]["run"] == "—"
    assert by["baseline"]["samples/s (epoch)"] == "190" and by["baseline"]["dev acc"] == "86.35%"
    assert by["baseline"]["MFU"] == "2.2%" and by["baseline"]["peak memory (GB)"] == "17.3"
    assert (
        by["baseline"]["vs guide (epoch)"] == "0.42x" and by["optimized"]["vs baseline (epoch)"] == "10.81x"
    )
    assert by["optimized"]["vs guide (epoch)"] == "4.58x" and by["guide"]["test acc"].startswith("85.25%")
    markdown = document.render_markdown(result, {})
    assert "| baseline | 73.2 | — | 190 |" in markdown and "cut after epoch 2 of 3" in markdown


def test_the_unfinished_record_survives_a_resume_and_goes_when_the_recipe_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = runner(tmp_path, monkeypatch, cut_child(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        run._train_one("baseline")
    run.save()
    saved = json.loads((tmp_path / "validate.json").read_text())
    assert saved["unfinished"]["baseline"]["epochs_done"] == 2
    resumed = validate.Runner.resume(tmp_path)
    assert resumed.data["unfinished"] == run.data["unfinished"]

    finished = {"summary": {"samples_per_s": 190.0}, "epochs": [], "run_id": 7}
    monkeypatch.setattr(resumed, "_spawn", lambda args, log_name: subprocess.Popen(["true"]))
    monkeypatch.setattr(resumed, "_dgxperf_json", lambda *a, **k: finished)
    assert resumed._train_one("baseline")["run_id"] == 7
    assert resumed.data["unfinished"] == {}


def test_a_failed_recipe_with_whole_epochs_is_shown_as_failed_after_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = runner(tmp_path, monkeypatch, cut_child(validate.PhaseError("train baseline exited with 1: OOM")))
    run._phase("train", run._train)  # optimized and guide "fail" the same way here
    assert run.phases["train"].state == "failed"
    assert {u["how"] for u in run.data["unfinished"].values()} == {"failed"}
    result = json.loads(json.dumps(run.result()))  # as validate.json holds it
    jsonschema.Draft202012Validator(SCHEMA).validate(result)
    _, rows = document.recipe_table(result)
    assert {row[0]: row[9] for row in rows}["baseline"] == "failed after epoch 2 of 3"


def test_a_recipe_cut_before_its_first_epoch_ended_leaves_no_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps_only = tmp_path / "steps.jsonl"
    steps_only.write_text(
        "".join(line + "\n" for line in CUT_METRICS.read_text().splitlines() if '"type": "step"' in line)
        + '{"type": "epoch", "epoch": 1, "trunc'  # a line being written when the run was cut
    )
    for child in (cut_child(KeyboardInterrupt(), steps_only), cut_child(KeyboardInterrupt(), None)):
        run = runner(tmp_path / str(id(child)), monkeypatch, child)
        with pytest.raises(KeyboardInterrupt):
            run._train_one("guide")
        assert run.data["unfinished"] == {}
        _, rows = document.recipe_table(run.result())
        assert rows == []
