"""Training FLOPs of the encoder and model FLOP utilisation (MFU), written down.

The count (ANCHORS.md; nanoGPT's ``estimate_mfu``; PaLM, Chowdhery et al. 2022, Appendix B)::

    FLOPs per sample = 6 * N * L  +  12 * layers * hidden * L**2

- ``N`` is the parameter count without the embedding tables (token and position lookups do no matmul).
  Each of those weights takes part in one multiply-add per token in the forward pass (2 FLOPs) and two
  in the backward pass (gradient with respect to the input and to the weight: 4 FLOPs): 6 N per token,
  6 N L per sample of L tokens.
- The attention term: per layer and sequence, the scores ``Q K^T`` and the weighted sum ``P V`` are two
  [L, L] x hidden matmuls, 2 * L^2 * hidden FLOPs each, so 4 L^2 hidden forward and 12 L^2 hidden with
  the backward pass (twice the forward). An encoder attends in both directions, so nothing is halved
  for causality.
- Not counted, as in nanoGPT and PaLM: softmax, LayerNorm, GELU, dropout, residual adds, the optimizer
  (all O(L * hidden), memory-bound, a few percent at most). Activation recomputation is not counted
  either: MFU counts the model's FLOPs, not the hardware's.
- The pooler and classifier are in ``N`` although they run on [CLS] only; the overcount is
  6 * (hidden^2 + hidden * num_labels) * (L - 1), 0.34% for ``large`` at L = 128. We keep it so our
  figures compare with ANCHORS.md, which counts the same way.

Padding. A batch padded to ``padded_len`` executes the FLOPs of ``padded_len`` tokens per sample, but
only the real tokens are useful work. MFU counts the useful FLOPs only: a recipe that pads every batch
to 128 when the mean review is 70 characters long does not get credit for the padding. The FLOPs of the
padded shape, divided by the same time, are the hardware FLOP utilisation (HFU-style): how busy the
tensor cores were. The gap between the two is the compute lost to padding. :func:`flops_for_batch`
gives both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from dgxperf.train.model import ModelConfig, param_count


def transformer_train_flops(non_embedding_params: int, layers: int, hidden: int, seq_len: int) -> float:
    """Training FLOPs (forward + backward) for one sequence of ``seq_len`` tokens: the formula above.

    Takes the numbers rather than a config, so that other models (the stock Hugging Face BERT of
    ANCHORS.md) can be counted the same way.
    """
    if seq_len < 0 or non_embedding_params < 0 or layers < 0 or hidden < 0:
        raise ValueError("parameter counts, sizes and the sequence length must be >= 0")
    return 6.0 * non_embedding_params * seq_len + 12.0 * layers * hidden * seq_len**2


def flops_per_sample(config: ModelConfig, seq_len: int) -> float:
    """Training FLOPs for one sample of ``seq_len`` tokens through the encoder described by ``config``."""
    return transformer_train_flops(
        param_count(config, embeddings=False), config.layers, config.hidden, seq_len
    )


def flops_per_token(config: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token at ``seq_len``: 6 N + 12 layers hidden seq_len (attention grows with L)."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    return flops_per_sample(config, seq_len) / seq_len


@dataclasses.dataclass(frozen=True)
class BatchFlops:
    """FLOPs of one training batch: ``useful`` on real tokens (for MFU), ``executed`` on the padded shape."""

    useful: float
    """Sum over samples of the per-sample formula at that sample's real length: what MFU counts."""
    executed: float
    """The formula at the padded length times the batch size: what the GPU computed (HFU-style)."""
    real_tokens: int
    padded_tokens: int

    @property
    def padding_waste(self) -> float:
        """Share of the executed FLOPs spent on padding (0 when nothing is padded)."""
        return 1.0 - self.useful / self.executed if self.executed > 0 else 0.0


def flops_for_batch(config: ModelConfig, lengths: Sequence[int], padded_len: int | None = None) -> BatchFlops:
    """Useful and executed training FLOPs of a batch whose samples have ``lengths`` real tokens.

    ``padded_len`` is the length the batch was padded to (``max_len`` for the guide's fixed padding);
    ``None`` means dynamic padding to the longest sample. Attention cost is quadratic per sample, so
    the useful FLOPs are summed sample by sample, not computed from the total token count.
    """
    if len(lengths) == 0:
        return BatchFlops(useful=0.0, executed=0.0, real_tokens=0, padded_tokens=0)
    if min(lengths) < 1:
        raise ValueError(f"every sample needs at least one token, got lengths with min {min(lengths)}")
    longest = max(lengths)
    shape_len = longest if padded_len is None else padded_len
    if shape_len < longest:
        raise ValueError(f"padded_len {padded_len} is shorter than the longest sample ({longest})")
    useful = sum(flops_per_sample(config, n) for n in lengths)
    executed = len(lengths) * flops_per_sample(config, shape_len)
    return BatchFlops(
        useful=useful,
        executed=executed,
        real_tokens=sum(lengths),
        padded_tokens=len(lengths) * shape_len,
    )


def mfu(flops_per_second: float, peak_tflops: float, n_gpus: int = 1) -> float:
    """Model FLOP utilisation as a fraction: achieved FLOP/s over ``n_gpus`` times the per-GPU peak.

    ``peak_tflops`` is the per-GPU dense peak in the precision the matmuls run in (from hw/specs, e.g.
    989 for H100/H200 bf16), or a measured GEMM ceiling for "utilisation of what the node can do".
    Pass useful FLOP/s for MFU, executed FLOP/s (padded shape) for hardware utilisation.
    """
    if peak_tflops <= 0 or n_gpus < 1:
        raise ValueError(f"peak_tflops must be > 0 and n_gpus >= 1, got {peak_tflops} and {n_gpus}")
    return flops_per_second / (peak_tflops * 1e12 * n_gpus)
