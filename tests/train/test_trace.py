"""train/trace.py: the profile of a few optimizer steps, from a real CPU training run's torch.profiler trace,
and the summary's arithmetic on small hand-written traces (the GPU parts a CPU cannot produce)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dgxperf.render import profile_line
from dgxperf.train import recipes
from dgxperf.train.loop import RunOptions, config_differences, train
from dgxperf.train.trace import TraceError, is_fp32_gemm, load_trace, summarize_trace

QUICK = {"preset": "tiny", "train_samples": "256", "batch_size": "32", "lr": "2e-3", "log_every": "4",
         "compile": "false", "num_workers": "0", "epochs": "1"}  # fmt: skip


SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "src/dgxperf/schemas/train.v1.json").read_text())


PROFILE_SCHEMA = jsonschema.Draft202012Validator({"$defs": SCHEMA["$defs"], "$ref": "#/$defs/profile"})


def schema_errors(document: Any) -> list[str]:
    return [error.message for error in jsonschema.Draft202012Validator(SCHEMA).iter_errors(document)]


def event(name: str, cat: str, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def steps_trace(*extra: dict[str, Any]) -> dict[str, Any]:
    """Two 1 ms steps (0-1000 µs, 1000-2000 µs)."""
    marks = [
        event("ProfilerStep#3", "user_annotation", 0, 1000),
        event("ProfilerStep#4", "user_annotation", 1000, 1000),
    ]
    return {"traceEvents": [*marks, *extra]}


def test_a_real_cpu_run_profiles_the_asked_steps(tmp_path: Path) -> None:
    cfg = recipes.build_config("optimized", overrides={**QUICK, "profile_steps": "3", "profile_after": "1"})
    out = tmp_path / "run"
    result = train(
        cfg, RunOptions(out_dir=out, cache_dir=tmp_path / "cache", device="cpu", checkpoints=False)
    )
    assert result is not None
    profile = result["profile"]
    assert profile["steps"] == 3 and profile["trace"] == str(out / "profile" / "trace.json.gz")
    assert profile["step_ms_min"] <= profile["step_ms"] <= profile["step_ms_max"]
    # no GPU in the trace: no busy share, launches or kernels, and nothing invented for them
    assert profile["gpu_busy_share"] is None and profile["launches_per_step"] is None
    assert profile["top_kernels"] == [] and profile["median_kernel_us"] is None
    names = [op["name"] for op in profile["top_cpu_ops"]]
    assert any(name.startswith("aten::") for name in names)  # the model's operators, by self time
    assert all(op["self_ms_per_step"] >= 0 for op in profile["top_cpu_ops"])
    assert (
        summarize_trace(load_trace(out / "profile" / "trace.json.gz"))
        | {"trace": profile["trace"], "requested_steps": 3}
        == profile
    )
    assert schema_errors(json.loads((out / "result.json").read_text())) == []
    assert profile_line(profile).startswith("profile: 3 steps, ")


def test_a_run_that_ends_before_its_profiled_steps_says_so(tmp_path: Path) -> None:
    cfg = recipes.build_config("optimized", overrides={**QUICK, "profile_steps": "3", "profile_after": "500"})
    result = train(cfg, RunOptions(out_dir=tmp_path / "run", cache_dir=tmp_path / "cache", device="cpu",
                                   checkpoints=False))  # fmt: skip
    assert result is not None
    assert result["profile"]["trace"] is None and "lower profile_after" in result["profile"]["error"]
    assert profile_line(result["profile"]).startswith("profile: the run ended before step 502")
    assert schema_errors(result) == []


def test_a_run_that_ends_inside_its_profiled_steps_keeps_what_it_has(tmp_path: Path) -> None:
    cfg = recipes.build_config("optimized", overrides={**QUICK, "profile_steps": "20", "profile_after": "1"})
    result = train(cfg, RunOptions(out_dir=tmp_path / "run", cache_dir=tmp_path / "cache", device="cpu",
                                   checkpoints=False))  # fmt: skip
    assert result is not None
    profile = result["profile"]
    assert profile["steps"] == result["steps"] - 2 and profile["requested_steps"] == 20  # 8 steps: 1 + 1 + 6
    assert "6 steps of the 20 asked (the run ended first)" in profile_line(profile)
    assert schema_errors(result) == []


def test_no_profile_unless_asked(tmp_path: Path) -> None:
    cfg = recipes.build_config("optimized", overrides={**QUICK, "max_steps": "2"})
    result = train(cfg, RunOptions(out_dir=tmp_path / "run", cache_dir=tmp_path / "cache", device="cpu",
                                   checkpoints=False))  # fmt: skip
    assert result is not None and result["profile"] is None
    assert not (tmp_path / "run" / "profile").exists()


def test_busy_share_is_the_union_of_gpu_intervals_within_the_steps() -> None:
    trace = steps_trace(
        event("gemm", "kernel", 100, 400, tid=7),  # 100-500
        event("softmax", "kernel", 300, 400, tid=8),  # 300-700 on another stream: overlaps, counts once
        event("Memcpy HtoD", "gpu_memcpy", 1500, 100, tid=7),  # 1500-1600
        event("late", "kernel", 1900, 500, tid=7),  # 1900-2400: only its first 100 µs are inside
    )
    summary = summarize_trace(trace)
    assert summary["steps"] == 2 and summary["step_ms"] == 1.0
    assert summary["gpu_busy_share"] == pytest.approx((600 + 100 + 100) / 2000)
    assert summary["median_kernel_us"] == 400  # kernels starting inside: 400, 400, 500
    assert summary["top_kernels"][0] == {"name": "late", "ms_per_step": 0.25}


def test_launches_and_syncs_are_counted_per_step() -> None:
    trace = steps_trace(
        event("cudaLaunchKernel", "cuda_runtime", 10, 5),
        event("cudaLaunchKernel", "cuda_runtime", 20, 5),
        event("cuLaunchKernelEx", "cuda_driver", 30, 5),
        event("cudaStreamSynchronize", "cuda_runtime", 40, 300),
        event("cudaGraphLaunch", "cuda_runtime", 1010, 5),
        event("cudaMemcpyAsync", "cuda_runtime", 1020, 5),  # a copy, not a launch
    )
    summary = summarize_trace(trace)
    assert summary["launches_per_step"] == 2  # median of 3 and 1
    assert summary["graph_launches_per_step"] == 0.5  # median of 0 and 1: a replay counts among launches too
    assert summary["sync_ms_per_step"] == 0.15  # 300 µs over 2 steps
    assert summary["gpu_busy_share"] is None  # no GPU events at all


def test_the_gpu_timelines_step_marks_are_not_counted_twice() -> None:
    # a CUDA trace repeats each ProfilerStep# on the GPU's timeline; here the GPU runs 300 µs behind
    trace = steps_trace(
        event("ProfilerStep#3", "gpu_user_annotation", 300, 1000, tid=7),
        event("ProfilerStep#4", "gpu_user_annotation", 1300, 1000, tid=7),
        event("gemm", "kernel", 300, 500, tid=7),  # the first GPU step's first half
        event("gemm", "kernel", 1300, 1000, tid=7),  # all of the second
        event("cudaStreamSynchronize", "cuda_runtime", 100, 200),
    )
    summary = summarize_trace(trace)
    assert summary["steps"] == 2 and summary["step_ms"] == 1.0
    assert summary["sync_ms_per_step"] == 0.1  # 200 µs over 2 steps, not 4
    assert summary["gpu_lag_ms"] == 0.3
    assert summary["gpu_busy_share_steps"] == [0.5, 1.0]
    assert summary["gpu_busy_share"] == 0.75  # over the GPU's own step window


PROFILES = Path(__file__).resolve().parents[1] / "data/train/profile"


def h200_profile(name: str) -> dict[str, Any]:
    """Profiled steps of real H200 runs (1 epoch from scratch, steps 21-30 profiled), cut down with
    scripts/h200/trim_trace.py; docs/benchmarks/2026-12-04-h200-encoder-k/ has the whole runs."""
    return summarize_trace(load_trace(PROFILES / f"h200-{name}.json.gz"))


def test_real_h200_traces_tell_a_host_bound_step_from_a_gpu_bound_one() -> None:
    b128, b256, guide = h200_profile("optimized-b128"), h200_profile("optimized-b256"), h200_profile("guide")
    assert (b128["steps"], b256["steps"], guide["steps"]) == (2, 2, 1)  # host marks only
    assert (b128["bound"], b256["bound"], guide["bound"]) == ("host", "gpu", "host")
    # optimized at batch 128: the GPU starts each step right after the host, then waits on launches
    assert b128["gpu_lag_ms"] < 2 and b128["gpu_busy_share"] < 0.8
    assert b128["median_kernel_us"] < 30 and b128["launches_per_step"] > 1000
    assert b128["graph_launches_per_step"] == 0  # no CUDA graphs: every kernel launched on its own
    # Inductor's Python wrappers, all graphs together, lead the host's time
    assert b128["top_cpu_ops"][0]["name"] == "## Call CompiledFxGraph ##"
    assert b128["top_cpu_ops"][0]["self_ms_per_step"] > 15
    # the same launches at batch 256 give the GPU twice the work: the host runs tens of ms ahead
    assert b256["launches_per_step"] == b128["launches_per_step"]
    assert b256["gpu_lag_ms"] > 20 and b256["gpu_busy_share"] > 0.9
    # guide: 4 uncompiled micro-batches a step, and the fp16 casts of fp32 weights lead the host's time
    assert guide["launches_per_step"] > 2 * b128["launches_per_step"]
    assert guide["gpu_busy_share"] < 0.4 and guide["gpu_lag_ms"] < 2
    assert guide["top_cpu_ops"][0]["name"] == "aten::copy_"
    assert guide["sync_ms_per_step"] < 1  # GradScaler's found_inf read waits on an idle GPU: no cost
    for summary in (b128, b256, guide):
        assert list(PROFILE_SCHEMA.iter_errors(summary | {"trace": "x", "requested_steps": 10})) == []


def test_a_real_graphed_step_is_one_replay_a_step_and_keeps_the_gpu_busy() -> None:
    """`optimized` with its whole step as a CUDA graph (H100, 1 epoch from scratch, 4 of its 10 profiled
    steps, cut with scripts/h200/trim_trace.py; docs/benchmarks/2026-12-06-h100-graphs-ablation/ has the
    whole run), against the H200's eager compiled step at the same batch."""
    graphed = summarize_trace(load_trace(PROFILES / "h100-optimized-graphed.json.gz"))
    eager = h200_profile("optimized-b128")
    assert graphed["steps"] == 4
    assert graphed["graph_launches_per_step"] == 1  # the whole step: one replay
    # the rest are the host's own small ops around it (batch copies, the step counter), not the model's
    assert graphed["launches_per_step"] < 20 < 1000 < eager["launches_per_step"]
    assert graphed["bound"] == "gpu" and eager["bound"] == "host"
    assert graphed["gpu_busy_share"] > 0.95 > 0.8 > eager["gpu_busy_share"]
    assert graphed["gpu_lag_ms"] > 50  # the host queues steps ahead of the GPU
    # no Inductor wrapper runs on the host any more: the replay took its place
    assert all(op["name"] != "## Call CompiledFxGraph ##" for op in graphed["top_cpu_ops"])
    assert "(1 of them CUDA-graph replays)" in profile_line(graphed | {"trace": "x"})


