from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dgxperf.train import recipes
from dgxperf.train.recipes import RecipeError


def test_the_three_recipes_validate_and_differ_as_documented() -> None:
    for config in recipes.RECIPES.values():
        config.validate()
    baseline, guide, optimized = (recipes.get_recipe(n) for n in ("baseline", "guide", "optimized"))
    assert baseline.precision == "fp32" and baseline.padding == "max" and baseline.num_workers == 0
    assert not baseline.pin_memory and not baseline.compile and not baseline.static_graph
    # Guide A §4.1-§4.2, §5.2, §6.1, exactly.
    assert guide.precision == "fp16" and guide.ln_fp32
    assert (guide.scaler_init_scale, guide.scaler_growth_factor) == (2.0**16, 2.0)
    assert (guide.scaler_backoff_factor, guide.scaler_growth_interval) == (0.5, 2000)
    assert guide.clip_grad_norm == 1.0
    assert guide.gradient_as_bucket_view and guide.static_graph
    assert guide.grad_accum > 1 and guide.num_workers > 0 and guide.pin_memory and guide.non_blocking
    assert guide.memory_fraction == 0.9 and guide.padding == "max"
    # The same learning hyper-parameters across recipes, so accuracy compares fairly.
    shared = (
        "lr",
        "epochs",
        "warmup_ratio",
        "weight_decay",
        "max_len",
        "preset",
        "seed",
        "dropout",
        "truncation",
        "pooling",
    )
    for field in shared:
        assert getattr(baseline, field) == getattr(guide, field) == getattr(optimized, field), field
    assert optimized.precision == "bf16" and optimized.bucketing and optimized.padding == "dynamic"
    assert optimized.fused_optimizer and optimized.compile and optimized.no_sync
    assert optimized.effective_lr(128) == pytest.approx(2 * optimized.lr)
    assert guide.effective_lr(128) == guide.lr


def test_lr_follows_the_batch_linearly_or_by_the_square_root() -> None:
    optimized = recipes.apply_overrides(recipes.OPTIMIZED, {"lr_scaling": "sqrt"})
    assert optimized.effective_lr(256) == pytest.approx(2 * optimized.lr)  # sqrt(256 / 64) = 2
    assert optimized.effective_lr(64) == pytest.approx(optimized.lr)
    assert recipes.OPTIMIZED.effective_lr(256) == pytest.approx(4 * optimized.lr)
    unscaled = recipes.apply_overrides(recipes.GUIDE, {"lr_scaling": "sqrt"})
    assert unscaled.effective_lr(256) == unscaled.lr  # no lr_reference_batch: lr as written
    with pytest.raises(RecipeError, match="lr_scaling='cube': choose from linear, sqrt"):
        recipes.apply_overrides(recipes.OPTIMIZED, {"lr_scaling": "cube"})


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("lr_layer_decay", "0", r"lr_layer_decay=0.0 must be in \(0, 1\] \(1: one lr for all layers\)"),
        ("warmup_ratio", "1", r"warmup_ratio=1.0 must be in \[0, 1\)"),
        ("memory_fraction", "2", r"memory_fraction=2.0 must be in \(0, 1\]"),
        ("ema_decay", "1", r"ema_decay=1.0 must be in \[0, 1\) \(0: no weight average\)"),
        ("reinit_layers", "-1", r"reinit_layers=-1 must be 0 or more \(0: keep every layer\)"),
        ("label_smoothing", "2", r"label_smoothing=2.0 must be in \[0, 1\)"),
        ("label_smoothing", "-0.1", r"label_smoothing=-0.1 must be in \[0, 1\)"),
        ("rdrop_alpha", "-1", r"rdrop_alpha=-1.0 must be 0 or more \(0: no R-Drop\)"),
        ("rdrop_share", "0", r"rdrop_share=0.0 must be in \(0, 1\] \(1: every row twice\)"),
        ("weight_decay", "-0.01", "weight_decay=-0.01 must be 0 or more"),
        ("beta1", "1", r"beta1=1.0 must be in \[0, 1\)"),
        ("beta2", "1.5", r"beta2=1.5 must be in \[0, 1\)"),
        ("eps", "0", "eps=0.0 must be positive"),
        ("clip_grad_norm", "-1", "clip_grad_norm=-1.0 must be 0 or more"),
        ("scaler_init_scale", "0", "scaler_init_scale=0.0 must be positive"),
        ("scaler_growth_factor", "1", "scaler_growth_factor=1.0 must be above 1"),
        ("scaler_backoff_factor", "1", r"scaler_backoff_factor=1.0 must be in \(0, 1\)"),
        ("scaler_growth_interval", "0", "scaler_growth_interval=0 must be positive"),
        ("bucket_cap_mb", "0", "bucket_cap_mb=0 must be positive"),
        ("powersgd_rank", "0", "powersgd_rank=0 must be positive"),
        ("init_timeout_s", "-5", "init_timeout_s=-5 must be positive"),
        ("num_workers", "-1", "num_workers=-1 must be 0 or more"),
        ("checkpoint_every", "-10", "checkpoint_every=-10 must be 0 or more steps"),
        ("synthetic_samples", "0", "synthetic_samples=0 must be positive"),
        ("lr_reference_batch", "0", "lr_reference_batch=0 must be positive"),
    ],
)
def test_a_number_out_of_range_is_refused_by_name(field: str, value: str, rule: str) -> None:
    """What these fields feed (AdamW, GradScaler, cross-entropy, DDP, the DataLoader) would otherwise fail
    deep inside PyTorch, after the data is prepared, as an unexplained RuntimeError."""
    with pytest.raises(RecipeError, match=rule):
        recipes.apply_overrides(recipes.OPTIMIZED, {field: value})


