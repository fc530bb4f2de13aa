"""The training loop, readable top to bottom: data -> model -> wrappers -> optimizer -> epochs -> report.

One function, :func:`train`, runs one recipe on one process (a torchrun rank, or the only process). What
a recipe switches on (precision, padding, DDP flags, compile, accumulation with no_sync) is applied here
or in ``parallel.py``; the model file knows nothing of it. Throughput is timed over windows bounded by
device synchronisations, and evaluation and checkpointing are kept out of the timed training seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dgxperf import __version__
from dgxperf.pace import step_pace_change
from dgxperf.train import checkpoint, ngram, parallel
from dgxperf.train.ema import WeightAverage
from dgxperf.train.flops import flops_for_batch
from dgxperf.train.graphs import CaptureError, GraphedStep
from dgxperf.train.metrics import ThroughputMeter, paired_comparison, scores, wilson_interval
from dgxperf.train.objective import classification_loss, rows_through_model
from dgxperf.train.paired import DEV_PREDICTIONS_FILE, PREDICTIONS_FILE, write_predictions
from dgxperf.train.recipes import RecipeError, TrainConfig, changes_from_recipe, for_world
from dgxperf.train.trace import StepProfiler
from dgxperf.train.warmup import passes_per_shape, run_shapes, union_across_ranks, warm_shapes

TRAIN_SCHEMA = "dgxperf.train/1"
SYNTHETIC_VOCAB = 21128  # bert-base-chinese's vocabulary: the shapes of ANCHORS.md


class TrainError(Exception):
    """A run that cannot go on, with what to do: non-finite loss, out of memory, bad data or checkpoint."""


@dataclasses.dataclass
class RunOptions:
    out_dir: Path
    cache_dir: Path
    device: str = "cuda"
    resume: bool = False
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    gemm_ceiling_tflops: float | None = None
    on_log: Callable[[dict[str, Any]], None] | None = None
    keep_checkpoints: int = 2
    checkpoints: bool = True


@dataclasses.dataclass
class Prepared:
    """Data and model, ready to train."""

    task: Any  # EncodedTask
    model_config: Any  # ModelConfig
    data_info: dict[str, Any]


# -- data ---------------------------------------------------------------------------------------------------


def prepare_data(config: TrainConfig, options: RunOptions, context: parallel.RunContext) -> Prepared:
    """Load, split, tokenize and encode (rank 0 builds the cache; the other ranks then read it)."""
    from dgxperf.train import data as data_mod
    from dgxperf.train.model import preset
    from dgxperf.train.tokenizer import build_tokenizer, load_tokenizer

    def build() -> tuple[Any, dict[str, Any]]:
        if config.task == "synthetic":
            task = data_mod.synthetic_task(
                SYNTHETIC_VOCAB, config.max_len, config.synthetic_samples, 2, config.seed
            )
            return task, {"task": "synthetic", "samples": config.synthetic_samples}
        if config.task == "files":
            assert config.train_file is not None
            text = data_mod.load_files(
                config.train_file, config.dev_file, config.test_file, seed=config.data_seed
            )
        else:
            text = data_mod.load_sentiment(config.data_dir, seed=config.data_seed)
        tokenizer_path = options.out_dir / "tokenizer.json"
        # Rank 0 trains the tokenizer; the others read its file (WordPiece training is not deterministic,
        # huggingface/tokenizers#1794, so every rank must use rank 0's vocabulary).
        if (options.resume or not context.is_main) and tokenizer_path.exists():
            tokenizer = load_tokenizer(tokenizer_path)
        elif config.init_from is not None:
            # A pretrained encoder's token embeddings only mean something under its own vocabulary.
            pretrained_tokenizer = Path(config.init_from) / "tokenizer.json"
            if not pretrained_tokenizer.is_file():
                raise data_mod.DataError(
                    f"init_from={config.init_from}: no tokenizer.json there (make the folder with `dgxperf pretrain`)"
                )
            tokenizer = load_tokenizer(pretrained_tokenizer)
            if context.is_main:
                tokenizer.save(tokenizer_path)
        else:
            tokenizer = build_tokenizer(config.tokenizer, text.texts("train"))
            if context.is_main:
                tokenizer.save(tokenizer_path)
        task = data_mod.encoded_cached(text, tokenizer, config.max_len, options.cache_dir, config.truncation)
        info = {"task": text.name, "stats": text.stats().to_json(), "encoded": task.to_json()}
        return task, info

    if context.is_main:
        task, info = build()
        context.barrier()
    else:
        context.barrier()
        task, info = build()
    if config.train_samples is not None and config.task != "synthetic":
        task = data_mod.subset_task(task, config.train_samples, seed=config.data_seed)
        info["subset"] = {s: len(task.split(s)) for s in ("train", "dev", "test")}
    model_config = preset(
        config.preset,
        vocab_size=task.vocab_size,
        num_labels=task.num_labels,
        max_len=config.max_len,
        pre_ln=config.pre_ln,
        dropout=config.dropout,
        attn_dropout=config.attn_dropout,
        ln_fp32=config.ln_fp32,
        pooling=config.pooling,
    )
    return Prepared(task, model_config, info)


def make_loader(
    split: Any, config: TrainConfig, context: parallel.RunContext, *, train: bool
) -> tuple[Any, Any]:
    """A DataLoader over ``split`` with the recipe's padding, bucketing, workers and pinning."""
    import torch

    from dgxperf.train.data import BucketBatchSampler, Collator, EncodedDataset, make_batch_sampler

    if train:
        sampler = make_batch_sampler(
            split,
            config.batch_size,
            bucketed=config.bucketing,
            seed=config.seed,
            rank=context.rank,
            world_size=context.world_size,
        )
        pad_to = config.max_len if config.padding == "max" else None
    else:
        # Evaluation: every sample once, grouped by length (the order does not change the scores).
        sampler = BucketBatchSampler(
            split.lengths,
            config.eval_batch_size,
            shuffle=False,
            rank=context.rank,
            world_size=context.world_size,
            even=False,
        )
        pad_to = None
    collate = Collator(pad_to=pad_to, multiple_of=config.pad_multiple, cap=config.max_len)
    loader = torch.utils.data.DataLoader(
        EncodedDataset(split),
        batch_sampler=sampler,
        collate_fn=collate,
        num_workers=effective_workers(config, context) if train else 0,
        pin_memory=config.pin_memory and context.cuda,
        # Its own generator: creating an iterator draws a seed, which must not move the global RNG that
        # dropout uses, or a resumed run would draw different dropout masks than an uninterrupted one.
        generator=torch.Generator().manual_seed(config.seed),
    )
    return loader, sampler


