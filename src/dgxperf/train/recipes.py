"""Training recipes: named, typed presets a user can print, diff and override field by field.

Three recipes train the same model on the same data with the same learning hyper-parameters, so their
speed and accuracy compare fairly (guide A §7's table). What makes a from-scratch encoder learn here is one of
those shared choices, not part of any recipe's speed: pre-LN blocks, a self-pretrained encoder (``init_from``)
and, since 2026-12-06, R-Drop (``rdrop_alpha=4``, train/objective.py), which doubles the rows a step:

- ``baseline``: plain PyTorch. fp32 with TF32 off, every batch padded to max_len, a DataLoader without
  workers or pinning, default DDP, no compile.
- ``guide``: exactly guide A's recipe (§4.1, §4.2, §5.2, §6.1): AMP fp16 with
  GradScaler(init_scale=2**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000), unscale then
  clip_grad_norm 1.0, LayerNorm kept in FP32, DDP(gradient_as_bucket_view=True, static_graph=True), NCCL
  init with env:// and a timeout, gradient accumulation, DataLoader workers + pin_memory + non_blocking
  copies, set_per_process_memory_fraction(0.9); batches padded to max_len as CLUE baseline scripts do.
- ``optimized``: what measurably helps on Hopper, each piece a field that can be switched off: bf16
  autocast (no scaler), length-bucketed dynamic padding, fused AdamW, torch.compile, a larger batch
  with the learning rate scaled to it, no_sync during accumulation, every batch shape of the run
  compiled before the clock starts (``warm_shapes``: a new shape mid-epoch recompiles, seconds of stall),
  and the whole step recorded as one CUDA graph per batch shape and replayed (``cuda_graphs``: one launch a
  step instead of ~1,400; a field the user sets that rules graphs out, such as ``grad_accum=4``, turns them
  off for that run instead of being refused).

Every field can be overridden from the command line (``--set lr=3e-4``) or a YAML file; ``dgxperf train
--show-recipe NAME`` prints one, ``--diff A --diff B`` shows what differs.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
PADDINGS = ("max", "dynamic")
SCHEDULES = ("linear", "cosine", "constant")
COMM_HOOKS = ("none", "fp16", "bf16", "powersgd")
TASKS = ("chnsenticorp", "files", "synthetic")
# The names of dgxperf.train.model.PRESETS, kept here so that a recipe is checked without importing torch.
MODEL_PRESETS = ("tiny", "base", "large")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# torch.compile modes that replay CUDA graphs (CUDAGraph Trees): a function's first call per shape runs
# eagerly as a warm-up, the second records the graph and the third is the first replay.
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


class RecipeError(Exception):
    """A recipe name, field or value the user got wrong."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs, apart from where it runs (GPUs, output folder)."""

    recipe: str = "custom"
    # -- data
    task: str = "chnsenticorp"
    data_dir: str | None = None
    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    tokenizer: str = "char"
    max_len: int = 128
    truncation: str = "head_tail"
    padding: str = "max"
    pad_multiple: int = 8
    bucketing: bool = False
    synthetic_samples: int = 8192
    train_samples: int | None = None
    data_seed: int = 1234
    # -- model
    preset: str = "large"
    pre_ln: bool = True
    dropout: float = 0.1
    attn_dropout: float = 0.1
    ln_fp32: bool = False
    pooling: str = "cls"
    init_from: str | None = None  # a `dgxperf pretrain` folder: start from its encoder and tokenizer
    reinit_layers: int = 0  # with init_from: fresh weights for the top N blocks (model.reinit_top_blocks)
    # -- precision
    precision: str = "fp32"
    # with precision=bf16: the residual stream between the blocks (and its gradient) in bf16 instead of fp32,
    # halving what the memory-bound dropout, residual-add and LayerNorm fusions move (parallel.bf16_residual)
    bf16_residual: bool = False
    scaler_init_scale: float = 2.0**16
    scaler_growth_factor: float = 2.0
    scaler_backoff_factor: float = 0.5
    scaler_growth_interval: int = 2000
    # -- optimisation (per GPU micro-batch; the global batch is batch_size * grad_accum * GPUs)
    epochs: int = 3
    max_steps: int | None = None
    batch_size: int = 64
    grad_accum: int = 1
    lr: float = 5e-5
    lr_reference_batch: int | None = None
    lr_scaling: str = "linear"  # how lr follows the global batch from lr_reference_batch: linear or sqrt
    lr_layer_decay: float = 1.0  # < 1: each layer's lr is the one above it times this (head at lr)
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-6
    warmup_ratio: float = 0.1
    schedule: str = "linear"
    clip_grad_norm: float | None = 1.0
    fused_optimizer: bool = False
    label_smoothing: float = 0.0
    rdrop_alpha: float = 0.0  # > 0: R-Drop, each row twice under dropout with a KL term (train/objective.py)
    rdrop_share: float = 1.0  # with rdrop_alpha: the share of each batch's rows that go through twice
    ema_decay: float = 0.0  # > 0: dev and test score an average of the weights (train/ema.py)
    # a token 1-3-gram regression fitted beside the encoder and averaged with it, reported apart from the
    # encoder's own test score (train/ngram.py)
    ngram_fusion: bool = True
    # -- input pipeline
    num_workers: int = 0
    pin_memory: bool = False
    non_blocking: bool = False
    # -- distributed
    gradient_as_bucket_view: bool = False
    static_graph: bool = False
    bucket_cap_mb: int = 25
    comm_hook: str = "none"
    powersgd_rank: int = 1
    no_sync: bool = False
    fsdp: bool = False
    init_timeout_s: int = 1800
    # -- speed and memory
    compile: bool = False
    compile_scope: str = "blocks"
    compile_mode: str | None = None
    # Inductor's C++ wrapper: the compiled graph's kernel calls run from generated C++, not Python
    compile_cpp_wrapper: bool = False
    cuda_graphs: bool = False  # the whole step recorded once per batch shape and replayed (train/graphs.py)
    # with cuda_graphs: "fixed" gradients, allocated once and zeroed then added into inside each graph, or
    # "pool": written afresh by each step's backward in the graphs' pool (no zeroing, no adds; no effect
    # without cuda_graphs)
    graph_grads: str = "fixed"
    activation_checkpointing: bool = False
    warm_shapes: bool = False  # one pass per batch shape before the clock starts (train/warmup.py)
    memory_fraction: float | None = None
    # -- reliability and output
    seed: int = 42
    checkpoint_every: int | None = None
    log_every: int = 20
    eval_batch_size: int = 256
    # -- profiling (train/trace.py): torch.profiler over profile_steps optimizer steps after profile_after
    profile_steps: int = 0
    profile_after: int = 20

    def effective_lr(self, global_batch: int) -> float:
        """``lr`` scaled to the global batch when ``lr_reference_batch`` is set: linearly (Goyal et al., 2017,
        for SGD) or by the square root (Malladi et al., 2022, the rule derived for Adam). On the H200 the
        linear rule's 2e-4 at batch 256 held the fine-tune loss above ln 2 over its first 20 steps and
        ended at 84.74 / 84.56% test against 85.54% at batch 128 from the same encoder
        (``2026-12-04-h200-encoder-i``)."""
        if not self.lr_reference_batch:
            return self.lr
        ratio = global_batch / self.lr_reference_batch
        return self.lr * (ratio if self.lr_scaling == "linear" else ratio**0.5)

    def validate(self) -> None:
        def choose(field: str, value: object, allowed: tuple[str, ...]) -> None:
            if value not in allowed:
                raise RecipeError(f"{field}={value!r}: choose from {', '.join(allowed)}")

        choose("preset", self.preset, MODEL_PRESETS)
        choose("precision", self.precision, PRECISIONS)
        choose("padding", self.padding, PADDINGS)
        choose("schedule", self.schedule, SCHEDULES)
        choose("comm_hook", self.comm_hook, COMM_HOOKS)
        choose("task", self.task, TASKS)
        choose("tokenizer", self.tokenizer, ("char", "wordpiece"))
        choose("compile_scope", self.compile_scope, ("blocks", "model"))
        choose("graph_grads", self.graph_grads, ("fixed", "pool"))
        if self.compile_mode is not None:
            choose("compile_mode", self.compile_mode, COMPILE_MODES)
        choose("lr_scaling", self.lr_scaling, ("linear", "sqrt"))
        choose("truncation", self.truncation, ("head", "head_tail"))
        choose("pooling", self.pooling, ("cls", "mean"))
        positive = (
            "max_len",
            "batch_size",
            "grad_accum",
            "epochs",
            "eval_batch_size",
            "log_every",
            "pad_multiple",
        )
        for field in positive:
            if getattr(self, field) <= 0:
                raise RecipeError(f"{field} must be positive, not {getattr(self, field)}")
        if self.profile_steps < 0 or self.profile_after < 0:
            raise RecipeError(
                "profile_steps and profile_after must be 0 or more (profile_steps=0: no profiling)"
            )
        if self.max_len < 4:
            raise RecipeError("max_len must be at least 4 ([CLS], [SEP] and some text)")
        if not 0 < self.lr < 1:
            raise RecipeError(f"lr={self.lr} is not a learning rate (0 < lr < 1)")
        self._validate_ranges()
        if self.train_samples is not None and self.train_samples < 8:
            raise RecipeError("train_samples must be at least 8 (or none for the whole split)")
        if self.max_steps is not None and self.max_steps <= 0:
            raise RecipeError("max_steps must be positive")
        if self.bucketing and self.padding == "max":
            raise RecipeError(
                "bucketing needs padding=dynamic (with padding=max every batch is max_len long)"
            )
        if self.bf16_residual and self.precision != "bf16":
            raise RecipeError(
                f"bf16_residual=true keeps the residual stream in bf16: set precision=bf16 (not {self.precision})"
            )
        if self.bf16_residual and not self.pre_ln:
            raise RecipeError(
                "bf16_residual=true needs pre_ln=true: post-LN normalises after every residual add, and "
                "autocast's LayerNorm returns fp32, so the stream would be fp32 again after the first block"
            )
        if self.fsdp and self.precision == "fp16":
            raise RecipeError(
                "fsdp=true works with bf16, tf32 or fp32; the fp16 grad scaler is DDP-only here"
            )
        if self.fsdp and self.comm_hook != "none":
            raise RecipeError("comm_hook applies to DDP; FSDP reduces gradients itself (set fsdp=false)")
        if self.compile and self.compile_mode in CUDA_GRAPH_MODES and self.compile_scope == "blocks":
            # Measured on the H200 with torch 2.11 (2026-12-04-h200-encoder-j): every block calls the one
            # compiled graph in turn, and CUDAGraph Trees overwrite a block's output while the next block
            # still needs it. The run died on its first steps; PyTorch issue #152887.
            raise RecipeError(
                f"compile_mode={self.compile_mode} replays CUDA graphs, which fail with compile_scope=blocks: "
                "each Transformer block calls the same compiled graph in turn, and the graph overwrites one "
                "block's output while the next still needs it (H200, torch 2.11: 'accessing tensor output "
                "of CUDAGraphs that has been overwritten'; PyTorch issue #152887). Set compile_scope=model "
                "(one graph for the whole model: minutes of compiling) or "
                "compile_mode=max-autotune-no-cudagraphs"
            )
        if self.ema_decay and self.fsdp:
            raise RecipeError("ema_decay averages whole weights; FSDP shards them (set fsdp=false)")
        if self.reinit_layers and self.init_from is None:
            raise RecipeError(
                "reinit_layers re-initialises the top layers of a pretrained encoder: set init_from too"
            )
        if self.compile_cpp_wrapper and not self.compile:
            raise RecipeError(
                "compile_cpp_wrapper=true changes how torch.compile's code runs: set compile=true"
            )
        self._validate_cuda_graphs()
        if self.task == "files" and not self.train_file:
            raise RecipeError("task=files needs train_file (and optionally dev_file, test_file)")
        if not 0 <= self.dropout < 1 or not 0 <= self.attn_dropout < 1:
            raise RecipeError("dropout and attn_dropout must be in [0, 1)")
        if self.init_from is not None and self.task == "synthetic":
            raise RecipeError(
                "init_from needs real text: a pretrained vocabulary means nothing to task=synthetic"
            )

    def _validate_ranges(self) -> None:
        """Each numeric field's range, refused with the field's name before anything runs rather than deep
        inside PyTorch (label_smoothing=2 used to end as "dgxperf bug: RuntimeError" after the data was
        prepared). Checked before the combinations of fields, so a bad number is named first."""
        ranges: tuple[tuple[str, bool, str], ...] = (
            ("lr_layer_decay", 0 < self.lr_layer_decay <= 1, "in (0, 1] (1: one lr for all layers)"),
            ("warmup_ratio", 0 <= self.warmup_ratio < 1, "in [0, 1)"),
            (
                "memory_fraction",
                self.memory_fraction is None or 0 < self.memory_fraction <= 1,
                "in (0, 1]",
            ),
            ("ema_decay", 0 <= self.ema_decay < 1, "in [0, 1) (0: no weight average)"),
            ("reinit_layers", self.reinit_layers >= 0, "0 or more (0: keep every layer)"),
            ("label_smoothing", 0 <= self.label_smoothing < 1, "in [0, 1) (0: none)"),
            ("rdrop_alpha", self.rdrop_alpha >= 0, "0 or more (0: no R-Drop)"),
            ("rdrop_share", 0 < self.rdrop_share <= 1, "in (0, 1] (1: every row twice)"),
            ("weight_decay", self.weight_decay >= 0, "0 or more"),
            ("beta1", 0 <= self.beta1 < 1, "in [0, 1)"),
            ("beta2", 0 <= self.beta2 < 1, "in [0, 1)"),
            ("eps", self.eps > 0, "positive"),
            (
                "clip_grad_norm",
                self.clip_grad_norm is None or self.clip_grad_norm >= 0,
                "0 or more (0: no clipping)",
            ),
            ("scaler_init_scale", self.scaler_init_scale > 0, "positive"),
            ("scaler_growth_factor", self.scaler_growth_factor > 1, "above 1"),
            ("scaler_backoff_factor", 0 < self.scaler_backoff_factor < 1, "in (0, 1)"),
            ("scaler_growth_interval", self.scaler_growth_interval > 0, "positive"),
            ("bucket_cap_mb", self.bucket_cap_mb > 0, "positive"),
            ("powersgd_rank", self.powersgd_rank > 0, "positive"),
            ("init_timeout_s", self.init_timeout_s > 0, "positive"),
            ("num_workers", self.num_workers >= 0, "0 or more (0: load in the training process)"),
            (
                "checkpoint_every",
                (self.checkpoint_every or 0) >= 0,
                "0 or more steps (0: only at epoch ends)",
            ),
            ("synthetic_samples", self.synthetic_samples > 0, "positive"),
            (
                "lr_reference_batch",
                self.lr_reference_batch is None or self.lr_reference_batch > 0,
                "positive",
            ),
        )
        for field, valid, rule in ranges:
            if not valid:
                raise RecipeError(f"{field}={getattr(self, field)} must be {rule}")

    def _validate_cuda_graphs(self) -> None:
        conflicts = self.graph_conflicts() if self.cuda_graphs else []
        if conflicts:
            reasons = "; ".join(f"{setting}: {why}" for setting, why in conflicts)
            raise RecipeError("cuda_graphs=true records one whole step; it cannot with " + reasons)

    def graph_conflicts(self) -> list[tuple[str, str]]:
        """What in this recipe a replayed step cannot do (train/graphs.py): (the setting, why and what to
        change instead) for each."""
        refused = [
            (
                self.grad_accum > 1,
                f"grad_accum={self.grad_accum}",
                "one micro-batch a step (set grad_accum=1)",
            ),
            (
                self.precision == "fp16",
                "precision=fp16",
                "its grad scaler reads found_inf on the host (use bf16)",
            ),
            (self.fsdp, "fsdp=true", "the graph holds whole gradients (set fsdp=false)"),
            (
                self.activation_checkpointing,
                "activation_checkpointing=true",
                "it saves RNG states on the host (set it to false)",
            ),
            (
                self.compile and self.compile_mode in CUDA_GRAPH_MODES,
                f"compile_mode={self.compile_mode}",
                "torch.compile's own CUDA graphs (leave compile_mode unset)",
            ),
        ]
        return [(setting, why) for bad, setting, why in refused if bad]


