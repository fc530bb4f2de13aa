"""Pooling, dropout and weight averaging for the from-scratch encoder on the default task (issue 4's 86%
line): which of them lifts accuracy at CPU size? Run as

    .venv/bin/python scripts/experiments/regularise_cpu.py [EPOCHS] [VARIANT ...]

Variants (same encoder, seed, data and schedule as self_pretrain_cpu.py: 2 layers x 128, batch 64, lr 5e-4):
"chars" (the encoder as it is), "mean-pool" (mean of the non-pad positions instead of [CLS]),
"dropout-0.3" (dropout and attention dropout 0.3 instead of 0.1), "ema-0.999" (evaluate an exponential
moving average of the weights, decay 0.999, updated every step).

Result, 2026-12-03, this 2-core CPU, `regularise_cpu.py 3` (one seed, ~5.5 min a variant; chars from
self_pretrain_cpu.py's identical scratch run):
    chars        dev 81.2 / 81.7 / 83.4   test 81.97%
    mean-pool    dev 80.7 / 80.8 / 82.1   test 81.74%
    dropout-0.3  dev 80.4 / 80.3 / 81.9   test 81.62%
    ema-0.999    dev 69.9 / 75.9 / 79.0   test 79.21%   (640 steps: the average still lags the weights)
None lifts accuracy at 3 epochs; the spread between them is within what one seed can tell apart.
Longer, `regularise_cpu.py 8 chars` (~14 min):
    chars x8     dev 79.8 / 82.4 / 83.5 / 82.1 / 80.1 / 82.2 / 82.2 / 81.7   test 80.01%
Dev peaks at epoch 3 and the model then overfits the 13.6k training reviews: more epochs are not it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from self_pretrain_cpu import finetune, run_variants, small_encoder

from dgxperf.train.model import Encoder

VARIANTS: dict[str, dict[str, float | str]] = {
    "chars": {},
    "mean-pool": {"pooling": "mean"},
    "dropout-0.3": {"dropout": 0.3, "attn_dropout": 0.3},
    "ema-0.999": {},
}


def train(name: str, task: Any, epochs: int) -> tuple[list[float], float]:
    model = Encoder(small_encoder(task, **VARIANTS[name]))
    return finetune(model, task, epochs, 0.999 if name.startswith("ema") else None)


def main() -> None:
    run_variants(list(VARIANTS), train)


if __name__ == "__main__":
    main()