def effective_workers(config: TrainConfig, context: parallel.RunContext) -> int:
    """The recipe's DataLoader workers, capped so every rank keeps a core of its own for the main loop."""
    cores = os.cpu_count() or 1
    return min(config.num_workers, max(0, cores // context.world_size - 1))


# -- optimizer and schedule ------------------------------------------------------------------------------


def layer_depth(name: str, layers: int) -> int:
    """0 for the embeddings, i + 1 for block i, layers + 1 for what sits above the blocks (final LayerNorm,
    pooler, classifier): the depth that layer-wise lr decay counts from the top."""
    parts = name.split(".")
    if "blocks" in parts:
        return int(parts[parts.index("blocks") + 1]) + 1
    if any(part.endswith("emb") or part == "emb_ln" for part in parts):
        return 0
    return layers + 1


# Fields that do not change what the training computes: a resumed run may set them differently
# (ngram_fusion only adds a second model after the test evaluation).
RESUME_FREE_FIELDS = ("profile_steps", "profile_after", "ngram_fusion")


def config_differences(saved: Any, config: TrainConfig) -> list[str]:
    """The recipe fields in which a checkpoint's config differs from this run's. A field the checkpoint
    lacks (it was written before the field existed) counts as its default, the value that run used."""
    if not isinstance(saved, dict):
        return ["config"]
    defaults = dataclasses.asdict(TrainConfig())
    current = dataclasses.asdict(config)
    return [
        name
        for name, value in current.items()
        if name not in RESUME_FREE_FIELDS and saved.get(name, defaults[name]) != value
    ]


def make_optimizer(model: Any, config: TrainConfig, lr: float, context: parallel.RunContext) -> Any:
    """AdamW with no weight decay on biases, LayerNorm and embeddings (BERT's practice). With
    ``lr_layer_decay`` < 1 each layer's lr is that of the layer above times the decay, from the head down
    to the embeddings (Sun et al., 2019; ELECTRA): a pretrained encoder's lower layers move least."""
    import torch

    layers = len(model.blocks) if hasattr(model, "blocks") else 0
    grouped: dict[tuple[bool, int], list[Any]] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        no_decay = param.ndim < 2 or "emb" in name
        depth = layer_depth(name, layers) if config.lr_layer_decay < 1 else layers + 1
        grouped.setdefault((no_decay, depth), []).append(param)
    # decay first, then no-decay: with lr_layer_decay = 1 these are the two groups of every earlier run,
    # so their checkpoints still resume
    groups = [
        {
            "params": params,
            "weight_decay": 0.0 if no_decay else config.weight_decay,
            "lr": lr * config.lr_layer_decay ** (layers + 1 - depth),
        }
        for (no_decay, depth), params in sorted(grouped.items(), key=lambda item: (item[0][0], -item[0][1]))
    ]
    kwargs: dict[str, Any] = {"lr": lr, "betas": (config.beta1, config.beta2), "eps": config.eps}
    if config.fused_optimizer:
        kwargs["fused"] = True
    if config.cuda_graphs and context.cuda:
        kwargs["capturable"] = True  # its step keeps its counters on the GPU: no host work to record
    try:
        return torch.optim.AdamW(groups, **kwargs)
    except (
        RuntimeError
    ) as exc:  # fused AdamW unavailable for this device/dtype: say so, do not fall back silently
        raise TrainError(
            f"fused AdamW is not available here ({exc}); use --set fused_optimizer=false"
        ) from exc


def make_schedule(optimizer: Any, config: TrainConfig, total_steps: int) -> Any:
    """Linear warm-up over ``warmup_ratio`` of the steps, then linear decay to 0, cosine, or constant."""
    import torch

    warmup = max(1, int(config.warmup_ratio * total_steps)) if config.warmup_ratio > 0 else 0

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if config.schedule == "constant":
            return 1.0
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        if config.schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * progress))
        return max(0.0, 1.0 - progress)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# -- evaluation ------------------------------------------------------------------------------------------