def test_the_edges_of_those_ranges_are_accepted() -> None:
    edges = {
        "label_smoothing": "0",
        "weight_decay": "0",
        "beta1": "0",
        "clip_grad_norm": "0",
        "num_workers": "0",
        "checkpoint_every": "0",
        "lr_reference_batch": "none",
    }
    config = recipes.apply_overrides(recipes.GUIDE, edges)
    assert (config.label_smoothing, config.clip_grad_norm, config.lr_reference_batch) == (0.0, 0.0, None)


def test_cuda_graph_modes_need_the_whole_model_compiled() -> None:
    """compile_mode=reduce-overhead with per-block compile died on the H200's first steps (CUDA graph
    output overwritten, 2026-12-04-h200-encoder-j): refused up front, naming the two settings that work."""
    for mode in ("reduce-overhead", "max-autotune"):
        with pytest.raises(RecipeError, match=r"fail with compile_scope=blocks.*compile_scope=model"):
            recipes.apply_overrides(recipes.OPTIMIZED, {"compile_mode": mode})
        whole = recipes.build_config("optimized", overrides={"compile_mode": mode, "compile_scope": "model"})
        assert (whole.compile_mode, whole.compile_scope) == (mode, "model")
        assert not whole.cuda_graphs  # torch.compile's graphs replace optimized's own whole-step ones
    no_graphs = recipes.apply_overrides(recipes.OPTIMIZED, {"compile_mode": "max-autotune-no-cudagraphs"})
    assert no_graphs.compile_scope == "blocks"
    # not compiled: the mode is never used, so nothing to refuse
    eager = recipes.apply_overrides(
        recipes.OPTIMIZED, {"compile": "false", "compile_mode": "reduce-overhead"}
    )
    assert not eager.compile
    with pytest.raises(RecipeError, match="compile_mode='fast': choose from default, reduce-overhead"):
        recipes.apply_overrides(recipes.OPTIMIZED, {"compile_mode": "fast"})


def test_the_cpp_wrapper_needs_compile() -> None:
    assert recipes.apply_overrides(recipes.OPTIMIZED, {"compile_cpp_wrapper": "true"}).compile_cpp_wrapper
    with pytest.raises(RecipeError, match=r"compile_cpp_wrapper=true .* set compile=true"):
        recipes.apply_overrides(recipes.GUIDE, {"compile_cpp_wrapper": "true"})


def test_a_bf16_residual_stream_needs_bf16_and_pre_ln() -> None:
    assert (
        recipes.OPTIMIZED.bf16_residual
        and not recipes.GUIDE.bf16_residual
        and not recipes.BASELINE.bf16_residual
    )
    with pytest.raises(RecipeError, match=r"bf16_residual=true .* set precision=bf16 \(not fp16\)"):
        recipes.apply_overrides(recipes.GUIDE, {"bf16_residual": "true"})
    with pytest.raises(RecipeError, match=r"bf16_residual=true needs pre_ln=true"):
        recipes.apply_overrides(recipes.OPTIMIZED, {"bf16_residual": "true", "pre_ln": "false"})


def test_overrides_are_typed_and_checked() -> None:
    config = recipes.apply_overrides(
        recipes.BASELINE,
        {"lr": "3e-4", "epochs": "5", "compile": "true", "max_steps": "none", "batch_size": "1e2"},
    )
    assert (config.lr, config.epochs, config.compile, config.max_steps, config.batch_size) == (
        3e-4,
        5,
        True,
        None,
        100,
    )
    with pytest.raises(RecipeError, match="unknown recipe field 'lrr'"):
        recipes.apply_overrides(recipes.BASELINE, {"lrr": "1"})
    with pytest.raises(RecipeError, match="not a valid float"):
        recipes.apply_overrides(recipes.BASELINE, {"lr": "fast"})
    with pytest.raises(RecipeError, match="not a valid int"):
        recipes.apply_overrides(recipes.BASELINE, {"epochs": "2.5"})
    with pytest.raises(RecipeError, match="not a valid bool"):
        recipes.apply_overrides(recipes.BASELINE, {"compile": "maybe"})
    with pytest.raises(RecipeError, match="precision"):
        recipes.apply_overrides(recipes.BASELINE, {"precision": "fp8"})
    with pytest.raises(RecipeError, match="bucketing needs padding=dynamic"):
        recipes.apply_overrides(recipes.BASELINE, {"bucketing": "true"})
    with pytest.raises(RecipeError, match="unknown recipe 'fast'"):
        recipes.get_recipe("fast")