def test_a_real_step_with_pool_gradients_has_no_gradient_add_a_parameter() -> None:
    """`optimized` with `graph_grads=pool` (its default since 2026-12-06; H100, R-Drop, 1 epoch from scratch,
    2 of its 10 profiled steps, cut with scripts/h200/trim_trace.py; docs/benchmarks/2026-12-06-h100-speed-launch/
    has the run), against the same graphed step with `graph_grads=fixed`: backward no longer adds each
    parameter's gradient into a buffer of its own, one fp32 add kernel a parameter."""
    pool_trace = load_trace(PROFILES / "h100-optimized-pool.json.gz")
    fixed_trace = load_trace(PROFILES / "h100-optimized-graphed.json.gz")
    pool, fixed = summarize_trace(pool_trace), summarize_trace(fixed_trace)

    def fp32_adds(trace: dict[str, Any], steps: int) -> tuple[float, float]:
        """fp32 out-of-place add kernels a step, and their ms a step"""
        adds = [
            e
            for e in trace["traceEvents"]
            if e.get("cat") == "kernel" and "CUDAFunctor_add<float>" in e["name"]
        ]
        return len(adds) / steps, sum(e["dur"] for e in adds) / 1000 / steps

    pool_count, pool_ms = fp32_adds(pool_trace, pool["steps"])
    fixed_count, fixed_ms = fp32_adds(fixed_trace, fixed["steps"])
    assert pool["steps"] == 2 and pool["graph_launches_per_step"] == 1 and pool["bound"] == "gpu"
    assert fixed_count > 296 > 30 > pool_count  # at least one a parameter: the large preset has 296 tensors
    assert fixed_ms > 2 > 0.5 > pool_ms
    assert 0.45 < next(c["share"] for c in pool["kernel_classes"] if c["class"] == "gemm") < 0.6