def evaluate(
    model: Any,
    split: Any,
    config: TrainConfig,
    context: parallel.RunContext,
    num_labels: int,
    *,
    sharded: bool = False,
    keep_predictions: bool = False,
) -> dict[str, Any]:
    """Accuracy and macro-F1 over the whole split, summed across ranks (each evaluates its share).

    ``keep_predictions``: also return ``predictions``, the predicted label of every example in the split's
    order (gathered from all ranks), so that two runs can be compared review by review
    (``metrics.paired_comparison``), and ``probabilities``, each example's softmax over the labels, so that
    runs (or a run and another model) can be averaged by their confidence rather than only voted."""
    import torch

    loader, sampler = make_loader(split, config, context, train=False)
    # The eval loader has no workers and a fixed order: its batches are exactly these index lists.
    index_batches = sampler.rank_batches(sampler.epoch)
    n = num_labels
    matrix = torch.zeros(n, n, dtype=torch.long, device=context.device)
    # Every example belongs to one rank; the others keep -1 there, so a MAX all-reduce gathers them.
    kept = len(split) if keep_predictions else 0
    predicted = torch.full((kept,), -1, dtype=torch.long, device=context.device)
    probabilities = torch.full((kept, n), -1.0, dtype=torch.float32, device=context.device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=context.device)
    was_training = model.training
    model.eval()
    batches = list(loader)
    if sharded:
        # Under FSDP every forward is collective (parameters are gathered): all ranks must run the same
        # number of batches, so a rank with fewer runs a two-token batch per missing one and discards it.
        count = torch.tensor([len(batches)], device=context.device)
        import torch.distributed as dist

        dist.all_reduce(count, op=dist.ReduceOp.MAX)
        extra = int(count.item()) - len(batches)
    else:
        extra = 0
    with torch.no_grad(), autocast(config, context):
        for _ in range(extra):
            model(torch.full((1, 2), 2, dtype=torch.long, device=context.device), None)  # [CLS] [SEP]
        for batch, indices in zip(batches, index_batches, strict=True):
            ids = batch["input_ids"].to(context.device, non_blocking=config.non_blocking)
            mask = batch["attention_mask"].to(context.device, non_blocking=config.non_blocking)
            labels = batch["labels"].to(context.device, non_blocking=config.non_blocking)
            full = batch["real_tokens"] == ids.numel()
            logits = model(ids, None if full else mask)
            loss_sum += torch.nn.functional.cross_entropy(logits.float(), labels, reduction="sum").double()
            preds = logits.argmax(dim=-1)
            matrix.index_put_((labels, preds), torch.ones_like(labels), accumulate=True)
            if keep_predictions:
                rows = torch.as_tensor(indices, device=context.device)
                predicted[rows] = preds
                probabilities[rows] = torch.softmax(logits.float(), dim=-1)
    if context.distributed:
        import torch.distributed as dist

        dist.all_reduce(matrix)
        dist.all_reduce(loss_sum)
        if keep_predictions:
            dist.all_reduce(predicted, op=dist.ReduceOp.MAX)
            dist.all_reduce(probabilities, op=dist.ReduceOp.MAX)
    model.train(was_training)
    result: dict[str, Any] = scores(matrix.tolist())
    result["loss"] = float(loss_sum.item()) / max(1, int(result["samples"]))
    if keep_predictions:
        result["predictions"] = predicted.tolist()
        # six decimals: about float32's own precision near 1, and a small file (1,736 reviews: ~40 kB)
        result["probabilities"] = [[round(p, 6) for p in row] for row in probabilities.tolist()]
    return result


