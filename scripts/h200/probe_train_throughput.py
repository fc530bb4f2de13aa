"""Early probe for issue 4: training-step throughput and MFU of dgxperf's own BERT-large (preset large)
on fixed-length synthetic sequences of 128 (ANCHORS.md's shapes), for a few precision/compile settings.

    PYTHONPATH=src python3 scripts/h200/probe_train_throughput.py > probe.jsonl
"""

import json
import sys
import time

import torch
import torch.nn.functional as F

from dgxperf.train.flops import flops_per_sample
from dgxperf.train.model import Encoder, param_count, preset

PEAK = 989.5
SEQ = 128


def run(name, batch, precision, compile_blocks, fused=True, steps=30, warmup=8, vocab=21128, whole=None):
    torch.manual_seed(0)
    cfg = preset("large", vocab_size=vocab, num_labels=2, max_len=SEQ)
    model = Encoder(cfg).cuda()
    if compile_blocks:
        for block in model.blocks:
            block.compile(dynamic=False)
    if whole is not None:  # whole-model compile; "reduce-overhead" adds CUDA graphs
        model = torch.compile(model, mode=whole, dynamic=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**16) if precision == "fp16" else None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    torch.backends.cuda.matmul.allow_tf32 = precision in ("tf32", "bf16")
    ids = torch.randint(4, vocab, (batch, SEQ), device="cuda")
    labels = torch.randint(0, 2, (batch,), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(ids, None), labels)
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        opt.zero_grad(set_to_none=True)

    began = time.perf_counter()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - began
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(steps // 3):
            step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) / (steps // 3))
    times.sort()
    per_step = times[1]
    sps = batch / per_step
    flops = flops_per_sample(cfg, SEQ) * sps
    out = {
        "name": name,
        "whole_compile_mode": whole,
        "batch": batch,
        "precision": precision,
        "compile": compile_blocks,
        "params": param_count(cfg),
        "samples_per_s": round(sps, 1),
        "mfu": round(flops / PEAK / 1e12, 4),
        "tflops": round(flops / 1e12, 1),
        "step_ms": [round(x * 1e3, 2) for x in times],
        "peak_mem_gb": round(torch.cuda.max_memory_allocated() / 1e9, 2),
        "warmup_s": round(compile_s, 1),
    }
    print(json.dumps(out), flush=True)


runs = [
    ("fp16 AMP eager (guide-like)", 64, "fp16", False),
    ("bf16 eager", 64, "bf16", False),
    ("bf16 + block compile", 64, "bf16", True),
    ("bf16 + block compile, batch 256", 256, "bf16", True),
    ("bf16 + whole compile", 64, "bf16", False, True, 30, 8, 21128, "default"),
    ("bf16 + whole compile reduce-overhead", 64, "bf16", False, True, 30, 8, 21128, "reduce-overhead"),
    ("bf16 + whole compile, batch 256", 256, "bf16", False, True, 30, 8, 21128, "default"),
]
only = sys.argv[1:]
for r in runs:
    if not only or r[0] in only:
        run(*r)
        torch.cuda.empty_cache()  # the run's model and optimizer went with its frame