def test_a_real_fp32_step_is_gpu_bound_with_its_host_waiting_in_the_unpinned_batch_copy() -> None:
    """`baseline` (fp32, TF32 off, no pinned memory; H100, preset base, 1 epoch from scratch, 3 of its 10
    profiled steps, cut with scripts/h200/trim_trace.py; docs/benchmarks/2026-12-06-h100-base-preset/profiled/
    has the whole run's summary): the other side of `guide`'s host-bound step."""
    baseline = summarize_trace(load_trace(PROFILES / "h100-base-baseline.json.gz"))
    guide = h200_profile("guide")
    assert baseline["steps"] == 3 and baseline["bound"] == "gpu" and baseline["gpu_busy_share"] > 0.95
    # a copy from pageable memory waits for the GPU to finish the step before: most of the host's step is that
    # wait, which costs a GPU-bound step nothing
    assert baseline["top_cpu_ops"][0]["name"] == "aten::copy_"
    assert baseline["sync_ms_per_step"] > 0.5 * baseline["step_ms"] and guide["sync_ms_per_step"] < 1
    # TF32 off: fp32 GEMMs, long kernels, and fewer launches a step than guide's autocast casts
    assert any("sgemm" in kernel["name"] for kernel in baseline["top_kernels"][:3])
    assert baseline["median_kernel_us"] > 20 > guide["median_kernel_us"]
    assert baseline["launches_per_step"] < guide["launches_per_step"]
    # most of its kernel time is fp32 GEMMs on the CUDA cores, and the line names the switch; no other
    # recipe's trace has any
    assert baseline["fp32_gemm_share"] > 0.8
    line = profile_line(baseline | {"trace": "x"})
    assert "83% of kernel time in fp32 GEMMs on the CUDA cores" in line and "allow_tf32 = True" in line
    others = [h200_profile(name) for name in ("guide", "optimized-b128", "optimized-b256")]
    others.append(summarize_trace(load_trace(PROFILES / "h100-optimized-graphed.json.gz")))
    assert [other["fp32_gemm_share"] for other in others] == [0, 0, 0, 0]
    assert all("fp32 GEMMs" not in profile_line(other | {"trace": "x"}) for other in others)
    assert list(PROFILE_SCHEMA.iter_errors(baseline | {"trace": "x", "requested_steps": 10})) == []