def averaged(average: WeightAverage | None) -> Any:
    """The weight average swapped into the model (``ema_decay`` > 0), or nothing to do."""
    return average.swapped_in() if average is not None else contextlib.nullcontext()


def autocast(config: TrainConfig, context: parallel.RunContext, *, cache_enabled: bool = True) -> Any:
    """The recipe's autocast. ``cache_enabled=False`` for a captured step, as PyTorch's CUDA-graph notes
    ask: no cast weight is kept between the ops of a graph and the eager code around it."""
    import torch

    dtype = parallel.autocast_dtype(config)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=context.device.type, dtype=dtype, cache_enabled=cache_enabled)


# -- the loop --------------------------------------------------------------------------------------------


def train(config: TrainConfig, options: RunOptions) -> dict[str, Any] | None:
    """Run ``config`` on this process; rank 0 returns the result (``None`` on the other ranks)."""
    import torch
    from torch._dynamo.exc import BackendCompilerFailed

    config.validate()
    context = parallel.setup(config, options.env, want_cuda=options.device == "cuda")
    try:
        result = _train(config, options, context)
    except BackendCompilerFailed as exc:  # Inductor's InductorError among them
        raise TrainError(parallel.compile_failure(exc, cpp_wrapper=config.compile_cpp_wrapper)) from exc
    except torch.cuda.OutOfMemoryError as exc:
        accum = config.grad_accum * 2
        raise TrainError(
            f"CUDA out of memory with micro-batch {config.batch_size} x {config.max_len} tokens on "
            f"{context.device}: try --set batch_size={max(1, config.batch_size // 2)} --set grad_accum={accum} "
            f"(the same global batch), or a smaller preset ({exc.__class__.__name__})"
        ) from exc
    # Only after a clean finish: destroying the group while a peer is still in a collective can hang
    # (torchtitan#1342); a failed worker exits and torchrun stops the others.
    parallel.teardown(context)
    return result


