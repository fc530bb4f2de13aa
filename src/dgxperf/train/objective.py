"""The fine-tuning objective, shared by the eager step (loop.py), the recorded one (graphs.py) and the shape
warm-up (warmup.py), so that all three run the same shapes and the same arithmetic.

With ``rdrop_alpha`` > 0 it is R-Drop (Liang et al., "R-Drop: Regularized Dropout for Neural Networks",
NeurIPS 2021): every row goes through the model twice in one batch, under independent dropout masks, and the
symmetric KL divergence between the two softmaxes is added to their cross-entropies: the paper's
CE1 + CE2 + alpha/2 (KL12 + KL21), halved so that the logged loss stays a mean cross-entropy, comparable with
a run without it (alpha as in the paper: 0.1-1 on GLUE; 4 in bert4keras's Chinese classification example).
The model sees twice the rows a step, so a step costs about twice the compute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def copies(rdrop_alpha: float) -> int:
    """How many times each row goes through the model in one step."""
    return 2 if rdrop_alpha > 0 else 1


def classification_loss(
    forward: Callable[[Any, Any], Any],
    ids: Any,
    mask: Any | None,
    labels: Any,
    *,
    label_smoothing: float = 0.0,
    rdrop_alpha: float = 0.0,
) -> tuple[Any, Any]:
    """(the objective to differentiate, the cross-entropy to log). ``forward(ids, mask)`` returns logits;
    it runs once, on twice the rows when R-Drop is on (one forward keeps one graph and one kernel per op)."""
    import torch
    import torch.nn.functional as F

    if rdrop_alpha <= 0:
        logits = forward(ids, mask)
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing)
        return loss, loss
    both = forward(torch.cat((ids, ids)), None if mask is None else torch.cat((mask, mask)))
    first, second = both.float().chunk(2)
    cross_entropy = (
        F.cross_entropy(first, labels, label_smoothing=label_smoothing)
        + F.cross_entropy(second, labels, label_smoothing=label_smoothing)
    ) / 2
    log_p, log_q = F.log_softmax(first, dim=-1), F.log_softmax(second, dim=-1)
    # kl_div(input, target) is KL(target || input); batchmean: summed over labels, averaged over rows
    both_ways = F.kl_div(log_p, log_q, reduction="batchmean", log_target=True) + F.kl_div(
        log_q, log_p, reduction="batchmean", log_target=True
    )
    return cross_entropy + rdrop_alpha / 4 * both_ways, cross_entropy