def for_world(config: TrainConfig, world_size: int) -> tuple[TrainConfig, str | None]:
    """The recipe as ``world_size`` processes run it, and a note when that differs from ``config``.

    A replayed CUDA graph holds one process's whole step; DDP's all-reduce is not recorded into it here, so
    with several processes ``cuda_graphs=true`` falls back to the eager step (the recorded config says so)
    rather than refusing: a recipe that turns graphs on still runs on a whole node.
    """
    if config.cuda_graphs and world_size > 1:
        note = (
            f"cuda_graphs=true records one process's whole step; the {world_size} processes run the eager "
            "step instead (the result's config says cuda_graphs=false)"
        )
        return dataclasses.replace(config, cuda_graphs=False), note
    return config, None


# R-Drop in all three (2026-12-06-h100-rdrop: +0.46 points over five seed pairs of `optimized`, every pair up;
# free on `guide`'s host-bound step, 1.77x `optimized`'s epoch): a choice about learning, shared as pre-LN is
BASELINE = TrainConfig(recipe="baseline", rdrop_alpha=4.0)

GUIDE = dataclasses.replace(
    BASELINE,
    recipe="guide",
    precision="fp16",
    ln_fp32=True,
    gradient_as_bucket_view=True,
    static_graph=True,
    grad_accum=2,
    batch_size=32,
    num_workers=4,
    pin_memory=True,
    non_blocking=True,
    memory_fraction=0.9,
)

