from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from dgxperf.train.model import (
    PRESETS,
    Encoder,
    FP32LayerNorm,
    ModelConfig,
    embedding_params,
    param_count,
    preset,
)

VOCAB = 50


def tiny(**overrides: Any) -> ModelConfig:
    return preset("tiny", vocab_size=VOCAB, num_labels=3, max_len=32, **overrides)


def batch(b: int = 4, length: int = 12, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, VOCAB, (b, length), generator=g)


# --- config and presets ---------------------------------------------------------------------------


def test_presets_have_the_documented_shapes() -> None:
    assert set(PRESETS) == {"tiny", "base", "large"}
    large = preset("large", vocab_size=21128, num_labels=2)
    assert (large.layers, large.hidden, large.heads, large.ffn, large.max_len) == (24, 1024, 16, 4096, 128)
    base = preset("base", vocab_size=21128, num_labels=2, max_len=256, dropout=0.0)
    assert (base.layers, base.hidden, base.heads, base.ffn) == (12, 768, 12, 3072)
    assert base.max_len == 256 and base.dropout == 0.0 and base.head_dim == 64


def test_preset_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match=r"unknown model preset 'huge'.*tiny, base, large"):
        preset("huge", vocab_size=100, num_labels=2)
    with pytest.raises(ValueError, match=r"unknown ModelConfig field.*hiddden"):
        preset("tiny", vocab_size=100, num_labels=2, hiddden=32)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hidden": 64, "heads": 3}, "divisible by heads"),
        ({"layers": 0}, "layers must be a positive integer"),
        ({"vocab_size": -1}, "vocab_size must be a positive integer"),
        ({"num_labels": 0}, "num_labels must be a positive integer"),
        ({"ffn": 2.5}, "ffn must be a positive integer"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
        ({"attn_dropout": -0.1}, r"attn_dropout must be in \[0, 1\)"),
        ({"gelu": "relu"}, "gelu must be 'tanh' or 'exact'"),
        ({"layer_norm_eps": 0.0}, "layer_norm_eps must be > 0"),
        ({"init_std": 0.0}, "init_std must be > 0"),
    ],
)
def test_config_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(tiny(), **overrides)


def test_config_is_frozen_and_serialisable() -> None:
    config = tiny()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.hidden = 128  # type: ignore[misc]
    assert ModelConfig(**config.to_json()) == config


# --- parameter counts -----------------------------------------------------------------------------


