"""train/paired.py: test predictions written by a run, read back, and two runs paired on them."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dgxperf.train.paired import (
    PREDICTIONS_FILE,
    PredictionsError,
    compare_predictions,
    compare_runs,
    load_predictions,
    write_predictions,
)

GOLD = [0, 1, 1, 0, 1, 0]


def fake_task(gold: list[int] = GOLD, split_hash: str = "abc123") -> Any:
    # Only what write_predictions reads: the split's hash, label names and the test split's labels.
    test = types.SimpleNamespace(labels=np.asarray(gold, dtype=np.int64))
    return types.SimpleNamespace(split_hash=split_hash, labels=("neg", "pos"), test=test)


def write_run(folder: Path, predictions: list[int], **task: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_predictions(folder / PREDICTIONS_FILE, fake_task(**task), predictions)
    return folder


def test_written_predictions_read_back_in_the_splits_order(tmp_path: Path) -> None:
    run = write_run(tmp_path / "a", [0, 1, 0, 0, 1, 1])
    data = load_predictions(run)
    assert data["gold"] == GOLD and data["predictions"] == [0, 1, 0, 0, 1, 1]
    assert data["split_hash"] == "abc123" and data["labels"] == ["neg", "pos"]
    assert json.loads((run / PREDICTIONS_FILE).read_text())["split"] == "test"


def test_probabilities_are_kept_when_given_and_optional_when_not(tmp_path: Path) -> None:
    rows = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.7, 0.3], [0.0, 1.0], [0.45, 0.55]]
    run = tmp_path / "a"
    run.mkdir()
    write_predictions(run / PREDICTIONS_FILE, fake_task(), [0, 1, 0, 0, 1, 1], rows)
    assert load_predictions(run)["probabilities"] == rows
    assert "probabilities" not in load_predictions(write_run(tmp_path / "b", GOLD))  # runs before 2026-12-06


def test_two_runs_are_compared_answer_by_answer(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", [0, 1, 1, 0, 1, 1])  # 5 of 6: wrong on the last
    b = write_run(tmp_path / "b", [0, 1, 0, 1, 1, 0])  # 4 of 6: wrong on 2 and 3
    pair = compare_runs(a, b)
    assert (pair["accuracy_a"], pair["accuracy_b"]) == (5 / 6, 4 / 6)
    assert (pair["a_only"], pair["b_only"]) == (2, 1)
    assert pair["difference"] == pytest.approx(1 / 6) and pair["p_value"] == 1.0


def test_runs_on_different_splits_are_not_paired(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", GOLD)
    b = write_run(tmp_path / "b", GOLD, split_hash="fff999")
    with pytest.raises(PredictionsError, match="different splits"):
        compare_runs(a, b)
    c = write_run(tmp_path / "c", GOLD[:-1], gold=GOLD[:-1])  # a smaller subset of the same split
    with pytest.raises(PredictionsError, match="test examples differ"):
        compare_runs(a, c)


def test_a_run_without_predictions_says_why(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    with pytest.raises(PredictionsError, match=r"no test_predictions\.json"):
        load_predictions(tmp_path / "old")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not readable as JSON"),
        ('["a list"]', "not a dgxperf.train.predictions/1 file"),
        ('{"schema": "dgxperf.train/1"}', "schema 'dgxperf.train/1'"),
        ('{"schema": "dgxperf.train.predictions/1", "gold": [0, 1], "predictions": [0]}', "same length"),
        (
            '{"schema": "dgxperf.train.predictions/1", "gold": [0, 1], "predictions": [true, 0]}',
            "lists of labels",
        ),
        ('{"schema": "dgxperf.train.predictions/1", "gold": "01", "predictions": "01"}', "lists of labels"),
        *(
            (
                '{"schema": "dgxperf.train.predictions/1", "labels": ["neg", "pos"], "gold": [0, 1], '
                f'"predictions": [0, 1], "probabilities": {rows}}}',
                "one row per example",
            )
            for rows in ("[[1, 0]]", "[[1, 0], [0.5]]", "[[1, 0], [1.5, -0.5]]", '[[1, 0], ["a", 1]]', '"x"')
        ),
    ],
)
def test_malformed_predictions_are_clear_errors(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / PREDICTIONS_FILE).write_text(content)
    with pytest.raises(PredictionsError, match=message):
        load_predictions(tmp_path)


def test_compare_predictions_checks_the_label_names() -> None:
    base = {"split_hash": "h", "labels": ["neg", "pos"], "gold": [0, 1], "predictions": [0, 1]}
    with pytest.raises(PredictionsError, match="differ"):
        compare_predictions(base, base | {"labels": ["pos", "neg"]})