OPTIMIZED = dataclasses.replace(
    BASELINE,
    recipe="optimized",
    precision="bf16",
    padding="dynamic",
    bucketing=True,
    fused_optimizer=True,
    compile=True,
    batch_size=128,
    lr_reference_batch=64,
    num_workers=2,
    pin_memory=True,
    non_blocking=True,
    no_sync=True,
    gradient_as_bucket_view=True,
    warm_shapes=True,
    cuda_graphs=True,
    # the same losses and test answers as fixed gradients, 2.2-2.4% more samples/s and 1.2 GB less at peak on
    # an H100 (docs/benchmarks/2026-12-06-h100-rdrop-share-pairs)
    graph_grads="pool",
    # +1.6 to +2.9% samples/s an epoch (median +2.4%), 1.64 GB less at peak, accuracy +0.18 points over five
    # seed pairs, none lower, on an H100 (docs/benchmarks/2026-12-07-h100-bf16-residual)
    bf16_residual=True,
)

RECIPES: dict[str, TrainConfig] = {"baseline": BASELINE, "guide": GUIDE, "optimized": OPTIMIZED}


def get_recipe(name: str) -> TrainConfig:
    try:
        return RECIPES[name]
    except KeyError:
        raise RecipeError(f"unknown recipe {name!r}; choose from {', '.join(RECIPES)}") from None


