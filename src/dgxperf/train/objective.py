"""The fine-tuning objective, shared by the eager step (loop.py), the recorded one (graphs.py) and the shape
warm-up (warmup.py), so that all three run the same shapes and the same arithmetic.

With ``rdrop_alpha`` > 0 it is R-Drop (Liang et al., "R-Drop: Regularized Dropout for Neural Networks",
NeurIPS 2021): every row goes through the model twice in one batch, under independent dropout masks, and the
symmetric KL divergence between the two softmaxes is added to their cross-entropies: the paper's
CE1 + CE2 + alpha/2 (KL12 + KL21), halved so that the logged loss stays a mean cross-entropy, comparable with
a run without it (alpha as in the paper: 0.1-1 on GLUE; 4 in bert4keras's Chinese classification example).
The model sees twice the rows a step, so a step costs about twice the compute.

``rdrop_share`` < 1 sends only that share of each batch's rows through a second time, spread evenly over the
batch (a length-bucketed batch may be sorted by length). The KL term is then a mean over fewer rows, an
unbiased estimate of the same term, so alpha keeps its meaning; the step costs 1 + share times the compute.
At 0.5 on an H100 the epoch was 1.27-1.28x shorter and the test score 0.51 points lower over five seed pairs
(``2026-12-06-h100-rdrop-share-pairs``), so no recipe uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def second_pass_rows(batch: int, rdrop_alpha: float, rdrop_share: float = 1.0) -> int:
    """How many of a batch's rows go through the model a second time (none without R-Drop)."""
    if rdrop_alpha <= 0:
        return 0
    return min(batch, max(1, round(batch * rdrop_share)))


def rows_through_model(batch: int, rdrop_alpha: float, rdrop_share: float = 1.0) -> int:
    """The rows the model sees in one step for a batch of ``batch`` rows."""
    return batch + second_pass_rows(batch, rdrop_alpha, rdrop_share)


def classification_loss(
    forward: Callable[[Any, Any], Any],
    ids: Any,
    mask: Any | None,
    labels: Any,
    *,
    label_smoothing: float = 0.0,
    rdrop_alpha: float = 0.0,
    rdrop_share: float = 1.0,
) -> tuple[Any, Any]:
    """(the objective to differentiate, the cross-entropy to log). ``forward(ids, mask)`` returns logits;
    it runs once, on the batch and its second-pass rows together (one forward keeps one graph and one kernel
    per op)."""
    import torch
    import torch.nn.functional as F

    batch = int(ids.shape[0])
    again = second_pass_rows(batch, rdrop_alpha, rdrop_share)
    if again == 0:
        logits = forward(ids, mask)
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing)
        return loss, loss
    if again == batch:  # every row: no gather
        ids2, mask2, labels2 = ids, mask, labels
    else:
        pick = torch.arange(again, device=ids.device) * batch // again  # spread evenly over the batch
        ids2, mask2, labels2 = ids[pick], None if mask is None else mask[pick], labels[pick]
    both = forward(torch.cat((ids, ids2)), None if mask is None else torch.cat((mask, mask2)))
    both = both.float()
    first, second = both[:batch], both[batch:]
    # the mean over both passes' rows; with every row twice, (CE1 + CE2) / 2
    cross_entropy = F.cross_entropy(both, torch.cat((labels, labels2)), label_smoothing=label_smoothing)
    paired = first if again == batch else first[pick]
    log_p, log_q = F.log_softmax(paired, dim=-1), F.log_softmax(second, dim=-1)
    # kl_div(input, target) is KL(target || input); batchmean: summed over labels, averaged over rows
    both_ways = F.kl_div(log_p, log_q, reduction="batchmean", log_target=True) + F.kl_div(
        log_q, log_p, reduction="batchmean", log_target=True
    )
    return cross_entropy + rdrop_alpha / 4 * both_ways, cross_entropy
