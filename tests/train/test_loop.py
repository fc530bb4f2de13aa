"""Real training runs on the CPU: tiny model, a subset of the real reviews, real torchrun/gloo processes."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from dgxperf.train import recipes
from dgxperf.train.loop import RunOptions, TrainError, steady_state, train
from dgxperf.train.model import Encoder
from dgxperf.train.paired import load_predictions

QUICK = {"preset": "tiny", "train_samples": "512", "batch_size": "32", "lr": "2e-3", "log_every": "4",
         "warmup_ratio": "0.05"}  # fmt: skip


def config(recipe: str, **extra: str) -> recipes.TrainConfig:
    return recipes.build_config(recipe, overrides={**QUICK, **extra})


def run(cfg: recipes.TrainConfig, out: Path, **options: Any) -> dict[str, Any]:
    result = train(cfg, RunOptions(out_dir=out, cache_dir=out.parent / "cache", device="cpu", **options))
    assert result is not None
    return result


def records(out: Path, kind: str) -> list[dict[str, Any]]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == kind]


def test_baseline_learns_and_reports(tmp_path: Path) -> None:
    result = run(config("baseline", epochs="3"), tmp_path / "run")
    steps = records(tmp_path / "run", "step")
    assert steps[0]["loss"] > steps[-1]["loss"]  # it learns
    assert {s["total_steps"] for s in steps} == {steps[-1]["step"]}  # validate's "step N/total"
    assert result["test"]["accuracy"] > 0.6  # the majority class is 52%
    assert result["schema"] == "dgxperf.train/1" and result["recipe"] == "baseline"
    assert [e["epoch"] for e in result["epochs"]] == [1, 2, 3]
    epoch = result["epochs"][-1]
    assert epoch["samples_per_s"] > 0 and epoch["padding_share"] > 0.3  # every batch padded to 128
    assert result["data"]["subset"] == {"train": 512, "dev": 64, "test": 64}
    assert (tmp_path / "run" / "tokenizer.json").exists() and (tmp_path / "run" / "result.json").exists()
    assert (tmp_path / "run" / "checkpoints" / "latest").exists()
    answers = load_predictions(tmp_path / "run")  # every test review's answer, to pair with another run
    assert len(answers["predictions"]) == 64 and result["test_predictions"] == "test_predictions.json"
    right = sum(p == y for p, y in zip(answers["predictions"], answers["gold"], strict=True))
    assert right / 64 == result["test"]["accuracy"]
    # each answer's softmax, to average runs by confidence: it sums to 1 and its largest is the answer
    rows = answers["probabilities"]
    assert len(rows) == 64 and all(abs(sum(row) - 1) < 1e-4 for row in rows)
    # (rounding may tie a review the model all but tied: only clear answers are compared)
    clear = [
        (row, p) for row, p in zip(rows, answers["predictions"], strict=True) if abs(row[0] - row[1]) > 1e-5
    ]
    assert clear and all(max(range(2), key=row.__getitem__) == p for row, p in clear)
    # the same of the final model on dev, where a choice between models is made before test judges it
    dev = json.loads((tmp_path / "run" / "dev_predictions.json").read_text())
    assert dev["split"] == "dev" and len(dev["predictions"]) == len(dev["probabilities"]) == 64
    dev_right = sum(p == y for p, y in zip(dev["predictions"], dev["gold"], strict=True))
    assert dev_right / 64 == result["epochs"][-1]["dev_accuracy"]
    # the n-gram model averaged in, paired with the encoder's own answers on the same 64 reviews
    fusion = result["ngram_fusion"]
    assert fusion["features"] > 0 and 0 <= fusion["weight"] <= 1 and fusion["test"]["samples"] == 64
    assert fusion["paired"]["accuracy_b"] == result["test"]["accuracy"]
    assert fusion["paired"]["accuracy_a"] == fusion["test"]["accuracy"]


def test_the_steady_rate_is_the_work_of_the_windows_after_the_first_over_their_time() -> None:
    def window(samples: int, seconds: float, mfu: float | None = 0.3) -> dict[str, Any]:
        return {"seconds": seconds, "samples_per_s": samples / seconds, "real_tokens_per_s": 50 * samples / seconds,
                "mfu": mfu}  # fmt: skip

    # the first window compiles; then three of 640 samples whose batches differ in length, so in time
    windows = [window(640, 2.0), window(640, 0.2), window(640, 0.4, 0.2), window(640, 0.25)]
    steady = steady_state(windows)
    assert steady["steady_samples_per_s"] == pytest.approx(1920 / 0.85)  # not the median window's 2,560
    assert steady["steady_real_tokens_per_s"] == pytest.approx(50 * 1920 / 0.85)
    assert steady["steady_mfu"] == pytest.approx((0.3 * 0.2 + 0.2 * 0.4 + 0.3 * 0.25) / 0.85)  # time-weighted
    assert steady["steady_windows"] == 3
    assert steady_state(windows[:1])["steady_samples_per_s"] == pytest.approx(320)  # one window: itself
    assert steady_state([window(640, 1.0, None)] * 3)["steady_mfu"] is None  # no peak known (a CPU)
    assert steady_state([]) == {} and steady_state([window(640, 1.0), {"seconds": 0.0}]) == {}


def test_the_steady_rate_compares_an_h100_ablations_runs_over_the_same_batches() -> None:
    """The H100 ablation's logged windows (docs/benchmarks/2026-12-06-h100-graphs-ablation/): its bucketed
    batches make one window 2,379 samples/s and another 3,451 in one run, so medians compared different
    windows of the two runs; the windows' totals compare the same 35 steps."""
    runs = (
        Path(__file__).resolve().parents[2]
        / "docs/benchmarks/2026-12-06-h100-graphs-ablation/ablation-1/runs"
    )

    def windows(name: str) -> list[dict[str, Any]]:
        return records(runs / name, "step")

    def rate(name: str) -> float:
        return float(steady_state(windows(name))["steady_samples_per_s"])

    reference, repeat, eager = rate("optimized"), rate("optimized-repeat"), rate("optimized-CUDA-graphs")
    assert abs(repeat / reference - 1) < 0.002  # the same batches, run twice
    assert eager / reference == pytest.approx(0.889, abs=0.002)  # CUDA graphs: -11.1%

    def median(name: str) -> float:
        rates = sorted(w["samples_per_s"] for w in windows(name)[1:])
        return rates[len(rates) // 2]

    assert median("optimized-CUDA-graphs") / median("optimized") == pytest.approx(
        0.846, abs=0.002
    )  # the old -15.6%


def test_bucketing_cuts_padding_and_bf16_runs(tmp_path: Path) -> None:
    cfg = config("optimized", epochs="1", compile="false", num_workers="0")
    result = run(cfg, tmp_path / "opt", checkpoints=False)
    assert result["epochs"][0]["padding_share"] < 0.15
    assert not (tmp_path / "opt" / "checkpoints").exists()


def test_a_bf16_residual_run_trains_close_to_the_fp32_stream_and_records_it(tmp_path: Path) -> None:
    """The same tiny run, same seed, with the stream in fp32 (optimized's own is bf16): every logged loss moves, by
    little; its recipe says so."""
    common = {"epochs": "1", "compile": "false", "num_workers": "0", "ngram_fusion": "false"}
    plain = run(config("optimized", bf16_residual="false", **common), tmp_path / "plain", checkpoints=False)
    cast = run(config("optimized", **common), tmp_path / "cast", checkpoints=False)
    assert cast["config"]["bf16_residual"] and not plain["config"]["bf16_residual"]
    assert plain["recipe_changes"]["bf16_residual"] is False and "bf16_residual" not in cast["recipe_changes"]
    losses = [r["loss"] for r in records(tmp_path / "cast", "step")]
    plain_losses = [r["loss"] for r in records(tmp_path / "plain", "step")]
    assert len(losses) == len(plain_losses) == 4 and all(map(math.isfinite, losses))
    gaps = [abs(a - b) for a, b in zip(losses, plain_losses, strict=True)]
    assert 0 < max(gaps) < 1e-3  # the cast reached the blocks; bf16's rounding, not another model


def test_a_new_run_in_a_used_folder_logs_only_itself(tmp_path: Path) -> None:
    """validate trains a recipe cut by a call's limit again into the same folder, without --resume: its
    metrics.jsonl (the loss curve, the epochs of a run cut again) must not start with the cut run's lines."""
    cfg = config("optimized", epochs="1", compile="false", num_workers="0", max_steps="4")
    out = tmp_path / "opt"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"type": "step", "step": 99, "loss": 9.9}\n{"type": "epoch", "ep\n')
    run(cfg, out, checkpoints=False)
    steps = records(out, "step")
    assert [s["step"] for s in steps] == sorted({s["step"] for s in steps}) and steps[-1]["step"] == 4
    assert 99 not in [s["step"] for s in steps]


def test_guide_recipe_with_grad_scaler_on_cpu(tmp_path: Path) -> None:
    result = run(config("guide", epochs="1", num_workers="0"), tmp_path / "guide", checkpoints=False)
    steps = records(tmp_path / "guide", "step")
    assert steps[-1]["loss_scale"] > 0 and "skipped_steps" in steps[-1]
    summary = result["summary"]
    low, high = summary["test_accuracy_ci95"]
    assert (
        low <= summary["test_accuracy"] <= high and high - low > 0.02
    )  # a small test split: a wide interval


def test_non_finite_loss_stops_with_the_last_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Encoder.forward
    calls = {"n": 0}

    def poisoned(self: Encoder, *args: Any, **kwargs: Any) -> torch.Tensor:
        calls["n"] += 1
        logits = original(self, *args, **kwargs)
        return logits * float("nan") if calls["n"] > 20 and self.training else logits

    monkeypatch.setattr(Encoder, "forward", poisoned)
    cfg = config("baseline", epochs="3", checkpoint_every="6", log_every="100")
    with pytest.raises(TrainError, match=r"NaN/inf at step 24 .*Last good checkpoint: .*step-00000018"):
        run(cfg, tmp_path / "nan")
    state = torch.load(tmp_path / "nan" / "checkpoints" / "step-00000018" / "state.pt", weights_only=False)
    assert all(torch.isfinite(t).all() for t in state["model"].values())


def test_out_of_memory_says_what_would_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def oom(*args: Any, **kwargs: Any) -> None:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr("dgxperf.train.loop._train", oom)
    with pytest.raises(TrainError, match=r"--set batch_size=16 --set grad_accum=2"):
        run(config("baseline"), tmp_path / "oom")


@pytest.mark.parametrize(
    ("extra", "fix"),
    [
        (
            {"compile": "true", "compile_cpp_wrapper": "true"},
            r"--set compile_cpp_wrapper=false \(Inductor's C\+\+",
        ),
        ({"compile": "true"}, r"--set compile=false \(eager\)"),
    ],
)
def test_a_compile_failure_names_the_setting_that_avoids_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: dict[str, str], fix: str
) -> None:
    from torch._inductor.exc import InductorError

    def fails(*args: Any, **kwargs: Any) -> None:  # what the H100 printed with compile_cpp_wrapper=true
        cause = AssertionError(
            "CudaKernelParamCache not populated for triton_poi_fused__to_copy_native_dropout_0"
        )
        raise InductorError(cause, None)

    monkeypatch.setattr("dgxperf.train.loop._train", fails)
    with pytest.raises(
        TrainError,
        match=r"^torch.compile failed \(AssertionError: CudaKernelParamCache .*\): run with " + fix,
    ):
        run(config("optimized", **extra), tmp_path / "compile")


