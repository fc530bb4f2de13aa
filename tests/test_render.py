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