@pytest.mark.parametrize(
    ("kernel", "fp32"),
    [
        ("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(cutlass_80_simt_sgemm_2", True),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4", True),
        ("ampere_sgemm_128x64_nn", True),
        ("sm80_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4", False),
        (
            "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align2>",
            False,
        ),
        ("nvjet_hsh_256x128_64x4_2x1_v_bz_coopB_TNT", False),
        ("triton_per_fused_native_layer_norm_0", False),
    ],
)
def test_fp32_gemms_are_told_by_their_kernel_names(kernel: str, fp32: bool) -> None:
    assert is_fp32_gemm(kernel) is fp32


def test_a_wait_that_fills_half_the_step_is_read_against_what_bounds_it() -> None:
    baseline = summarize_trace(load_trace(PROFILES / "h100-base-baseline.json.gz")) | {"trace": "x"}
    assert "cuda*Synchronize (the host waits for the GPU, which costs nothing" in profile_line(baseline)
    guide = h200_profile("guide") | {"trace": "x"}  # 0.5 ms of a 172 ms step: no word on it
    assert "cuda*Synchronize;" in profile_line(guide) and "costs nothing" not in profile_line(guide)
    waiting = {"steps": 2, "step_ms": 10.0, "sync_ms_per_step": 6.0, "bound": "host", "trace": "x"}
    assert "each wait empties the GPU's queue" in profile_line(waiting)
    assert "cuda*Synchronize. Trace" in profile_line(
        waiting | {"sync_ms_per_step": 4.0}
    )  # under half: no word
    assert "costs nothing" not in profile_line(waiting | {"bound": None})


def test_the_fp32_gemm_note_needs_a_fifth_of_the_kernel_time() -> None:
    profile = {"steps": 2, "step_ms": 10.0, "trace": "x"}
    assert "fp32 GEMMs" in profile_line(profile | {"fp32_gemm_share": 0.2})
    assert "fp32 GEMMs" not in profile_line(profile | {"fp32_gemm_share": 0.19})
    assert "fp32 GEMMs" not in profile_line(profile | {"fp32_gemm_share": None})


def test_self_time_takes_out_nested_ops_per_thread() -> None:
    trace = steps_trace(
        event("aten::linear", "cpu_op", 0, 100),
        event("aten::addmm", "cpu_op", 10, 60),  # inside linear
        event("aten::copy_", "cpu_op", 20, 10),  # inside addmm
        event("aten::linear", "cpu_op", 50, 30, tid=2),  # another thread: not a child of the first
    )
    ops = {op["name"]: op["self_ms_per_step"] for op in summarize_trace(trace)["top_cpu_ops"]}
    assert ops == {"aten::linear": pytest.approx((40 + 30) / 2e3), "aten::addmm": 0.025, "aten::copy_": 0.005}


