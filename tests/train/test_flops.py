from __future__ import annotations

import pytest

from dgxperf.train.flops import (
    BatchFlops,
    flops_for_batch,
    flops_per_sample,
    flops_per_token,
    mfu,
    transformer_train_flops,
)
from dgxperf.train.model import param_count, preset

LARGE = preset("large", vocab_size=21128, num_labels=2)


def test_formula_terms_by_hand() -> None:
    config = preset("tiny", vocab_size=100, num_labels=2)
    n = param_count(config, embeddings=False)
    seq = 48
    expected = 6 * n * seq + 12 * config.layers * config.hidden * seq * seq
    assert flops_per_sample(config, seq) == expected
    assert flops_per_token(config, seq) == pytest.approx(expected / seq)
    # The vocabulary does not change the FLOPs: embedding lookups are not matmuls.
    assert flops_per_sample(preset("tiny", vocab_size=9000, num_labels=2), seq) == expected
    assert transformer_train_flops(10, 2, 4, 3) == 6 * 10 * 3 + 12 * 2 * 4 * 9


def test_large_per_sample_flops_at_128() -> None:
    # 6 x 303,363,074 x 128 + 12 x 24 x 1024 x 128^2
    assert flops_per_sample(LARGE, 128) == 232_982_840_832 + 4_831_838_208 == 237_814_679_040


def test_reproduces_the_anchors_mfu_of_stock_hugging_face_bert_large() -> None:
    """ANCHORS.md: HF BERT-large (326M, vocab 21,128), seq 128, 1,346 samples/s on one H200 = 32.4%."""
    hf_total = 325_524_482  # BertForSequenceClassification, 2 labels: "326M"
    hf_embeddings = (21128 + 512 + 2) * 1024  # word, position (512) and token-type tables
    per_sample = transformer_train_flops(hf_total - hf_embeddings, layers=24, hidden=1024, seq_len=128)
    assert 100 * mfu(1346 * per_sample, peak_tflops=989, n_gpus=1) == pytest.approx(32.4, abs=0.2)
    # Our `large` preset has the same non-embedding parameters, so it is counted identically.
    assert flops_per_sample(LARGE, 128) == per_sample
    # The other rows of the table, too (fp32 eager 175/s = 4.2%; bf16+SDPA+fused AdamW 902/s = 21.7%).
    assert 100 * mfu(175 * per_sample, 989) == pytest.approx(4.2, abs=0.1)
    assert 100 * mfu(902 * per_sample, 989) == pytest.approx(21.7, abs=0.1)


def test_mfu_over_several_gpus_and_bad_input() -> None:
    assert mfu(8 * 494.5e12, peak_tflops=989, n_gpus=8) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="peak_tflops must be > 0"):
        mfu(1e12, peak_tflops=0)
    with pytest.raises(ValueError, match="n_gpus >= 1"):
        mfu(1e12, peak_tflops=989, n_gpus=0)


def test_batch_flops_count_real_tokens_for_mfu_and_padded_shape_for_hardware() -> None:
    lengths = [70, 40, 128, 10]
    fixed = flops_for_batch(LARGE, lengths, padded_len=128)
    assert fixed.useful == sum(flops_per_sample(LARGE, n) for n in lengths)
    assert fixed.executed == 4 * flops_per_sample(LARGE, 128)
    assert fixed.real_tokens == 248 and fixed.padded_tokens == 512
    # Attention is quadratic per sample: useful FLOPs are not the total tokens at one length.
    assert fixed.useful < 248 / 128 * flops_per_sample(LARGE, 128)
    assert fixed.padding_waste == pytest.approx(1 - fixed.useful / fixed.executed)
    assert 0.5 < fixed.padding_waste < 0.55
    # Dynamic padding to the longest sample: here it is 128 as well, so the same shape.
    assert flops_for_batch(LARGE, lengths) == fixed
    bucket = flops_for_batch(LARGE, [60, 62, 64])
    assert bucket.padded_tokens == 192 and bucket.executed == 3 * flops_per_sample(LARGE, 64)
    assert bucket.padding_waste < 0.04
    full = flops_for_batch(LARGE, [128, 128])
    assert full.useful == full.executed and full.padding_waste == 0.0


def test_batch_flops_edge_cases() -> None:
    assert flops_for_batch(LARGE, []) == BatchFlops(0.0, 0.0, 0, 0)
    assert BatchFlops(0.0, 0.0, 0, 0).padding_waste == 0.0
    with pytest.raises(ValueError, match="shorter than the longest sample"):
        flops_for_batch(LARGE, [10, 130], padded_len=128)
    with pytest.raises(ValueError, match="at least one token"):
        flops_for_batch(LARGE, [0, 5])
    with pytest.raises(ValueError, match="seq_len must be >= 1"):
        flops_per_token(LARGE, 0)
