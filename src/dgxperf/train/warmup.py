"""Shape warm-up: one forward and backward pass for every batch shape the run will meet, before the clock.

With dynamic padding a batch is padded to its longest text rounded up to ``pad_multiple``; a full batch
(no padding) takes no attention mask, which is another graph; and a bucket's remainder is a smaller batch.
The first batch of each new shape pays one-time work — a torch.compile recompile, per-shape kernel
selection — at some point of the run. Over an epoch that is amortised; in a short timed run (validate's
ablation: 40 steps) it lands in a few of the windows. On the H200 (2026-12-03) a 67-sample remainder batch
at step 33 of the optimized recipe cost 6.6 s in one 5-step window whose others took 0.3 s, after every
sequence length had been warmed: the shapes are therefore read from the sampler, not guessed.
``warm_shapes=true`` pays that work up front instead.

Training itself is unchanged: the passes use constant inputs, their gradients are dropped, no optimizer
step is taken, and every random generator is put back, so the run's losses equal those of a run without
the warm-up (tested on the CPU). Under DDP every rank warms the union of all ranks' shapes in the same
order, since each backward pass all-reduces.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from dgxperf.train import checkpoint, parallel
from dgxperf.train.data import padded_length
from dgxperf.train.recipes import CUDA_GRAPH_MODES, TrainConfig
from dgxperf.train.tokenizer import CLS_ID

Shape = tuple[int, int, bool]  # batch size, padded length, full (no padding: no attention mask)


def run_shapes(sampler: Any, lengths: np.ndarray, config: TrainConfig, epochs: Iterable[int]) -> list[Shape]:
    """Every (batch size, padded length, full) a training batch of ``sampler`` has in ``epochs``."""
    pad_to = config.max_len if config.padding == "max" else None
    shapes: set[Shape] = set()
    for epoch in epochs:
        for batch in sampler.rank_batches(epoch):
            sizes = lengths[batch]
            length = padded_length(int(sizes.max()), pad_to, config.pad_multiple, config.max_len)
            shapes.add((len(batch), length, bool((sizes == length).all())))
    return sorted(shapes)


def union_across_ranks(shapes: list[Shape], context: Any) -> list[Shape]:
    if not context.distributed:
        return shapes
    import torch.distributed as dist

    gathered: list[Any] = [None] * context.world_size
    dist.all_gather_object(gathered, shapes)
    return sorted({tuple(shape) for rank_shapes in gathered for shape in rank_shapes})  # type: ignore[misc]


def passes_per_shape(config: TrainConfig) -> int:
    """Warm-up passes each shape needs before the clock: 3 when compiled steps replay CUDA graphs (warm-up,
    recording, first replay), else 1 (compilation and kernel selection happen on the first)."""
    return 3 if config.compile and config.compile_mode in CUDA_GRAPH_MODES else 1


def release_cache(context: Any) -> None:
    """Hand the CUDA cache back between shapes. Each shape's activations are freed when its backward ends,
    but blocks cut to one shape's sizes rarely fit the next: at 128 tokens the 20 shapes of a graphed run
    left 61 GB cached for a ~20 GB step (NVML, 2026-12-05-h100-encoder-160), at 256 tokens 83 GB of an 80 GB
    card. Emptied between shapes, the warm-up holds about one shape's memory (NVML since: 25.8 GB at most over a
    whole 128-token run, 2026-12-05-h100-encoder-256-pairs). A no-op off CUDA."""
    if context.cuda:
        import torch

        torch.cuda.empty_cache()


def warm_shapes(
    model: Any,
    shapes: list[Shape],
    context: Any,
    autocast: Callable[[], Any],
    passes: int = 1,
    *,
    keep_grads: bool = False,
    rows: Callable[[int], int] | None = None,
) -> dict[str, Any]:
    """Run each shape through ``model`` ``passes`` times, forward and backward; leave every random generator
    as it was, and no gradient (``keep_grads``: zeroed gradients, allocated once for a CUDA graph).
    ``rows(batch)``: the rows the model sees for a batch, where the step adds some (R-Drop's second pass,
    train/objective.py)."""
    import torch

    rng = checkpoint.rng_state()
    graphs = parallel.compiled_graphs()
    began = time.perf_counter()
    for index, (batch, length, full) in enumerate(shape for shape in shapes for _ in range(passes)):
        if index and index % passes == 0:
            release_cache(context)
        seen = rows(batch) if rows is not None else batch
        ids = torch.full((seen, length), CLS_ID, dtype=torch.long, device=context.device)
        mask = None
        if not full:  # the last position of each row is padding
            mask = torch.ones(seen, length, dtype=torch.bool, device=context.device)
            mask[:, -1] = False
        with autocast():
            logits = model(ids, mask)
        labels = torch.zeros(seen, dtype=torch.long, device=context.device)
        torch.nn.functional.cross_entropy(logits.float(), labels).backward()
    for param in model.parameters():
        if keep_grads and param.grad is not None:
            param.grad.zero_()
        else:
            param.grad = None
    context.sync()
    release_cache(context)
    checkpoint.set_rng_state(rng)
    return {
        "shapes": [list(s) for s in shapes],
        "passes": passes,
        "seconds": round(time.perf_counter() - began, 3),
        "graphs_compiled": parallel.compiled_graphs() - graphs,
    }
