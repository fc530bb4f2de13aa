"""render.py: the human views, on results the H200 printed."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from rich.console import Console

from dgxperf.render import render_train

ROOT = Path(__file__).resolve().parent.parent
GUIDE_FROM_ENCODER = (
    ROOT / "docs" / "benchmarks" / "2026-12-03-h200-pretrain" / "pretrain80-guide" / "train-guide.json"
)


def rendered(result: dict[str, object]) -> str:
    console = Console(record=True, width=200, color_system=None)
    render_train(console, result)  # type: ignore[arg-type]
    return console.export_text()


def test_train_view_shows_the_test_accuracy_and_its_interval_when_the_result_has_one() -> None:
    result = json.loads(GUIDE_FROM_ENCODER.read_text())
    assert "test_accuracy_ci95" not in result["summary"]  # written before the field existed
    text = rendered(result)
    assert "test: accuracy 0.8606, macro-F1" in text and "(1736 samples)" in text and "interval" not in text
    with_interval = copy.deepcopy(result)
    with_interval["summary"]["test_accuracy_ci95"] = [0.8435, 0.8761]
    assert "test: accuracy 0.8606 (95% interval 0.8435-0.8761), macro-F1" in rendered(with_interval)


def paired_text(paired: dict[str, object]) -> str:
    from dgxperf.render import render_paired

    console = Console(record=True, width=400, color_system=None)
    render_paired(console, 3, 4, paired)
    return console.export_text()


def test_paired_test_line_gives_the_gap_its_interval_and_p() -> None:
    pair = {"samples": 1736, "accuracy_a": 0.8491, "accuracy_b": 0.8554, "difference": -0.0063,
            "difference_ci95": [-0.0171, 0.0045], "a_only": 45, "b_only": 56, "p_value": 0.3197}  # fmt: skip
    text = paired_text(pair)
    assert "over the same 1,736 examples: run 3 84.91% vs run 4 85.54%" in text
    assert "difference -0.63 points (95% interval -1.71 to +0.45)" in text
    assert "right only in run 3: 45, only in run 4: 56; McNemar p = 0.32" in text


def test_paired_test_line_says_why_there_is_none() -> None:
    text = paired_text({"error": "/x: no test_predictions.json (runs before ...)"})
    assert text.startswith("no paired test comparison: /x: no test_predictions.json")


def test_seeds_verdict_needs_the_interval_and_the_permutation_test_to_agree() -> None:
    from dgxperf.render import seeds_verdict
    from dgxperf.train.seeds import compare_seed_groups

    overlapping = compare_seed_groups([86.46, 86.75, 86.06, 86.64], [85.89, 86.18, 85.71, 86.5])
    assert "not told apart" in seeds_verdict(overlapping)
    two_a_side = compare_seed_groups([86.0, 86.1], [84.0, 84.1])  # Welch separates them; 6 splits cannot
    assert "cannot confirm it with so few seeds" in seeds_verdict(two_a_side) and "0.333" in seeds_verdict(
        two_a_side
    )
    five_a_side = compare_seed_groups([86.0, 86.1, 86.2, 86.05, 86.15], [84.0, 84.1, 84.2, 84.05, 84.15])
    assert five_a_side["p_value"] <= 0.05
    assert seeds_verdict(five_a_side) == "the groups differ by more than their seeds do"


def test_train_view_says_when_r_drop_ran_each_row_twice() -> None:
    result = json.loads(GUIDE_FROM_ENCODER.read_text())
    assert "rdrop_alpha" not in result["config"]  # written before the field existed: nothing said
    assert "R-Drop" not in rendered(result)
    doubled = copy.deepcopy(result)
    doubled["config"]["rdrop_alpha"] = 4.0
    assert "lr 5e-05 — R-Drop, alpha 4 (each row twice a step)" in rendered(doubled)
    doubled["config"]["rdrop_alpha"] = 0.0
    assert "R-Drop" not in rendered(doubled)


ENCODER_W = ROOT / "docs" / "benchmarks" / "2026-12-07-h100-encoder-w"


def test_train_view_says_when_the_pace_fell_part_way() -> None:
    """guide-s1 on the 2026-12-07 H100 host: its result.json predates the field, so it is added from its own
    logged steps, as the loop now writes it."""
    from dgxperf.pace import step_pace_change
    from dgxperf.report.validate import read_metrics_records

    result = json.loads((ENCODER_W / "guide-s1" / "result.json").read_text())
    assert "pace_change" not in result and "pace:" not in rendered(result)
    result["pace_change"] = step_pace_change(
        read_metrics_records(ENCODER_W / "guide-s1" / "metrics.jsonl", "step")
    )
    text = rendered(result)
    assert (
        "pace: the logged samples/s fell 40% by step 320: a median of 521 over the 15 windows before, 314 over"
        in text
    )
    assert "the 19 from it on, so the epochs mix two paces" in text and "launch.host_slowed" in text
    result["pace_change"] = None  # a run that held its pace
    assert "pace:" not in rendered(result)