def test_yaml_file_then_command_line(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("recipe: guide\nlr: 0.0003\nepochs: 4\ncompile: false\n")
    config = recipes.build_config("baseline", yaml_file=path, overrides={"epochs": "6"})
    assert config.recipe == "guide" and config.precision == "fp16"
    assert config.lr == 3e-4 and config.epochs == 6
    bad = tmp_path / "bad.yaml"
    bad.write_text("lr: [1, 2\n")
    with pytest.raises(RecipeError, match="not valid YAML"):
        recipes.build_config("baseline", yaml_file=bad)
    listing = tmp_path / "list.yaml"
    listing.write_text("- lr\n")
    with pytest.raises(RecipeError, match="mapping"):
        recipes.build_config("baseline", yaml_file=listing)
    with pytest.raises(RecipeError, match="cannot read"):
        recipes.build_config("baseline", yaml_file=tmp_path / "missing.yaml")


def test_diff_lists_only_changed_fields() -> None:
    rows = dict((k, (a, b)) for k, a, b in recipes.diff(recipes.GUIDE, recipes.OPTIMIZED))
    assert rows["precision"] == ("fp16", "bf16")
    assert "lr" not in rows and "preset" not in rows


def test_an_unknown_model_preset_is_a_recipe_error_named_like_the_model_presets() -> None:
    """A misspelt preset used to reach the model builder and end as a 'dgxperf bug' after the data was read."""
    from dgxperf.train.model import PRESETS

    assert set(recipes.MODEL_PRESETS) == set(PRESETS)
    with pytest.raises(RecipeError, match="preset='huge': choose from tiny, base, large"):
        recipes.apply_overrides(recipes.OPTIMIZED, {"preset": "huge"})


def test_a_run_records_the_fields_it_changed_in_its_recipe() -> None:
    assert recipes.changes_from_recipe(recipes.build_config("optimized")) == {}
    assert recipes.changes_from_recipe(recipes.build_config("optimized", overrides={"lr": "3e-4"})) == {
        "lr": 3e-4
    }
    accumulated = recipes.build_config("optimized", overrides={"grad_accum": "4"})
    assert recipes.changes_from_recipe(accumulated) == {"grad_accum": 4, "cuda_graphs": False}
    assert recipes.changes_from_recipe(dataclasses.replace(recipes.GUIDE, recipe="mine")) is None


def test_optimizeds_bf16_residual_stream_gives_way_to_a_field_asked_for_that_rules_it_out() -> None:
    """As its graphs do: precision=fp16 or pre_ln=false on optimized trains with the fp32 stream and is told
    why, while bf16_residual=true asked for alongside them is still an error."""
    fp16 = recipes.build_config("optimized", overrides={"precision": "fp16"})
    assert not fp16.bf16_residual and recipes.changes_from_recipe(fp16) == {
        "precision": "fp16",
        "bf16_residual": False,
        "cuda_graphs": False,
    }
    assert recipes.residual_given_way(fp16) == (
        "optimized keeps its residual stream in bf16, which precision=fp16 rules out: this run keeps it in fp32"
    )
    both = recipes.build_config("optimized", overrides={"precision": "fp32", "pre_ln": "false"})
    assert "which precision=fp32 and pre_ln=false rule out" in (recipes.residual_given_way(both) or "")
    assert recipes.build_config("optimized", overrides={"lr": "3e-4"}).bf16_residual  # nothing in the way
    assert recipes.residual_given_way(recipes.build_config("optimized")) is None
    asked_off = recipes.build_config("optimized", overrides={"bf16_residual": "false"})
    assert not asked_off.bf16_residual and recipes.residual_given_way(asked_off) is None
    assert recipes.residual_given_way(recipes.build_config("guide")) is None
    with pytest.raises(RecipeError, match=r"set precision=bf16 \(not fp16\)"):
        recipes.build_config("optimized", overrides={"precision": "fp16", "bf16_residual": "true"})


def test_a_run_that_cannot_replay_its_recipes_graphs_is_told_which_field_rules_them_out() -> None:
    accumulated = recipes.build_config("optimized", overrides={"grad_accum": "4"})
    assert recipes.graphs_given_way(accumulated) == (
        "optimized replays its step as CUDA graphs, which grad_accum=4 rules out: this run takes the eager step"
    )
    both = recipes.build_config("optimized", overrides={"grad_accum": "2", "precision": "fp16"})
    assert "which grad_accum=2 and precision=fp16 rule out" in (recipes.graphs_given_way(both) or "")
    assert recipes.graphs_given_way(recipes.build_config("optimized")) is None  # graphs on: nothing to say
    assert (
        recipes.graphs_given_way(recipes.build_config("optimized", overrides={"cuda_graphs": "false"}))
        is None
    )
    assert recipes.graphs_given_way(recipes.build_config("guide", overrides={"grad_accum": "4"})) is None
