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

import copy
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from self_pretrain_cpu import BATCH, LR, SEED, SHAPE, accuracy, batches, schedule

from dgxperf.train import data as D
from dgxperf.train import recipes
from dgxperf.train.model import Encoder, preset
from dgxperf.train.tokenizer import build_tokenizer

VARIANTS: dict[str, dict[str, float | str]] = {
    "chars": {},
    "mean-pool": {"pooling": "mean"},
    "dropout-0.3": {"dropout": 0.3, "attn_dropout": 0.3},
    "ema-0.999": {},
}


def train(
    model: Encoder, task: D.EncodedTask, epochs: int, ema_decay: float | None
) -> tuple[list[float], float]:
    g = torch.Generator().manual_seed(SEED + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    n = len(task.train.labels)
    sched = schedule(opt, epochs * math.ceil(n / BATCH))
    average = copy.deepcopy(model) if ema_decay else None
    devs = []
    for _ in range(epochs):
        for ids, mask, labels in batches(task.train, torch.randperm(n, generator=g).tolist()):
            loss = F.cross_entropy(model(ids, mask), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            if average is not None and ema_decay is not None:
                with torch.no_grad():
                    for kept, live in zip(average.parameters(), model.parameters(), strict=True):
                        kept.lerp_(live, 1 - ema_decay)
        judged = average if average is not None else model
        devs.append(accuracy(judged, task.dev))
        print(f"  epoch {len(devs)}: dev {devs[-1]:.4f}", flush=True)
    return devs, accuracy(average if average is not None else model, task.test)


def main() -> None:
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    names = sys.argv[2:] or list(VARIANTS)
    torch.set_num_threads(2)
    config = recipes.BASELINE
    text = D.load_sentiment(config.data_dir, seed=config.data_seed)
    tokenizer = build_tokenizer("char", text.texts("train"))
    task = D.encode_task(text, tokenizer, config.max_len, truncation=config.truncation)
    results = {}
    for name in names:
        print(f"== {name}", flush=True)
        began = time.time()
        model_config = preset(
            "tiny", vocab_size=task.vocab_size, num_labels=len(task.labels), max_len=config.max_len,
            **SHAPE, **VARIANTS[name],
        )  # fmt: skip
        torch.manual_seed(SEED)
        model = Encoder(model_config)
        results[name] = train(model, task, epochs, 0.999 if name.startswith("ema") else None)
        print(f"  ({time.time() - began:.0f} s)", flush=True)
    for name, (devs, test) in results.items():
        print(f"{name:12s} dev {' / '.join(f'{100 * d:.1f}' for d in devs)}  test {100 * test:.2f}%")


if __name__ == "__main__":
    main()
