"""A linear probe of a pretrained encoder: how well its frozen features separate the task's labels.

Why: comparing two pretraining settings by fine-tuning is expensive and noisy here. Two fine-tunes of one
recipe from one encoder differ with an sd of 0.52 points of test accuracy (``scripts/experiments/
noise_budget.py``), so a +0.5-point change needs ~17 pairs to show. A probe has no fine-tuning seed: the
encoder's features (mean of its last hidden states over each text's real tokens, dropout off) are computed
once, and a logistic regression fitted on the training split by L-BFGS is deterministic. Its dev accuracy
measures the representation alone, every few epochs of a pretraining, for about the cost of one pass over
the texts. It does not replace fine-tuning (the fine-tune moves every weight), and the test split is never
touched: the probe exists to choose pretraining settings.
"""

from __future__ import annotations

import time
from typing import Any

PROBE_WEIGHT_DECAY = 1e-3  # on the standardised features: fixed, so that dev chooses nothing
PROBE_MAX_ITER = 200
PROBE_BATCH_ROWS = 256  # x max_len 128: 32k tokens a batch


def mean_features(model: Any, split: Any, device: Any, autocast: Any) -> Any:
    """``[len(split), hidden]`` float32: each text's mean last hidden state over its real tokens ([CLS] and
    [SEP] included), in length-sorted batches of ``PROBE_BATCH_ROWS`` texts (little padding)."""
    import numpy as np
    import torch

    from dgxperf.train.tokenizer import PAD_ID

    lengths = split.lengths
    order = np.argsort(lengths, kind="stable")
    out = torch.empty(len(split), model.config.hidden, dtype=torch.float32, device=device)
    was_training = model.training
    model.eval()
    with torch.no_grad(), autocast:
        for start in range(0, len(order), PROBE_BATCH_ROWS):
            chosen = order[start : start + PROBE_BATCH_ROWS]
            ids = torch.full((len(chosen), int(lengths[chosen].max())), PAD_ID, dtype=torch.long)
            for row, index in enumerate(chosen):
                text = torch.as_tensor(split[int(index)], dtype=torch.long)
                ids[row, : len(text)] = text
            ids = ids.to(device)
            out[torch.as_tensor(chosen, device=device)] = model.pooled(
                ids, ids != PAD_ID, pooling="mean"
            ).float()
    model.train(was_training)
    return out


def fit_logistic(features: Any, labels: Any, classes: int) -> Any:
    """A multinomial logistic regression on standardised ``features``, fitted by L-BFGS (deterministic);
    returns a function from features to predicted labels."""
    import torch

    mean, std = features.mean(dim=0), features.std(dim=0).clamp(min=1e-6)
    x = (features - mean) / std
    weight = torch.zeros(features.shape[1], classes, device=features.device, requires_grad=True)
    bias = torch.zeros(classes, device=features.device, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=PROBE_MAX_ITER, line_search_fn="strong_wolfe")

    def loss() -> Any:
        optimizer.zero_grad()
        value = torch.nn.functional.cross_entropy(x @ weight + bias, labels)
        value = value + 0.5 * PROBE_WEIGHT_DECAY * (weight**2).sum()
        value.backward()
        return value

    with torch.enable_grad():
        optimizer.step(loss)
    weight, bias = weight.detach(), bias.detach()
    return lambda other: (((other - mean) / std) @ weight + bias).argmax(dim=1)


def linear_probe(model: Any, train: Any, dev: Any, device: Any, autocast: Any) -> dict[str, Any]:
    """Fit on ``train``'s features, score on ``dev``'s: ``{"dev_accuracy", "train_accuracy", "seconds"}``."""
    import torch

    began = time.perf_counter()
    train_labels = torch.as_tensor(train.labels, dtype=torch.long, device=device)
    dev_labels = torch.as_tensor(dev.labels, dtype=torch.long, device=device)
    classes = int(max(train_labels.max(), dev_labels.max())) + 1
    train_features = mean_features(model, train, device, autocast)
    predict = fit_logistic(train_features, train_labels, classes)
    dev_predictions = predict(mean_features(model, dev, device, autocast))
    train_predictions = predict(train_features)
    return {
        "dev_accuracy": float((dev_predictions == dev_labels).float().mean()),
        "train_accuracy": float((train_predictions == train_labels).float().mean()),
        "seconds": time.perf_counter() - began,
    }
