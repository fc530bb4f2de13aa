"""ELECTRA's replaced-token detection (Clark et al., 2020), the other objective of ``dgxperf pretrain``.

Why: masked-LM pretraining learns from the 15% of tokens it masks. ELECTRA's discriminator learns from
every token: a small generator (a masked LM) fills the masked positions with its own samples, and the
encoder we keep, the discriminator, says of each token whether it was replaced. At equal compute it beat
BERT by the widest margin on small models and budgets, and Krishna et al. (2022) self-pretrained ELECTRA
on downstream datasets alone. Here the corpus is ~14k short reviews, seen 80 times.

What one step does (``electra_losses``): the rows are masked as for the masked LM; the generator (the
encoder's depth at a quarter of its width, as ELECTRA's large model) predicts the masked tokens; each
masked position is filled with a token sampled from its prediction (Gumbel-max on the device, no special
token, no host sync); the discriminator reads the corrupted rows and a small head scores every position.
The loss is the generator's masked-LM loss plus ``DISCRIMINATOR_WEIGHT`` times the discriminator's binary
cross-entropy over all positions. A sample equal to the original counts as not replaced, as in ELECTRA.
Generator and discriminator keep separate embeddings (ELECTRA ties them; its ablation put the untied model
0.7 GLUE points lower): simpler, and the discriminator's weights alone are what ``encoder.pt`` keeps.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from torch import nn

from dgxperf.train.model import Encoder, ModelConfig

DISCRIMINATOR_WEIGHT = 50.0  # ELECTRA's lambda
GENERATOR_DIVISOR = 4  # the generator's width: a quarter of the discriminator's (ELECTRA-Large: 256 of 1024)


def generator_config(discriminator: ModelConfig) -> ModelConfig:
    """The generator's shape: the discriminator's depth, vocabulary and length at a quarter of its width."""
    hidden = max(8, discriminator.hidden // GENERATOR_DIVISOR)
    heads = max(1, discriminator.heads // GENERATOR_DIVISOR)
    while hidden % heads:
        heads -= 1
    return dataclasses.replace(
        discriminator, hidden=hidden, heads=heads, ffn=max(8, discriminator.ffn // GENERATOR_DIVISOR)
    )


class ReplacedTokenHead(nn.Module):  # type: ignore[misc]
    """ELECTRA's discriminator head: dense, GELU, one logit per position ("replaced")."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.act = nn.GELU()
        self.out = nn.Linear(hidden, 1)

    def forward(self, states: Any) -> Any:
        return self.out(self.act(self.dense(states))).squeeze(-1)


class ElectraModels(nn.Module):  # type: ignore[misc]
    """What ELECTRA trains, as one module (one optimizer, one state dict, one train/eval switch)."""

    def __init__(self, discriminator: Any) -> None:
        super().__init__()
        self.discriminator = discriminator
        self.generator = Encoder(generator_config(discriminator.config))
        self.head = ReplacedTokenHead(discriminator.config.hidden)


def generator_loss_and_logits(generator: Any, inputs: Any, targets: Any) -> tuple[Any, Any]:
    """The generator's masked-LM loss and its token logits (detached: sampling sends no gradient back)."""
    import torch.nn.functional as F

    from dgxperf.train.pretrain import mlm_logits

    logits = mlm_logits(generator, inputs)
    loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100)
    return loss, logits.detach()


def replaced_token_loss(discriminator: Any, head: Any, corrupted: Any, replaced: Any) -> Any:
    """Binary cross-entropy of the head's per-position logits against ``replaced`` (float 0/1)."""
    import torch.nn.functional as F

    from dgxperf.train.pretrain import encoder_states

    logits = head(encoder_states(discriminator, corrupted)).float()
    return F.binary_cross_entropy_with_logits(logits, replaced)


def corrupt(ids: Any, targets: Any, logits: Any, generator: Any) -> tuple[Any, Any]:
    """The rows with every masked position (``targets`` != -100) filled by a sample from ``logits``
    (Gumbel-max over the plain tokens, drawn with ``generator``), and which positions now differ."""
    import torch

    from dgxperf.train.tokenizer import CLS_ID, PAD_ID, SEP_ID, UNK_ID

    specials = torch.arange(max(PAD_ID, CLS_ID, SEP_ID, UNK_ID) + 1, device=logits.device)
    # out of place: the logits may share storage with the generator's loss graph
    scores = logits.float().index_fill(-1, specials, -math.inf)  # never sample a special token
    noise = torch.rand(scores.shape, generator=generator, device=scores.device).clamp_(1e-10, 1 - 1e-7)
    sampled = (scores - torch.log(-torch.log(noise))).argmax(dim=-1)
    corrupted = torch.where(targets != -100, sampled, ids)
    return corrupted, (corrupted != ids).float()


def electra_losses(
    models: ElectraModels,
    ids: Any,
    inputs: Any,
    targets: Any,
    sample_rng: Any,
    generator_step: Any = generator_loss_and_logits,
    discriminator_step: Any = replaced_token_loss,
) -> tuple[Any, Any, Any]:
    """(total, generator loss, discriminator loss) of one batch; the two steps may be compiled versions."""
    mlm, logits = generator_step(models.generator, inputs, targets)
    corrupted, replaced = corrupt(ids, targets, logits, sample_rng)
    rtd = discriminator_step(models.discriminator, models.head, corrupted, replaced)
    return mlm + DISCRIMINATOR_WEIGHT * rtd, mlm.detach(), rtd.detach()
