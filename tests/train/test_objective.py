"""The fine-tuning objective (train/objective.py): cross-entropy, and R-Drop's two passes with a KL term."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from dgxperf.train.objective import classification_loss, rows_through_model, second_pass_rows


def test_r_drop_runs_rows_twice_and_nothing_else_does() -> None:
    assert [second_pass_rows(128, alpha) for alpha in (0.0, 0.5, 4.0)] == [0, 128, 128]
    assert rows_through_model(128, 4.0) == 256 and rows_through_model(128, 0.0, 0.5) == 128
    # a share of the rows: at least one, never more than the batch
    assert [second_pass_rows(b, 4.0, 0.5) for b in (128, 7, 1)] == [64, 4, 1]
    assert second_pass_rows(3, 4.0, 0.01) == 1 and rows_through_model(128, 4.0, 0.5) == 192


def _recording(logits: torch.Tensor, seen: list[tuple[Any, Any]]) -> Any:
    def forward(ids: Any, mask: Any) -> Any:
        seen.append((ids, mask))
        return logits[: ids.shape[0]]

    return forward


def test_without_r_drop_it_is_the_cross_entropy_of_one_pass() -> None:
    logits = torch.tensor([[2.0, -1.0], [0.5, 0.25], [-3.0, 1.0]])
    labels = torch.tensor([0, 1, 1])
    seen: list[tuple[Any, Any]] = []
    objective, logged = classification_loss(
        _recording(logits, seen), torch.ones(3, 5, dtype=torch.long), None, labels, label_smoothing=0.1
    )
    assert objective is logged and len(seen) == 1 and seen[0][0].shape == (3, 5)
    assert torch.allclose(objective, F.cross_entropy(logits, labels, label_smoothing=0.1))


def test_r_drop_sends_both_copies_in_one_forward_with_their_mask() -> None:
    ids = torch.arange(6).reshape(2, 3)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    seen: list[tuple[Any, Any]] = []
    logits = torch.tensor([[1.0, 0.0], [0.0, 1.0]] * 2)
    classification_loss(_recording(logits, seen), ids, mask, torch.tensor([0, 1]), rdrop_alpha=1.0)
    ((sent_ids, sent_mask),) = seen
    assert torch.equal(sent_ids, torch.cat((ids, ids))) and torch.equal(sent_mask, torch.cat((mask, mask)))
    seen.clear()
    classification_loss(_recording(logits, seen), ids, None, torch.tensor([0, 1]), rdrop_alpha=1.0)
    assert seen[0][1] is None  # a full batch keeps the mask-free attention path


def test_two_identical_passes_add_nothing_to_the_cross_entropy() -> None:
    logits = torch.tensor([[2.0, -1.0], [0.5, 0.25]])
    labels = torch.tensor([0, 1])
    objective, logged = classification_loss(
        lambda ids, mask: torch.cat((logits, logits)), torch.ones(2, 4), None, labels, rdrop_alpha=4.0
    )
    plain = F.cross_entropy(logits, labels)
    assert torch.allclose(objective, plain) and torch.allclose(logged, plain)


def test_the_kl_term_is_the_papers_halved() -> None:
    """R-Drop's loss is CE1 + CE2 + alpha/2 (KL(P1||P2) + KL(P2||P1)), each a sum over the batch's rows; here
    divided by twice the rows, so that the logged cross-entropy is a mean, as without it."""
    first = torch.tensor([[2.0, -1.0], [0.5, 0.25], [0.0, 3.0]])
    second = torch.tensor([[1.0, 0.0], [-0.5, 1.0], [0.2, 2.0]])
    labels = torch.tensor([0, 1, 1])
    alpha = 4.0
    objective, logged = classification_loss(
        lambda ids, mask: torch.cat((first, second)), torch.ones(3, 4), None, labels, rdrop_alpha=alpha
    )

    def kl(p: list[float], q: list[float]) -> float:
        return sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))

    p1 = F.softmax(first, dim=-1).tolist()
    p2 = F.softmax(second, dim=-1).tolist()
    ce = sum(-math.log(p1[i][int(y)]) - math.log(p2[i][int(y)]) for i, y in enumerate(labels.tolist()))
    papers = ce + alpha / 2 * sum(kl(a, b) + kl(b, a) for a, b in zip(p1, p2, strict=True))
    assert logged.item() == pytest.approx(ce / 6, rel=1e-6)
    assert objective.item() == pytest.approx(papers / 6, rel=1e-6)


def test_the_kl_term_pulls_the_two_dropout_passes_together() -> None:
    """Through a real dropout layer the term has a gradient of its own: a larger alpha, another step."""
    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.Linear(4, 2))
    ids = torch.randn(8, 4)
    labels = torch.randint(0, 2, (8,))

    def gradient(alpha: float) -> torch.Tensor:
        torch.manual_seed(1)
        layer.zero_grad()
        objective, _ = classification_loss(lambda x, _m: layer(x), ids, None, labels, rdrop_alpha=alpha)
        objective.backward()
        weight = layer[1].weight.grad
        assert weight is not None
        return weight.clone()

    assert not torch.allclose(gradient(0.5), gradient(8.0))


def test_a_share_of_the_rows_goes_through_twice_spread_over_the_batch() -> None:
    """rdrop_share=0.5: rows 0, 2, 4, 6 of eight again (a bucketed batch may be sorted by length), their
    cross-entropy in the mean, and the KL over those four pairs only."""
    ids = torch.arange(8)[:, None].repeat(1, 3)
    mask = torch.ones(8, 3, dtype=torch.bool)
    labels = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1])
    torch.manual_seed(0)
    logits = torch.randn(12, 2)
    seen: list[tuple[Any, Any]] = []
    objective, logged = classification_loss(
        _recording(logits, seen), ids, mask, labels, rdrop_alpha=2.0, rdrop_share=0.5
    )
    ((sent_ids, sent_mask),) = seen
    assert sent_ids[:, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 0, 2, 4, 6] and sent_mask.shape == (12, 3)
    pick = [0, 2, 4, 6]
    ce = F.cross_entropy(logits, torch.cat((labels, labels[pick])))
    p, q = F.log_softmax(logits[pick], dim=-1), F.log_softmax(logits[8:], dim=-1)
    kl = (p.exp() * (p - q)).sum(dim=-1).mean() + (q.exp() * (q - p)).sum(dim=-1).mean()
    assert torch.allclose(logged, ce) and torch.allclose(objective, ce + 2.0 / 4 * kl)