def _actual(config: ModelConfig) -> int:
    # meta device: the module is built (shapes, no memory), so even `large` is counted in a second.
    with torch.device("meta"):
        model = Encoder(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", ["tiny", "base", "large"])
@pytest.mark.parametrize("pooler", [True, False])
def test_param_count_formula_matches_the_module_for_presets(name: str, pooler: bool) -> None:
    config = preset(name, vocab_size=21128, num_labels=2, pooler=pooler)
    assert param_count(config) == _actual(config)


@pytest.mark.parametrize(
    "overrides",
    [
        {"pre_ln": False},
        {"pre_ln": False, "pooler": False, "ln_fp32": True},
        {"hidden": 96, "heads": 3, "ffn": 200, "layers": 3, "num_labels": 7},
        {"vocab_size": 6000, "max_len": 512, "num_labels": 1},
    ],
)
def test_param_count_formula_matches_the_module_for_custom_configs(overrides: dict[str, Any]) -> None:
    config = dataclasses.replace(tiny(), **overrides)
    model = Encoder(config)
    assert param_count(config) == sum(p.numel() for p in model.parameters()) == param_count(model)
    assert param_count(config, embeddings=False) == param_count(model, embeddings=False)
    assert param_count(config) - param_count(config, embeddings=False) == embedding_params(config)
    assert embedding_params(config) == model.tok_emb.weight.numel() + model.pos_emb.weight.numel()


def test_large_parameter_count_against_hugging_face() -> None:
    config = preset("large", vocab_size=21128, num_labels=2)
    assert param_count(config) == 325_129_218
    assert param_count(config, embeddings=False) == 303_363_074
    # Stock HF BertForSequenceClassification (ANCHORS.md, "326M") has the same blocks, pooler and head;
    # it adds 384 more positions (512 vs 128) and a 2-row token-type table: 395,264 parameters.
    hf_extra = (512 - 128) * 1024 + 2 * 1024
    assert param_count(config) + hf_extra == 325_524_482  # ANCHORS' "326M"
    assert round((param_count(config) + hf_extra) / 1e6) == 326
    # The char vocabulary of the review data is ~6k: the count falls by the token table only.
    assert param_count(dataclasses.replace(config, vocab_size=6000)) == 309_638_146


def test_param_count_of_a_wrapped_module_skips_embeddings() -> None:
    model = Encoder(tiny())
    wrapper = nn.Sequential(model)
    assert param_count(wrapper, embeddings=False) == param_count(tiny(), embeddings=False)


# --- forward --------------------------------------------------------------------------------------


@pytest.mark.parametrize("pre_ln", [True, False])
def test_forward_shapes_and_dtype(pre_ln: bool) -> None:
    model = Encoder(tiny(pre_ln=pre_ln)).eval()
    logits = model(batch(5, 17))
    assert logits.shape == (5, 3) and logits.dtype == torch.float32
    assert torch.isfinite(logits).all()


def test_sequence_longer_than_max_len_is_a_clear_error() -> None:
    model = Encoder(tiny())
    with pytest.raises(ValueError, match="sequence length 33 exceeds the model's max_len 32"):
        model(batch(1, 33))


@pytest.mark.parametrize("pre_ln", [True, False])
def test_padding_does_not_change_logits(pre_ln: bool) -> None:
    torch.manual_seed(0)
    model = Encoder(tiny(pre_ln=pre_ln)).eval()
    ids = batch(3, 10)
    short = model(ids, torch.ones_like(ids, dtype=torch.bool))
    for extra in (1, 6, 22):
        padded = torch.cat([ids, torch.zeros(3, extra, dtype=ids.dtype)], dim=1)
        mask = torch.zeros_like(padded, dtype=torch.bool)
        mask[:, :10] = True
        torch.testing.assert_close(model(padded, mask), short, rtol=1e-5, atol=1e-5)
        # What sits under the padding is invisible too.
        garbage = padded.clone()
        garbage[:, 10:] = torch.randint(1, VOCAB, (3, extra))
        torch.testing.assert_close(model(garbage, mask), short, rtol=1e-5, atol=1e-5)
    # Without the mask the padding is attended to: the test above can fail.
    padded = torch.cat([ids, torch.zeros(3, 6, dtype=ids.dtype)], dim=1)
    assert not torch.allclose(model(padded), short, atol=1e-5)


def test_mean_pooling_ignores_padding_and_differs_from_cls() -> None:
    torch.manual_seed(0)
    model = Encoder(tiny(pooling="mean")).eval()
    ids = batch(3, 10)
    short = model(ids)
    padded = torch.cat([ids, torch.randint(1, VOCAB, (3, 5))], dim=1)
    mask = torch.zeros_like(padded, dtype=torch.bool)
    mask[:, :10] = True
    torch.testing.assert_close(model(padded, mask), short, rtol=1e-5, atol=1e-5)
    cls_model = Encoder(tiny()).eval()
    cls_model.load_state_dict(model.state_dict())
    assert not torch.allclose(cls_model(ids), short, atol=1e-5)
    with pytest.raises(ValueError, match="pooling must be 'cls' or 'mean'"):
        tiny(pooling="max")


def test_mixed_lengths_in_one_batch_match_each_sequence_alone() -> None:
    model = Encoder(tiny()).eval()
    lengths = [3, 9, 14]
    ids = batch(3, 14)
    mask = torch.arange(14)[None, :] < torch.tensor(lengths)[:, None]
    together = model(ids, mask)
    for i, n in enumerate(lengths):
        alone = model(ids[i : i + 1, :n])
        torch.testing.assert_close(together[i : i + 1], alone, rtol=1e-5, atol=1e-5)


def test_no_mask_equals_an_all_true_mask_and_integer_masks_work() -> None:
    model = Encoder(tiny()).eval()
    ids = batch()
    none = model(ids)
    torch.testing.assert_close(model(ids, torch.ones_like(ids, dtype=torch.bool)), none)
    torch.testing.assert_close(model(ids, torch.ones_like(ids)), none)  # HF-style 0/1 integers


def test_dropout_only_in_training() -> None:
    torch.manual_seed(0)
    ids = batch()
    for overrides in ({"dropout": 0.3, "attn_dropout": 0.0}, {"dropout": 0.0, "attn_dropout": 0.5}):
        model = Encoder(tiny(**overrides))
        model.train()
        assert not torch.allclose(model(ids), model(ids))
        model.eval()
        torch.testing.assert_close(model(ids), model(ids), rtol=0, atol=0)
    silent = Encoder(tiny(dropout=0.0, attn_dropout=0.0)).train()
    torch.testing.assert_close(silent(ids), silent(ids), rtol=0, atol=0)


def test_init_follows_the_documented_scheme() -> None:
    torch.manual_seed(0)
    config = preset("tiny", vocab_size=VOCAB, num_labels=3, hidden=256, heads=4, ffn=1024, layers=8)
    model = Encoder(config)
    std = config.init_std
    block = model.blocks[0]
    assert block.attn.qkv.weight.std().item() == pytest.approx(std, rel=0.05)
    assert model.tok_emb.weight.std().item() == pytest.approx(std, rel=0.05)
    assert block.attn.proj.weight.std().item() == pytest.approx(std / 4.0, rel=0.05)  # 1/sqrt(2*8)
    assert block.mlp.fc2.weight.std().item() == pytest.approx(std / 4.0, rel=0.05)
    assert torch.all(block.attn.qkv.bias == 0) and torch.all(block.ln1.weight == 1)
    post = Encoder(dataclasses.replace(config, pre_ln=False))
    assert post.blocks[0].attn.proj.weight.std().item() == pytest.approx(std, rel=0.05)


# --- LayerNorm in float32 -------------------------------------------------------------------------


class _LayerNormDtypes(TorchFunctionMode):  # type: ignore[misc]
    """Records the input and weight dtypes of every F.layer_norm call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch.dtype, torch.dtype]] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.layer_norm:
            weight = args[2] if len(args) > 2 else kwargs["weight"]
            self.calls.append((args[0].dtype, weight.dtype))
        return func(*args, **kwargs)


@pytest.mark.parametrize("pre_ln", [True, False])
def test_ln_fp32_runs_every_layer_norm_in_float32_for_bf16_models(pre_ln: bool) -> None:
    ids = batch()
    for ln_fp32, expected in ((True, torch.float32), (False, torch.bfloat16)):
        model = Encoder(tiny(pre_ln=pre_ln, ln_fp32=ln_fp32)).eval().to(torch.bfloat16)
        with _LayerNormDtypes() as seen:
            logits = model(ids)
        assert len(seen.calls) == 2 * 2 + 1  # two per block, plus the embedding or the final one
        assert all(call == (expected, expected) for call in seen.calls)
        assert logits.dtype == torch.float32


def test_fp32_layer_norm_matches_a_float64_reference_and_keeps_the_dtype() -> None:
    torch.manual_seed(0)
    ln = FP32LayerNorm(256, eps=1e-12)
    with torch.no_grad():
        ln.weight.normal_(1.0, 0.2)
        ln.bias.normal_(0.0, 0.2)
    x = (torch.randn(8, 256) * 30 + 5).to(torch.bfloat16)  # large offset: naive low-precision stats lose it
    out = ln(x)
    assert out.dtype == torch.bfloat16
    reference = F.layer_norm(x.double(), (256,), ln.weight.double(), ln.bias.double(), 1e-12)
    # One rounding to bf16 at the end: within half a bf16 ulp (2^-8 relative) of the exact result.
    torch.testing.assert_close(out.double(), reference, rtol=2**-8, atol=1e-6)


# --- learning -------------------------------------------------------------------------------------


@pytest.mark.parametrize("pre_ln", [True, False])
def test_gradients_reach_every_parameter(pre_ln: bool) -> None:
    torch.manual_seed(0)
    model = Encoder(tiny(pre_ln=pre_ln))
    ids = batch(4, 12)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 7:] = False
    F.cross_entropy(model(ids, mask), torch.tensor([0, 1, 2, 1])).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("pre_ln", [True, False])
def test_tiny_model_overfits_a_tiny_batch(pre_ln: bool) -> None:
    torch.manual_seed(0)
    model = Encoder(tiny(pre_ln=pre_ln, dropout=0.0, attn_dropout=0.0))
    ids = batch(16, 16, seed=1)
    lengths = torch.randint(4, 17, (16,), generator=torch.Generator().manual_seed(2))
    mask = torch.arange(16)[None, :] < lengths[:, None]
    labels = torch.randint(0, 3, (16,), generator=torch.Generator().manual_seed(3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses: list[float] = []
    for _ in range(100):
        loss = F.cross_entropy(model(ids, mask), labels)
        losses.append(loss.item())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    assert losses[0] > 0.9  # about ln(3) at init: the labels are random
    assert losses[-1] < 0.05
    assert (model.eval()(ids, mask).argmax(dim=1) == labels).all()


def test_forward_traces_into_one_graph_without_breaks() -> None:
    """Nothing compile-hostile (.item(), data-dependent branches) in forward: dynamo traces it whole.

    backend="eager" runs dynamo's tracing only (no Inductor code generation), so this stays fast on CPU.
    """
    model = Encoder(tiny()).eval()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    ids = batch()
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[0, 5:] = False
    torch.testing.assert_close(compiled(ids, mask), model(ids, mask))
    torch.testing.assert_close(compiled(ids), model(ids))
