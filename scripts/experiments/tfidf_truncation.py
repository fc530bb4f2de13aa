"""The linear bar for issue 4's 86% line, and what truncation to max_len costs it: a character 1-3-gram
TF-IDF with logistic regression and a linear SVM on dgxperf's split of the default task, on the full texts
and truncated as the encoder sees them (126 characters: head_tail or head). Needs scikit-learn, which
dgxperf does not depend on (`pip install scikit-learn`). Run as

    .venv/bin/python scripts/experiments/tfidf_truncation.py

Result, 2026-12-03 (scikit-learn 1.9.1, min_df 2, sublinear tf; LR C=4, LinearSVC C=0.3; 18.3% of the
training texts are longer than 126 characters):
    full       LR  dev 85.71  test 85.20     SVC  dev 86.00  test 85.71
    head_tail  LR  dev 85.60  test 84.97     SVC  dev 85.77  test 85.08
    head       LR  dev 84.79  test 84.50     SVC  dev 84.79  test 84.62
Truncation with head_tail costs the linear model 0.2-0.6 points, so it explains little of the 3-4 points
between it and a from-scratch encoder (81-83%).
"""

from __future__ import annotations

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

from dgxperf.train import data as D
from dgxperf.train import recipes


def main() -> None:
    config = recipes.BASELINE
    task = D.load_sentiment(config.data_dir, seed=config.data_seed)
    keep = config.max_len - 2  # [CLS] and [SEP]

    def cut(text: str, how: str) -> str:
        if how == "full" or len(text) <= keep:
            return text
        if how == "head":
            return text[:keep]
        head = (keep + 1) // 2  # as dgxperf.train.data._truncate
        return text[:head] + text[len(text) - (keep - head) :]

    def split(name: str, how: str) -> tuple[list[str], list[str]]:
        examples = task.split(name)
        return [cut(e.text, how) for e in examples], [e.label for e in examples]

    for how in ("full", "head_tail", "head"):
        (train, y_train), (dev, y_dev), (test, y_test) = (split(s, how) for s in ("train", "dev", "test"))
        vectorizer = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True, min_df=2)
        x_train = vectorizer.fit_transform(train)
        for name, model in (("LR", LogisticRegression(C=4, max_iter=2000)), ("SVC", LinearSVC(C=0.3))):
            model.fit(x_train, y_train)
            dev_acc = 100 * model.score(vectorizer.transform(dev), y_dev)
            test_acc = 100 * model.score(vectorizer.transform(test), y_test)
            print(f"{how:10s} {name:4s} dev {dev_acc:.2f}  test {test_acc:.2f}", flush=True)
    longer = sum(len(e.text) > keep for e in task.split("train")) / len(task.split("train"))
    print(f"training texts longer than {keep} characters: {100 * longer:.1f}%")


if __name__ == "__main__":
    main()
