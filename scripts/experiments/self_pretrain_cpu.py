"""Does self-pretraining (masked-LM on the training split's own texts, then fine-tuning) lift a
from-scratch encoder's accuracy on the default task? A CPU-sized check (issue 4's 86% line), run as

    .venv/bin/python scripts/experiments/self_pretrain_cpu.py [MLM_EPOCHS] [FT_EPOCHS]

It trains the same small encoder twice with the same seed and fine-tuning schedule: from scratch, and
after MLM_EPOCHS of masked-LM (15% of tokens: 80% [UNK] as the mask, 10% random, 10% kept; output layer
tied to the token embeddings). Prints dev accuracy per fine-tuning epoch and test accuracy of both.

Result, 2026-12-03, this 2-core CPU, encoder 2 layers x 128 (heads 4, FFN 512), batch 64, lr 5e-4,
`self_pretrain_cpu.py 4 3` (one seed; ~25 min):
    scratch   dev 81.2 / 81.7 / 83.4   test 81.97%
    mlm x4    dev 80.6 / 81.3 / 83.5   test 82.95%   (MLM loss 6.53 -> 5.59, still falling)
Four MLM epochs give no clear lift at this size (dev equal, test +1.0 on one seed); both stay below the
84.7-85.7% of a character TF-IDF linear model on this split.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from dgxperf.train import data as D
from dgxperf.train import recipes
from dgxperf.train.model import Encoder, ModelConfig, preset
from dgxperf.train.tokenizer import CLS_ID, PAD_ID, SEP_ID, UNK_ID, build_tokenizer

SHAPE = {"layers": 2, "hidden": 128, "heads": 4, "ffn": 512}
BATCH, LR, SEED = 64, 5e-4, 0


def batches(split: D.EncodedSplit, order: list[int]) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    out = []
    for start in range(0, len(order), BATCH):
        rows = [split.ids[split.offsets[i] : split.offsets[i + 1]] for i in order[start : start + BATCH]]
        length = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), length, dtype=torch.long)
        for j, r in enumerate(rows):
            ids[j, : len(r)] = torch.as_tensor(r, dtype=torch.long)
        out.append(
            (
                ids,
                ids != PAD_ID,
                torch.as_tensor(split.labels[order[start : start + BATCH]], dtype=torch.long),
            )
        )
    return out


def hidden(model: Encoder, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    x = model.tok_emb(ids) + model.pos_emb.weight[: ids.shape[1]]
    x = model.drop(model.emb_ln(x))
    for block in model.blocks:
        x = block(x, mask[:, None, None, :])
    return model.ln_f(x)


def schedule(opt: torch.optim.Optimizer, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    warm = max(1, total // 10)
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / (total - warm)))
    )


def mlm(model: Encoder, split: D.EncodedSplit, epochs: int, vocab: int) -> None:
    g = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    n = len(split.labels)
    sched = schedule(opt, epochs * math.ceil(n / BATCH))
    for epoch in range(epochs):
        began, losses = time.time(), []
        for ids, mask, _ in batches(split, torch.randperm(n, generator=g).tolist()):
            special = (ids == PAD_ID) | (ids == CLS_ID) | (ids == SEP_ID)
            pick = (torch.rand(ids.shape, generator=g) < 0.15) & ~special
            targets = torch.where(pick, ids, torch.full_like(ids, -100))
            roll = torch.rand(ids.shape, generator=g)
            inputs = torch.where(pick & (roll < 0.8), torch.full_like(ids, UNK_ID), ids)
            inputs = torch.where(
                pick & (roll >= 0.8) & (roll < 0.9), torch.randint(4, vocab, ids.shape, generator=g), inputs
            )
            logits = hidden(model, inputs, mask) @ model.tok_emb.weight.T
            loss = F.cross_entropy(logits.view(-1, vocab), targets.view(-1), ignore_index=-100)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
        print(
            f"  mlm epoch {epoch + 1}: loss {sum(losses) / len(losses):.3f} ({time.time() - began:.0f} s)",
            flush=True,
        )


def accuracy(model: Encoder, split: D.EncodedSplit) -> float:
    model.eval()
    right = 0
    with torch.no_grad():
        for ids, mask, labels in batches(split, list(range(len(split.labels)))):
            right += int((model(ids, mask).argmax(-1) == labels).sum())
    model.train()
    return right / len(split.labels)


def finetune(
    model: Encoder, task: D.EncodedTask, epochs: int, ema_decay: float | None = None
) -> tuple[list[float], float]:
    """Fine-tune and judge each epoch on dev, then test; with ``ema_decay``, judge an exponential moving
    average of the weights (updated every step) instead of the weights themselves."""
    g = torch.Generator().manual_seed(SEED + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    n = len(task.train.labels)
    sched = schedule(opt, epochs * math.ceil(n / BATCH))
    average = copy.deepcopy(model) if ema_decay else None
    judged = average if average is not None else model
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
        devs.append(accuracy(judged, task.dev))
        print(f"  fine-tune epoch {len(devs)}: dev {devs[-1]:.4f}", flush=True)
    return devs, accuracy(judged, task.test)


def load_task() -> D.EncodedTask:
    """The default task, split and truncated as the recipes do, with a character vocabulary."""
    config = recipes.BASELINE
    text = D.load_sentiment(config.data_dir, seed=config.data_seed)
    tokenizer = build_tokenizer("char", text.texts("train"))
    return D.encode_task(text, tokenizer, config.max_len, truncation=config.truncation)


def small_encoder(task: D.EncodedTask, **overrides: Any) -> ModelConfig:
    """The experiments' encoder (SHAPE) for this task; ``overrides`` replace model fields."""
    return preset(
        "tiny", vocab_size=task.vocab_size, num_labels=len(task.labels), max_len=recipes.BASELINE.max_len,
        **{**SHAPE, **overrides},
    )  # fmt: skip


def report(results: dict[str, tuple[list[float], float]]) -> None:
    width = max(len(name) for name in results) + 2
    for name, (devs, test) in results.items():
        print(f"{name:{width}s} dev {' / '.join(f'{100 * d:.1f}' for d in devs)}  test {100 * test:.2f}%")


def run_variants(
    default_names: list[str], train: Callable[[str, D.EncodedTask, int], tuple[list[float], float]]
) -> None:
    """The experiments' command line, ``SCRIPT [EPOCHS] [VARIANT ...]``: each variant trained by
    ``train(name, task, epochs)`` from the same seed, timed, and the results table printed."""
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    names = sys.argv[2:] or default_names
    torch.set_num_threads(2)
    task = load_task()
    results = {}
    for name in names:
        print(f"== {name}", flush=True)
        began = time.time()
        torch.manual_seed(SEED)
        results[name] = train(name, task, epochs)
        print(f"  ({time.time() - began:.0f} s)", flush=True)
    report(results)


def main() -> None:
    mlm_epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    ft_epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.set_num_threads(2)
    task = load_task()
    model_config = small_encoder(task)
    results = {}
    for name, pre in (("scratch", 0), (f"mlm x{mlm_epochs}", mlm_epochs)):
        print(f"== {name}", flush=True)
        torch.manual_seed(SEED)
        model = Encoder(model_config)
        if pre:
            mlm(model, task.train, pre, task.vocab_size)
        results[name] = finetune(model, task, ft_epochs)
    report(results)


if __name__ == "__main__":
    main()
