"""Shape warm-up (train/warmup.py): every batch shape once before the clock, and the training unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from dgxperf.train import recipes
from dgxperf.train.warmup import batch_lengths
from tests.train.test_loop import config, records, run


def test_batch_lengths_follow_the_padding() -> None:
    assert batch_lengths(recipes.build_config("guide", overrides={"max_len": "128"})) == [128]
    dynamic = recipes.build_config("optimized", overrides={"max_len": "128", "pad_multiple": "8"})
    assert batch_lengths(dynamic) == list(range(8, 129, 8))
    odd = recipes.build_config("optimized", overrides={"max_len": "20", "pad_multiple": "8"})
    assert batch_lengths(odd) == [8, 16, 20]  # rounded up, never past max_len


def test_warm_up_leaves_the_training_exactly_as_it_was(tmp_path: Path) -> None:
    """Same seed with and without the warm-up: identical losses at every logged step and identical test
    accuracy (its passes use constant inputs, drop their gradients and put every RNG back)."""
    cfg = dict(epochs="1", compile="false", num_workers="0", bucketing="true", padding="dynamic", dropout="0.1")
    plain = run(config("optimized", **cfg), tmp_path / "plain", checkpoints=False)
    warmed = run(config("optimized", **cfg, warm_shapes="true"), tmp_path / "warm", checkpoints=False)
    assert plain["shape_warmup"] is None
    # 16 lengths (8..128), each padded and full
    assert warmed["shape_warmup"]["shapes"] == 32 and warmed["shape_warmup"]["seconds"] > 0
    losses = [[s["loss"] for s in records(tmp_path / name, "step")] for name in ("plain", "warm")]
    assert len(losses[0]) >= 3 and losses[0] == losses[1]
    assert plain["test"] == warmed["test"]
    saved = json.loads((tmp_path / "warm" / "result.json").read_text())
    assert saved["config"]["warm_shapes"] is True