def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(TrainConfig)


def parse_value(field: str, text: str) -> Any:
    """Turn ``--set field=text`` into the field's type (bool, int, float, str, or None for optionals)."""
    types_ = _field_types()
    if field not in types_:
        close = [f for f in types_ if field.replace("-", "_") == f or field in f]
        hint = f" (did you mean {', '.join(close[:3])}?)" if close else ""
        raise RecipeError(f"unknown recipe field {field!r}{hint}; `--show-recipe` lists them")
    kind = types_[field]
    optional = isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind)
    if optional:
        if text.lower() in ("none", "null", ""):
            return None
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise ValueError(text)
            return lowered in ("true", "1", "yes", "on")
        if kind is int:
            try:
                return int(text)
            except ValueError:
                number = float(text)  # "1e3" is a fine way to write 1000; "2.5" is not an int
                if not number.is_integer():
                    raise
                return int(number)
        if kind is float:
            value = float(text)
            if math.isnan(value):
                raise ValueError(text)
            return value
        return str(text)
    except ValueError:
        name = getattr(kind, "__name__", str(kind))
        raise RecipeError(f"{field}={text!r} is not a valid {name}") from None


def apply_overrides(config: TrainConfig, overrides: Mapping[str, Any]) -> TrainConfig:
    """Apply ``{field: value}`` (values already typed, or strings from the command line) and validate."""
    typed: dict[str, Any] = {}
    for key, value in overrides.items():
        field = key.replace("-", "_")
        typed[field] = parse_value(field, value) if isinstance(value, str) else _check_type(field, value)
    updated = dataclasses.replace(config, **typed)
    updated.validate()
    return updated


