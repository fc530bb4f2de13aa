"""train/ngram.py: the token n-gram regression fitted beside the encoder, and the two averaged."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dgxperf.train import ngram
from dgxperf.train.data import EncodedSplit

CLS, SEP = 2, 3


def split(sequences: list[list[int]], labels: list[int]) -> EncodedSplit:
    return EncodedSplit.from_sequences([[CLS, *s, SEP] for s in sequences], labels, 16, 0.0)


def test_ngrams_leave_out_cls_and_sep_and_never_cross_two_sequences() -> None:
    rows, keys = ngram._sequence_ngrams(split([[10, 11], [12]], [0, 1]), base=20)
    got = {(int(r), int(k)) for r, k in zip(rows, keys, strict=True)}
    # sequence 0: 10, 11 and the bigram 10 11; sequence 1: 12 alone; no [CLS]/[SEP] and no 11 12
    assert got == {(0, 11), (0, 12), (0, 11 + 12 * 20), (1, 13)}


def test_tfidf_rows_are_scikit_learns_sublinear_unit_rows() -> None:
    # token 10 twice in example 0 and once in example 1; token 11 once in example 0 (max_n up to 3)
    train = split([[10, 10, 11], [10]], [0, 1])
    rows, keys, counts = ngram._counts(train, base=20)
    unique, df = np.unique(keys, return_counts=True)
    idf = np.log((1 + 2) / (1 + df)) + 1
    matrix = ngram._matrix((rows, keys, counts), len(train), unique, idf).to_dense().numpy()
    column = {int(k): i for i, k in enumerate(unique)}
    tf_10 = (1 + math.log(2)) * (math.log(3 / 3) + 1)  # in both examples: idf 1
    tf_11 = 1 * (math.log(3 / 2) + 1)
    row0 = matrix[0]
    assert np.linalg.norm(row0) == pytest.approx(1) and np.linalg.norm(matrix[1]) == pytest.approx(1)
    assert row0[column[11]] / row0[column[12]] == pytest.approx(tf_10 / tf_11)
    assert counts[(rows == 0) & (keys == 11)].tolist() == [2]


def test_it_learns_a_label_carried_by_a_bigram_and_scores_unseen_examples() -> None:
    rng = np.random.default_rng(0)
    sequences, labels = [], []
    for i in range(200):
        body = rng.integers(20, 40, size=8).tolist()
        if i % 2:
            body[3:5] = [5, 6]  # the positive bigram; 5 and 6 alone appear in negatives too
        else:
            body[2], body[6] = 6, 5
        sequences.append(body)
        labels.append(i % 2)
    model = ngram.fit(split(sequences[:150], labels[:150]), num_labels=2, vocab_size=40)
    probs = ngram.probabilities(model, split(sequences[150:], labels[150:]))
    assert probs.shape == (50, 2) and np.allclose(probs.sum(1), 1)
    assert np.mean(probs.argmax(1) == np.asarray(labels[150:])) == 1.0
    # n-grams seen in one training example only are not features
    assert model.features < len(np.unique(ngram._counts(split(sequences[:150], labels[:150]), 41)[1]))


def test_the_weight_is_chosen_on_dev_and_a_tie_keeps_the_encoder() -> None:
    gold = np.array([0, 1, 0, 1])
    right = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.4, 0.6]])
    wrong = right[:, ::-1]
    assert ngram.choose_weight(right, wrong, gold) == 1.0  # the n-gram model earns nothing
    # the encoder always wrong: every share under a half lets the n-gram model decide; the largest is kept
    assert ngram.choose_weight(wrong, right, gold) == 0.45
    assert ngram.choose_weight(right, right, gold) == 1.0  # equal everywhere: the encoder keeps it all
    assert ngram.average(right, wrong, 0.75).argmax(1).tolist() == [0, 1, 0, 1]


def test_report_scores_the_average_against_the_encoder_alone() -> None:
    rng = np.random.default_rng(1)

    def sample(n: int) -> tuple[list[list[int]], list[int]]:
        labels = rng.integers(0, 2, size=n).tolist()
        return [[*rng.integers(20, 40, size=6).tolist(), 5 + y] for y in labels], labels

    class Task:
        num_labels, vocab_size = 2, 40
        train, dev, test = (split(*sample(n)) for n in (120, 40, 40))

    task = Task()

    # an encoder that is right on the first half of each split and unsure on the rest
    def encoder(gold: np.ndarray) -> list[list[float]]:
        half = len(gold) // 2
        return [[1.0 - y, float(y)] if i < half else [0.5, 0.5] for i, y in enumerate(gold.tolist())]

    dev_p, test_p = encoder(task.dev.labels), encoder(task.test.labels)
    answers = [int(np.argmax(p)) for p in test_p]
    got = ngram.report(task, dev_p, test_p, answers)
    assert got["weight"] < 1 and got["test"]["accuracy"] == 1.0 == got["dev_accuracy"]
    assert got["paired"]["accuracy_b"] == np.mean(np.asarray(answers) == task.test.labels)
    assert got["paired"]["a_only"] > 0 and got["paired"]["b_only"] == 0
    assert got["ngram"]["test_accuracy"] == 1.0 and got["features"] > 0


BENCH = Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / "2026-12-06-h100-ngram-fusion"


@pytest.fixture(scope="module")
def real_task() -> Any:
    from dgxperf.train import data as D
    from dgxperf.train.tokenizer import build_tokenizer

    try:
        text = D.load_sentiment()
    except D.DataError as exc:
        pytest.skip(f"the default task's data is not here: {exc}")
    return D.encode_task(text, build_tokenizer("char", text.texts("train")), 128, "head_tail")


@pytest.fixture(scope="module")
def real_model(real_task: Any) -> ngram.NgramModel:
    return ngram.fit(real_task.train, real_task.num_labels, real_task.vocab_size)


@pytest.mark.parametrize("run", ["optimized-s1", "guide-s2", "baseline-s1"])
def test_an_h100_runs_average_replays_on_the_cpu_from_its_committed_softmax(
    real_task: Any, real_model: ngram.NgramModel, run: str
) -> None:
    """The run's dev and test softmax, as committed, and an n-gram model fitted here on the real split give the
    weight and the averaged test accuracy the H100 run reported."""
    result = json.loads((BENCH / run / "result.json").read_text())
    dev, test = (json.loads((BENCH / run / f"{s}_predictions.json").read_text()) for s in ("dev", "test"))
    assert dev["split_hash"] == test["split_hash"] == real_task.split_hash
    got = ngram.report(
        real_task, dev["probabilities"], test["probabilities"], test["predictions"], real_model
    )
    reported = result["ngram_fusion"]
    assert got["weight"] == reported["weight"]
    assert got["test"]["accuracy"] == pytest.approx(reported["test"]["accuracy"], abs=1 / 1736)
    assert got["ngram"]["test_accuracy"] == pytest.approx(reported["ngram"]["test_accuracy"], abs=1 / 1736)
    assert got["paired"]["accuracy_b"] == result["test"]["accuracy"]


def test_switching_the_n_gram_model_off_is_free_on_resume() -> None:
    from dgxperf.train import recipes
    from dgxperf.train.loop import config_differences

    saved = recipes.dataclasses.asdict(recipes.OPTIMIZED)
    off = recipes.apply_overrides(recipes.OPTIMIZED, {"ngram_fusion": "false"})
    assert off.ngram_fusion is False and config_differences(saved, off) == []


def test_three_labels_as_clue_tasks_have_them() -> None:
    rng = np.random.default_rng(2)
    labels = (np.arange(150) % 3).tolist()
    sequences = [[*rng.integers(20, 40, size=6).tolist(), 5 + y, 5 + y] for y in labels]
    model = ngram.fit(split(sequences[:120], labels[:120]), num_labels=3, vocab_size=40)
    probs = ngram.probabilities(model, split(sequences[120:], labels[120:]))
    assert probs.shape == (30, 3) and np.allclose(probs.sum(1), 1)
    assert probs.argmax(1).tolist() == labels[120:]
