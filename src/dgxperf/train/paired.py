"""Two training runs compared on the same test examples, answer by answer.

Every `dgxperf train` run writes its test predictions (``test_predictions.json``, beside ``result.json``).
Two accuracies from one test split of 1,736 reviews are each known only to about +-1.6 points, yet two
recipes evaluated on the *same* reviews can be told apart far more finely: only the reviews that exactly
one of them gets right carry the difference (:func:`dgxperf.train.metrics.paired_comparison`). This is
how `validate` says whether `optimized` really is less accurate than `guide`, or only looks it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

from dgxperf.atomic import atomic_write

PREDICTIONS_SCHEMA = "dgxperf.train.predictions/1"
PREDICTIONS_FILE = "test_predictions.json"
# the final model's dev answers, the same record: a choice between runs (or how much to trust a second
# model beside a run) is made on dev, then judged on test
DEV_PREDICTIONS_FILE = "dev_predictions.json"


class PredictionsError(Exception):
    """Predictions that are missing, malformed, or not of the same examples as the other run's."""


def write_predictions(
    path: Path,
    task: Any,
    predictions: list[int],
    probabilities: list[list[float]] | None = None,
    split: str = "test",
) -> None:
    """A split's predicted labels (test unless ``split`` says dev), in the split's order, beside what
    identifies that split, so that another run on the same split can be compared with this one review by
    review; with ``probabilities`` (each example's softmax over the labels, the same order) runs can also be
    averaged by confidence."""
    record: dict[str, Any] = {
        "schema": PREDICTIONS_SCHEMA,
        "split": split,
        "split_hash": task.split_hash,
        "labels": list(task.labels),
        "gold": [int(y) for y in getattr(task, split).labels],
        "predictions": predictions,
    }
    if probabilities is not None:
        record["probabilities"] = probabilities
    with atomic_write(path) as handle:
        handle.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")


def load_predictions(run_dir: Path) -> dict[str, Any]:
    """A run folder's test predictions, checked for shape: gold and predicted labels of equal length."""
    path = run_dir / PREDICTIONS_FILE
    if not path.is_file():
        raise PredictionsError(
            f"{run_dir}: no {PREDICTIONS_FILE} (runs before dgxperf wrote test predictions, or one that "
            "did not reach its test evaluation, have none)"
        )
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PredictionsError(f"{path}: not readable as JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != PREDICTIONS_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise PredictionsError(f"{path}: not a {PREDICTIONS_SCHEMA} file (schema {found!r})")
    gold, predictions = data.get("gold"), data.get("predictions")
    if not (_int_list(gold) and _int_list(predictions) and len(gold) == len(predictions)):
        raise PredictionsError(f"{path}: gold and predictions must be lists of labels of the same length")
    probabilities = data.get("probabilities")
    if probabilities is not None and not _probability_rows(
        probabilities, len(gold), len(data.get("labels") or [])
    ):
        raise PredictionsError(
            f"{path}: probabilities must hold one row per example, one number in [0, 1] per label"
        )
    return data


def _probability_rows(value: Any, rows: int, labels: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == rows
        and all(
            isinstance(row, list)
            and len(row) == labels
            and all(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p <= 1 for p in row)
            for row in value
        )
    )


def _int_list(value: Any) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def compare_predictions(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`paired_comparison` of run ``a`` against run ``b`` (``difference`` = accuracy a - accuracy b),
    refused unless both predicted the same examples: the same split and the same gold labels in order."""
    if a.get("split_hash") != b.get("split_hash"):
        raise PredictionsError(
            f"the runs were tested on different splits (split hash {str(a.get('split_hash'))[:12]}… "
            f"against {str(b.get('split_hash'))[:12]}…): their answers cannot be paired"
        )
    if a.get("labels") != b.get("labels") or a["gold"] != b["gold"]:
        raise PredictionsError(
            "the runs' test examples differ (other labels, or another subset): their answers cannot be paired"
        )
    # here, not at the top: train.metrics imports PyTorch, which `validate` spares its option checks
    from dgxperf.train.metrics import paired_comparison

    return paired_comparison(a["predictions"], b["predictions"], a["gold"])


def compare_runs(dir_a: Path, dir_b: Path) -> dict[str, Any]:
    """:func:`compare_predictions` of two run folders' saved test predictions."""
    return compare_predictions(load_predictions(dir_a), load_predictions(dir_b))