def cli(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "DGXPERF_HOME": str(home), "COLUMNS": "120", **(env or {})}
    return subprocess.run([sys.executable, "-m", "dgxperf", *args], capture_output=True, text=True, env=full,
                          timeout=600)  # fmt: skip


def overrides(**extra: str) -> list[str]:
    return [arg for k, v in {**QUICK, **extra}.items() for arg in ("--set", f"{k}={v}")]


def test_two_processes_with_torchrun_and_gloo(tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    # guide's DDP, accumulation and clipping in bf16: fp16 autocast has no fast CPU kernels and took this run from
    # 19 s to 60 s; the fp16 scaler path has its own test (test_guide_recipe_with_grad_scaler_on_cpu)
    result = cli("train", "--recipe", "guide", "--device", "cpu", "--gpus", "2", "--epochs", "3", "--out", str(out),
                 "--json", *overrides(num_workers="0", train_samples="1024", log_every="2", precision="bf16"),
                 home=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert data["world"]["world_size"] == 2 and data["world"]["backend"] == "gloo"
    assert data["global_batch"] == 32 * 2 * 2  # micro-batch x accumulation x ranks
    losses = [s["loss"] for s in records(out, "step")]
    assert sum(losses[:2]) > sum(losses[-2:])  # 24 steps of a global batch of 128: it learns
    assert "train" in cli("runs", "list", home=tmp_path).stdout
    # the store's one-line summary gives the encoder's score and, beside it, the average with n-grams
    (stored,) = json.loads(cli("runs", "list", "--json", home=tmp_path).stdout)
    fused = data["ngram_fusion"]["test"]["accuracy"]
    assert f"test acc {data['test']['accuracy']:.4f} ({fused:.4f} with n-grams)" in stored["summary"]
    # Each rank evaluates half the test reviews; the answers file holds all of them, in the split's order.
    answers = load_predictions(out)
    assert len(answers["predictions"]) == data["test"]["samples"] == 128 and -1 not in answers["predictions"]
    right = sum(p == y for p, y in zip(answers["predictions"], answers["gold"], strict=True))
    assert right / 128 == data["test"]["accuracy"]
    # gathered by the same MAX all-reduce: no row is left at the -1 it starts from on the other rank
    assert len(answers["probabilities"]) == 128 and min(min(row) for row in answers["probabilities"]) >= 0


def test_resume_after_kill_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    # ema_decay: the weight average that dev and test score is part of what a checkpoint must bring back
    args = ["train", "--recipe", "baseline", "--device", "cpu", "--epochs", "2", "--json",
            *overrides(checkpoint_every="6", dropout="0.1", ema_decay="0.9")]  # fmt: skip
    whole = cli(*args, "--out", str(tmp_path / "whole"), home=tmp_path)
    assert whole.returncode == 0, whole.stderr[-2000:]
    expected = json.loads(whole.stdout)

    out = tmp_path / "killed"
    env = {**os.environ, "DGXPERF_HOME": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-m", "dgxperf", *args, "--out", str(out)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.time() + 300
    while time.time() < deadline:  # kill -9 once a mid-epoch checkpoint exists, before the run ends
        latest = out / "checkpoints" / "latest"
        if latest.exists() and latest.read_text().strip() != "step-00000000":
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (out / "checkpoints" / "latest").exists(), "the run ended before a checkpoint was written"
    assert not (out / "result.json").exists(), "the run finished before it was killed"
    resumed = cli(*args, "--out", str(out), "--resume", home=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    got = json.loads(resumed.stdout)
    assert got["test"] == expected["test"]
    assert [e["dev_accuracy"] for e in got["epochs"]] == [e["dev_accuracy"] for e in expected["epochs"]]
    assert [e["dev_loss"] for e in got["epochs"]] == [e["dev_loss"] for e in expected["epochs"]]
    steps = records(out, "step")
    assert [s["step"] for s in steps] == sorted({s["step"] for s in steps})  # no step logged twice
    # The same answers review by review, which `runs compare` shows beside the differing fields.
    compared = json.loads(cli("runs", "compare", str(expected["run_id"]), str(got["run_id"]), "--json",
                              home=tmp_path).stdout)  # fmt: skip
    assert compared["paired_test"]["a_only"] == compared["paired_test"]["b_only"] == 0
    assert compared["paired_test"]["accuracy_a"] == expected["test"]["accuracy"]
    human = cli("runs", "compare", str(expected["run_id"]), str(got["run_id"]), home=tmp_path).stdout
    words = " ".join(human.split())  # Rich wraps long lines at the terminal's width
    assert "difference +0.00 points" in words and "McNemar p = 1" in words


def test_resume_with_other_flags_names_the_fields_that_differ(tmp_path: Path) -> None:
    cfg = config("optimized", compile="false", num_workers="0", max_steps="2")
    run(cfg, tmp_path / "run")
    with pytest.raises(
        TrainError, match=r"written with another recipe \(lr, seed differ\); use the same flags"
    ):
        run(recipes.apply_overrides(cfg, {"lr": "1e-3", "seed": "7"}), tmp_path / "run", resume=True)
    # profiling changes nothing the run computes: that checkpoint resumes with it on
    resumed = run(recipes.apply_overrides(cfg, {"profile_steps": "1", "max_steps": "2"}), tmp_path / "run",
                  resume=True)  # fmt: skip
    assert resumed["steps"] == 2


def test_bad_user_data_is_a_usage_error_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sentence": "好", "label": "1"}\n{"sentence": "坏", "label": \n')
    result = cli("train", "--device", "cpu", "--train-file", str(bad), "--preset", "tiny", home=tmp_path)
    assert result.returncode == 2
    assert "bad.jsonl" in result.stderr and ":2" in result.stderr
    assert "Traceback" not in result.stderr
    assert cli("train", "--recipe", "fast", home=tmp_path).returncode == 2
    huge = cli(
        "train", "--device", "cpu", "--preset", "huge", home=tmp_path
    )  # checked before the data is read
    assert huge.returncode == 2 and "preset='huge': choose from tiny, base, large" in huge.stderr
    (tmp_path / "a-file").write_text("")
    under_a_file = cli("train", "--device", "cpu", "--out", str(tmp_path / "a-file" / "run"), home=tmp_path)
    assert under_a_file.returncode == 2 and "cannot create" in under_a_file.stderr
    assert "Traceback" not in under_a_file.stderr
    assert (
        cli("train", "--device", "cpu", "--resume", "--out", str(tmp_path / "none"), home=tmp_path).returncode
        == 2
    )
    no_gpu = cli("train", "--gpus", "8", home=tmp_path)
    if not torch.cuda.is_available():
        assert no_gpu.returncode == 2 and "no CUDA GPU" in no_gpu.stderr
        # optimized's CUDA graphs give way to a field that rules them out, and the run says so before it starts
        accumulated = cli("train", "--recipe", "optimized", *overrides(grad_accum="2"), home=tmp_path)
        note = " ".join(accumulated.stderr.split())
        assert "note: optimized replays its step as CUDA graphs, which grad_accum=2 rules out" in note
        assert accumulated.returncode == 2 and "Traceback" not in accumulated.stderr
        # a recipe file counts as asking too: the note comes for its grad_accum, and not once it turns graphs off
        recipe_file = tmp_path / "accumulate.yaml"
        recipe_file.write_text("recipe: optimized\ngrad_accum: 2\n")
        from_file = cli("train", "--config", str(recipe_file), home=tmp_path)
        assert "which grad_accum=2 rules out" in " ".join(from_file.stderr.split())
        recipe_file.write_text("recipe: optimized\ngrad_accum: 2\ncuda_graphs: false\n")
        turned_off = cli("train", "--config", str(recipe_file), home=tmp_path)
        assert turned_off.returncode == 2 and "no CUDA GPU" in turned_off.stderr
        assert "replays its step" not in turned_off.stderr and "Traceback" not in turned_off.stderr
        # so does its bf16 residual stream, to precision=fp16 (which rules out the graphs too), once for each
        fp16 = " ".join(
            cli("train", "--recipe", "optimized", *overrides(precision="fp16"), home=tmp_path).stderr.split()
        )
        assert "note: optimized keeps its residual stream in bf16, which precision=fp16 rules out" in fp16
        assert fp16.count("note: optimized") == 2 and "Traceback" not in fp16


def test_fsdp_two_processes_checkpoint_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "fsdp"
    args = ["train", "--recipe", "baseline", "--device", "cpu", "--gpus", "2", "--epochs", "2", "--out", str(out),
            "--json", *overrides(fsdp="true", no_sync="true", grad_accum="2", checkpoint_every="5")]  # fmt: skip
    first = cli(*args, home=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    data = json.loads(first.stdout)
    assert data["config"]["fsdp"] is True and data["world"]["world_size"] == 2
    # Resuming the finished run loads the gathered checkpoint into the sharded model: same test figures.
    again = cli(*args, "--resume", home=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["test"] == data["test"]


def test_powersgd_gradient_compression_hook(tmp_path: Path) -> None:
    result = cli("train", "--recipe", "baseline", "--device", "cpu", "--gpus", "2", "--epochs", "1", "--json",
                 "--no-checkpoint", "--out", str(tmp_path / "psgd"),
                 *overrides(comm_hook="powersgd", powersgd_rank="2"), home=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["config"]["comm_hook"] == "powersgd"


def test_synthetic_fixed_length_task(tmp_path: Path) -> None:
    cfg = recipes.build_config(
        "optimized",
        overrides={
            "task": "synthetic",
            "synthetic_samples": "256",
            "preset": "tiny",
            "compile": "false",
            "precision": "fp32",
            "num_workers": "0",
            "log_every": "1",
            "max_steps": "6",
        },
    )
    result = run(cfg, tmp_path / "synthetic", checkpoints=False)
    assert result["data"]["task"] == "synthetic" and result["steps"] == 6
    assert result["epochs"][0]["padding_share"] == 0.0  # fixed length: nothing to pad
    assert result["summary"]["steady_samples_per_s"] > 0
    assert result["ngram_fusion"] is None  # random labels: no n-gram model is fitted
    assert result["pace_change"] is None  # 5 windows after the warm-up one: too few to judge a change of pace


def test_the_n_gram_model_is_skipped_with_a_reason_above_its_token_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dgxperf.train import ngram

    monkeypatch.setattr(ngram, "MAX_TRAIN_TOKENS", 1000)  # the 512 training reviews hold ~40,000
    result = run(config("optimized", compile="false", precision="fp32", epochs="1"), tmp_path / "big")
    assert result["ngram_fusion"] is None and result["test"]["samples"] == 64
    assert "no n-gram model: the training split has" in capsys.readouterr().err
    off = run(
        config("optimized", compile="false", precision="fp32", epochs="1", ngram_fusion="false"),
        tmp_path / "off",
    )
    assert off["ngram_fusion"] is None
