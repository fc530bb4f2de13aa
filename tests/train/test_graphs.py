"""Whole-step CUDA graphs (train/graphs.py). There is no GPU here, so nothing is captured: the graphed step
runs eagerly on its static tensors, and these tests hold its bookkeeping (static inputs, gradients zeroed in
place, tensor learning rates, the optimizer state made before capture) to the ordinary loop's losses."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from dgxperf.train import recipes
from dgxperf.train.graphs import CaptureError, GraphedStep, capture_order
from dgxperf.train.loop import TrainError, make_optimizer, make_schedule
from dgxperf.train.model import Encoder, ModelConfig
from dgxperf.train.recipes import RecipeError
from tests.test_schemas import assert_valid
from tests.train.test_loop import cli, config, overrides, records, run

FAST = {"compile": "false", "num_workers": "0", "epochs": "2"}


class _Context:
    device = torch.device("cpu")
    cuda = False
    distributed = False

    def sync(self) -> None:
        pass


def _small(pooling: str = "cls", graph_grads: str = "pool") -> tuple[Encoder, Any, Any, GraphedStep]:
    torch.manual_seed(0)
    shape = {"layers": 1, "hidden": 8, "heads": 2, "ffn": 16}
    model = Encoder(ModelConfig(vocab_size=40, num_labels=2, max_len=16, pooling=pooling, **shape))
    cfg = recipes.apply_overrides(
        recipes.OPTIMIZED, {"cuda_graphs": "true", "compile": "false", "graph_grads": graph_grads}
    )
    optimizer = make_optimizer(model, cfg, 1e-2, _Context())  # type: ignore[arg-type]
    schedule = make_schedule(optimizer, cfg, total_steps=10)
    return model, optimizer, schedule, GraphedStep(model, optimizer, cfg, _Context(), contextlib.nullcontext)


def test_the_graphed_step_trains_exactly_as_the_eager_loop(tmp_path: Path) -> None:
    """Same seed, with and without: identical loss at every logged step, identical test answers."""
    plain = run(config("optimized", cuda_graphs="false", **FAST), tmp_path / "eager")
    graphed = run(config("optimized", cuda_graphs="true", **FAST), tmp_path / "graphed")
    assert [s["loss"] for s in records(tmp_path / "graphed", "step")] == [
        s["loss"] for s in records(tmp_path / "eager", "step")
    ]
    assert [s["lr"] for s in records(tmp_path / "graphed", "step")] == [
        s["lr"] for s in records(tmp_path / "eager", "step")
    ]
    assert (
        graphed["test"] == plain["test"]
        and graphed["epochs"][-1]["dev_loss"] == plain["epochs"][-1]["dev_loss"]
    )
    assert graphed["cuda_graphs"]["captured"] == 0 and graphed["cuda_graphs"]["device"].startswith("cpu")
    assert graphed["cuda_graphs"]["capture_peak_memory_bytes"] is None  # nothing recorded on a CPU
    assert graphed["cuda_graphs"]["capture_pool_bytes"] is None
    assert plain["cuda_graphs"] is None
    assert plain["recipe_changes"]["cuda_graphs"] is False and "cuda_graphs" not in graphed["recipe_changes"]
    assert_valid("train", graphed)
    assert graphed["shape_warmup"]["shapes"] == plain["shape_warmup"]["shapes"]


def test_either_way_of_keeping_the_gradients_trains_exactly_as_the_eager_loop(tmp_path: Path) -> None:
    """graph_grads=pool (optimized's) drops the gradients before each step for backward to write; fixed
    zeroes gradients kept at fixed addresses and adds into them: the same sums, so the same loss at every
    logged step."""
    extra = {**FAST, "rdrop_alpha": "4"}
    plain = run(config("optimized", cuda_graphs="false", **extra), tmp_path / "eager")
    pooled = run(config("optimized", cuda_graphs="true", **extra), tmp_path / "pool")
    fixed = run(config("optimized", cuda_graphs="true", graph_grads="fixed", **extra), tmp_path / "fixed")
    losses = [s["loss"] for s in records(tmp_path / "eager", "step")]
    assert losses[-1] < losses[0]
    for name, result in (("pool", pooled), ("fixed", fixed)):
        assert [s["loss"] for s in records(tmp_path / name, "step")] == losses, name
        assert result["test"] == plain["test"] and result["config"]["graph_grads"] == name, name
        assert_valid("train", result)
    assert "graph_grads" not in pooled["recipe_changes"] and fixed["recipe_changes"]["graph_grads"] == "fixed"


def test_gradients_in_the_pool_are_not_kept_between_steps() -> None:
    model, optimizer, _, graphed = _small(graph_grads="pool")
    graphed.prepare([(2, 8, False), (3, 16, True)])
    assert graphed.params and graphed.grads == []  # nothing allocated once to zero
    assert all(p.grad is None for p in model.parameters())
    states = [optimizer.state[p] for p in graphed.params]
    assert states and all(float(s["step"]) == 0 for s in states)  # the rehearsal made the state all the same
    ids, labels = torch.ones(2, 8, dtype=torch.long), torch.zeros(2, dtype=torch.long)
    before = [p.detach().clone() for p in model.parameters()]
    graphed(ids, torch.ones(2, 8, dtype=torch.bool), labels)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))  # it stepped
    with pytest.raises(recipes.RecipeError, match="graph_grads"):
        recipes.apply_overrides(recipes.OPTIMIZED, {"graph_grads": "sometimes"})


@pytest.mark.parametrize("share", ["1", "0.5"])
def test_r_drop_trains_the_same_graphed_and_eager(tmp_path: Path, share: str) -> None:
    """R-Drop's second-pass rows (all, or every other one gathered on the device) and KL term run inside the
    recorded step as in the eager one, and the loss logged stays the cross-entropy: the run learns."""
    # rdrop_alpha=4: the recipes' own since 2026-12-06, asked for here all the same
    extra = {**FAST, "rdrop_alpha": "4", "rdrop_share": share}
    plain = run(config("optimized", cuda_graphs="false", **extra), tmp_path / "eager")
    graphed = run(config("optimized", cuda_graphs="true", **extra), tmp_path / "graphed")
    losses = [s["loss"] for s in records(tmp_path / "eager", "step")]
    assert [s["loss"] for s in records(tmp_path / "graphed", "step")] == losses
    assert graphed["test"] == plain["test"] and losses[-1] < losses[0]
    assert graphed["config"]["rdrop_alpha"] == 4.0 and "rdrop_alpha" not in plain["recipe_changes"]
    assert graphed["config"]["rdrop_share"] == float(share)
    assert_valid("train", graphed)


def test_a_graphed_run_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    """Resumed after epoch 1: the optimizer state comes from the checkpoint (not made afresh at step 0) and
    the learning rates from the schedule, so epoch 2 and the test come out as in the uninterrupted run."""
    cfg = config("optimized", cuda_graphs="true", precision="fp32", **FAST)  # fp32: this CPU emulates bf16
    whole = run(cfg, tmp_path / "run")
    checkpoints = tmp_path / "run" / "checkpoints"
    first = sorted(p.name for p in checkpoints.glob("step-*"))[0]
    (checkpoints / "latest").write_text(first + "\n")  # back to the end of epoch 1
    resumed = run(cfg, tmp_path / "run", resume=True)
    assert resumed["test"] == whole["test"]
    assert resumed["epochs"][-1]["dev_loss"] == whole["epochs"][-1]["dev_loss"]


def test_optimizer_state_is_made_before_capture_and_moves_no_weight() -> None:
    model, optimizer, schedule, graphed = _small()
    before = [p.detach().clone() for p in model.parameters()]
    graphed.prepare([(2, 8, False), (3, 16, True)])
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    states = [optimizer.state[p] for p in graphed.params]
    assert states and all(float(s["step"]) == 0 for s in states)
    assert all(not s["exp_avg"].any() and not s["exp_avg_sq"].any() for s in states)
    assert [float(lr) for lr in graphed.lrs] == schedule.get_last_lr()  # put back after the step at lr 0
    assert all(g is not None and not g.any() for g in graphed.grads)  # allocated once, zeroed
    assert sorted(graphed.batches) == [(2, 8, False), (3, 16, True)]


def test_the_rehearsal_keeps_a_loaded_optimizer_state_and_the_random_generators() -> None:
    """Before capture every shape's step runs once at lr 0 (every kernel of the step, run before it is
    recorded). A resumed run's optimizer state must come out of it bit for bit, and so must the generators
    that draw dropout."""
    model, optimizer, _, graphed = _small()
    model.train()
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    optimizer.step()  # a state as a checkpoint would bring it: step 1, moments not zero
    loaded = {p: {k: v.clone() for k, v in optimizer.state[p].items()} for p in optimizer.state}
    for p in model.parameters():
        p.grad = None
    weights = [p.detach().clone() for p in model.parameters()]
    generator = torch.get_rng_state()
    graphed.prepare([(2, 8, False), (3, 16, True)])
    assert torch.equal(torch.get_rng_state(), generator)
    assert all(torch.equal(a, b) for a, b in zip(weights, model.parameters(), strict=True))
    for p, state in loaded.items():
        assert all(torch.equal(optimizer.state[p][k], v) for k, v in state.items())


def test_schedule_steps_reach_the_tensors_the_graphs_read() -> None:
    _, optimizer, schedule, graphed = _small()
    kept = list(graphed.lrs)
    graphed.prepare([(2, 8, False)])
    for _ in range(3):
        graphed(torch.full((2, 8), 5), torch.ones(2, 8, dtype=torch.bool), torch.tensor([0, 1]))
        schedule.step()
        graphed.schedule_stepped()
        assert [float(lr) for lr in graphed.lrs] == pytest.approx([float(v) for v in schedule.get_last_lr()])
        assert [g["lr"] for g in optimizer.param_groups] == kept and graphed.lrs == kept  # the same tensors
    optimizer.param_groups[0]["lr"] = 0.5  # a scheduler that assigns a number instead of filling the tensor
    graphed.schedule_stepped()
    assert optimizer.param_groups[0]["lr"] is kept[0] and float(kept[0]) == 0.5


def test_a_shape_the_sampler_did_not_announce_still_trains() -> None:
    model, _, _, graphed = _small()
    graphed.prepare([(2, 8, False)])
    before = [p.detach().clone() for p in model.parameters()]
    loss = graphed(torch.full((4, 16), 5), None, torch.tensor([0, 1, 0, 1]))
    assert torch.isfinite(loss) and (4, 16, True) in graphed.batches
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.parametrize(
    ("recipe", "fields", "named"),
    [
        ("optimized", {"grad_accum": "2"}, "grad_accum=2"),
        ("optimized", {"precision": "fp16"}, "precision=fp16"),
        ("optimized", {"fsdp": "true"}, "fsdp=true"),
        ("optimized", {"activation_checkpointing": "true"}, "activation_checkpointing=true"),
        (
            "optimized",
            {"compile_mode": "reduce-overhead", "compile_scope": "model"},
            "compile_mode=reduce-overhead",
        ),
        ("guide", {}, "grad_accum=2: one micro-batch a step (set grad_accum=1); precision=fp16"),
    ],
)
def test_what_a_replayed_step_cannot_do_is_refused_by_name(
    recipe: str, fields: dict[str, str], named: str
) -> None:
    with pytest.raises(
        RecipeError, match="cuda_graphs=true records one whole step; it cannot with .*" + re.escape(named)
    ):
        recipes.build_config(recipe, overrides={**fields, "cuda_graphs": "true"})


def test_several_processes_fall_back_to_the_eager_step() -> None:
    graphed = recipes.apply_overrides(recipes.OPTIMIZED, {"cuda_graphs": "true"})
    assert recipes.for_world(graphed, 1) == (graphed, None)
    eager, note = recipes.for_world(graphed, 8)
    assert eager == dataclasses.replace(graphed, cuda_graphs=False)
    assert note is not None and "the 8 processes run the eager step" in note
    assert recipes.for_world(recipes.GUIDE, 8) == (recipes.GUIDE, None)  # nothing to say


def test_optimized_replays_its_step_unless_a_field_asked_for_rules_it_out() -> None:
    assert recipes.build_config("optimized").cuda_graphs is True
    assert recipes.build_config("optimized", overrides={"lr": "3e-4"}).cuda_graphs is True
    for fields in ({"grad_accum": "4"}, {"precision": "fp16"}, {"fsdp": "true"},
                   {"compile-mode": "reduce-overhead", "compile-scope": "model"}):  # fmt: skip
        config = recipes.build_config("optimized", overrides=fields)
        assert config.cuda_graphs is False, fields  # the field asked for wins; the run takes the eager step
        assert recipes.build_config("optimized", overrides={**fields, "cuda_graphs": "false"}) == config
    assert recipes.build_config("optimized", overrides={"cuda_graphs": "false"}).cuda_graphs is False
    assert recipes.build_config("guide").cuda_graphs is False  # guide and baseline never turn them on


def test_a_recipe_file_that_rules_graphs_out_runs_eagerly_too(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("recipe: optimized\ngrad_accum: 2\n")
    assert recipes.build_config("baseline", yaml_file=recipe).cuda_graphs is False
    recipe.write_text("recipe: optimized\ngrad_accum: 2\ncuda_graphs: true\n")
    with pytest.raises(RecipeError, match="grad_accum=2"):
        recipes.build_config("baseline", yaml_file=recipe)  # asked for both: refused, by name


def test_two_torchrun_processes_train_eagerly_and_say_so_once(tmp_path: Path) -> None:
    """Real torchrun and gloo: the run goes on without graphs, the note comes once (not once a rank), and
    the result records what ran."""
    result = cli("train", "--recipe", "optimized", "--device", "cpu", "--gpus", "2", "--epochs", "1", "--json",
                 "--no-checkpoint", "--out", str(tmp_path / "ddp"),
                 *overrides(cuda_graphs="true", compile="false", num_workers="0", train_samples="256",
                            precision="fp32"),
                 home=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("the 2 processes run the eager step instead") == 1
    data = json.loads(result.stdout)
    assert data["world"]["world_size"] == 2
    assert data["config"]["cuda_graphs"] is False and data["cuda_graphs"] is None
    assert "Traceback" not in result.stderr


def test_a_step_that_cannot_be_recorded_stops_the_run_with_the_shape_and_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No GPU here, so CUDA's refusal is stood in for: the reason and the batch shape reach the user, and
    the run stops (a process whose capture failed has CUDA state not to be trusted)."""
    _, _, _, graphed = _small()

    @contextlib.contextmanager
    def refusing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore detail")
        yield

    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: object())
    monkeypatch.setattr(torch.cuda, "graph", refusing)
    graphed.capture = True
    with pytest.raises(
        CaptureError, match=r"batch shape \(2, 8, False\) failed: CUDA error: operation not permitted"
    ):
        graphed._capture((2, 8, False), graphed._static_batch((2, 8, False)))

    def failed(self: GraphedStep, shapes: list[Any]) -> None:
        raise CaptureError("recording the step for batch shape (32, 16, False) failed: a reason")

    monkeypatch.setattr(GraphedStep, "prepare", failed)
    with pytest.raises(
        TrainError,
        match=r"cuda_graphs=true: recording .* a reason\. Train without it: --set cuda_graphs=false",
    ):
        run(config("optimized", cuda_graphs="true", **FAST), tmp_path / "run")