def _train(config: TrainConfig, options: RunOptions, context: parallel.RunContext) -> dict[str, Any] | None:
    import torch

    from dgxperf.hw.specs import match_spec, peak_tflops
    from dgxperf.train.model import Encoder, param_count

    started_wall = time.perf_counter()
    config, world_note = for_world(config, context.world_size)  # torchrun started by hand: note it here
    if world_note and context.is_main:
        print(f"note: {world_note}", file=sys.stderr, flush=True)
    options.out_dir.mkdir(parents=True, exist_ok=True)
    ckpt_dir = options.out_dir / "checkpoints"
    torch.manual_seed(config.seed)  # identical initial weights on every rank
    prepared = prepare_data(config, options, context)
    task, model_config = prepared.task, prepared.model_config

    parallel.set_precision_flags(config)
    if config.memory_fraction is not None and context.cuda:
        torch.cuda.set_per_process_memory_fraction(config.memory_fraction, context.device)
    core = Encoder(model_config)
    init = None
    if config.init_from is not None and not options.resume:  # a resumed run's checkpoint holds its weights
        from dgxperf.train.pretrain import PretrainError, load_pretrained

        try:
            init = load_pretrained(core, Path(config.init_from))
        except PretrainError as exc:  # a folder that does not fit this run is bad input, not a failed run
            raise RecipeError(str(exc)) from None
        if config.reinit_layers > model_config.layers:
            raise RecipeError(
                f"reinit_layers={config.reinit_layers}: preset {config.preset} has {model_config.layers} layers"
            )
        core.reinit_top_blocks(config.reinit_layers, seed=config.seed)
        init["reinit_layers"] = config.reinit_layers
    core = core.to(context.device)
    model: Any = core
    if config.bf16_residual:
        parallel.bf16_residual(core)
    if config.activation_checkpointing:
        parallel.checkpoint_blocks(core)
    if config.compile and config.compile_scope == "blocks":
        parallel.compile_blocks(core, config)
    sharded = config.fsdp and context.distributed
    ddp = parallel.wrap_ddp(core, config, context) if context.distributed and not sharded else None
    if ddp is not None:
        model = ddp
    if sharded:
        parallel.shard_fsdp(core, config)
    if config.compile and config.compile_scope == "model":
        model = parallel.compile_model(model, config)

    loader, sampler = make_loader(task.train, config, context, train=True)
    micro_per_epoch = len(sampler)
    if micro_per_epoch == 0:
        raise TrainError(
            f"the training split ({len(task.train)} samples) gives no batch of {config.batch_size} "
            f"on each of {context.world_size} ranks: lower batch_size"
        )
    steps_per_epoch = math.ceil(micro_per_epoch / config.grad_accum)
    total_steps = config.max_steps or steps_per_epoch * config.epochs
    global_batch = config.batch_size * config.grad_accum * context.world_size
    lr = config.effective_lr(global_batch)
    optimizer = make_optimizer(core, config, lr, context)
    schedule = make_schedule(optimizer, config, total_steps)
    scaler = (
        torch.amp.GradScaler(
            context.device.type,
            init_scale=config.scaler_init_scale,
            growth_factor=config.scaler_growth_factor,
            backoff_factor=config.scaler_backoff_factor,
            growth_interval=config.scaler_growth_interval,
        )
        if config.precision == "fp16"
        else None
    )
    average = WeightAverage(core, config.ema_decay) if config.ema_decay else None

    step, epoch, consumed = 0, 0, 0
    history: list[dict[str, Any]] = []
    if options.resume:
        latest = checkpoint.latest(ckpt_dir)
        if latest is None:
            raise TrainError(f"--resume: no checkpoint in {ckpt_dir}")
        state, rng = checkpoint.load(latest, rank=context.rank)
        differ = config_differences(state.get("config"), config)
        if differ:
            raise TrainError(
                f"--resume: {latest} was written with another recipe ({', '.join(differ)} differ); "
                "use the same flags"
            )
        parallel.load_full_state(core, optimizer, state["model"], state["optimizer"], sharded=sharded)
        schedule.load_state_dict(state["schedule"])
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        sampler.load_state_dict(state["sampler"])
        if average is not None:
            average.load_state_dict(state["ema"])
        step, epoch, consumed = state["step"], state["epoch"], state["sampler"]["position"]
        history = state["history"]
        if rng is not None:
            checkpoint.set_rng_state(rng)
        _truncate_log(options.out_dir / "metrics.jsonl", step)
    else:
        torch.manual_seed(config.seed + 1000 * context.rank)  # dropout differs per rank, reproducibly
        if context.is_main:  # a new run in a used folder logs from an empty file, not after the old run's
            (options.out_dir / "metrics.jsonl").unlink(missing_ok=True)

    spec = match_spec(torch.cuda.get_device_name(context.device), None) if context.cuda else None
    peak = peak_tflops(spec, "bf16") if spec else None
    log = _MetricsLog(options.out_dir / "metrics.jsonl", context.is_main)
    model.train()
    warmed = None

    def model_rows(batch: int) -> int:  # what the model sees for a batch: R-Drop adds second-pass rows
        return rows_through_model(batch, config.rdrop_alpha, config.rdrop_share)

    graphed = (
        GraphedStep(model, optimizer, config, context, lambda: autocast(config, context, cache_enabled=False))
        if config.cuda_graphs
        else None
    )
    if config.warm_shapes or graphed is not None:
        shapes = union_across_ranks(
            run_shapes(sampler, task.train.lengths, config, range(epoch, config.epochs)), context
        )
        if graphed is not None:
            try:
                warmed = graphed.prepare(shapes)
            except CaptureError as exc:  # the process's CUDA state is not to be trusted after it: stop
                raise TrainError(
                    f"cuda_graphs=true: {exc}. Train without it: --set cuda_graphs=false"
                ) from exc
        else:
            warmed = warm_shapes(
                model,
                shapes,
                context,
                lambda: autocast(config, context),
                passes=passes_per_shape(config),
                rows=model_rows,
            )

    def save_checkpoint() -> None:
        model_state, optimizer_state = parallel.full_state(core, optimizer, sharded=sharded)
        state = {
            "schema": "dgxperf.checkpoint/1",
            "config": dataclasses.asdict(config),
            "model": model_state,
            "optimizer": optimizer_state,
            "schedule": schedule.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "ema": average.state_dict() if average is not None else None,
            "sampler": sampler.state_dict(consumed=consumed),
            "step": step,
            "epoch": epoch,
            "history": history,
        }
        checkpoint.save(
            ckpt_dir, step, state, rank=context.rank, barrier=context.barrier, keep=options.keep_checkpoints
        )

    windows: list[dict[str, Any]] = []  # every timed log window of this process, for the steady state
    profiler = (
        StepProfiler(options.out_dir / "profile", config.profile_steps, config.profile_after, context.cuda)
        if config.profile_steps and context.is_main
        else None
    )

    def forward(ids: Any, mask: Any) -> Any:
        with autocast(config, context):
            return model(ids, mask)

    def backward(ids: Any, mask: Any, labels: Any, *, group: int, last: bool) -> Any:
        """One micro-batch's forward and backward (the eager step); returns its unscaled loss."""
        skip_allreduce = context.distributed and config.no_sync and not last
        if sharded:
            core.set_requires_gradient_sync(not skip_allreduce)
        sync_ctx = ddp.no_sync() if skip_allreduce and ddp is not None else contextlib.nullcontext()
        with sync_ctx:
            objective, loss = classification_loss(
                forward,
                ids,
                mask,
                labels,
                label_smoothing=config.label_smoothing,
                rdrop_alpha=config.rdrop_alpha,
                rdrop_share=config.rdrop_share,
            )
            scaled = objective / group
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
        return loss

    def optimizer_step() -> None:
        """The eager step after a group's backward passes: unscale, clip, step, drop the gradients."""
        if scaler is not None:
            scaler.unscale_(optimizer)
        if config.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(core.parameters(), config.clip_grad_norm)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    # the last epoch's dev answers: the final weights', so that dev_predictions.json and the n-gram average's
    # weight need no second pass over dev (a run resumed after its last epoch has none: dev is run again)
    last_dev: dict[str, Any] | None = None
    while epoch < config.epochs and step < total_steps:
        sampler.set_epoch(epoch)
        meter = ThroughputMeter(
            context.sync,
            peak_tflops=peak,
            ceiling_tflops=options.gemm_ceiling_tflops,
            world=context.world_size,
            reduce=context.sum_across_ranks,
        )
        if context.cuda:
            torch.cuda.reset_peak_memory_stats(context.device)
        loss_sum = torch.zeros((), device=context.device)
        nonfinite = torch.zeros((), device=context.device, dtype=torch.long)
        window_losses = 0
        graphs_at_epoch = graphs_at_window = parallel.compiled_graphs()
        micro_in_epoch = consumed
        resumed_at = consumed
        epoch_started = time.perf_counter()
        batches: Iterator[Any] = iter(loader)
        while micro_in_epoch < micro_per_epoch and step < total_steps:
            group = min(config.grad_accum, micro_per_epoch - micro_in_epoch)
            for index in range(group):
                batch = next(batches)
                ids = batch["input_ids"].to(context.device, non_blocking=config.non_blocking)
                labels = batch["labels"].to(context.device, non_blocking=config.non_blocking)
                full = batch["real_tokens"] == ids.numel()
                mask = (
                    None
                    if full
                    else batch["attention_mask"].to(context.device, non_blocking=config.non_blocking)
                )
                if graphed is not None:  # forward, backward and the optimizer step, replayed
                    loss = graphed(ids, mask, labels)
                else:
                    loss = backward(ids, mask, labels, group=group, last=index == group - 1)
                loss_sum += loss.detach()
                nonfinite += (~torch.isfinite(loss.detach())).long()
                window_losses += 1
                lengths = batch["attention_mask"].sum(dim=1).tolist()  # the CPU copy: no device sync
                flops = flops_for_batch(model_config, lengths, ids.shape[1])
                meter.add(
                    samples=len(lengths),
                    real_tokens=flops.real_tokens,
                    padded_tokens=flops.padded_tokens,
                    # R-Drop runs rows twice: the GPU's work, which MFU measures, grows with them
                    useful_flops=flops.useful * model_rows(len(lengths)) / len(lengths),
                )
                micro_in_epoch += 1
            if graphed is None:
                optimizer_step()
            if average is not None:
                average.update()
            schedule.step()
            if graphed is not None:
                graphed.schedule_stepped()
            step += 1
            consumed = micro_in_epoch
            meter.step()
            if profiler is not None:
                profiler.step()
            every = config.checkpoint_every
            checkpoint_due = bool(options.checkpoints and every and step % every == 0)
            # A checkpoint is written only right after the finiteness check of a log point: never a NaN model.
            if step % config.log_every == 0 or micro_in_epoch == micro_per_epoch or checkpoint_due:
                rates = meter.lap()
                if context.distributed:
                    import torch.distributed as dist

                    dist.all_reduce(nonfinite)  # every rank must take the same decision, or the others hang
                bad = int(nonfinite.item())
                mean_loss = float(loss_sum.item()) / max(1, window_losses)
                if bad and (scaler is None or bad == window_losses * context.world_size):
                    last_good = checkpoint.latest(ckpt_dir)
                    raise TrainError(
                        f"the loss became NaN/inf at step {step} (epoch {epoch + 1}); "
                        f"lower lr (now {float(schedule.get_last_lr()[0]):.3g}) or use bf16/fp16 with the grad scaler. "
                        + (
                            f"Last good checkpoint: {last_good} (resume with --resume)."
                            if last_good
                            else "No checkpoint was written yet."
                        )
                    )
                record = {
                    "type": "step",
                    "step": step,
                    "total_steps": total_steps,  # validate's progress line shows "step N/total" from it
                    "epoch": epoch + 1,
                    "loss": mean_loss,
                    "lr": float(schedule.get_last_lr()[0]),  # a tensor under cuda_graphs
                    **{k: v for k, v in rates.items() if k != "steps"},
                }
                if scaler is not None:
                    record["loss_scale"] = float(scaler.get_scale())
                    record["skipped_steps"] = _skipped_steps(optimizer, step)
                if config.compile:  # a window that compiled is slow for that reason: say so next to its rate
                    graphs_now = parallel.compiled_graphs()
                    record["graphs_compiled"] = graphs_now - graphs_at_window
                    graphs_at_window = graphs_now
                log.write(record)
                windows.append(rates | {"step": step})
                if options.on_log and context.is_main:
                    options.on_log(record | {"epochs": config.epochs})
                loss_sum.zero_()
                nonfinite.zero_()
                window_losses = 0
                meter.resume()
            if checkpoint_due and micro_in_epoch < micro_per_epoch:
                meter.pause()
                save_checkpoint()
                meter.resume()
        train_seconds = time.perf_counter() - epoch_started
        graphs_in_epoch = (
            parallel.compiled_graphs() - graphs_at_epoch
        )  # before evaluation, which compiles its own
        totals = meter.totals()
        with averaged(average):
            dev = evaluate(
                model,
                task.dev,
                config,
                context,
                model_config.num_labels,
                sharded=sharded,
                keep_predictions=True,
            )
        last_dev = {key: dev.pop(key) for key in ("predictions", "probabilities")}
        # The trained weights too: the average's effect measured on the very run that trained them, with
        # none of the noise of a second seed (two fine-tune seeds differ by up to 1.8 points).
        dev_unaveraged = (
            evaluate(model, task.dev, config, context, model_config.num_labels, sharded=sharded)
            if average is not None
            else None
        )
        epoch_peak = torch.cuda.max_memory_allocated(context.device) if context.cuda else None
        if graphed is not None:
            epoch_peak = graphed.epoch_peak(epoch_peak)
        epoch_record = {
            "type": "epoch",
            "epoch": epoch + 1,
            "step": step,
            "epoch_seconds": train_seconds,
            "timed_seconds": totals["seconds"],
            "samples_per_s": totals["samples_per_s"],
            "real_tokens_per_s": totals["real_tokens_per_s"],
            "padding_share": totals["padding_share"],
            "model_tflops": totals["model_tflops"],
            "mfu": totals["mfu"],
            "mfu_vs_measured_gemm": totals["mfu_vs_measured_gemm"],
            "peak_memory_bytes": epoch_peak,
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(context.device) if context.cuda else None,
            "dev_accuracy": dev["accuracy"],
            "dev_macro_f1": dev["macro_f1"],
            "dev_loss": dev["loss"],
            "resumed_mid_epoch": resumed_at > 0,
            **({"graphs_compiled": graphs_in_epoch} if config.compile else {}),
            **(
                {
                    "dev_accuracy_unaveraged": dev_unaveraged["accuracy"],
                    "dev_loss_unaveraged": dev_unaveraged["loss"],
                }
                if dev_unaveraged is not None
                else {}
            ),
        }
        history.append(epoch_record)
        log.write(epoch_record)
        if options.on_log and context.is_main:
            options.on_log(epoch_record | {"total_steps": total_steps, "epochs": config.epochs})
        epoch += 1
        consumed = 0
        if options.checkpoints:
            save_checkpoint()

    profile = profiler.finish() if profiler is not None else None
    with averaged(average):
        test = evaluate(
            model, task.test, config, context, model_config.num_labels, sharded=sharded, keep_predictions=True
        )
        dev_final = last_dev or evaluate(
            model, task.dev, config, context, model_config.num_labels, sharded=sharded, keep_predictions=True
        )
    predictions = test.pop("predictions")
    probabilities = test.pop("probabilities")
    weight_average = None
    if average is not None:
        unaveraged = evaluate(
            model, task.test, config, context, model_config.num_labels, sharded=sharded, keep_predictions=True
        )
        weight_average = {
            "decay": config.ema_decay,
            "updates": average.updates,
            "test_unaveraged": {
                k: v for k, v in unaveraged.items() if k not in ("predictions", "probabilities")
            },
            # averaged (a) against trained (b), review by review on the same test split
            "paired": paired_comparison(
                predictions, unaveraged["predictions"], [int(y) for y in task.test.labels]
            ),
        }
    if context.is_main:
        write_predictions(options.out_dir / PREDICTIONS_FILE, task, predictions, probabilities)
        write_predictions(
            options.out_dir / DEV_PREDICTIONS_FILE,
            task,
            dev_final["predictions"],
            dev_final["probabilities"],
            split="dev",
        )
    log.write(
        {
            "type": "test",
            "step": step,
            "accuracy": test["accuracy"],
            "macro_f1": test["macro_f1"],
            "loss": test["loss"],
        }
    )
    if not context.is_main:
        return None
    fusion = None
    # the synthetic task's labels are random: nothing for an n-gram model to find
    if config.ngram_fusion and config.task != "synthetic":
        if task.train.tokens <= ngram.MAX_TRAIN_TOKENS:
            fusion = ngram.report(task, dev_final["probabilities"], probabilities, predictions)
        else:
            print(
                f"no n-gram model: the training split has {task.train.tokens:,} tokens, over the "
                f"{ngram.MAX_TRAIN_TOKENS:,} it is fitted in memory for (--set ngram_fusion=false says so up front)",
                file=sys.stderr,
            )
    steady = [h for h in history if not h["resumed_mid_epoch"]]
    final: dict[str, Any] = (steady or history)[-1] if history else {}
    peaks = [h["peak_memory_bytes"] for h in history if h["peak_memory_bytes"] is not None]
    result = {
        "schema": TRAIN_SCHEMA,
        "tool_version": __version__,
        "recipe": config.recipe,
        "config": dataclasses.asdict(config),
        "recipe_changes": changes_from_recipe(config),
        "model": model_config.to_json()
        | {
            "params": param_count(model_config),
            "params_non_embedding": param_count(model_config, embeddings=False),
        },
        "data": prepared.data_info,
        "init": init,
        "world": {
            "world_size": context.world_size,
            "backend": context.backend,
            "device": str(context.device),
            "gpu": torch.cuda.get_device_name(context.device) if context.cuda else None,
            "peak_tflops_bf16": peak,
            "measured_gemm_tflops": options.gemm_ceiling_tflops,
        },
        "global_batch": global_batch,
        "dataloader_workers": effective_workers(config, context),
        "lr": lr,
        "steps": step,
        "shape_warmup": warmed,
        "cuda_graphs": graphed.summary() if graphed is not None else None,
        "weight_average": weight_average,
        "ngram_fusion": fusion,
        "profile": profile,
        "pace_change": step_pace_change(windows),
        "epochs": history,
        "test": test,
        "summary": {
            "epoch_seconds": final.get("epoch_seconds"),
            "samples_per_s": final.get("samples_per_s"),
            "real_tokens_per_s": final.get("real_tokens_per_s"),
            "mfu": final.get("mfu"),
            "mfu_vs_measured_gemm": final.get("mfu_vs_measured_gemm"),
            "peak_memory_bytes": max(peaks) if peaks else None,  # None on a CPU, as in each epoch
            "dev_accuracy": final.get("dev_accuracy"),
            "test_accuracy": test["accuracy"],
            "test_accuracy_ci95": wilson_interval(test["accuracy"], int(test["samples"])),
            "test_macro_f1": test["macro_f1"],
            "wall_seconds": time.perf_counter() - started_wall,
            "skipped_steps": _skipped_steps(optimizer, step) if scaler is not None else 0,
            **steady_state(windows),
        },
        "out_dir": str(options.out_dir),
        "test_predictions": PREDICTIONS_FILE,
    }
    (options.out_dir / "result.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def steady_state(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates over the logged windows after the first (which holds compilation and warm-up): the work of
    those windows over their time, the throughput a long run settles at, next to the whole-epoch figures
    that include that warm-up. Not a median of the windows' rates: with length-bucketed batches a window's
    samples/s follows its batches' lengths, and a median picks whichever window lands in the middle, so two
    runs of the same batches were compared on different windows (an H100 ablation put CUDA graphs at
    -15.6% by medians and -11.1% by the windows' totals, 2026-12-06-h100-graphs-ablation)."""
    usable = windows[1:] if len(windows) > 1 else windows
    timed = [w for w in usable if (w.get("seconds") or 0) > 0]
    if not timed:
        return {}
    seconds = float(sum(w["seconds"] for w in timed))

    def overall(key: str) -> float | None:
        if any(w.get(key) is None for w in timed):
            return None
        return float(sum(w[key] * w["seconds"] for w in timed)) / seconds  # a rate times its time: the work

    return {
        "steady_samples_per_s": overall("samples_per_s"),
        "steady_real_tokens_per_s": overall("real_tokens_per_s"),
        "steady_mfu": overall("mfu"),
        "steady_windows": len(timed),
    }


def _skipped_steps(optimizer: Any, attempted: int) -> int:
    """Optimizer steps the grad scaler skipped (inf/NaN gradients): AdamW's own step counter lags behind."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state.get(param)
            if state and "step" in state:
                return max(0, attempted - int(float(state["step"])))
    return attempted


class _MetricsLog:
    """metrics.jsonl: one JSON object per line, flushed at once (a crash loses no logged step)."""

    def __init__(self, path: Path, enabled: bool) -> None:
        self.path = path
        self.enabled = enabled

    def write(self, record: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        with self.path.open("a") as handle:
            handle.write(json.dumps(record, default=str) + "\n")


def _truncate_log(path: Path, step: int) -> None:
    """On resume, drop the records written after the checkpoint (the resumed run writes them again)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("step", 0) <= step and record.get("type") != "test":
            kept.append(line)
    path.write_text("".join(k + "\n" for k in kept))
