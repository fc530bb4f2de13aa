"""Where a 256-token fine-tune gains over its 128-token pair: paired runs of one encoder and seed (a run
`NAME` at 256 tokens and `NAME-max_len128`, as `capture_next.sh`'s item 2 writes them), their test accuracy
by review length. Run as

    .venv/bin/python scripts/experiments/truncation_pairs.py docs/benchmarks/2026-12-05-h100-encoder-256-pairs

A 128-token row holds 126 characters ([CLS] and [SEP] take two), a 256-token row 254, so a longer row can
only change the answers on reviews of 127 characters or more; a gain elsewhere is the fine-tune's noise.
Result, 2026-12-05 (three pairs of `optimized` from one 256-token encoder, H100): the 256-token runs scored
+0.54 points on test, and all of it on reviews the two runs read identically:
    1-126 characters (whole in both)     1,399 reviews   +9.3 right a pair (+0.54% of the split)
    127-254 (cut at 128 only)              292           -0.7
    255 and longer (cut in both)            45           +0.7
so the difference is the fine-tune's noise, not the longer row (on dev the same pairs went -0.35 points).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from dgxperf.train import data as D
from dgxperf.train import recipes
from dgxperf.train.paired import PREDICTIONS_FILE, load_predictions

BANDS = (
    (0, 126, "1-126 (whole in both)"),
    (126, 254, "127-254 (cut at 128 only)"),
    (254, None, "255+ (cut in both)"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="a folder of runs: NAME and NAME-max_len128")
    args = parser.parse_args()
    short_runs = sorted(args.folder.glob(f"*-max_len128/{PREDICTIONS_FILE}"))
    if not short_runs:
        raise SystemExit(f"no NAME-max_len128/{PREDICTIONS_FILE} under {args.folder}")
    test = D.load_sentiment(recipes.BASELINE.data_dir, seed=recipes.BASELINE.data_seed).split("test")
    lengths = np.asarray([len(review.text) for review in test])
    totals: dict[str, list[int]] = {label: [] for *_, label in BANDS}
    for short_path in short_runs:
        name = short_path.parent.name.removesuffix("-max_len128")
        long_dir = short_path.parent.parent / name
        if not (long_dir / PREDICTIONS_FILE).exists():
            continue
        short, long = load_predictions(short_path.parent), load_predictions(long_dir)
        gold = np.asarray(short["gold"])
        if len(gold) != len(lengths) or long["gold"] != short["gold"]:
            raise SystemExit(f"{name}: its test answers are not of this split")
        right_short = np.asarray(short["predictions"]) == gold
        right_long = np.asarray(long["predictions"]) == gold
        print(f"{name}: 256 {right_long.mean():.2%}, 128 {right_short.mean():.2%}")
        for low, high, label in BANDS:
            inside = (lengths > low) & (lengths <= (high or lengths.max()))
            gain = int(right_long[inside].sum() - right_short[inside].sum())
            totals[label].append(gain)
            print(
                f"  {label}: {inside.sum()} reviews, 256 {right_long[inside].mean():.2%} against "
                f"128 {right_short[inside].mean():.2%}, {gain:+d} right ({gain / len(gold):+.2%} of the split)"
            )
    if not any(totals.values()):
        raise SystemExit(f"no NAME-max_len128 under {args.folder} has its NAME run beside it")
    for label, gains in totals.items():
        mean = float(np.mean(gains))
        print(f"mean over {len(gains)} pairs, {label}: {mean:+.1f} right ({mean / len(lengths):+.2%})")


if __name__ == "__main__":
    main()
