"""The linear probe (train/probe.py): frozen mean features that padding does not change, a deterministic
logistic regression, and a probe that leaves the encoder, its mode and the random generators as it found
them."""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from dgxperf.train.data import EncodedSplit
from dgxperf.train.model import Encoder, ModelConfig
from dgxperf.train.probe import PROBE_BATCH_ROWS, fit_logistic, linear_probe, mean_features
from dgxperf.train.tokenizer import CLS_ID, SEP_ID

VOCAB = 40


def encoder() -> Encoder:
    torch.manual_seed(0)
    return Encoder(
        ModelConfig(vocab_size=VOCAB, num_labels=2, max_len=24, layers=1, hidden=16, heads=2, ffn=32)
    )


def split(count: int, seed: int = 0) -> EncodedSplit:
    """Texts of 1-20 plain tokens framed by [CLS] ... [SEP]; label 1 when token 7 occurs."""
    rng = np.random.default_rng(seed)
    seqs, labels = [], []
    for _ in range(count):
        body = rng.integers(8, VOCAB, size=int(rng.integers(1, 21))).tolist()
        if rng.random() < 0.5:
            body[int(rng.integers(len(body)))] = 7
        seqs.append([CLS_ID, *body, SEP_ID])
        labels.append(int(7 in body))
    return EncodedSplit.from_sequences(seqs, labels, max_len=24, truncated_share=0.0)


def test_mean_features_do_not_depend_on_the_padding_of_their_batch() -> None:
    model, texts = encoder(), split(PROBE_BATCH_ROWS + 40)  # two batches, the texts sorted by length
    batched = mean_features(model, texts, torch.device("cpu"), contextlib.nullcontext())
    model.eval()
    for i in (0, 5, len(texts) - 1):
        alone = model.pooled(torch.as_tensor(texts[i], dtype=torch.long)[None], None, pooling="mean")
        torch.testing.assert_close(batched[i], alone[0], rtol=1e-5, atol=1e-5)


def test_pooled_is_what_the_classifier_reads() -> None:
    model = encoder().eval()
    ids = torch.as_tensor(split(4)[0], dtype=torch.long)[None]
    cls = model.pooled(ids)
    assert torch.equal(cls, model.pooled(ids, pooling="cls"))
    expected = model.classifier(torch.tanh(model.pooler(cls))).float()
    torch.testing.assert_close(model(ids), expected)
    assert not torch.equal(model.pooled(ids, pooling="mean"), cls)


def test_the_logistic_regression_separates_and_is_deterministic() -> None:
    g = torch.Generator().manual_seed(0)
    features = torch.randn(400, 8, generator=g)
    labels = (features[:, 2] - 0.5 * features[:, 5] > 0).long()
    predict = fit_logistic(features, labels, 2)
    assert float((predict(features) == labels).float().mean()) > 0.97
    assert torch.equal(predict(features), fit_logistic(features, labels, 2)(features))


def test_the_probe_learns_a_token_and_leaves_the_encoder_alone() -> None:
    model = encoder()
    model.train()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    generator = torch.get_rng_state()
    result = linear_probe(
        model, split(300), split(100, seed=1), torch.device("cpu"), contextlib.nullcontext()
    )
    assert set(result) == {"dev_accuracy", "train_accuracy", "seconds"}
    # even a random encoder's mean features carry whether token 7 occurs, at 50/50 labels
    assert result["train_accuracy"] > 0.8 and result["dev_accuracy"] > 0.7
    assert model.training and torch.equal(torch.get_rng_state(), generator)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())
