"""What is applied around the model, never inside it (torchtitan's habit): process group, precision
switches, torch.compile, DDP and its communication hooks (guide A §4.1, guide B §3.3).

Compilation goes block by block, as torchtitan does: the 24 identical Transformer blocks share one
compiled artifact, so compile time stays a few seconds per distinct sequence length instead of minutes
for the whole graph — which is what made ANCHORS' whole-model torch.compile over variable-length batches
never finish an epoch.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from dgxperf.train.recipes import TrainConfig


@dataclasses.dataclass(frozen=True)
class RunContext:
    rank: int
    local_rank: int
    world_size: int
    device: Any  # torch.device
    backend: str | None
    created_group: bool

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def cuda(self) -> bool:
        return bool(self.device.type == "cuda")

    def barrier(self) -> None:
        import torch.distributed as dist

        if self.distributed:
            dist.barrier()

    def sync(self) -> None:
        import torch

        if self.cuda:
            torch.cuda.synchronize(self.device)

    def sum_across_ranks(self, values: list[float]) -> list[float]:
        """Element-wise sum over ranks (one small all-reduce), for throughput counters."""
        if not self.distributed:
            return values
        import torch
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return [float(v) for v in tensor.tolist()]


def setup(config: TrainConfig, env: Mapping[str, str], *, want_cuda: bool) -> RunContext:
    """Join torchrun's process group (env://, NCCL on GPUs, gloo on CPU, with the recipe's timeout)."""
    import torch
    import torch.distributed as dist

    world = int(env.get("WORLD_SIZE", "1"))
    rank = int(env.get("RANK", "0"))
    local_rank = int(env.get("LOCAL_RANK", "0"))
    cuda = want_cuda and torch.cuda.is_available()
    device = torch.device(f"cuda:{local_rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    backend = None
    created = False
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if cuda else "gloo"
        dist.init_process_group(
            backend=backend,
            init_method="env://",
            timeout=dt.timedelta(seconds=config.init_timeout_s),
            device_id=device if cuda else None,
        )
        created = True
    elif dist.is_initialized():
        backend = str(dist.get_backend())
    return RunContext(rank, local_rank, world, device, backend, created)


def teardown(context: RunContext) -> None:
    import torch.distributed as dist

    if context.created_group and dist.is_initialized():
        dist.destroy_process_group()


def set_precision_flags(config: TrainConfig) -> None:
    """fp32 means IEEE fp32 (TF32 off, as the baseline is defined); tf32/bf16 allow TF32 for fp32 matmuls."""
    import torch

    allow = config.precision in ("tf32", "bf16")
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow


def autocast_dtype(config: TrainConfig) -> Any:
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(config.precision)


def bf16_residual(model: Any) -> Any:
    """The residual stream in bf16: the embeddings' output is cast once, before the first block, so every
    block's residual adds (and, in backward, the stream's gradient) run in bf16 instead of fp32.

    Under autocast a block's GEMMs already give bf16, but the stream they are added to stays in fp32
    (the embeddings are not autocast, and fp32 + bf16 is fp32), so the dropout, residual-add and LayerNorm
    fusions around each GEMM read and write 4 bytes an element where 2 would do; on an H100 they were about
    half the elementwise 29% of ``optimized``'s step (``2026-12-07-h100-speed-host``). LayerNorm itself still
    computes in fp32 (autocast runs ``layer_norm`` in fp32). A hook, so the model file, its parameter names
    and its checkpoints stay as they are; Megatron-LM keeps the stream in the training dtype by default
    (``fp32_residual_connection`` off)."""
    import torch

    def to_bf16(_module: Any, _inputs: Any, output: Any) -> Any:
        return output.to(torch.bfloat16)

    model.drop.register_forward_hook(to_bf16)
    return model


def checkpoint_blocks(model: Any) -> Any:
    """Activation checkpointing per Transformer block: backward recomputes each block's forward, so only
    the block inputs stay alive between forward and backward (about one [B, L, hidden] tensor per layer
    instead of roughly 17 of them), for about a third more compute. Non-reentrant, so it composes with
    torch.compile, DDP and FSDP; dropout replays the same mask (the RNG state is saved and restored).
    The forward is replaced in place, so parameter names and checkpoints stay those of the eager model."""
    from torch.utils.checkpoint import checkpoint

    for block in model.blocks:

        def run(x: Any, mask: Any, _forward: Any = block.forward) -> Any:
            return checkpoint(_forward, x, mask, use_reentrant=False)

        block.forward = run
    return model


def _allow_recompiles() -> None:
    # Bucketed batches come in up to max_len / pad_multiple lengths, and train, eval and the last short
    # batch each add graphs; dynamo's default limit (8) would silently drop the code back to eager.
    import torch._dynamo

    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, getattr(torch._dynamo.config, name)))
            break


def compile_kwargs(config: TrainConfig) -> dict[str, Any]:
    """torch.compile's ``mode`` or, with ``compile_cpp_wrapper``, the same mode's Inductor options plus
    ``cpp_wrapper`` (torch.compile takes a mode or options, not both). The C++ wrapper calls the graph's
    kernels from generated C++ instead of Python: on the H200 Inductor's Python wrappers took ~24 ms of
    `optimized`'s ~90 ms profiled step, a host-bound one (``2026-12-04-h200-encoder-k``)."""
    if not config.compile_cpp_wrapper:
        return {"mode": config.compile_mode}
    from torch._inductor import list_mode_options

    mode_options = list_mode_options(config.compile_mode) if config.compile_mode else {}  # None: all modes
    return {"options": {**mode_options, "cpp_wrapper": True}}


