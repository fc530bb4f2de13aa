"""Shape warm-up: one forward and backward pass for every batch shape training can meet, before the clock.

With dynamic padding a batch is padded to its longest text rounded up to ``pad_multiple``, so an epoch meets
up to ``max_len / pad_multiple`` sequence lengths, each with and without padding (a full batch takes no
attention mask: another graph). The first batch of each shape pays one-time work — a torch.compile
recompile, per-shape kernel selection — at a random point of the run. Over an epoch that is amortised; in
a short timed run (validate's ablation: 40 steps) it lands in some of the few windows and can make a
variant look 20-40% faster or slower than it runs (H200, 2026-12-03: docs/benchmarks/
2026-12-03-h200-validate-ablation/). ``warm_shapes=true`` pays it up front instead.

Training itself is unchanged: the passes use constant inputs, their gradients are dropped, no optimizer
step is taken, and every random generator is put back, so the run's losses equal those of a run without
the warm-up (tested on the CPU).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dgxperf.train import checkpoint
from dgxperf.train.data import padded_length
from dgxperf.train.recipes import TrainConfig
from dgxperf.train.tokenizer import CLS_ID


def batch_lengths(config: TrainConfig) -> list[int]:
    """Every length a training batch can be padded to under ``config``, shortest first."""
    if config.padding == "max":
        return [config.max_len]
    return sorted(
        {padded_length(n, None, config.pad_multiple, config.max_len) for n in range(1, config.max_len + 1)}
    )


def warm_shapes(model: Any, config: TrainConfig, context: Any, autocast: Callable[[], Any]) -> dict[str, Any]:
    """Run each (length, padded or full) shape through ``model`` once, forward and backward, at the
    per-rank micro-batch size; leave no gradient and every random generator as it was."""
    import torch

    rng = checkpoint.rng_state()
    began = time.perf_counter()
    shapes = 0
    labels = torch.zeros(config.batch_size, dtype=torch.long, device=context.device)
    for length in batch_lengths(config):
        ids = torch.full((config.batch_size, length), CLS_ID, dtype=torch.long, device=context.device)
        masks: list[Any] = [None]
        if length > 1:  # a padded batch: the last position of each row is padding
            padded = torch.ones(config.batch_size, length, dtype=torch.bool, device=context.device)
            padded[:, -1] = False
            masks.append(padded)
        for mask in masks:
            with autocast():
                logits = model(ids, mask)
            torch.nn.functional.cross_entropy(logits.float(), labels).backward()
            shapes += 1
    for param in model.parameters():
        param.grad = None
    context.sync()
    checkpoint.set_rng_state(rng)
    return {"shapes": shapes, "seconds": round(time.perf_counter() - began, 3)}
