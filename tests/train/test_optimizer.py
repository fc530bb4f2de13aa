"""train/loop.py's optimizer: weight-decay groups and layer-wise lr decay."""

from __future__ import annotations

import pytest
import torch

from dgxperf.train import recipes
from dgxperf.train.loop import layer_depth, make_optimizer
from dgxperf.train.model import Encoder, ModelConfig

CONFIG = ModelConfig(vocab_size=50, num_labels=2, max_len=16, hidden=16, layers=3, heads=2, ffn=32)


def optimizer_for(**overrides: str) -> tuple[Encoder, torch.optim.Optimizer]:
    model = Encoder(CONFIG)
    config = recipes.apply_overrides(recipes.GUIDE, overrides)
    return model, make_optimizer(model, config, 1e-4, context=None)  # type: ignore[arg-type]


def names_in(model: Encoder, group: dict) -> set[str]:
    ids = {id(p) for p in group["params"]}
    return {name for name, p in model.named_parameters() if id(p) in ids}


def test_layer_depth_counts_from_the_embeddings_up() -> None:
    assert [layer_depth(n, 3) for n in ("tok_emb.weight", "pos_emb.weight", "emb_ln.weight")] == [0, 0, 0]
    assert layer_depth("blocks.0.attn.qkv.weight", 3) == 1 and layer_depth("blocks.2.ln2.bias", 3) == 3
    assert [layer_depth(n, 3) for n in ("ln_f.weight", "pooler.weight", "classifier.bias")] == [4, 4, 4]
    assert layer_depth("_orig_mod.blocks.1.mlp.fc1.weight", 3) == 2  # torch.compile's wrapper
    assert layer_depth("_orig_mod.tok_emb.weight", 3) == 0


def test_without_layer_decay_the_two_groups_of_every_earlier_run() -> None:
    model, optimizer = optimizer_for()
    decay, no_decay = optimizer.param_groups  # this order: earlier checkpoints resume into it
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert decay["lr"] == no_decay["lr"] == 1e-4
    assert "blocks.0.attn.qkv.weight" in names_in(model, decay)
    assert {"tok_emb.weight", "blocks.0.ln1.weight", "classifier.bias"} <= names_in(model, no_decay)
    assert len(names_in(model, decay) | names_in(model, no_decay)) == len(list(model.parameters()))


def test_layer_decay_gives_each_layer_the_lr_of_the_one_above_times_the_decay() -> None:
    model, optimizer = optimizer_for(lr_layer_decay="0.5")
    lr_of = {name: group["lr"] for group in optimizer.param_groups for name in names_in(model, group)}
    assert len(lr_of) == len(list(model.parameters()))  # every parameter, once
    assert lr_of["classifier.weight"] == lr_of["ln_f.weight"] == pytest.approx(1e-4)
    assert lr_of["blocks.2.mlp.fc1.weight"] == pytest.approx(0.5e-4)
    assert lr_of["blocks.1.ln1.bias"] == pytest.approx(0.25e-4)
    assert lr_of["blocks.0.attn.qkv.weight"] == pytest.approx(0.125e-4)
    assert lr_of["tok_emb.weight"] == lr_of["pos_emb.weight"] == pytest.approx(0.0625e-4)
    wd_of = {
        name: group["weight_decay"] for group in optimizer.param_groups for name in names_in(model, group)
    }
    assert wd_of["blocks.0.attn.qkv.weight"] == 0.01 and wd_of["blocks.0.ln1.weight"] == 0.0
    assert wd_of["tok_emb.weight"] == 0.0


def test_layer_decay_follows_the_schedule_in_every_group() -> None:
    from dgxperf.train.loop import make_schedule

    _, optimizer = optimizer_for(lr_layer_decay="0.5", warmup_ratio="0.5")
    schedule = make_schedule(optimizer, recipes.apply_overrides(recipes.GUIDE, {"warmup_ratio": "0.5"}), 10)
    ratios = {group["lr"] / group["initial_lr"] for group in optimizer.param_groups}
    assert len(ratios) == 1  # warm-up scales every group alike
    for _ in range(5):
        optimizer.step()
        schedule.step()
    top = max(optimizer.param_groups, key=lambda g: g["initial_lr"])
    bottom = min(optimizer.param_groups, key=lambda g: g["initial_lr"])
    assert top["lr"] / bottom["lr"] == pytest.approx(2**4)


@pytest.mark.parametrize("value", ["0", "1.5", "-0.1"])
def test_layer_decay_outside_0_1_is_refused(value: str) -> None:
    with pytest.raises(recipes.RecipeError, match=rf"lr_layer_decay={value if value != '0' else '0.0'}"):
        recipes.apply_overrides(recipes.GUIDE, {"lr_layer_decay": value})