def compile_failure(exc: BaseException, *, cpp_wrapper: bool) -> str:
    """What to tell a user whose run torch.compile could not compile, with the setting that avoids it
    (``cpp_wrapper``: the run compiled with Inductor's C++ wrapper, ``compile_cpp_wrapper``)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
    if cpp_wrapper:
        # measured: optimized's training step on an H100 with torch 2.11 (2026-12-06-h100-graphs-ablation)
        fix = (
            "run with --set compile_cpp_wrapper=false (Inductor's C++ wrapper also failed on optimized's "
            "training step on an H100 with torch 2.11)"
        )
    else:
        fix = "run with --set compile=false (eager) to train without it"
    return f"torch.compile failed ({first[:300]}): {fix}"


def compile_blocks(model: Any, config: TrainConfig) -> Any:
    """torch.compile each Transformer block (shared artifact), leaving embeddings and head eager."""
    _allow_recompiles()
    # dynamic=None: the first shape compiles static, the second recompiles with a symbolic sequence length
    # that serves every later one, so a bucketed epoch pays two compiles rather than one per length.
    # Module.compile() compiles in place: parameter names (and so checkpoints) stay those of the eager model.
    for block in model.blocks:
        block.compile(dynamic=None, **compile_kwargs(config))
    return model


def compile_model(model: Any, config: TrainConfig, backend: str = "inductor") -> Any:
    """torch.compile the whole model (DDP wrapper included): one graph for embeddings, blocks and head, so
    the glue between blocks launches no kernels of its own from Python either.

    Fixed-length batches (padding=max) compile once, static. With dynamic padding a static graph per
    length would cost ~50 s each on the H200 for a 24-layer model (``2026-12-02-h200-train-probe.md``), so
    the sequence length turns symbolic at the second shape, as in :func:`compile_blocks`."""
    import torch

    _allow_recompiles()
    dynamic = False if config.padding == "max" else None
    return torch.compile(model, dynamic=dynamic, backend=backend, **compile_kwargs(config))


def compiled_graphs() -> int:
    """Graphs torch.compile has compiled in this process so far (each new batch shape or variant of the
    inputs can add one: seconds of stall on the step that meets it)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def wrap_ddp(model: Any, config: TrainConfig, context: RunContext) -> Any:
    """DDP with the recipe's flags and communication hook (none, fp16/bf16 compression, PowerSGD)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(
        model,
        device_ids=[context.local_rank] if context.cuda else None,
        gradient_as_bucket_view=config.gradient_as_bucket_view,
        static_graph=config.static_graph,
        bucket_cap_mb=config.bucket_cap_mb,
    )
    register_comm_hook(ddp, config)
    return ddp


def shard_fsdp(model: Any, config: TrainConfig) -> Any:
    """FSDP2 (``fully_shard``) per Transformer block, then the root: parameters, gradients and optimizer
    state are sharded over the ranks, for models that do not fit one GPU. bf16 recipes gather parameters
    in bf16 and reduce gradients in fp32."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if config.precision == "bf16"
        else MixedPrecisionPolicy()
    )
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def full_state(model: Any, optimizer: Any, *, sharded: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Model and optimizer state as full tensors (gathered to rank 0 under FSDP; others get empty dicts)."""
    if not sharded:
        return unwrap(model).state_dict(), optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options), get_optimizer_state_dict(
        model, optimizer, options=options
    )


def load_full_state(
    model: Any, optimizer: Any, model_state: Any, optimizer_state: Any, *, sharded: bool
) -> None:
    """Inverse of :func:`full_state`; under FSDP rank 0's full tensors are broadcast and re-sharded."""
    if not sharded:
        unwrap(model).load_state_dict(model_state)
        optimizer.load_state_dict(optimizer_state)
        return
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(model, model_state, options=options)
    set_optimizer_state_dict(model, optimizer, optimizer_state, options=options)


def register_comm_hook(ddp: Any, config: TrainConfig) -> None:
    """Guide B §3.3's gradient compression, through PyTorch's built-in DDP hooks."""
    if config.comm_hook == "none":
        return
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if config.comm_hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif config.comm_hook == "bf16":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    else:
        state = powerSGD_hook.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=config.powersgd_rank,
            start_powerSGD_iter=2,  # PyTorch's minimum; its docs advise ~10% of training for warm-up
            min_compression_rate=2,
        )
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def unwrap(model: Any) -> Any:
    """The plain Encoder under DDP and compile wrappers (for checkpoints and evaluation)."""
    inner = model.module if hasattr(model, "module") else model
    return getattr(inner, "_orig_mod", inner)
