"""Shape warm-up (train/warmup.py): every batch shape of the run once before the clock, training unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dgxperf.train import recipes
from dgxperf.train.data import BucketBatchSampler, FixedBatchSampler
from dgxperf.train.warmup import passes_per_shape, run_shapes, warm_shapes
from tests.train.test_loop import config, records, run


def test_run_shapes_are_read_from_the_sampler() -> None:
    """The case that made the shapes come from the sampler: a bucket's remainder is a smaller batch."""
    lengths = np.array([10] * 5 + [30] * 4 + [128] * 3)  # 12 texts
    dynamic = recipes.build_config(
        "optimized", overrides={"max_len": "128", "pad_multiple": "8", "batch_size": "4"}
    )
    bucketed = BucketBatchSampler(lengths, 4, seed=1)
    shapes = run_shapes(bucketed, lengths, dynamic, range(1))
    # sorted by length within the chunk: [128 128 128 30] [30 30 30 10] [10 10 10 10], padded to x8
    assert shapes == [(4, 16, False), (4, 32, False), (4, 128, False)]
    remainder = BucketBatchSampler(np.array([10] * 5 + [30] * 2), 4, seed=1, even=False)
    assert {s[0] for s in run_shapes(remainder, np.array([10] * 5 + [30] * 2), dynamic, range(1))} == {3, 4}
    padded = recipes.build_config("guide", overrides={"max_len": "128", "batch_size": "5"})
    fixed = run_shapes(FixedBatchSampler(12, 5, even=False), lengths, padded, range(3))
    assert {size for size, _, _ in fixed} == {5, 2} and {length for _, length, _ in fixed} == {128}


def test_cuda_graph_modes_warm_each_shape_three_times() -> None:
    """CUDAGraph Trees run a shape's first call eagerly, record on the second and replay from the third:
    all three before the clock, or the timed epoch pays one recording per shape."""
    for mode in ("reduce-overhead", "max-autotune"):
        graphs = recipes.build_config("optimized", overrides={"compile_mode": mode, "compile_scope": "model"})
        assert passes_per_shape(graphs) == 3
    assert passes_per_shape(recipes.OPTIMIZED) == 1  # compile, default mode: one pass compiles
    uncompiled = recipes.apply_overrides(
        recipes.OPTIMIZED, {"compile": "false", "compile_mode": "reduce-overhead"}
    )
    assert passes_per_shape(uncompiled) == 1


def test_warm_shapes_runs_every_shape_the_given_number_of_times() -> None:
    import contextlib

    import torch

    from dgxperf.train.model import Encoder, ModelConfig

    model = Encoder(ModelConfig(vocab_size=40, num_labels=2, max_len=16, layers=1, hidden=8, heads=2, ffn=16))
    seen: list[tuple[int, ...]] = []
    model.register_forward_pre_hook(lambda _, args: seen.append(tuple(args[0].shape)))
    context = type("Context", (), {"device": torch.device("cpu"), "cuda": False, "sync": lambda self: None})()
    shapes = [(2, 8, False), (3, 16, True)]
    warmed = warm_shapes(model, shapes, context, contextlib.nullcontext, passes=3)
    assert seen == [(2, 8)] * 3 + [(3, 16)] * 3
    assert warmed["passes"] == 3 and warmed["shapes"] == [[2, 8, False], [3, 16, True]]
    assert all(p.grad is None for p in model.parameters())
    seen.clear()  # R-Drop's step sends rows twice: the shapes the model will see are the step's rows
    warm_shapes(model, shapes, context, contextlib.nullcontext, rows=lambda batch: batch + (batch + 1) // 2)
    assert seen == [(3, 8), (5, 16)]


def test_warm_shapes_hands_the_cuda_cache_back_between_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA the cache is emptied after each shape's passes (not between the passes of one shape), so the
    warm-up holds one shape's memory; off CUDA nothing is called. The call is recorded by a stand-in: this
    machine has no GPU, so only the order of calls can be checked here."""
    import contextlib

    import torch

    from dgxperf.train.model import Encoder, ModelConfig

    model = Encoder(ModelConfig(vocab_size=40, num_labels=2, max_len=16, layers=1, hidden=8, heads=2, ffn=16))
    events: list[object] = []
    model.register_forward_pre_hook(lambda _, args: events.append(tuple(args[0].shape)))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: events.append("empty"))
    shapes = [(2, 8, False), (3, 16, True), (1, 4, True)]
    for cuda, expected in [
        (True, [(2, 8), (2, 8), "empty", (3, 16), (3, 16), "empty", (1, 4), (1, 4), "empty"]),
        (False, [(2, 8), (2, 8), (3, 16), (3, 16), (1, 4), (1, 4)]),
    ]:
        events.clear()
        context = type(
            "Context", (), {"device": torch.device("cpu"), "cuda": cuda, "sync": lambda self: None}
        )()
        warm_shapes(model, shapes, context, contextlib.nullcontext, passes=2)
        assert events == expected


def test_warm_up_leaves_the_training_exactly_as_it_was(tmp_path: Path) -> None:
    """Same seed with and without the warm-up: identical losses at every logged step and identical test
    figures (its passes use constant inputs, drop their gradients and put every RNG back); and the shapes
    it warmed are exactly those the epoch's batches had."""
    cfg = dict(
        epochs="1",
        compile="false",
        num_workers="0",
        bucketing="true",
        padding="dynamic",
        dropout="0.1",
        precision="fp32",  # most CPUs, CI's included, emulate bf16
        cuda_graphs="false",  # graphs prepare every shape whatever warm_shapes says
    )
    assert recipes.OPTIMIZED.warm_shapes and not recipes.GUIDE.warm_shapes  # on in the optimized recipe
    plain = run(config("optimized", **cfg, warm_shapes="false"), tmp_path / "plain", checkpoints=False)
    warmed = run(config("optimized", **cfg), tmp_path / "warm", checkpoints=False)
    assert plain["shape_warmup"] is None and warmed["shape_warmup"]["seconds"] > 0
    assert warmed["shape_warmup"]["graphs_compiled"] == 0  # compile=false: nothing to compile
    losses = [[s["loss"] for s in records(tmp_path / name, "step")] for name in ("plain", "warm")]
    assert len(losses[0]) >= 3 and losses[0] == losses[1]
    assert plain["test"] == warmed["test"]
    saved = json.loads((tmp_path / "warm" / "result.json").read_text())
    assert saved["config"]["warm_shapes"] is True
    shapes = {tuple(s) for s in warmed["shape_warmup"]["shapes"]}
    assert len(shapes) >= 4 and all(size <= 32 for size, _, _ in shapes)


def test_two_ranks_warm_the_union_of_their_shapes_under_ddp(tmp_path: Path) -> None:
    """Under DDP each warm-up backward all-reduces, so both ranks must warm the same shapes in the same
    order: the union of what each rank's batches have. A mismatch would hang; this run must finish."""
    from tests.train.test_loop import cli, overrides

    out = tmp_path / "ddp"
    result = cli("train", "--recipe", "optimized", "--device", "cpu", "--gpus", "2", "--epochs", "1", "--out",
                 str(out), "--json", *overrides(num_workers="0", compile="false", warm_shapes="true",
                                                 no_sync="false", precision="fp32"), home=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert data["world"]["world_size"] == 2
    shapes = [tuple(s) for s in data["shape_warmup"]["shapes"]]
    assert shapes == sorted(set(shapes)) and len(shapes) >= 4