def test_unreadable_or_unprofiled_traces_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no ProfilerStep# marks"):
        summarize_trace({"traceEvents": [event("aten::mm", "cpu_op", 0, 10)]})
    broken = tmp_path / "trace.json.gz"
    broken.write_bytes(b"not gzip")
    with pytest.raises(TraceError, match="not a readable trace"):
        load_trace(broken)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"events": []}))
    with pytest.raises(TraceError, match="no traceEvents list"):
        load_trace(other)
    good = tmp_path / "good.json.gz"
    good.write_bytes(gzip.compress(json.dumps(steps_trace()).encode()))
    assert load_trace(good)["traceEvents"][0]["name"] == "ProfilerStep#3"


def test_profile_fields_are_checked_and_free_on_resume() -> None:
    with pytest.raises(recipes.RecipeError, match="profile_steps and profile_after must be 0 or more"):
        recipes.apply_overrides(recipes.OPTIMIZED, {"profile_steps": "-1"})
    config = recipes.apply_overrides(recipes.OPTIMIZED, {"profile_steps": "5"})
    saved = recipes.dataclasses.asdict(recipes.OPTIMIZED)
    assert config_differences(saved, config) == []  # profiling does not change what the run computes
    # a checkpoint from before a field existed resumes when this run keeps the field's default
    del saved["lr_layer_decay"]
    assert config_differences(saved, config) == []
    assert config_differences(saved, recipes.apply_overrides(config, {"lr_layer_decay": "0.9"})) == [
        "lr_layer_decay"
    ]
    assert config_differences(None, config) == ["config"]


