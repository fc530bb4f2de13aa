"""Probe for issue 4: what cuts the host's time in `optimized`'s per-block compiled step? CUDA graphs
(compile_mode=reduce-overhead), or Inductor's C++ wrapper (compile_cpp_wrapper)?

On the H200 (torch 2.11, 2026-12-04-h200-encoder-j) `optimized` with compile_mode=reduce-overhead died on
its first steps: "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run".
Every block calls the same compiled graph in turn (PyTorch issue #152887), so the recipe now refuses that
combination. This probe measures, on preset large at batch 128 x 64 with a padding mask (optimized's
training step: bf16 autocast, fused AdamW, clip 1.0), each variant in its own process (CUDAGraph Trees
keep process-wide state, and one failure must not poison the next):

- ``blocks``: per-block compile, default mode: the recipe as it runs today (the reference);
- ``blocks-cpp``: the same with Inductor's C++ wrapper (``compile_cpp_wrapper=true``): the graph's kernels
  are called from generated C++. The profiler (2026-12-04-h200-encoder-k) put ~24 ms of the ~90 ms profiled
  step in Inductor's Python wrappers;
- ``blocks-graphs``: per-block compile, reduce-overhead: expected to fail as on 2026-12-04;
- ``blocks-graphs-clone``: the same, each block's output cloned outside the graph, the workaround that
  PyTorch's error message names;
- ``step-graph``: per-block compile, default mode, and the whole step (zeroing, forward, backward, clip,
  optimizer) captured by dgxperf itself and replayed (``cuda_graphs=true``, ``dgxperf/train/graphs.py``).

First run (H200, 2026-12-04, 128 x 128 rows, ``2026-12-04-h200-encoder-j/probe-cudagraph.jsonl``): the clone
variant ran, at 1,655 samples/s against 1,683 for ``blocks``. No speed-up, and the run did not record whether
graphs replayed at all; it now records CUDA Graph Trees' warnings and dynamo's skip count, and defaults to rows of
64 tokens, the length of the real bucketed batches, where launches weigh most.

    PYTHONPATH=src python3 scripts/h200/probe_cudagraph_blocks.py > probe.jsonl    (one JSON line per variant)

``--device cpu --variants blocks --preset tiny`` is the CPU dry run of the harness (no CUDA graphs there).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import torch

VARIANTS = ("blocks", "blocks-cpp", "blocks-graphs", "blocks-graphs-clone", "step-graph")


class CloneOut(torch.nn.Module):  # type: ignore[misc]
    """A compiled block whose output is copied out of the CUDA graph's memory pool before the next block
    (the same graph) runs again."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: Any, mask: Any) -> Any:
        return self.inner(x, mask).clone()


def measure(
    variant: str, device: str, preset_name: str, batch: int, length: int, steps: int, repeats: int
) -> dict[str, Any]:
    import warnings

    import torch.nn.functional as F
    from torch._dynamo.utils import counters

    from dgxperf.train.model import Encoder, preset

    torch.manual_seed(0)
    cfg = preset(preset_name, vocab_size=3635, num_labels=2, max_len=128)
    model = Encoder(cfg).to(device)
    mode = "reduce-overhead" if variant.startswith("blocks-graphs") else None
    for i, block in enumerate(model.blocks):
        if variant == "blocks-cpp":
            block.compile(dynamic=False, options={"cpp_wrapper": True})
        else:
            block.compile(mode=mode, dynamic=False)
        if variant == "blocks-graphs-clone":
            model.blocks[i] = CloneOut(block)
    graphed = variant == "step-graph"
    opt = torch.optim.AdamW(
        model.parameters(), lr=1e-4, fused=device == "cuda", capturable=graphed and device == "cuda"
    )
    ids = torch.randint(4, cfg.vocab_size, (batch, length), device=device)
    mask = torch.ones(batch, length, dtype=torch.bool, device=device)
    mask[:, -8:] = False  # a padded batch, as most of optimized's bucketed batches are
    labels = torch.randint(0, 2, (batch,), device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    losses: list[float] = []

    if graphed:
        from dgxperf.train.graphs import GraphedStep
        from dgxperf.train.parallel import RunContext
        from dgxperf.train.recipes import OPTIMIZED, apply_overrides

        context = RunContext(0, 0, 1, torch.device(device), None, False)
        # rdrop_alpha=0: the recorded step does what the plain one here does, one pass a row
        config = apply_overrides(OPTIMIZED, {"cuda_graphs": "true", "compile": "true", "rdrop_alpha": "0"})

        def graph_autocast() -> Any:  # as the training loop's captured step: no cast-weight cache
            return torch.autocast(device, dtype=torch.bfloat16, cache_enabled=False)

        replay = GraphedStep(model, opt, config, context, graph_autocast)

    def step() -> None:
        if graphed:
            losses.append(replay(ids, mask, labels).clone())
            return
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(ids, mask).float(), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())

    # CUDA Graph Trees fall back to running without graphs (and say so only in a warning) when a graph
    # is called again before the backward of its last call: record the warnings and dynamo's skip counts
    # so that "no speed-up" can be told apart from "no graphs".
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        began = time.perf_counter()
        if graphed:
            replay.prepare([(batch, length, False)])
        for _ in range(6):  # compile, CUDA graph warm-up, recording, first replays
            step()
        sync()
        warmup_s = time.perf_counter() - began
        rates = []
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            sync()
            rates.append(batch * steps / (time.perf_counter() - t0))
    graph_warnings = sorted({str(w.message)[:160] for w in caught if "CUDAGraph" in str(w.message)})
    return {
        "variant": variant,
        "ok": True,
        "preset": preset_name,
        "batch": batch,
        "length": length,
        "warmup_s": round(warmup_s, 2),
        "samples_per_s": [round(r, 1) for r in rates],
        "samples_per_s_median": round(statistics.median(rates), 1),
        "first_losses": [round(float(v), 5) for v in losses[:3]],
        "cudagraph_warnings": graph_warnings,
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
        "step_graph": replay.summary() if graphed else None,
        "torch": torch.__version__,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--preset", default="large")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--length", type=int, default=64, help="tokens a row (real bucketed batches: ~61)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=240, help="seconds per variant")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: measure one variant
    args = parser.parse_args()
    if args.one:
        try:
            out = measure(
                args.one, args.device, args.preset, args.batch, args.length, args.steps, args.repeats
            )
        except Exception as exc:  # the probe's answer: which variant fails, and with what
            out = {"variant": args.one, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:600]}
        print(json.dumps(out), flush=True)
        return 0
    for variant in args.variants.split(","):
        if variant not in VARIANTS:
            print(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}", file=sys.stderr)
            return 2
    for variant in args.variants.split(","):
        sizes = {
            "--batch": args.batch,
            "--length": args.length,
            "--steps": args.steps,
            "--repeats": args.repeats,
        }
        cmd = [sys.executable, __file__, "--one", variant, "--device", args.device, "--preset", args.preset]
        cmd += [str(part) for pair in sizes.items() for part in pair]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=False)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            failed = {
                "variant": variant,
                "ok": False,
                "error": f"exit {done.returncode}: {done.stderr[-400:]}",
            }
            result = json.loads(lines[-1]) if lines else failed
        except subprocess.TimeoutExpired:
            result = {"variant": variant, "ok": False, "error": f"still running after {args.timeout} s"}
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
