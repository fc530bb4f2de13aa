"""Does a character n-gram model carry what issue 4's fine-tunes miss? Each run's test softmax (in
`test_predictions.json` since 2026-12-06) averaged with a character 1-3-gram TF-IDF logistic regression's,
against the run alone: at equal weight, and at the weight that scores best on dev (the run's
`dev_predictions.json`, its final model's dev answers), so that nothing is tuned on test. Then all the runs'
softmaxes averaged against their majority vote. Needs scikit-learn (`pip install scikit-learn`). Run as

    .venv/bin/python scripts/experiments/fusion.py RUN_DIR [RUN_DIR ...]

Each RUN_DIR is a `dgxperf train` run folder on the default task's split (its split hash is checked).
The regression is tfidf_truncation.py's (min_df 2, sublinear tf, C=4) on the texts as the encoder sees them
(head_tail, 126 characters).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from dgxperf.train import data as D
from dgxperf.train import recipes
from dgxperf.train.paired import DEV_PREDICTIONS_FILE, PredictionsError, load_predictions

WEIGHTS = np.linspace(0, 1, 21)  # the run's share of the average, chosen on dev


def linear_probabilities(split_hash: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The regression's softmax and the labels of dev and test, on dgxperf's split of the default task."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    config = recipes.BASELINE
    task = D.load_sentiment(config.data_dir, seed=config.data_seed)
    if task.split_hash != split_hash:
        sys.exit(
            f"the runs were tested on another split (hash {split_hash[:12]}…, this data {task.split_hash[:12]}…)"
        )
    keep = config.max_len - 2  # [CLS] and [SEP]

    def seen(text: str) -> str:  # as dgxperf.train.data truncates head_tail
        head = (keep + 1) // 2
        return text if len(text) <= keep else text[:head] + text[len(text) - (keep - head) :]

    train = task.split("train")
    vectorizer = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True, min_df=2)
    model = LogisticRegression(C=4, max_iter=2000)
    index = {name: i for i, name in enumerate(task.labels)}  # the runs' label order, as their softmax
    model.fit(vectorizer.fit_transform([seen(e.text) for e in train]), [index[e.label] for e in train])
    return {
        name: (
            model.predict_proba(vectorizer.transform([seen(e.text) for e in task.split(name)])),
            np.array([index[e.label] for e in task.split(name)]),
        )
        for name in ("dev", "test")
    }


def accuracy(probabilities: np.ndarray, gold: np.ndarray) -> float:
    return float(100 * np.mean(probabilities.argmax(1) == gold))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    try:
        answers = [load_predictions(run) for run in args.runs]
    except PredictionsError as exc:
        sys.exit(str(exc))
    missing = [str(run) for run, a in zip(args.runs, answers, strict=True) if "probabilities" not in a]
    if missing:
        sys.exit(f"no probabilities in {', '.join(missing)} (runs before 2026-12-06 kept only their answers)")
    if len({a["split_hash"] for a in answers}) != 1:
        sys.exit("the runs were tested on different splits")
    splits = linear_probabilities(answers[0]["split_hash"])
    linear, gold = splits["test"]
    linear_dev, gold_dev = splits["dev"]
    if [int(y) for y in gold] != answers[0]["gold"]:
        sys.exit("the runs' test labels are not this split's, in its order")
    print(
        f"linear model alone: dev {accuracy(linear_dev, gold_dev):.2f}%, test {accuracy(linear, gold):.2f}%"
    )
    alone, equal, chosen = [], [], []
    for run, a in zip(args.runs, answers, strict=True):
        p = np.asarray(a["probabilities"])
        alone.append(accuracy(p, gold))
        equal.append(accuracy((p + linear) / 2, gold))
        line = f"{run}: alone {alone[-1]:.2f}%  equal weight {equal[-1]:.2f}%"
        dev_file = run / DEV_PREDICTIONS_FILE
        if dev_file.is_file():
            dev = np.asarray(json.loads(dev_file.read_text())["probabilities"])
            on_dev = [accuracy(w * dev + (1 - w) * linear_dev, gold_dev) for w in WEIGHTS]
            # the largest weight among the best on dev: trust the run unless the linear model earns its share
            w = WEIGHTS[max(i for i, acc in enumerate(on_dev) if acc == max(on_dev))]
            chosen.append(accuracy(w * p + (1 - w) * linear, gold))
            line += f"  dev-chosen weight {w:.2f} {chosen[-1]:.2f}%"
        print(line)
    for name, fused in (("equal weight", equal), ("dev-chosen weight", chosen)):
        if len(fused) != len(alone):
            continue
        gains = np.subtract(fused, alone)
        print(
            f"{len(alone)} runs, {name}: alone {np.mean(alone):.2f}%, fused {np.mean(fused):.2f}% "
            f"(gain {gains.mean():+.2f}, {int((gains > 0).sum())} of {len(gains)} up; "
            f"{sum(f >= 86 for f in fused)} of {len(fused)} fused >= 86%, {sum(a >= 86 for a in alone)} alone)"
        )
    if len(answers) > 1:
        stack = np.stack([np.asarray(a["probabilities"]) for a in answers])
        votes = (stack.argmax(2) == 1).sum(0)
        # a tie goes to the first run's answer, as summarize_runs.py's vote
        vote = np.where(2 * votes == len(answers), stack[0].argmax(1), 2 * votes > len(answers))
        print(
            f"all {len(answers)} runs: vote {100 * np.mean(vote == gold):.2f}%, "
            f"softmax average {accuracy(stack.mean(0), gold):.2f}%, "
            f"with the linear model {accuracy((stack.mean(0) + linear) / 2, gold):.2f}%"
        )


if __name__ == "__main__":
    main()
