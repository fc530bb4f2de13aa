"""train/ema.py: the weight average's arithmetic, its swap for evaluation, its checkpoint state, and a real
CPU training run that scores the average while training exactly as without it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import torch

from dgxperf.train import recipes
from dgxperf.train.ema import WeightAverage
from dgxperf.train.loop import RunOptions, train


def test_the_average_follows_the_weights_with_a_warming_decay() -> None:
    layer = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        layer.weight.fill_(0.0)
    average = WeightAverage(layer, decay=0.99)
    assert average.current_decay() == pytest.approx(1 / 10)  # (1 + 0) / (10 + 0): mostly the new weights
    with torch.no_grad():
        layer.weight.fill_(1.0)
    average.update()
    assert average.shadow[0].item() == pytest.approx(0.9)  # lerp by 1 - 0.1
    for _ in range(2000):
        average.update()
    assert average.current_decay() == 0.99  # the cap, once (1 + t) / (10 + t) passes it
    assert average.shadow[0].item() == pytest.approx(1.0)


def test_evaluation_sees_the_average_and_training_gets_its_weights_back() -> None:
    layer = torch.nn.Linear(2, 1)
    average = WeightAverage(layer, decay=0.5)
    trained = [p.detach().clone() for p in layer.parameters()]
    for p in average.shadow:
        p.fill_(7.0)
    with average.swapped_in():
        assert all(torch.equal(p, torch.full_like(p, 7.0)) for p in layer.parameters())
    assert all(torch.equal(p, t) for p, t in zip(layer.parameters(), trained, strict=True))


def test_the_state_round_trips_and_refuses_another_model() -> None:
    layer = torch.nn.Linear(2, 2)
    average = WeightAverage(layer, decay=0.9)
    average.update()
    average.update()
    restored = WeightAverage(torch.nn.Linear(2, 2), decay=0.9)
    restored.load_state_dict(average.state_dict())
    assert restored.updates == 2
    assert all(torch.equal(a, b) for a, b in zip(average.shadow, restored.shadow, strict=True))
    with pytest.raises(ValueError, match="another number of tensors"):
        WeightAverage(torch.nn.Linear(2, 2, bias=False), decay=0.9).load_state_dict(average.state_dict())


def test_ema_decay_is_checked() -> None:
    for bad in ("1", "-0.1"):
        with pytest.raises(recipes.RecipeError, match=r"ema_decay=.* must be in \[0, 1\)"):
            recipes.apply_overrides(recipes.OPTIMIZED, {"ema_decay": bad})
    with pytest.raises(recipes.RecipeError, match="FSDP shards them"):
        recipes.apply_overrides(recipes.OPTIMIZED, {"ema_decay": "0.99", "fsdp": "true"})


QUICK = {
    "preset": "tiny",
    "train_samples": "256",
    "batch_size": "32",
    "lr": "2e-3",
    "log_every": "2",
    "epochs": "2",
    "compile": "false",
    "num_workers": "0",
    "precision": "fp32",  # most CPUs, CI's included, emulate bf16
}


def test_a_run_with_the_average_trains_the_same_steps_and_scores_other_weights(tmp_path: Path) -> None:
    results, losses = {}, {}
    for decay in ("0", "0.9"):
        cfg = recipes.build_config("optimized", overrides={**QUICK, "ema_decay": decay})
        out = tmp_path / f"ema-{decay}"
        result = train(
            cfg, RunOptions(out_dir=out, cache_dir=tmp_path / "cache", device="cpu", checkpoints=False)
        )
        assert result is not None
        results[decay] = result
        lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        losses[decay] = [r["loss"] for r in lines if r["type"] == "step"]
    # the average draws no random number and changes no weight that trains: the same loss at every step
    assert losses["0"] == losses["0.9"] and len(losses["0"]) >= 8
    # but dev and test score the averaged weights
    assert results["0"]["test"]["loss"] != results["0.9"]["test"]["loss"]
    assert results["0"]["epochs"][0]["dev_loss"] != results["0.9"]["epochs"][0]["dev_loss"]
    assert results["0.9"]["config"]["ema_decay"] == 0.9
    # and the trained weights are scored beside the average: the same scores as the run without one
    plain, averaged = results["0"], results["0.9"]
    assert plain["weight_average"] is None and "dev_accuracy_unaveraged" not in plain["epochs"][0]
    side = averaged["weight_average"]
    assert side["decay"] == 0.9 and side["updates"] == averaged["steps"]
    assert side["test_unaveraged"]["loss"] == pytest.approx(plain["test"]["loss"], rel=1e-6)
    assert side["paired"]["accuracy_b"] == pytest.approx(plain["test"]["accuracy"])
    assert side["paired"]["accuracy_a"] == pytest.approx(averaged["test"]["accuracy"])
    assert side["paired"]["samples"] == averaged["test"]["samples"]
    for mine, theirs in zip(averaged["epochs"], plain["epochs"], strict=True):
        assert mine["dev_loss_unaveraged"] == pytest.approx(theirs["dev_loss"], rel=1e-6)
        assert mine["dev_accuracy_unaveraged"] == pytest.approx(theirs["dev_accuracy"])
    schema = json.loads((Path(recipes.__file__).parents[1] / "schemas" / "train.v1.json").read_text())
    jsonschema.validate(averaged, schema)
    jsonschema.validate(plain, schema)
