"""Would multi-character WordPiece units lift issue 4's encoder where characters stop near 86%? A cheap
probe before spending GPU time: a linear SVM on TF-IDF of token 1-2-grams, with the tokens of dgxperf's own
WordPiece trained on the training split, CJK characters split (character-level, as ``bert-base-chinese``)
or not (``split_cjk=False``: pieces learned from runs between punctuation), at three vocabulary sizes.
Needs scikit-learn, which dgxperf does not depend on (`pip install scikit-learn`). Run as

    PYTHONPATH=src .venv/bin/python scripts/experiments/wordpiece_units.py

Result, 2026-12-06 (scikit-learn 1.9.1, tokenizers 0.23.3, min_df 2, sublinear tf, LinearSVC C=0.3):
    split_cjk=True   vocab  5706  median 44 tokens  17.9% > 126  dev 85.66  test 85.14
    split_cjk=False  vocab  8496  median 45 tokens  18.2% > 126  dev 85.83  test 84.56
    split_cjk=False  vocab 16000  median 27 tokens   5.5% > 126  dev 84.16  test 82.83
    split_cjk=False  vocab 30000  median 24 tokens   2.9% > 126  dev 84.27  test 81.68
(The WordPiece trainer is not bit-stable between runs: three runs gave 5700-5706 pieces in the first row
and scores within 0.3 points of these.)
Larger pieces shorten the texts (fewer cut at 128 tokens) but cost the linear model 0.6-3.5 test points:
~14k reviews are too few to learn what a word-sized piece means, where characters are shared across
words. So no encoder was pretrained on them, and characters stay the default.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.svm import LinearSVC

from dgxperf.train import data as D
from dgxperf.train import recipes
from dgxperf.train.tokenizer import Tokenizer, build_tokenizer

KEEP = 126  # max_len 128 less [CLS] and [SEP]


def words(tok: Tokenizer, examples: Sequence[D.Example]) -> list[str]:
    """Each text as its token ids joined by spaces, so a word analyzer sees one token as one word."""
    return [" ".join(map(str, ids)) for ids in tok.ids_batch([e.text for e in examples])]


def main() -> None:
    config = recipes.BASELINE
    task = D.load_sentiment(config.data_dir, seed=config.data_seed)
    train, dev, test = (task.split(s) for s in ("train", "dev", "test"))
    for split_cjk, vocab_size in ((True, 8000), (False, 8000), (False, 16000), (False, 30000)):
        tok = build_tokenizer(
            "wordpiece", [e.text for e in train], vocab_size=vocab_size, split_cjk=split_cjk
        )

        lengths = [len(ids.split()) for ids in words(tok, train)]
        cut = 100 * sum(n > KEEP for n in lengths) / len(lengths)
        vectorizer = TfidfVectorizer(
            analyzer="word", token_pattern=r"\S+", ngram_range=(1, 2), sublinear_tf=True, min_df=2
        )
        model = LinearSVC(C=0.3).fit(vectorizer.fit_transform(words(tok, train)), [e.label for e in train])
        scores = [
            100 * model.score(vectorizer.transform(words(tok, s)), [e.label for e in s]) for s in (dev, test)
        ]
        print(
            f"split_cjk={split_cjk!s:5}  vocab {tok.vocab_size:5d}  median {statistics.median(lengths):.0f} tokens  "
            f"{cut:4.1f}% > {KEEP}  dev {scores[0]:.2f}  test {scores[1]:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
