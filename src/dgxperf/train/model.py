"""A compact BERT-style encoder for sequence classification, readable top to bottom.

The model is plain PyTorch in full precision: there is no parallelism, compilation, autocast or
dtype casting in this file (torchtitan's habit). ``train/parallel.py`` and the recipes apply DDP/FSDP,
``torch.compile`` and bf16/fp16 from outside, so the architecture can be read, counted and tested on
its own. The layout, top to bottom:

    input_ids [B, L] -> token embedding + learned position embedding
                     -> (post-LN only: LayerNorm) -> dropout
                     -> layers x Block:
                          pre-LN  (default): x = x + Attn(LN(x));  x = x + MLP(LN(x))
                          post-LN (BERT):    x = LN(x + Attn(x));  x = LN(x + MLP(x))
                     -> (pre-LN only: final LayerNorm)
                     -> [CLS] vector (position 0) -> (pooler: tanh(Linear)) -> dropout
                     -> classifier Linear(hidden, num_labels) -> logits [B, num_labels], float32

Attention projects q, k and v with ONE fused Linear (hidden -> 3*hidden: one large GEMM instead of three
small ones) and calls ``torch.nn.functional.scaled_dot_product_attention`` (SDPA), which dispatches to
FlashAttention, the memory-efficient kernel, cuDNN or plain math. Padding is a boolean key mask; when a
batch has no padding the caller passes ``attention_mask=None``, which is what lets SDPA pick the
FlashAttention kernel on Hopper (flash takes no arbitrary mask). See :meth:`Encoder.forward`.

Why pre-LN is the default: the original BERT (post-LN) puts LayerNorm after each residual add, which
makes the gradient at the bottom layers depend on the depth and needs a long, careful warm-up to train
from scratch; a 24-layer post-LN encoder trained from scratch with a short warm-up can stay at the
majority class (as stock BERT-large did on our data, ANCHORS.md). Pre-LN keeps an identity path from
the loss to the embeddings and trains stably at larger learning rates (Xiong et al., 2020, "On Layer
Normalization in the Transformer Architecture"). ``pre_ln=False`` gives the original BERT block.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

GeluKind = Literal["tanh", "exact"]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Everything that defines the encoder's architecture; frozen, so a run can store and diff it.

    ``max_len`` is the number of learned positions (the longest sequence the model accepts), not the
    length a batch is padded to. For tensor cores keep ``hidden`` and ``ffn`` multiples of 64 and the
    head size (``hidden // heads``) a multiple of 8 (FlashAttention needs it <= 256). The vocabulary
    size does not matter for speed here: the token table is a lookup, and nothing is tied to it.
    """

    vocab_size: int
    num_labels: int
    max_len: int = 128
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    ffn: int = 3072
    dropout: float = 0.1
    """Dropout on the embeddings, on each residual branch's output and before the classifier."""
    attn_dropout: float = 0.1
    """Dropout on the attention probabilities (SDPA's ``dropout_p``), in training only."""
    pre_ln: bool = True
    """Pre-LayerNorm blocks plus a final LayerNorm (stable from scratch); False: post-LN as in BERT."""
    ln_fp32: bool = False
    """Compute every LayerNorm in float32 even when activations/parameters are fp16/bf16 (guide A §4.2)."""
    layer_norm_eps: float = 1e-12
    gelu: GeluKind = "exact"
    """"exact" (erf, as BERT) or "tanh" (the approximation GPT-2 uses)."""
    init_std: float = 0.02
    pooler: bool = True
    """BERT's pooler: tanh(Linear(hidden, hidden)) on the [CLS] vector before the classifier."""
    pooling: str = "cls"
    """What the head reads: "cls" (the [CLS] vector, as BERT) or "mean" (the mean of the real tokens'
    vectors, which gives every position a direct gradient from the loss: a help when training from
    scratch, where [CLS] has not yet learnt to gather the sequence)."""

    def __post_init__(self) -> None:
        for name in ("vocab_size", "num_labels", "max_len", "hidden", "layers", "heads", "ffn"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden % self.heads != 0:
            raise ValueError(
                f"ModelConfig.hidden ({self.hidden}) must be divisible by heads ({self.heads}): "
                f"each head gets hidden // heads dimensions"
            )
        for name in ("dropout", "attn_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"ModelConfig.{name} must be in [0, 1), got {value!r}")
        if self.gelu not in ("tanh", "exact"):
            raise ValueError(f"ModelConfig.gelu must be 'tanh' or 'exact', got {self.gelu!r}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"ModelConfig.layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")
        if self.pooling not in ("cls", "mean"):
            raise ValueError(f"ModelConfig.pooling must be 'cls' or 'mean', got {self.pooling!r}")
        if not self.init_std > 0:
            raise ValueError(f"ModelConfig.init_std must be > 0, got {self.init_std!r}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The architecture of each named preset; vocabulary, labels and positions come from the data.
PRESETS: Mapping[str, Mapping[str, int]] = types.MappingProxyType(
    {
        # CPU tests and smoke runs: a few hundred thousand parameters at a char vocabulary.
        "tiny": types.MappingProxyType({"layers": 2, "hidden": 64, "heads": 2, "ffn": 256}),
        # BERT-base shape: ~102M parameters at vocab 21,128 (bert-base-chinese), ~110M at 30,522.
        "base": types.MappingProxyType({"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072}),
        # BERT-large shape: ~325M at vocab 21,128, the guide's "300M-parameter Transformer".
        "large": types.MappingProxyType({"layers": 24, "hidden": 1024, "heads": 16, "ffn": 4096}),
    }
)


def preset(name: str, vocab_size: int, num_labels: int, max_len: int = 128, **overrides: Any) -> ModelConfig:
    """The named preset's config for a vocabulary and label set; ``overrides`` replace any field.

    >>> preset("large", vocab_size=21128, num_labels=2).layers
    24
    """
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; known presets: {', '.join(PRESETS)}")
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"unknown ModelConfig field(s) {', '.join(unknown)}; fields: {', '.join(sorted(fields))}"
        )
    values: dict[str, Any] = {**PRESETS[name], "vocab_size": vocab_size, "num_labels": num_labels}
    values["max_len"] = max_len
    values.update(overrides)
    return ModelConfig(**values)


class FP32LayerNorm(nn.LayerNorm):  # type: ignore[misc]
    """LayerNorm computed in float32 whatever the input dtype; returns the input's dtype.

    Guide A §4.2 keeps LayerNorm in FP32 under mixed precision: the mean and variance of a 1024-wide
    row in fp16 lose precision (and fp16 overflows on large activations), and the normalised values
    are then scaled by weights that are themselves rounded. This module upcasts the input, weight and
    bias, normalises and applies the affine transform in fp32, and rounds once on the way out.

    When it matters: under ``torch.autocast`` PyTorch already runs ``layer_norm`` in fp32, so this is
    for the recipes that cast the parameters themselves (``model.half()``, FSDP ``param_dtype``), where
    a plain ``nn.LayerNorm`` would run with fp16/bf16 inputs and weights. Code that casts a model can
    skip these modules to keep their parameters stored in fp32 too.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight.float() if self.weight is not None else None
        bias = self.bias.float() if self.bias is not None else None
        return F.layer_norm(x.float(), self.normalized_shape, weight, bias, self.eps).to(x.dtype)


def _layer_norm(config: ModelConfig) -> nn.LayerNorm:
    cls = FP32LayerNorm if config.ln_fp32 else nn.LayerNorm
    return cls(config.hidden, eps=config.layer_norm_eps)


class SelfAttention(nn.Module):  # type: ignore[misc]
    """Multi-head self-attention: fused QKV projection, SDPA, output projection, residual dropout."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.attn_dropout = config.attn_dropout
        self.qkv = nn.Linear(config.hidden, 3 * config.hidden)  # one GEMM for q, k and v
        self.proj = nn.Linear(config.hidden, config.hidden)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, length, hidden = x.shape
        q, k, v = self.qkv(x).split(hidden, dim=2)
        # [B, L, hidden] -> [B, heads, L, head_dim], the layout SDPA wants.
        q = q.view(b, length, self.heads, hidden // self.heads).transpose(1, 2)
        k = k.view(b, length, self.heads, hidden // self.heads).transpose(1, 2)
        v = v.view(b, length, self.heads, hidden // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.attn_dropout if self.training else 0.0
        )
        y = y.transpose(1, 2).reshape(b, length, hidden)
        return self.drop(self.proj(y))


class MLP(nn.Module):  # type: ignore[misc]
    """Position-wise feed-forward: Linear(hidden, ffn) -> GELU -> Linear(ffn, hidden) -> dropout."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.hidden, config.ffn)
        self.act = nn.GELU(approximate="tanh" if config.gelu == "tanh" else "none")
        self.fc2 = nn.Linear(config.ffn, config.hidden)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.act(self.fc1(x))))


class Block(nn.Module):  # type: ignore[misc]
    """One Transformer encoder layer, pre-LN or post-LN (a constant of the config, not of the data)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.pre_ln = config.pre_ln
        self.ln1 = _layer_norm(config)
        self.attn = SelfAttention(config)
        self.ln2 = _layer_norm(config)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.attn(self.ln1(x), mask)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x, mask))
        return self.ln2(x + self.mlp(x))


def _draw_normal(weight: torch.Tensor, std: float, generator: torch.Generator | None) -> None:
    """N(0, std) in place, from the global generator or, when one is given, from that (CPU) generator: the
    draw is made on the CPU and copied, so that it is the same wherever the weight lives."""
    with torch.no_grad():
        if generator is None:
            nn.init.normal_(weight, mean=0.0, std=std)
        else:
            weight.copy_(torch.randn(weight.shape, generator=generator) * std)


class Encoder(nn.Module):  # type: ignore[misc]
    """The BERT-style encoder with a [CLS] classification head; see the module docstring."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.hidden)
        self.pos_emb = nn.Embedding(config.max_len, config.hidden)
        # One extra LayerNorm either way: on the embeddings (post-LN, as BERT) or after the last block
        # (pre-LN, whose residual stream is otherwise never normalised before the head).
        self.emb_ln = nn.Identity() if config.pre_ln else _layer_norm(config)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln_f = _layer_norm(config) if config.pre_ln else nn.Identity()
        self.pooler = nn.Linear(config.hidden, config.hidden) if config.pooler else None
        self.head_drop = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.hidden, config.num_labels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """BERT's init: N(0, init_std) weights, zero biases, LayerNorm ones/zeros.

        In pre-LN, the two projections that write into the residual stream (attention output and the
        second MLP Linear) start with std init_std / sqrt(2 * layers), as GPT-2 and nanoGPT do. Each of
        the 2 * layers residual branches adds its output to the stream, so with equal init the
        stream's variance at the top grows with depth and the final LayerNorm (and the gradient through
        it) sees a depth-dependent scale; shrinking the branches keeps the stream's scale about
        constant at init, which is what lets a 24-layer model start from scratch at a normal learning
        rate. Post-LN renormalises after every add, so BERT (and ``pre_ln=False``) does not scale.
        """
        self._init_modules(self, None)
        for block in self.blocks:
            self._scale_residual_branches(block, None)

    def reinit_top_blocks(self, count: int, seed: int) -> None:
        """Give the top ``count`` Transformer blocks a fresh initialisation, as :meth:`reset_parameters`
        would, from a generator seeded with ``seed``: for a masked-LM encoder whose top layers learned to
        predict characters, not to classify (Zhang et al., 2021, "Revisiting few-sample BERT fine-tuning")."""
        generator = torch.Generator().manual_seed(seed)
        for block in self.blocks[len(self.blocks) - count :]:
            self._init_modules(block, generator)
            self._scale_residual_branches(block, generator)

    def _init_modules(self, root: nn.Module, generator: torch.Generator | None) -> None:
        std = self.config.init_std
        for module in root.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                _draw_normal(module.weight, std, generator)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def _scale_residual_branches(self, block: nn.Module, generator: torch.Generator | None) -> None:
        std = self.config.init_std
        residual_std = std / math.sqrt(2 * self.config.layers) if self.config.pre_ln else std
        _draw_normal(block.attn.proj.weight, residual_std, generator)
        _draw_normal(block.mlp.fc2.weight, residual_std, generator)

    def pooled(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, pooling: str | None = None
    ) -> torch.Tensor:
        """The encoder's summary of each sequence ``[B, hidden]``, before the pooler and classifier: the
        last hidden state at [CLS] or the mean over real tokens (``pooling``, default the config's).
        ``attention_mask`` as in :meth:`forward`."""
        _, length = input_ids.shape
        if length > self.config.max_len:
            raise ValueError(f"sequence length {length} exceeds the model's max_len {self.config.max_len}")
        mask = None
        if attention_mask is not None:
            mask = attention_mask.to(torch.bool)[:, None, None, :]  # [B, 1, 1, L]: block padded keys
        x = self.tok_emb(input_ids) + self.pos_emb.weight[:length]
        x = self.drop(self.emb_ln(x))
        for block in self.blocks:
            x = block(x, mask)
        x = self.ln_f(x)
        if (pooling or self.config.pooling) == "mean":
            if attention_mask is None:
                return x.mean(dim=1)
            weights = attention_mask.to(x.dtype)[:, :, None]
            return (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return x[:, 0]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[B, num_labels]`` (float32) for ``input_ids [B, L]``, [CLS] at position 0.

        ``attention_mask [B, L]``: True (or 1) for real tokens, False (0) for padding. It becomes a
        ``[B, 1, 1, L]`` boolean mask that SDPA broadcasts over heads and queries: no query may attend
        to a padded key, so a sequence's logits do not depend on how much padding follows it. Padded
        query rows are computed and ignored (only [CLS] reaches the head). Every sequence needs at
        least one real token, or its softmax row is empty (NaN).

        Pass ``attention_mask=None`` when the batch has no padding (fixed-length or packed batches,
        or a length bucket that happens to be full): with a mask, SDPA can only use the
        memory-efficient or math kernels; without one it can use FlashAttention, the fastest on
        Hopper. The model does not test ``attention_mask.all()`` itself: that would read a GPU value
        on the host (a sync each step) and break the torch.compile graph; the collator knows whether
        it padded. This None-or-not choice is the only branch on the inputs, and it is taken before
        the blocks.

        The logits are returned in float32 so the loss is computed in fp32 whatever precision the
        caller applied; for [B, num_labels] the cast costs nothing.
        """
        cls = self.pooled(input_ids, attention_mask)
        if self.pooler is not None:
            cls = torch.tanh(self.pooler(cls))
        return self.classifier(self.head_drop(cls)).float()


def embedding_params(config: ModelConfig) -> int:
    """Parameters of the lookup tables (token and position embeddings): no matmul FLOPs are done on them.

    This is the "embeddings" that the FLOP formula subtracts (ANCHORS.md, nanoGPT, Kaplan et al.).
    The embedding LayerNorm of post-LN (2 x hidden) is not a table and is not counted here.
    """
    return (config.vocab_size + config.max_len) * config.hidden


def param_count(model_or_config: ModelConfig | nn.Module, *, embeddings: bool = True) -> int:
    """Number of parameters, from the config's formula or by counting a module's tensors.

    For a :class:`ModelConfig` the formula below is exact (tests check it against ``Encoder``). For a
    module, its parameters are counted as they are (shared tensors once), and ``embeddings=False``
    subtracts every ``nn.Embedding``; that works on wrapped modules too (``torch.compile``, DDP).
    """
    if not isinstance(model_or_config, ModelConfig):
        module = model_or_config
        total = sum(p.numel() for p in module.parameters())
        if not embeddings:
            total -= sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Embedding))
        return int(total)
    c = model_or_config
    h, f = c.hidden, c.ffn
    layer_norm = 2 * h  # weight + bias
    per_layer = (
        (h * 3 * h + 3 * h)  # fused QKV
        + (h * h + h)  # attention output projection
        + (h * f + f)  # MLP in
        + (f * h + h)  # MLP out
        + 2 * layer_norm  # ln1, ln2
    )
    total = (
        embedding_params(c)
        + layer_norm  # embedding LayerNorm (post-LN) or final LayerNorm (pre-LN)
        + c.layers * per_layer
        + ((h * h + h) if c.pooler else 0)
        + (h * c.num_labels + c.num_labels)  # classifier
    )
    return total if embeddings else total - embedding_params(c)
