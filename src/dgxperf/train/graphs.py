"""Whole-step CUDA graphs (``cuda_graphs=true``): a training step recorded once per batch shape, replayed.

Why: the profiler put ``optimized`` at batch 128 on the host's clock (``2026-12-04-h200-encoder-k``): 1,413
kernel launches a step, a 10 µs median kernel, the GPU 48% busy in the profiled steps and ~75% over an
epoch by NVML, so the step follows the VM's CPU. A replayed graph launches the step's kernels with one
call. torch.compile's own graphs (``compile_mode=reduce-overhead``) crashed with per-block compilation
(PyTorch #152887), so the step is captured here, whole, around the compiled blocks.

One step is: zero the gradients, forward under autocast, cross-entropy, backward, gradient clipping and
the optimizer step. For a replay to be that step again, everything it reads or writes between steps has
a fixed address outside the graphs' memory pool:

- each batch shape has its own static input tensors; a batch is copied into them;
- gradients (``graph_grads=fixed``, the default) are allocated once and zeroed inside the graph, never set
  to ``None``, so backward adds each parameter's gradient into them: on an H100 the zeroing and those adds
  (one kernel a parameter) were 2.1 ms of a ~68 ms step (``tests/data/train/profile/h100-optimized-graphed``).
  With ``graph_grads=pool`` they are dropped before each recorded step instead, as PyTorch's whole-network
  capture example does (``zero_grad(set_to_none=True)`` before the capture): backward hands its result to
  each parameter as its gradient, and it lives in the graphs' pool like an activation, read by the clipping
  and the optimizer inside the same replay and by nothing after it;
- the optimizer is ``capturable`` and its learning rates are device tensors, refilled in place after
  every schedule step; its state is created before the first capture by a rehearsal of each shape's step at
  learning rate 0 (which moves no weight: weight decay scales by 1 - 0), and then put back (to step 0 for a
  new run, to the checkpoint's state for a resumed one).

Every shape's graph shares one memory pool: replays run one at a time on one stream, and the only output
kept across a replay, the loss, is read (stream-ordered) before the next one. Two things are meant to keep
that pool small (added after a 256-token fine-tune ran out of the H100's 80 GB recording its 19th of 32
shapes, ``2026-12-05-h100-encoder-256``, where at 128 tokens the card had 64 GB reserved against a 20 GB
peak; measured since at 128 tokens, ``2026-12-05-h100-encoder-160``: 22.6 GB reserved, a 15.7 GB pool, the
same speed; at 256 tokens, ``2026-12-05-h100-encoder-256-pairs``: every shape recorded, a 30.5 GB pool):

- the cache the warm-up and the rehearsal left is handed back to CUDA before the first capture. While a
  capture is underway PyTorch's allocator never frees cached blocks (``release_cached_blocks`` is skipped:
  no ``cudaFree`` mid-capture), so memory cached for the eager passes is out of the graphs' reach;
- the shapes are recorded largest first (:func:`capture_order`). A block freed in one capture can be split
  for a smaller request of a later one, never grown for a larger one: recorded smallest first, each
  longer shape's activations need new segments, and the pool tends to the sum of them, not the largest.

On the CPU there is nothing to capture: the same step runs eagerly on the same static tensors, which is how
the CPU tests check this bookkeeping against the ordinary loop, loss for loss. With several processes each
runs the eager step (``recipes.for_world``: DDP's all-reduce is not recorded). Not supported (the recipe
refuses them): gradient accumulation, fp16's grad scaler (its step reads ``found_inf`` on the host),
activation checkpointing (it saves RNG states on the host), FSDP, torch.compile's own graphs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Callable
from typing import Any

from dgxperf.train import checkpoint
from dgxperf.train.objective import classification_loss, rows_through_model
from dgxperf.train.recipes import TrainConfig
from dgxperf.train.warmup import Shape, release_cache, warm_shapes


def capture_order(shapes: list[Shape]) -> list[Shape]:
    """The order to record ``shapes`` in: most tokens first, the masked one of a pair first (a mask is one
    more input and the attention kernel that takes it needs at least as much), so that each later capture
    fits in blocks an earlier one freed."""
    return sorted(shapes, key=lambda shape: (-shape[0] * shape[1], shape[2], shape))


class CaptureError(Exception):
    """Recording a step failed: which batch shape, and CUDA's or PyTorch's reason."""


@dataclasses.dataclass
class StaticBatch:
    """One batch shape's input tensors, at the addresses its graph reads; ``loss`` is the graph's output."""

    ids: Any
    mask: Any | None
    labels: Any
    graph: Any | None = None
    loss: Any | None = None


class GraphedStep:
    """The training step of :mod:`dgxperf.train.loop`, replayed from a CUDA graph per batch shape."""

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        config: TrainConfig,
        context: Any,
        autocast: Callable[[], Any],
    ) -> None:
        import torch

        self.model = model
        self.optimizer = optimizer
        self.config = config
        self.context = context
        self.autocast = autocast
        self.capture = bool(context.cuda)
        self.grads_in_pool = config.graph_grads == "pool"
        self.stream: Any = torch.cuda.Stream(context.device) if self.capture else None
        self.pool: Any = None
        self.batches: dict[Shape, StaticBatch] = {}
        self.grads: list[Any] = []
        self.params: list[Any] = []
        self.eager_steps = 0  # steps of a shape met only mid-run: run eagerly, never captured mid-epoch
        self.seconds = 0.0
        # A replay leaves the allocator's state unchanged: a step's activations live in the graphs' pool,
        # allocated while the step was recorded (the allocator counts private pools in its statistics,
        # PyTorch #51436), so an epoch's own max_memory_allocated misses them. This is their peak.
        self.capture_peak_bytes: int | None = None
        # What the graphs' pool holds: the card's reserved memory after the captures less before them.
        self.capture_pool_bytes: int | None = None
        # The learning rates the captured optimizer step reads: one device tensor per parameter group.
        # CUDA's fused AdamW reads a tensor lr as float32 (a float lr it takes in double): a relative change
        # of ~6e-8, so graphed and eager GPU runs are not bit-identical. On the CPU the tensors are float64
        # and AdamW's arithmetic is the eager loop's: the tests compare the bookkeeping itself, loss for loss.
        dtype = torch.float32 if self.capture else torch.float64
        self.lrs = [
            torch.tensor(float(g["lr"]), dtype=dtype, device=context.device) for g in optimizer.param_groups
        ]
        for group, lr in zip(optimizer.param_groups, self.lrs, strict=True):
            group["lr"] = lr

    # -- before the clock -------------------------------------------------------------------------------

    def prepare(self, shapes: list[Shape]) -> dict[str, Any]:
        """Warm every shape up (compile it), rehearse each shape's step, capture each shape; returns the
        warm-up's record (``warm_shapes``)."""
        import torch

        began = time.perf_counter()
        with self._on_side_stream():
            warmed = warm_shapes(
                self.model,
                shapes,
                self.context,
                self.autocast,
                keep_grads=True,
                rows=lambda batch: rows_through_model(
                    batch, self.config.rdrop_alpha, self.config.rdrop_share
                ),
            )
            self.params = [p for p in self.model.parameters() if p.grad is not None]
            self.grads = [] if self.grads_in_pool else [p.grad for p in self.params]  # zeroed by the warm-up
            if self.grads_in_pool:
                self._reset_grads()
            for shape in shapes:
                self.batches[shape] = self._static_batch(shape)
            self._rehearse([self.batches[shape] for shape in shapes])
        if self.capture:
            torch.cuda.empty_cache()  # the rehearsal ended with a synchronize: nothing cached is in flight
            torch.cuda.reset_peak_memory_stats(self.context.device)
            reserved_before = torch.cuda.memory_reserved(self.context.device)
            for shape in capture_order(shapes):
                self._capture(shape, self.batches[shape])
            if self.grads_in_pool:
                self._reset_grads()  # the last recording's gradients: its pool keeps their memory
            torch.cuda.current_stream(self.context.device).wait_stream(self.stream)
            self.capture_peak_bytes = torch.cuda.max_memory_allocated(self.context.device)
            self.capture_pool_bytes = torch.cuda.memory_reserved(self.context.device) - reserved_before
        self.seconds = time.perf_counter() - began
        return warmed  # the shape warm-up's record; what was captured is in summary()

    def _on_side_stream(self) -> Any:
        import torch

        if not self.capture:
            return contextlib.nullcontext()
        # capture needs the work before it (lazy cuBLAS set-up, compilation) done on the stream it records
        self.stream.wait_stream(torch.cuda.current_stream(self.context.device))
        return torch.cuda.stream(self.stream)

    def _rehearse(self, statics: list[StaticBatch]) -> None:
        """Each shape's step once, eagerly, exactly as it will be recorded but at learning rate 0, as PyTorch's
        whole-network capture example warms its step up: every kernel of the step (zeroing, the loss,
        clipping, the fused optimizer) has run on this stream before a capture, and the optimizer state
        exists at fixed addresses. Nothing the run keeps moves: no weight (AdamW's decay scales by 1 - 0),
        the optimizer state is put back (zeros for a new run, the checkpoint's for a resumed one), and the
        random generators are restored, so the dropout masks are the eager loop's."""
        import torch

        kept_state = {
            p: {k: v.clone() for k, v in state.items() if isinstance(v, torch.Tensor)}
            for p, state in self.optimizer.state.items()
            if state
        }
        kept_lrs = [float(lr) for lr in self.lrs]
        rng = checkpoint.rng_state()
        for lr in self.lrs:
            lr.zero_()
        with (
            warnings.catch_warnings()
        ):  # "capturable=True but not capturing": these steps are meant to be eager
            warnings.simplefilter("ignore")
            for static in statics:
                self._step(static)
                release_cache(self.context)  # one shape's activations at a time, as in the warm-up
        checkpoint.set_rng_state(rng)
        for lr, value in zip(self.lrs, kept_lrs, strict=True):
            lr.fill_(value)
        with torch.no_grad():
            for param, state in self.optimizer.state.items():
                for key, value in state.items():
                    if not isinstance(value, torch.Tensor):
                        continue
                    if param in kept_state:
                        value.copy_(kept_state[param][key])
                    else:
                        value.zero_()
        self._reset_grads()
        self.context.sync()

    def _capture(self, shape: Shape, static: StaticBatch) -> None:
        import torch

        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self.pool, stream=self.stream):
                static.loss = self._step(static)
        except RuntimeError as exc:  # an op that cannot be recorded (a host sync, a CPU tensor, ...)
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CaptureError(f"recording the step for batch shape {shape} failed: {reason[:300]}") from exc
        self.pool = graph.pool()
        static.graph = graph

    def epoch_peak(self, allocated: int | None) -> int | None:
        """An epoch's peak allocated memory with the graphs' own: the larger of the two."""
        if allocated is None or self.capture_peak_bytes is None:
            return allocated
        return max(allocated, self.capture_peak_bytes)

    # -- the step ---------------------------------------------------------------------------------------

    def _forward(self, ids: Any, mask: Any) -> Any:
        with self.autocast():
            return self.model(ids, mask)

    def _reset_grads(self) -> None:
        """Before a step: zero the fixed gradients, or drop them for backward to write (``graph_grads``)."""
        import torch

        if self.grads_in_pool:
            for param in self.params:
                param.grad = None
        else:
            torch._foreach_zero_(self.grads)

    def _step(self, static: StaticBatch) -> Any:
        import torch

        self._reset_grads()
        objective, loss = classification_loss(
            self._forward,
            static.ids,
            static.mask,
            static.labels,
            label_smoothing=self.config.label_smoothing,
            rdrop_alpha=self.config.rdrop_alpha,
            rdrop_share=self.config.rdrop_share,
        )
        objective.backward()
        if self.config.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.params, self.config.clip_grad_norm)
        self.optimizer.step()
        return loss.detach()

    def __call__(self, ids: Any, mask: Any | None, labels: Any) -> Any:
        """One training step on this batch; returns its loss (read it before the next call)."""
        shape = (int(ids.shape[0]), int(ids.shape[1]), mask is None)
        static = self.batches.get(shape)
        if static is None:
            # Capturing mid-epoch would record while the DataLoader's pinning thread may call CUDA: a shape
            # the sampler did not announce runs eagerly, on static tensors of its own.
            static = self.batches[shape] = self._static_batch(shape)
        static.ids.copy_(ids, non_blocking=True)
        if static.mask is not None:
            static.mask.copy_(mask, non_blocking=True)
        static.labels.copy_(labels, non_blocking=True)
        if static.graph is None:
            if self.capture:
                self.eager_steps += 1
            return self._step(static)
        static.graph.replay()
        return static.loss

    def _static_batch(self, shape: Shape) -> StaticBatch:
        import torch

        batch, length, full = shape
        device = self.context.device
        return StaticBatch(
            ids=torch.zeros(batch, length, dtype=torch.long, device=device),
            mask=None if full else torch.ones(batch, length, dtype=torch.bool, device=device),
            labels=torch.zeros(batch, dtype=torch.long, device=device),
        )

    def schedule_stepped(self) -> None:
        """After ``schedule.step()``: the new learning rates into the tensors the graphs read."""
        for group, lr in zip(self.optimizer.param_groups, self.lrs, strict=True):
            value = group["lr"]
            if value is not lr:  # a scheduler that assigns a new value instead of filling the tensor
                lr.fill_(value)
                group["lr"] = lr

    def summary(self) -> dict[str, Any]:
        return {
            "captured": sum(b.graph is not None for b in self.batches.values()),
            "eager_steps": self.eager_steps,
            "prepare_seconds": round(self.seconds, 3),
            "capture_peak_memory_bytes": self.capture_peak_bytes,
            "capture_pool_bytes": self.capture_pool_bytes,
            "device": "cuda" if self.capture else "cpu (nothing to capture: the step ran eagerly)",
        }