def _check_type(field: str, value: Any) -> Any:
    # YAML gives typed values; run them through the same parser so a typo'd type is caught the same way.
    if value is None:
        return parse_value(field, "none")
    return parse_value(field, str(value).lower() if isinstance(value, bool) else str(value))


def load_yaml(path: Path) -> dict[str, Any]:
    try:
        import yaml
    except ImportError:
        raise RecipeError("reading a recipe file needs PyYAML: pip install pyyaml") from None
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise RecipeError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise RecipeError(f"{path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: expected a mapping of recipe fields, got {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def build_config(
    recipe: str, *, yaml_file: Path | None = None, overrides: Mapping[str, str] | None = None
) -> TrainConfig:
    """The named recipe, then the YAML file's fields (which may name a ``recipe`` to start from), then ``--set``."""
    return build_config_asked(recipe, yaml_file=yaml_file, overrides=overrides)[0]


def build_config_asked(
    recipe: str, *, yaml_file: Path | None = None, overrides: Mapping[str, str] | None = None
) -> tuple[TrainConfig, frozenset[str]]:
    """``build_config``'s config, and the fields the YAML file and ``--set`` asked for (the notes about
    what a recipe gave up depend on whether the user asked for it)."""
    file_fields = load_yaml(yaml_file) if yaml_file else {}
    base = get_recipe(str(file_fields.pop("recipe", recipe)))
    fields = {key.replace("-", "_"): value for key, value in file_fields.items()}
    fields.update({key.replace("-", "_"): value for key, value in (overrides or {}).items()})
    asked = frozenset(fields)
    # The recipe's own graphs and bf16 residual stream give way to a field the user asked for that rules them
    # out (grad_accum=4 or fsdp=true for the graphs, precision=fp16 or pre_ln=false for the stream): that run
    # takes the eager step or the fp32 stream, and its recorded config says so.
    config = apply_overrides(dataclasses.replace(base, cuda_graphs=False, bf16_residual=False), fields)
    if base.cuda_graphs and "cuda_graphs" not in fields and not config.graph_conflicts():
        config = dataclasses.replace(config, cuda_graphs=True)
    if base.bf16_residual and "bf16_residual" not in fields and not residual_conflicts(config):
        config = dataclasses.replace(config, bf16_residual=True)
    return config, asked