@pytest.mark.parametrize(("pooling", "graph_grads"), [("cls", "pool"), ("mean", "pool"), ("cls", "fixed")])
def test_the_recorded_step_never_reads_a_value_back_to_the_host(pooling: str, graph_grads: str) -> None:
    """A CUDA graph cannot record a host read: `.item()`, `bool(tensor)`, `nonzero` (a shape that depends on
    values) fail the capture. Every op the step dispatches is listed here, on the CPU, so that a change to the
    model, the loss or the clipping that adds one fails this test rather than the next GPU session."""
    from torch.utils._python_dispatch import TorchDispatchMode

    host_reads = {"aten._local_scalar_dense", "aten.item", "aten.nonzero", "aten.is_nonzero", "aten.equal"}
    seen: set[str] = set()

    class Recorder(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            seen.add(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    _, _, _, graphed = _small(pooling, graph_grads)
    graphed.prepare([(2, 8, False), (2, 8, True)])
    for static in graphed.batches.values():
        with Recorder():
            graphed._step(static)
    assert {"aten._fused_adamw_", "aten._foreach_norm"} <= seen  # the whole step ran
    # fixed gradients are zeroed inside the step; pool ones are written afresh by backward
    assert ("aten._foreach_zero_" in seen) == (graph_grads == "fixed")
    assert not seen & host_reads, seen & host_reads


def test_an_epochs_peak_memory_includes_the_graphs_own() -> None:
    """Replays allocate nothing, so an epoch's max_memory_allocated misses the activations that live in the
    graphs' pool (on the H200: 5.6 GB graphed against 19.1 GB eager, about the weights, gradients and AdamW
    moments alone); the epoch reports the larger of its own peak and the captures'."""
    *_, step = _small()
    assert step.epoch_peak(5) == 5 and step.epoch_peak(None) is None  # nothing captured (a CPU)
    step.capture_peak_bytes = 19
    assert step.epoch_peak(5) == 19 and step.epoch_peak(25) == 25
    assert step.epoch_peak(None) is None  # a CPU run has no peak to report


def test_shapes_are_recorded_largest_first_so_later_captures_reuse_the_pool() -> None:
    """A block freed in one capture can be split for a smaller request of a later one, never grown: recorded
    smallest first (the sampler's order), a 256-token fine-tune's 32 shapes ran the H100 out of memory at the
    19th. Most tokens first; at equal tokens the masked shape (one more input) first; ties broken stably."""
    shapes = [
        (128, 8, False),
        (128, 256, True),
        (57, 64, False),
        (128, 256, False),
        (64, 128, False),
        (32, 256, True),
    ]
    assert capture_order(shapes) == [
        (128, 256, False),
        (128, 256, True),
        (64, 128, False),
        (32, 256, True),
        (57, 64, False),
        (128, 8, False),
    ]
    assert capture_order([]) == []
    assert sorted(capture_order(shapes)) == sorted(shapes)  # a reordering: nothing lost, nothing added