def test_the_trace_command_summarises_any_profiler_trace(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dgxperf.cli import app

    path = tmp_path / "trace.json"
    path.write_text(json.dumps(steps_trace(event("gemm", "kernel", 100, 500, tid=7),
                                           event("cudaLaunchKernel", "cuda_runtime", 50, 5),
                                           event("aten::mm", "cpu_op", 40, 20))))  # fmt: skip
    runner = CliRunner()
    shown = runner.invoke(app, ["trace", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "2 steps, 1.0 ms a step; GPU busy 25% of it" in " ".join(shown.output.split())
    assert "busiest kernels" in shown.output and "gemm" in shown.output
    as_json = runner.invoke(app, ["trace", str(path), "--json"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.output) == summarize_trace(load_trace(path)) | {"trace": str(path)}
    (tmp_path / "plain.json").write_text(json.dumps({"traceEvents": []}))
    for bad, why in (
        (tmp_path / "missing.json", "not a readable trace"),
        (tmp_path / "plain.json", "no ProfilerStep"),
    ):
        refused = runner.invoke(app, ["trace", str(bad)])
        assert refused.exit_code == 2 and why in " ".join(refused.output.split())


def test_compiled_graphs_are_summed_under_one_name() -> None:
    trace = steps_trace(
        event("## Call CompiledFxGraph fabc123 ##", "cpu_op", 0, 300),
        event("## Call CompiledFxGraph fdef456 ##", "cpu_op", 400, 200),
        event("Torch-Compiled Region: 0/4", "cpu_op", 1000, 100),
        event("Torch-Compiled Region: 1/2", "cpu_op", 1200, 100),
    )
    ops = {op["name"]: op["self_ms_per_step"] for op in summarize_trace(trace)["top_cpu_ops"]}
    assert ops == {"## Call CompiledFxGraph ##": 0.25, "Torch-Compiled Region": 0.1}


def test_two_real_traces_side_by_side(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dgxperf.cli import app
    from dgxperf.train.trace import compare_summaries

    before, after = h200_profile("optimized-b128"), h200_profile("optimized-b256")
    compared = compare_summaries(before, after)
    figures = {row["figure"]: row for row in compared["figures"]}
    assert figures["launches_per_step"]["ratio"] == 1.0  # batch 256 launches the same kernels
    assert figures["gpu_busy_share"]["ratio"] == round(after["gpu_busy_share"] / before["gpu_busy_share"], 3)
    assert figures["sync_ms_per_step"]["ratio"] is None  # 0 before: no ratio
    ops = {row["name"]: row for row in compared["top_cpu_ops"]}
    assert ops["## Call CompiledFxGraph ##"]["before"] > ops["## Call CompiledFxGraph ##"]["after"] > 0
    assert any(row["before"] is None or row["after"] is None for row in compared["top_cpu_ops"])
    runner = CliRunner()
    paths = [str(PROFILES / f"h200-{name}.json.gz") for name in ("optimized-b128", "optimized-b256")]
    shown = runner.invoke(app, ["trace", *paths])
    assert shown.exit_code == 0, shown.output
    words = " ".join(shown.output.replace("│", " ").split())  # table cells, however Rich wraps them
    assert "launches_per_step 1,410 1,410 1 " in words and "## Call CompiledFxGraph ## 24.108 20.31" in words
    as_json = json.loads(runner.invoke(app, ["trace", *paths, "--json"]).output)
    assert as_json["before"]["trace"] == paths[0] and as_json["figures"] == compared["figures"]
    refused = runner.invoke(app, ["trace", paths[0], str(tmp_path / "missing.json")])
    assert refused.exit_code == 2 and "not a readable trace" in " ".join(refused.output.split())


def test_what_bounds_the_steps() -> None:
    from dgxperf.train.trace import bound

    assert bound(0.95, 0.3) == "gpu"  # busy is busy, however the launches line up
    assert bound(0.48, 0.44) == "host"  # optimized at batch 128 over ten H200 steps
    assert bound(0.81, 5.36) == "mixed"  # batch 256 over ten steps: host bound at first, then GPU bound
    assert bound(0.5, 30.0) == "mixed"  # idle, yet with work queued ahead: neither story alone
    assert bound(None, 1.0) is None and bound(0.5, None) is None
    summaries = json.loads(
        (
            Path(__file__).resolve().parents[2]
            / "docs/benchmarks/2026-12-04-h200-encoder-k/profile/summaries.json"
        ).read_text()
    )
    assert {name: s["bound"] for name, s in summaries.items()} == {
        "optimized-s1-profile_steps10": "host",
        "guide-s1-profile_steps10": "host",
        "optimized-s1-profile_steps10-batch_size256": "mixed",
    }


@pytest.mark.parametrize(
    ("kernel", "label"),
    [  # names from the committed real traces (tests/data/train/profile/)
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", "gemm"),
        (
            "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16",
            "gemm",
        ),
        ("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(cutlass_80_simt_sgemm", "gemm"),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma", "gemm"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1", "attention"),
        ("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*", "attention"),
        (
            "fmha_cutlassB_f32_aligned_64x64_k64_dropout_sm80(PyTorchMemEffAttention::AttentionBackwardKernel",
            "attention",
        ),
        (
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)"
            "::FusedOptimizerTensorListMetadata<4>",
            "optimizer",
        ),
        (
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::Tensor",
            "copy",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<8, at::native::float16_copy_kernel_cuda(at::",
            "copy",
        ),
        ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::", "copy"),
        ("triton_poi_fused__to_copy_3", "copy"),
        ("triton_per_fused__to_copy_add_native_dropout_native_layer_norm_view_5", "elementwise"),
        ("triton_poi_fused_gelu_gelu_backward_view_4", "elementwise"),
        (
            "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t",
            "elementwise",
        ),
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ],
)
def test_kernels_are_classed_by_their_names(kernel: str, label: str) -> None:
    from dgxperf.train.trace import kernel_class

    assert kernel_class(kernel) == label


def test_real_traces_say_what_the_gpus_time_went_to() -> None:
    """The kernel classes of the committed real traces: the GPU-bound `optimized` step spends about half its
    kernel time in GEMMs and a quarter in fused elementwise kernels and norms; `guide` an eighth in autocast's
    copies and casts; `baseline` most of it in GEMMs (fp32 on the CUDA cores)."""
    b256, guide = h200_profile("optimized-b256"), h200_profile("guide")
    baseline = summarize_trace(load_trace(PROFILES / "h100-base-baseline.json.gz"))
    graphed = summarize_trace(load_trace(PROFILES / "h100-optimized-graphed.json.gz"))

    def shares(summary: dict[str, Any]) -> dict[str, float]:
        return {c["class"]: c["share"] for c in summary["kernel_classes"]}

    for summary in (b256, guide, baseline, graphed):
        assert sum(shares(summary).values()) == pytest.approx(1, abs=1e-3)
        ordered = [c["ms_per_step"] for c in summary["kernel_classes"]]
        assert ordered == sorted(ordered, reverse=True)
        assert summary["kernel_classes"][0]["class"] == "gemm"
    assert 0.5 < shares(b256)["gemm"] < 0.6 and 0.25 < shares(b256)["elementwise"] < 0.3
    assert 0.1 < shares(b256)["attention"] < 0.15
    # the graphed step replays the same kernels: each is in the trace, classed as the eager step's are
    assert 0.4 < shares(graphed)["gemm"] < 0.5 and shares(graphed)["elementwise"] > 0.25
    assert shares(guide)["copy"] > 0.1 > shares(b256)["copy"]
    assert shares(guide)["optimizer"] > 0.1  # GradScaler's unscale and the grad clip's foreach kernels
    assert shares(baseline)["gemm"] > 0.8
    line = " ".join(profile_line(b256 | {"trace": "x"}).split())
    assert "kernel time: GEMMs 55%, elementwise and norms 28%, attention 12%, optimizer 4%" in line
    assert (
        "of the elementwise time: dropout, residual adds, norms 51%, activations (GELU...) 35%, concatenations 9%;"
        in line
    )
    bare = profile_line({"steps": 2, "step_ms": 10.0, "trace": "x", "kernel_classes": []})
    assert "kernel time" not in bare and "elementwise time" not in bare


@pytest.mark.parametrize(
    ("kernel", "family"),
    [
        ("triton_poi_fused_gelu_view_8", "triton_poi_fused_gelu_view"),
        ("triton_red_fused_native_dropout_backward_sum_1", "triton_red_fused_native_dropout_backward_sum"),
        ("triton_per_fused__to_copy_native_layer_norm_0", "triton_per_fused__to_copy_native_layer_norm"),
        ("triton_poi_fused_add", "triton_poi_fused_add"),  # no number: kept
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
         "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0"),
    ],
)  # fmt: skip
def test_inductor_kernels_are_named_by_their_fusion_without_the_graphs_number(
    kernel: str, family: str
) -> None:
    from dgxperf.train.trace import kernel_family

    assert kernel_family(kernel) == family


def test_each_kernel_class_names_its_largest_fusions() -> None:
    """The R-Drop `optimized` step on an H100: GELU's backward and forward lead the elementwise time, the
    forward summed over its two numbered copies (2.457 + 1.252 ms a step)."""
    summary = summarize_trace(load_trace(PROFILES / "h100-optimized-pool.json.gz"))
    assert list(PROFILE_SCHEMA.iter_errors(summary | {"trace": "x", "requested_steps": 10})) == []
    classes = {c["class"]: c for c in summary["kernel_classes"]}
    assert classes["elementwise"]["kernels"] == [
        {"name": "triton_poi_fused_gelu_gelu_backward_view", "ms_per_step": 3.842},
        {"name": "triton_poi_fused_gelu_view", "ms_per_step": 3.709},
        {"name": "triton_poi_fused_add_native_dropout_view", "ms_per_step": 2.945},
    ]
    for label, row in classes.items():
        times = [k["ms_per_step"] for k in row["kernels"]]
        assert 1 <= len(times) <= 3 and times == sorted(times, reverse=True), label
        assert sum(times) <= row["ms_per_step"] + 1e-3, label
    # the overall list keeps each kernel's own name, so the GELU forward, split over two numbered copies of
    # 2.5 and 1.3 ms, is missing from its eight; its class names it second
    overall = [k["name"] for k in summary["top_kernels"]]
    assert overall[-1] == "triton_poi_fused_gelu_gelu_backward_view_4"
    assert not any(name.startswith("triton_poi_fused_gelu_view") for name in overall)


NORM = "dropout_residual_norm"


@pytest.mark.parametrize(
    ("kernel", "group"),
    [
        ("triton_poi_fused_gelu_gelu_backward_view_4", "activation"),
        ("triton_poi_fused_add_gelu_native_dropout_view_2", "activation"),  # the first group that matches
        ("triton_per_fused__to_copy_add_native_dropout_backward_native_layer_norm_backward_view_7", NORM),
        ("triton_red_fused__to_copy_add_native_layer_norm_6", NORM),
        ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1", NORM),
        ("triton_poi_fused_cat_transpose_view_9", "concatenation"),
        ("triton_red_fused_cat_sum_transpose_view_3", "concatenation"),
        ("triton_poi_fused_scatter_where_1", "other"),  # 'cat' inside a word is not a concatenation
        ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t", "other"),
    ],
)  # fmt: skip
def test_elementwise_kernels_are_grouped_by_what_they_fuse(kernel: str, group: str) -> None:
    from dgxperf.train.trace import elementwise_group

    assert elementwise_group(kernel) == group


def test_a_real_steps_elementwise_time_is_split_by_what_its_kernels_fuse() -> None:
    """The H100's R-Drop optimized step: of its elementwise 29%, dropout with the residual adds and LayerNorm take
    54%, GELU 30%, the fused QKV's gradient 9%; the groups add up to the class, largest first."""
    summary = summarize_trace(load_trace(PROFILES / "h100-optimized-pool.json.gz"))
    groups = summary["elementwise_groups"]
    assert [(g["group"], round(100 * g["share"])) for g in groups] == [
        ("dropout_residual_norm", 54),
        ("activation", 30),
        ("concatenation", 9),
        ("other", 7),
    ]
    elementwise = next(c for c in summary["kernel_classes"] if c["class"] == "elementwise")
    assert sum(g["ms_per_step"] for g in groups) == pytest.approx(elementwise["ms_per_step"], abs=0.005)
    assert list(PROFILE_SCHEMA.iter_errors(summary | {"trace": "x", "requested_steps": 10})) == []
    # a step without elementwise kernels has no groups (and no zero rows)
    only_gemm = {"traceEvents": [e for e in load_trace(PROFILES / "h100-optimized-pool.json.gz")["traceEvents"]
                                 if e.get("cat") != "kernel" or "nvjet" in str(e.get("name"))]}  # fmt: skip
    assert summarize_trace(only_gemm)["elementwise_groups"] == []


def test_kernel_classes_side_by_side_and_in_the_trace_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dgxperf.cli import app
    from dgxperf.train.trace import compare_summaries

    before, after = h200_profile("optimized-b128"), h200_profile("optimized-b256")
    rows = {row["class"]: row for row in compare_summaries(before, after)["kernel_classes"]}
    assert rows["gemm"]["before"] < rows["gemm"]["after"]  # twice the rows a step
    assert set(rows) == {c["class"] for c in before["kernel_classes"]} | {
        c["class"] for c in after["kernel_classes"]
    }
    # a summary written before the field existed: no rows rather than a wrong zero
    assert (
        compare_summaries({k: v for k, v in before.items() if k != "kernel_classes"}, after)["kernel_classes"]
        == []
    )
    # a class one trace lacks counts 0 there
    no_copies = before | {"kernel_classes": [c for c in before["kernel_classes"] if c["class"] != "copy"]}
    copies = {row["class"]: row for row in compare_summaries(no_copies, after)["kernel_classes"]}["copy"]
    assert copies["before"] == 0.0 and copies["after"] > 0
    runner = CliRunner()
    path = str(PROFILES / "h200-optimized-b256.json.gz")
    shown = runner.invoke(app, ["trace", path])
    words = " ".join(shown.output.replace("│", " ").split())
    assert shown.exit_code == 0 and "kernel time by class" in words and "GEMMs 46.164 54.6%" in words
    assert "largest kernels (ms a step)" in words and "triton_poi_fused_gelu_gelu_backward_view" in words
    both = runner.invoke(app, ["trace", str(PROFILES / "h200-optimized-b128.json.gz"), path])
    words = " ".join(both.output.replace("│", " ").split())
    assert (
        both.exit_code == 0 and "kernel time by class (ms a step)" in words and "GEMMs 37.977 46.164" in words
    )
    # and the elementwise time by what the kernels fuse: batch 256's dropout/norm fusions against 128's
    assert "elementwise time by what the kernels fuse" in words
    assert "dropout, residual adds, norms 10.448 12.041" in words
    alone = " ".join(runner.invoke(app, ["trace", path]).output.replace("│", " ").split())
    assert "dropout, residual adds, norms 12.041 51.2%" in alone
    groups = {row["group"]: row for row in compare_summaries(before, after)["elementwise_groups"]}
    assert (groups["activation"]["before"], groups["activation"]["after"]) == (6.355, 8.129)
    older = {
        k: v for k, v in before.items() if k != "elementwise_groups"
    }  # a result.json from before the field
    assert compare_summaries(older, after)["elementwise_groups"] == []


def test_the_launch_floor_says_how_much_of_a_step_the_launches_alone_take(tmp_path: Path) -> None:
    """`trace --launch-us`: launches a step x the host's measured cost of one (bench launch). On the H200's
    `guide` trace, 3,676 launches at 5 µs are 18.4 ms of a 172 ms profiled step: host bound, but mostly not
    by launching; the graphed step's 13 launches cost nothing."""
    from typer.testing import CliRunner

    from dgxperf.cli import app
    from dgxperf.train.trace import launch_floor

    guide = h200_profile("guide")
    floor = launch_floor(guide, 5.0)
    assert floor == {"launch_us": 5.0, "ms_per_step": 18.38, "share_of_step": 0.107}
    assert launch_floor({"launches_per_step": None, "step_ms": 10.0}, 5.0) is None  # no CUDA API events
    line = " ".join(profile_line(guide | {"launch_floor": floor, "trace": "t"}).split())
    assert "the launches alone 18.4 ms a step at 5 µs each (11% of the step)" in line
    graphed = PROFILES / "h100-optimized-graphed.json.gz"
    runner = CliRunner()
    shown = runner.invoke(app, ["trace", str(graphed), "--launch-us", "5", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["launch_floor"]["share_of_step"] < 0.01
    both = runner.invoke(app, ["trace", str(graphed), str(graphed), "--launch-us", "5", "--json"])
    assert both.exit_code == 0 and json.loads(both.output)["after"]["launch_floor"]["launch_us"] == 5.0
    refused = runner.invoke(app, ["trace", str(graphed), "--launch-us", "0"])
    assert refused.exit_code == 2 and "--launch-us" in refused.output