def residual_conflicts(config: TrainConfig) -> list[str]:
    """The fields, as ``field=value``, that rule out a bf16 residual stream (``TrainConfig.validate``'s errors
    say why)."""
    return [
        *([f"precision={config.precision}"] if config.precision != "bf16" else []),
        *(["pre_ln=false"] if not config.pre_ln else []),
    ]


def to_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def graphs_given_way(config: TrainConfig) -> str | None:
    """A note for a run whose recipe replays its step as CUDA graphs but which cannot (``build_config`` turned
    them off for a field the user asked for), naming that field; None otherwise."""
    conflicts = [setting for setting, _ in dataclasses.replace(config, cuda_graphs=True).graph_conflicts()]
    return _given_way(
        config, "cuda_graphs", conflicts, "replays its step as CUDA graphs", "takes the eager step"
    )


def residual_given_way(config: TrainConfig) -> str | None:
    """A note for a run whose recipe keeps the residual stream in bf16 but which cannot (``build_config`` turned
    it off for a field the user asked for), naming that field; None otherwise."""
    conflicts = residual_conflicts(config)
    return _given_way(
        config, "bf16_residual", conflicts, "keeps its residual stream in bf16", "keeps it in fp32"
    )


def _given_way(
    config: TrainConfig, field: str, conflicts: list[str], recipe_does: str, run_does: str
) -> str | None:
    base = RECIPES.get(config.recipe)
    if base is None or not getattr(base, field) or getattr(config, field) or not conflicts:
        return None
    verb = "rules" if len(conflicts) == 1 else "rule"
    return f"{config.recipe} {recipe_does}, which {' and '.join(conflicts)} {verb} out: this run {run_does}"


def changes_from_recipe(config: TrainConfig) -> dict[str, Any] | None:
    """The fields where ``config`` differs from its named recipe as that recipe stands now, or None when
    ``config.recipe`` names no built-in recipe. Recorded with each run, since a recipe's defaults change
    over time (``optimized`` gained ``cuda_graphs=true`` on 2026-12-05) and a run's config alone cannot say
    which of its fields were asked for."""
    base = RECIPES.get(config.recipe)
    return None if base is None else {field: new for field, _, new in diff(base, config)}


def diff(a: TrainConfig, b: TrainConfig) -> list[tuple[str, Any, Any]]:
    da, db = to_dict(a), to_dict(b)
    return [(k, da[k], db[k]) for k in da if da[k] != db[k]]
