from __future__ import annotations

import random
from pathlib import Path

import torch

from dgxperf.train import checkpoint


def test_save_load_round_trip_with_rng(tmp_path: Path) -> None:
    random.seed(3)
    torch.manual_seed(3)
    checkpoint.save(tmp_path, 10, {"step": 10, "w": torch.arange(4)}, rank=0, barrier=lambda: None)
    expected = (random.random(), torch.rand(2))
    latest = checkpoint.latest(tmp_path)
    assert latest is not None and latest.name == "step-00000010"
    state, rng = checkpoint.load(latest, rank=0)
    assert state["step"] == 10 and torch.equal(state["w"], torch.arange(4))
    assert rng is not None
    checkpoint.set_rng_state(rng)
    assert (random.random(), torch.rand(2))[0] == expected[0]
    checkpoint.set_rng_state(rng)
    assert torch.equal(torch.rand(2), expected[1])
    assert checkpoint.load(latest, rank=3)[1] is None  # a rank that did not write one


def test_only_complete_checkpoints_count_and_old_ones_are_pruned(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        checkpoint.save(tmp_path, step, {"step": step}, rank=0, barrier=lambda: None, keep=2)
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-00000002", "step-00000003"]
    (tmp_path / ".step-00000004.partial").mkdir()  # a kill in the middle of a save
    latest = checkpoint.latest(tmp_path)
    assert latest is not None and latest.name == "step-00000003"
    assert checkpoint.latest(tmp_path / "nothing") is None
