"""The project's own shell scripts (set-up, CI, GPU capture, Slurm) pass shellcheck, and every script that
runs on a lent GPU machine keeps NVLink multicast off."""

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dgxperf.train import recipes

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [ROOT / "dgx", ROOT / ".ci" / "run", *sorted((ROOT / "scripts").rglob("*.sh")),
           *sorted((ROOT / "scripts").rglob("*.sbatch")),
           ROOT / "scripts" / "h200" / "dry-run" / "python3"]  # fmt: skip


@pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="shellcheck not installed (.ci/run installs it)"
)
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shellcheck(script: Path) -> None:
    result = subprocess.run(  # -x: follow the capture scripts' `source` of scripts/h200/env.sh
        ["shellcheck", "-x", "-s", "bash", str(script)], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout


MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
DEVICE_SCRIPTS = [p for p in sorted((ROOT / "scripts" / "h200").glob("*.sh")) if "python3" in p.read_text()]


def test_the_shared_device_environment_turns_multicast_off_and_runs_this_checkout() -> None:
    shown = subprocess.run(
        ["bash", "-c", "source scripts/h200/env.sh && env"], capture_output=True, text=True, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin"}, check=True,
    ).stdout  # fmt: skip
    env = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    assert {k: env.get(k) for k in MULTICAST_OFF} == MULTICAST_OFF
    assert env["PYTHONPATH"] == "src" and env["PYTHONUNBUFFERED"] == "1"


@pytest.mark.parametrize("script", DEVICE_SCRIPTS, ids=lambda p: p.name)
def test_every_device_script_sources_the_shared_environment_before_running_python(script: Path) -> None:
    lines = script.read_text().splitlines()
    sourced = [i for i, line in enumerate(lines) if line.startswith("source ") and "env.sh" in line]
    first_python = next(i for i, line in enumerate(lines) if "python3" in line and not line.startswith("#"))
    assert sourced and sourced[0] < first_python, f"{script.name} must source env.sh before running python3"


def test_the_compile_probe_dry_runs_its_step_graph_variant_on_the_cpu() -> None:
    """The probe's first GPU capture costs device time: its harness, the whole-step variant included, must
    at least run on the CPU (nothing captured there), with the same first losses as the plain step."""
    import json
    import os
    import sys

    result = subprocess.run(
        [sys.executable, "scripts/h200/probe_cudagraph_blocks.py", "--device", "cpu", "--preset", "tiny",
         "--variants", "blocks,step-graph", "--batch", "8", "--length", "16", "--steps", "2", "--repeats", "1"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    plain, graphed = (json.loads(line) for line in result.stdout.splitlines())
    assert plain["ok"] and graphed["ok"], (plain, graphed)
    # Not equal to the last digit: the probe's plain step and the trainer's recorded step are two code paths,
    # and on CI's CPU their third losses rounded apart (0.6588 against 0.65878; 0.65878 both here). Each
    # update moves the loss 0.007-0.014, 14-28x the tolerance, so a step skipped or taken twice still fails.
    assert graphed["first_losses"] == pytest.approx(plain["first_losses"], abs=5e-4)
    assert graphed["step_graph"]["captured"] == 0 and plain["step_graph"] is None


def summarize_runs_module() -> Any:
    """scripts/h200/summarize_runs.py imported as a module (it is a script, not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("summarize_runs", ROOT / "scripts/h200/summarize_runs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summarize_runs(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """scripts/h200/summarize_runs.py run as a user runs it, with the package on PYTHONPATH."""
    import os
    import sys

    return subprocess.run(
        [sys.executable, "scripts/h200/summarize_runs.py", *map(str, args)], capture_output=True, text=True,
        cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip


def test_summarize_runs_pairs_each_variant_with_its_nearest_reference() -> None:
    """On committed H200 fine-tunes: every variant against the plain run of its seed, and the mean over seeds;
    and, for runs that all share a field (SET="max_len=256"), the reference with the fewest differences."""
    result = summarize_runs(str(ROOT / "docs/benchmarks/2026-12-04-h200-encoder-j/seeds"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "optimized-s2-lr_layer_decay0.9 vs optimized-s2: -1.32 points" in result.stdout
    assert (
        "lr_layer_decay=0.9: -0.75 points over 3 pair(s), 3 negative; dev by epoch +0.33 / -1.17 / -0.83"
        in (result.stdout)
    )
    # a change's mechanism on dev, epoch by epoch: mean pooling did not lift dev after epoch 1 (H100, encoder M)
    pairs = summarize_runs(str(ROOT / "docs/benchmarks/2026-12-05-h100-pooling-smoothing-pairs"))
    assert "pooling=mean: -0.31 points over 6 pair(s), 3 negative; dev by epoch +0.30 / +0.51 / +0.25" in (
        pairs.stdout
    )
    # each recipe's runs from one encoder, with the vote its README quotes (ties go to the first run's answer)
    assert "optimized, encoder 546e89e72342: 8 run(s), test mean 85.70% (84.33-86.41%), 4 at or above 86%, " \
        "their vote 86.46%" in pairs.stdout  # fmt: skip
    base = summarize_runs(str(ROOT / "docs/benchmarks/2026-12-06-h100-base-preset")).stdout
    assert "baseline (preset=base), encoder e3fbcb0b189b: 3 run(s), test mean 85.73% (84.85-86.35%), " \
        "2 at or above 86%, their vote 85.83%" in base  # fmt: skip
    assert "all recipes (preset=base): 9 run(s), test mean 85.51% (84.79-86.81%), 3 at or above 86%, " \
        "their vote 85.77%" in base  # fmt: skip
    # with the n-gram model averaged in (encoder N, the first runs that carry it): each run and each group
    fused = summarize_runs(str(ROOT / "docs/benchmarks/2026-12-06-h100-ngram-fusion")).stdout
    assert "baseline  seed 1  test 85.48% (with n-grams 86.52%, weight 0.30)" in fused
    assert "all recipes: 5 run(s), test mean 85.90% (85.48-86.41%), 2 at or above 86%, their vote 86.64%; " \
        "with n-grams mean 86.36%, 4 at or above 86%" in fused  # fmt: skip
    assert re.search(r"vs optimized-s2: -1\.32 points .*step losses at most 0\.\d+ apart over \d+ logged steps",
                     result.stdout)  # fmt: skip
    # the graphed step is the eager one, replayed: on the H200 every logged loss came out the same
    graphs = str(ROOT / "docs/benchmarks/2026-12-05-h200-cuda-graphs")
    result = summarize_runs(graphs)
    assert "vs optimized-s1: +0.00 points" in result.stdout
    assert "speed x1.60, step losses at most 0 apart over 6 logged steps" in result.stdout
    # memory: what the epochs allocated at their peak and what the card kept reserved (the recording's cost)
    h100 = summarize_runs(str(ROOT / "docs/benchmarks/2026-12-05-h100-encoder-256")).stdout
    assert "test 86.18%" in h100 and "memory 20.4 GB peak, 64.1 GB reserved" in h100
    # a profiled run repeats its seed under the profiler: reported with its profile, counted in no group
    ablation = summarize_runs(str(ROOT / "docs/benchmarks/2026-12-06-h100-graphs-ablation/graphs")).stdout
    assert "optimized, encoder none: 1 run(s), test mean 52.02%" in ablation
    profiled_line = (
        r"optimized-s1-profile_steps10 +optimized seed 1 +test 52\.02% +samples/s \[1871\], profiled "
        r"\(in no group, pair or table\): profile: 10 steps, 41\.7 ms a step, GPU bound"
    )
    assert re.search(profiled_line, ablation)
    assert "vs optimized-s1-profile_steps10" not in ablation
    assert (
        "optimized-s1-profile_steps10"
        not in summarize_runs(
            str(ROOT / "docs/benchmarks/2026-12-06-h100-graphs-ablation/graphs"), "--table"
        ).stdout
    )
    table = summarize_runs(graphs, "--table").stdout
    # issue 4's table: per epoch seconds, samples/s and speed against guide of the same seed
    assert (
        "| `optimized-s1-cuda_graphstrue` | 5.0 | 2,756 | 5.74 | 168,897 | 31.5% | 5.6 GB | 52.02 | 52.02% |"
        in table
    )
    assert "| `guide-s1` | 29.0 | 480 | - |" in table

    module = summarize_runs_module()

    def run(name: str, **variant: object) -> dict[str, object]:
        return {"run": name, "recipe": "optimized", "seed": 1, "encoder": "e", "variant": variant}

    long, short = run("256", max_len=256), run("128")
    ema = run("256-ema", max_len=256, ema_decay=0.99)
    runs = [long, short, ema, run("other-seed", max_len=256) | {"seed": 2}]
    assert module.reference_of(ema, runs) is long  # not the 128-token run: one field apart, not two
    assert module.reference_of(long, runs) is short
    assert module.reference_of(short, runs) is None

    # speed against guide: the guide run of the same seed and variant (both averaged), else guide's own recipe
    def timed(recipe: str, rates: list[int], **variant: object) -> dict[str, object]:
        return {"recipe": recipe, "seed": 2, "encoder": "e", "variant": variant, "samples_per_s": rates,
                "exact_samples_per_s": rates}  # fmt: skip

    plain_guide, averaged_guide = timed("guide", [100, 100]), timed("guide", [50, 50], ema_decay=0.99)
    timed_runs = [plain_guide, averaged_guide]
    assert module.speed_vs_guide(timed("optimized", [500, 400], ema_decay=0.99), timed_runs) == [10.0, 8.0]
    assert module.speed_vs_guide(timed("optimized", [500, 400], cuda_graphs=True), timed_runs) == [5.0, 4.0]
    assert module.speed_vs_guide(timed("optimized", [500, 400]), [averaged_guide]) is None
    average = {"unaveraged_test_accuracy": 0.8571}
    assert module.test_cell({"test_accuracy": 0.86, "weight_average": None}) == "86.00%"
    fused = {"test_accuracy": 0.86, "weight_average": None, "fused_test_accuracy": 0.8652}
    assert module.test_cell(fused) == "86.00% (with n-grams 86.52%)"
    assert (
        module.test_cell({"test_accuracy": 0.86, "weight_average": average})
        == "86.00% averaged, 85.71% trained"
    )
    # a run records what it changed in its recipe; older results are read against the recipe of their day
    assert module.recipe_changes({"recipe": "optimized", "recipe_changes": {"lr": 3e-4}, "config": {}}) == {
        "lr": 3e-4
    }
    eager_then = dict(recipes.to_dict(recipes.OPTIMIZED), cuda_graphs=False)
    assert module.recipe_changes({"recipe": "optimized", "config": eager_then}) == {}
    assert module.recipe_changes({"recipe": "optimized", "config": dict(eager_then, cuda_graphs=True)}) == {
        "cuda_graphs": True
    }


def test_summarize_runs_reports_a_weight_average_against_its_own_trained_weights(tmp_path: Path) -> None:
    """A real CPU run with ema_decay: its result scores the trained weights beside the average, and
    summarize_runs.py prints the paired difference between the two from that result."""

    from dgxperf.train.loop import RunOptions, train

    overrides = {"preset": "tiny", "train_samples": "256", "batch_size": "32", "lr": "2e-3", "epochs": "2",
                 "compile": "false", "num_workers": "0", "precision": "fp32", "ema_decay": "0.9"}  # fmt: skip
    config = recipes.build_config("optimized", overrides=overrides)
    out = tmp_path / "runs" / "optimized-s1-ema"
    result = train(
        config, RunOptions(out_dir=out, cache_dir=tmp_path / "cache", device="cpu", checkpoints=False)
    )
    assert result is not None
    paired = result["weight_average"]["paired"]
    shown = summarize_runs(tmp_path / "runs")
    assert shown.returncode == 0, shown.stderr[-2000:]
    expected = (
        f"optimized-s1-ema: its weight average (decay 0.9) {100 * paired['difference']:+.2f} points over its "
        f"trained weights ({100 * paired['accuracy_b']:.2f}%;"
    )
    assert expected in shown.stdout
    assert f"{paired['a_only']} reviews right only averaged, {paired['b_only']} only trained" in shown.stdout
    assert "mean of 1 run(s)" in shown.stdout


def test_summarize_runs_votes_only_over_answers_to_the_same_reviews(tmp_path: Path) -> None:
    import json

    module = summarize_runs_module()

    def run(name: str, predictions: list[int], gold: list[int], split: str = "s") -> str:
        folder = tmp_path / name
        folder.mkdir()
        answers = {"schema": "dgxperf.train.predictions/1", "split": "test", "split_hash": split,
                   "labels": ["neg", "pos"], "gold": gold, "predictions": predictions}  # fmt: skip
        (folder / "test_predictions.json").write_text(json.dumps(answers))
        return str(folder)

    gold = [0, 1, 1, 0]
    a, b, c = run("a", [0, 1, 0, 0], gold), run("b", [1, 1, 1, 0], gold), run("c", [0, 0, 1, 1], gold)
    assert module.vote_accuracy([a, b, c]) == 1.0  # each review right in two of three
    # a tie goes to the first run's answer: a and b disagree on reviews 0 and 2, where only a is right here
    a2, b2 = run("a2", [0, 1, 0, 0], [0, 1, 0, 0]), run("b2", [1, 1, 1, 0], [0, 1, 0, 0])
    assert (module.vote_accuracy([a2, b2]), module.vote_accuracy([b2, a2])) == (1.0, 0.5)
    assert module.vote_accuracy([a, run("other", [0, 1, 1, 0], gold, split="t")]) is None
    assert module.vote_accuracy([a, str(tmp_path / "missing")]) is None


def test_summarize_runs_pairs_each_recipe_with_guide_of_its_seed(tmp_path: Path) -> None:
    """Issue 4's two lines seed by seed, as encoder S's and T's READMEs quote them: each run of another recipe
    against guide of its seed (paired difference, McNemar p, discordant reviews) and the whole fine-tune's speed
    against guide's; a run whose guide was tested on another split says so instead of a figure."""
    import json

    def summarize(folder: Path, *args: str) -> str:
        result = summarize_runs(folder, *args)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    s_lines = summarize(ROOT / "docs/benchmarks/2026-12-06-h100-encoder-s")
    assert "optimized-s4 vs guide-s4 (same seed and encoder): -0.69 points (95% -1.62 to +0.24, McNemar p = 0.18, " \
        "68 discordant), whole fine-tune 2.95x guide's speed" in s_lines  # fmt: skip
    assert "optimized against guide: -0.23 points over 4 seed pair(s), 3 negative; whole fine-tune 2.75-2.95x " \
        "guide's speed" in s_lines  # fmt: skip
    t_folder = ROOT / "docs/benchmarks/2026-12-07-h100-encoder-t"
    t_lines = summarize(t_folder)
    assert "optimized-s1 vs guide-s1 (same seed and encoder): +0.40 points (95% -0.66 to +1.47, McNemar p = 0.53, " \
        "89 discordant), whole fine-tune 3.47x guide's speed" in t_lines  # fmt: skip
    assert "optimized against guide: -0.20 points over 2 seed pair(s), 1 negative; whole fine-tune 3.47-3.58x " \
        "guide's speed" in t_lines  # fmt: skip
    assert "baseline against guide: +0.23 points over 1 seed pair(s), 0 negative" in t_lines
    assert "optimized-s3 vs" not in t_lines  # no guide of seed 3 from T
    as_json = json.loads(summarize(t_folder, "--json"))
    assert [(p["run"], p["against"]) for p in as_json["against_guide"]] == [
        ("baseline-s1", "guide-s1"), ("optimized-s1", "guide-s1"), ("optimized-s2", "guide-s2")]  # fmt: skip

    module = summarize_runs_module()
    for name, split in (("optimized-s1", "s"), ("guide-s1", "t")):
        folder = tmp_path / name
        folder.mkdir()
        answers = {"schema": "dgxperf.train.predictions/1", "split": "test", "split_hash": split,
                   "labels": ["neg", "pos"], "gold": [0, 1], "predictions": [0, 1]}  # fmt: skip
        (folder / "test_predictions.json").write_text(json.dumps(answers))

    def run(name: str, recipe: str, seconds: list[float]) -> dict[str, object]:
        return {"run": name, "folder": str(tmp_path / name), "recipe": recipe, "seed": 1, "encoder": "e",
                "variant": {}, "epoch_seconds": seconds, "train_seconds": sum(seconds)}  # fmt: skip

    runs = [run("optimized-s1", "optimized", [10.0, 10.0]), run("guide-s1", "guide", [30.0, 32.0])]
    (refused,) = module.against_guide(runs)
    assert refused["whole_speed_ratio"] == 3.1 and refused["error"].startswith(
        "the runs were tested on different"
    )
    assert module.against_guide_by_recipe([refused]) == []
    runs[1]["epoch_seconds"] = [30.0]  # a guide cut after one epoch: no whole-fine-tune ratio
    assert module.against_guide(runs)[0]["whole_speed_ratio"] is None


def test_summarize_runs_gives_the_figures_encoder_us_readme_quotes() -> None:
    """Encoder U's one seed of each recipe: the pair against guide, the whole fine-tune's speed and the host's
    launch cost, as its README quotes them."""
    result = summarize_runs(ROOT / "docs/benchmarks/2026-12-07-h100-encoder-u")
    assert result.returncode == 0, result.stderr[-2000:]
    printed = result.stdout
    assert "optimized-s1 vs guide-s1 (same seed and encoder): -0.17 points (95% -1.21 to +0.87, McNemar p = 0.83, " \
        "85 discordant), whole fine-tune 3.43x guide's speed" in printed  # fmt: skip
    assert "host: one eager launch 7.16 µs (median of 3 reading(s)), a replayed kernel 1.00 µs" in printed


def test_summarize_runs_says_which_run_changed_pace_part_way() -> None:
    """Encoder W's host slowed in the middle of guide-s1: its line and the table's notes say so from the logged
    steps (its result.json predates the field); the runs that held their pace get no note."""
    folder = ROOT / "docs/benchmarks/2026-12-07-h100-encoder-w"
    printed = summarize_runs(folder).stdout
    (guide_s1,) = [line for line in printed.splitlines() if line.startswith("guide-s1 ")]
    assert guide_s1.endswith("GPU busy 53%; pace: the logged samples/s fell 40% by step 320: a median of 521 over "
                             "the 15 windows before, 314 over the 19 from it on, so the epochs mix two paces. A "
                             "host-bound run follows its host's CPU speed: `dgxperf advise` on a `dgxperf monitor` "
                             "recording of the run says whether the host slowed (launch.host_slowed)")  # fmt: skip
    assert printed.count("pace: ") == 1
    table = summarize_runs(folder, "--table").stdout
    assert (
        "\nguide-s1: pace: the logged samples/s fell 40% by step 320" in table and table.count("pace: ") == 1
    )
    runs = json.loads(summarize_runs(folder, "--json").stdout)["runs"]
    assert {r["run"]: bool(r["pace_change"]) for r in runs} == {
        "guide-s1": True, "guide-s2": False, "guide-s3": False, "optimized-s1": False, "optimized-s2": False,
        "optimized-s3": False, "optimized-s4": False}  # fmt: skip


STAND_IN = """#!/usr/bin/env bash
# python3 for capture_seeds.sh's shell logic alone: a train run writes its result at once, monitor waits
case "$*" in
  *"-m dgxperf monitor"*) exec sleep 60 ;;
  *"-m dgxperf train"*)
    while (($#)); do [[ "$1" == --out ]] && out="$2"; shift; done
    mkdir -p "$out" && echo '{}' > "$out/result.json" ;;
esac
"""


def run_capture_seeds(tmp_path: Path, runs: str, durations: str, **env: str) -> str:
    """capture_seeds.sh with a stand-in python3, an encoder folder and what earlier calls measured."""
    bin_dir, encoder, work = tmp_path / "bin", tmp_path / "encoder", tmp_path / "ft"
    for folder in (bin_dir, encoder, work, tmp_path / "out"):
        folder.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(STAND_IN)
    (bin_dir / "python3").chmod(0o755)
    (encoder / "encoder.pt").write_bytes(b"")
    (encoder / "pretrain.json").write_text("{}")
    encoder_id = subprocess.run(["sha256sum", str(encoder / "pretrain.json")], capture_output=True, text=True,
                                check=True).stdout[:16]  # fmt: skip
    (work / "encoder.id").write_text(encoder_id + "\n")  # so KEEP_DONE keeps what "earlier calls" measured
    (work / "durations").write_text(durations)
    result = subprocess.run(
        ["bash", "scripts/h200/capture_seeds.sh"], capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(tmp_path / "out"), "WORK": str(work),
             "ENCODER": str(encoder), "KEEP_DONE": "yes", "RUNS": runs, **env},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_capture_seeds_holds_back_a_run_that_would_not_fit_what_the_call_has_left(tmp_path: Path) -> None:
    log = run_capture_seeds(tmp_path, "guide:1 optimized:1", "guide 200\noptimized 40\n", END_S="100")
    # the script counts from its own start (bash's SECONDS): on a loaded machine a second can pass before the check
    assert re.search(
        r"== guide:1 not started: a guide run took 200 s here, (100|99|98) s are left \(next call\)", log
    )
    assert "== optimized seed 1" in log  # the shorter run after it still runs
    assert not (tmp_path / "ft" / "guide-s1").exists()
    assert (tmp_path / "ft" / "optimized-s1" / "result.json").is_file()
    # what it took is kept for the next call (the stand-in takes well under a second, which may straddle one tick)
    assert (tmp_path / "ft" / "durations").read_text().splitlines()[-1] in ("optimized 0", "optimized 1")


def test_capture_seeds_leaves_a_tenth_of_a_long_run_as_its_margin(tmp_path: Path) -> None:
    """Encoder AB's call 2: guide timed at 134 s here, started with 144 s left, and cut; a tenth of it (13 s) is the
    margin now, so the shorter run after it takes the time instead. A short run keeps 10 s."""
    log = run_capture_seeds(tmp_path, "guide:1 optimized:1", "guide 134\noptimized 40\n", END_S="144")
    assert re.search(
        r"== guide:1 not started: a guide run took 134 s here, 14[0-4] s are left \(next call\)", log
    )
    assert "== optimized seed 1" in log
    log = run_capture_seeds(tmp_path, "guide:2", "guide 134\n", END_S="150")
    assert "not started" not in log and "== guide seed 2" in log
    log = run_capture_seeds(tmp_path, "optimized:2", "optimized 40\n", END_S="49")
    assert re.search(
        r"== optimized:2 not started: a optimized run took 40 s here, (49|48|47) s are left", log
    )


def test_capture_seeds_takes_expect_for_a_kind_this_machine_has_not_timed(tmp_path: Path) -> None:
    """R-Drop's baseline (~450 s) started in a call with less left would be cut and its time lost."""
    expect = {"EXPECT": "baseline@460 guide:rdrop_alpha=0@125", "END_S": "200"}
    log = run_capture_seeds(tmp_path, "baseline:1 guide:1:rdrop_alpha=0", "guide 200\n", **expect)
    assert "== baseline:1 not started: a baseline run is expected to take 460 s (EXPECT), " in log
    assert "== guide seed 1 (rdrop_alpha=0)" in log  # its own guess fits; guide's timing is another kind's
    # a kind this machine has timed goes by its timing, not by EXPECT
    log = run_capture_seeds(tmp_path, "baseline:1", "baseline 100\n", **expect)
    assert "not started" not in log and "== baseline seed 1" in log


def test_capture_seeds_gives_a_long_kind_its_full_run_when_only_run_limit_s_bounds_it(tmp_path: Path) -> None:
    log = run_capture_seeds(tmp_path, "baseline:1", "baseline 295\n", RUN_LIMIT_S="300")
    assert "not started" not in log and "== baseline seed 1" in log


def test_summarize_runs_draws_each_groups_curves_from_the_committed_r_drop_pairs(tmp_path: Path) -> None:
    """`--curves`: dev accuracy by epoch and the logged loss, a mean per recipe and variant; the group means
    are the runs' own (R-Drop's dev ends above the plain runs' on this encoder: +0.79 points at epoch 3)."""
    import statistics

    module = summarize_runs_module()
    folder = ROOT / "docs" / "benchmarks" / "2026-12-06-h100-rdrop"
    runs = [r for child in sorted(folder.iterdir()) if child.is_dir() and (r := module.describe(child))]
    groups: dict[str, list[float]] = {}
    for run in runs:
        groups.setdefault(module.group_label(run), []).append(run["dev_accuracy"][-1])
    assert sorted(groups) == ["guide", "guide (rdrop_alpha=4.0)", "optimized", "optimized (rdrop_alpha=4.0)"]
    gain = statistics.fmean(groups["optimized (rdrop_alpha=4.0)"]) - statistics.fmean(groups["optimized"])
    assert round(100 * gain, 2) == 0.79
    picture = tmp_path / "curves.png"
    module.write_curves(runs, picture)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missing = summarize_runs(folder, "--curves", tmp_path / "no" / "c.png")
    assert missing.returncode == 2 and "no such folder for the curves" in missing.stderr


def test_summarize_runs_reads_each_runs_gpu_busy_share_from_the_calls_recordings(tmp_path: Path) -> None:
    """The committed encoder-Q folder keeps each call's log and NVML recording: each run's SM-active share over
    the busiest stretch as long as its epochs. The replayed R-Drop step keeps the GPU ~86% busy, half the rows
    a little less, fp32 baseline ~96%; the call's first run had ~5 s idle after its first epoch inside that
    stretch. A folder without recordings, or with a broken one, gives no share rather than an error."""
    import datetime
    import gzip
    import shutil

    module = summarize_runs_module()
    folder = ROOT / "docs" / "benchmarks" / "2026-12-06-h100-rdrop-share-pairs"
    runs = [r for child in sorted(folder.iterdir()) if child.is_dir() and (r := module.describe(child))]
    busy = module.gpu_busy(folder, runs)
    assert set(busy) == {r["run"] for r in runs}  # all eleven, across three calls
    assert all(85 < busy[f"optimized-s{seed}"] < 88 for seed in (2, 3, 4)) and 75 < busy["optimized-s1"] < 80
    assert all(81 < busy[f"optimized-s{seed}-rdrop_share0.5"] < 85 for seed in (1, 2, 3, 4))
    assert 95 < busy["baseline-s1"] < 96

    copy = tmp_path / "runs"
    shutil.copytree(folder / "optimized-s2", copy / "optimized-s2")
    assert module.gpu_busy(copy, runs) == {}  # no recordings
    (copy / "log-seeds.txt").write_text((folder / "log-seeds-call2.txt").read_text())
    (copy / "monitor-seeds.jsonl").write_text("not json\n")
    assert module.gpu_busy(copy, runs) == {}

    # the folder's recordings are committed gzipped; the plain recording, as a call writes it, reads the same
    recorded = gzip.decompress((folder / "monitor-seeds-call2.jsonl.gz").read_bytes())
    (copy / "monitor-seeds.jsonl").write_bytes(recorded)
    from_plain = module.gpu_busy(copy, runs)  # call 2's runs, as from the folder
    assert from_plain and from_plain == {name: busy[name] for name in from_plain}

    # the log prints times of day: past midnight they belong to the monitor's next day
    started = datetime.datetime(2026, 12, 6, 23, 59, 30, tzinfo=datetime.timezone.utc)
    log = "== guide seed 3 (lr=1e-4,rdrop_alpha=0) 23:59:40 (limit 500 s)\nx\nexit 0 00:01:10\n"
    windows = module.run_windows(log, started)
    assert list(windows) == ["guide-s3-lr1e-4-rdrop_alpha0"]
    began, ended = windows["guide-s3-lr1e-4-rdrop_alpha0"]
    assert (began - started.timestamp(), ended - began) == (10, 90)
    # and the per-run line prints it
    printed = summarize_runs(folder).stdout
    pool = next(line for line in printed.splitlines() if line.startswith("optimized-s1-graph_gradspool "))
    assert pool.endswith(", GPU busy 87%")


def test_summarize_runs_reads_what_a_launch_cost_the_host_from_the_calls_logs(tmp_path: Path) -> None:
    """The speed-launch folder's log-host.txt holds three calls' `bench launch` lines (an H100 host): their
    medians. A folder whose logs predate the lines gives none; a cut line is skipped, the others still count."""
    module = summarize_runs_module()
    host = module.host_launch(ROOT / "docs" / "benchmarks" / "2026-12-06-h100-speed-launch")
    assert host == {"readings": 3, "eager_us": 5.978, "graph_us": 0.998}
    assert module.host_line(host) == (
        "host: one eager launch 5.98 µs (median of 3 reading(s)), a replayed kernel 1.00 µs"
    )
    assert module.host_launch(ROOT / "docs" / "benchmarks" / "2026-12-06-h100-rdrop-share-pairs") is None

    (tmp_path / "log-table-call1.txt").write_text(
        '== bench launch: {"eager": {"us_per_op": 2.0, "wall_us_per_op": 2.0}}\n'
        '== bench launch: {"eager": {"us_per_op": 3.0\n'
        "== bench launch failed: no GPU\n"
    )
    host = module.host_launch(tmp_path)
    assert host == {"readings": 1, "eager_us": 2.0, "graph_us": None}
    assert module.host_line(host) == "host: one eager launch 2.00 µs (median of 1 reading(s))"


def stand_in_nvidia_smi(tmp_path: Path, card: str) -> Path:
    """A folder for PATH whose nvidia-smi names `card` (nothing: a machine with no GPU)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/usr/bin/env bash\n[[ -n '{card}' ]] && echo '{card}'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    return bin_dir


def capture_next(tmp_path: Path, bin_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """capture_next.sh with `bin_dir`'s nvidia-smi first on PATH, writing under `tmp_path`."""
    return subprocess.run(
        ["bash", "scripts/h200/capture_next.sh"], capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(tmp_path)} | env,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("card", "chosen"),
    [("NVIDIA H200", "h200-choice"), ("NVIDIA H100 80GB HBM3", "any-choice"), ("", "any-choice")],
)
def test_capture_next_takes_h200_item_on_an_h200_only(tmp_path: Path, card: str, chosen: str) -> None:
    """H200_ITEM=speed runs the speed half of the 3x line on an H200 and ITEM (item 3) on any other card; an item
    it does not know is refused before anything runs, so its name in the refusal says which one was chosen."""
    bin_dir = stand_in_nvidia_smi(tmp_path, card)
    result = capture_next(tmp_path, bin_dir, ITEM="any-choice", H200_ITEM="h200-choice", PLAN="yes")
    assert result.returncode == 2
    assert result.stderr.strip() == f"ITEM={chosen}: expected table, base, speed, graphs or ablation"


def capture_next_plan(tmp_path: Path, bin_dir: Path, **env: str) -> list[str]:
    """capture_next.sh's lines under PLAN=yes, checking that it wrote nothing and ran nothing."""
    result = capture_next(tmp_path, bin_dir, **({"PLAN": "yes"} | env))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]
    return result.stdout.splitlines()


TABLE_RUNS = (
    "optimized:1 guide:1 baseline:1 optimized:2 guide:2 optimized:3 guide:3 baseline:2 optimized:1:profile_steps=10 "
    "optimized:4 guide:4"
)
GAP_RUNS = " ".join(
    f"optimized:{s} guide:{s} optimized:{s}:lr_scaling=sqrt optimized:{s}:batch_size=64" for s in (1, 2, 3, 4)
)
SPEED_RUNS = "optimized:1 guide:1 optimized:1:profile_steps=10 baseline:1 optimized:2 guide:2"


@pytest.mark.parametrize(
    ("card", "item", "runs", "header"),
    [
        ("NVIDIA H200", "table", TABLE_RUNS, "the table (PENDING item 1)"),
        ("NVIDIA H200", "speed", SPEED_RUNS, "the recipes' speed"),
        (
            "NVIDIA H100 80GB HBM3",
            "table",
            GAP_RUNS,
            "where optimized's gap to guide comes from (PENDING item 3)",
        ),
        ("NVIDIA H100 80GB HBM3", "speed", SPEED_RUNS, "the recipes' speed"),
        ("", "table", GAP_RUNS, "no GPU named: where optimized's gap to guide comes from"),
    ],
)
def test_capture_next_runs_the_tables_runs_on_an_h200_and_the_gaps_elsewhere(
    tmp_path: Path, card: str, item: str, runs: str, header: str
) -> None:
    """Both lists open with the 3x line's two runs (optimized, guide), so a session short of time after refusals
    still measures it. On an H200 the table is issue 4's; on any other card, since encoder AA (2026-12-07), each
    seed's pair beside optimized with its lr scaled by the square root of the batch and at guide's batch, for
    where optimized's gap to guide comes from (from bf16_residual to AA they ran the table's runs). RUNS replaces
    either list."""
    bin_dir = stand_in_nvidia_smi(tmp_path, card)
    lines = capture_next_plan(tmp_path, bin_dir, ITEM=item)
    assert lines[-2] == f"== runs: {runs}" and header in lines[0]
    assert capture_next_plan(tmp_path, bin_dir, ITEM=item, RUNS="guide:7")[-2] == "== runs: guide:7"


@pytest.mark.parametrize(
    ("item", "last"),
    [
        ("base", "== every run ends by second 590 of the call (CALL_S)"),
        ("speed", "== every run ends by second 570 of the call (CALL_S)"),
        ("graphs", "== NVIDIA H100 80GB HBM3: the graphed step under the profiler, and the compile probe"),
        ("ablation", "== NVIDIA H100 80GB HBM3: the ablation with every batch shape warmed up"),
    ],
)
def test_capture_next_plans_every_item_without_running_it(tmp_path: Path, item: str, last: str) -> None:
    """PLAN=yes stops every item after its header (and its runs), before a run, a pretraining or a log."""
    bin_dir = stand_in_nvidia_smi(tmp_path, "NVIDIA H100 80GB HBM3")
    assert capture_next_plan(tmp_path, bin_dir, ITEM=item)[-1] == last


@pytest.mark.parametrize("item", ["table", "base", "speed"])
def test_capture_next_ends_every_item_with_runs_by_call_s(tmp_path: Path, item: str) -> None:
    """CALL_S sets the second by which the runs end for the table as for speed (the table ignored it once, and a
    call limited to 495 s started a 474 s run with 560 s of limit); an empty one is the item's default, and a
    value that is not whole seconds, 60 or more, is refused before anything runs."""
    bin_dir = stand_in_nvidia_smi(tmp_path, "NVIDIA H100 80GB HBM3")
    lines = capture_next_plan(tmp_path, bin_dir, ITEM=item, CALL_S="470")
    assert lines[-1] == "== every run ends by second 470 of the call (CALL_S)"
    assert lines[-2].startswith("== runs: optimized:1 ")
    default = 570 if item == "speed" else 590
    last = capture_next_plan(tmp_path, bin_dir, ITEM=item, CALL_S="")[-1]
    assert last == f"== every run ends by second {default} of the call (CALL_S)"
    for bad in ("8m", "30"):
        refused = capture_next(tmp_path, bin_dir, ITEM=item, CALL_S=bad)
        assert refused.returncode == 2
        assert refused.stderr.strip() == f"CALL_S={bad}: expected whole seconds, 60 or more"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]


def collect_calls(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """scripts/h200/collect_calls.py run as a user runs it."""
    import sys

    return subprocess.run(
        [sys.executable, "scripts/h200/collect_calls.py", *map(str, args)], capture_output=True, text=True,
        cwd=ROOT, timeout=120,
    )  # fmt: skip


def device_calls_of(folder_name: str, finished: list[tuple[str, ...]], where: Path) -> list[Path]:
    """A committed folder's calls as they came back from the device: each call's $OUT with its plain logs and
    recording, and a seeds.tgz of /tmp/ft as it stood after the call (runs with their tokenizer and stderr, the
    machine's dgxperf home), rebuilt from the folder; `finished` names the runs each call finished."""
    import gzip
    import tarfile

    folder = ROOT / "docs" / "benchmarks" / folder_name
    ft = where / "ft"
    (ft / "home" / "cache").mkdir(parents=True)
    (ft / "home" / "runs.sqlite").write_text("")
    for name in ("durations", "encoder.id"):
        shutil.copyfile(folder / name, ft / name)
    calls = []
    for number, runs in enumerate(finished, start=1):
        call = where / f"call{number}"
        call.mkdir()
        for name in (f"log-call{number}.txt", *(("card.txt", "pretrain.json") if number == 1 else ())):
            if (folder / name).is_file():
                shutil.copyfile(folder / name, call / name)
        for stem in ("log-host", "log-seeds", "log-table"):
            if (folder / f"{stem}-call{number}.txt").is_file():
                shutil.copyfile(folder / f"{stem}-call{number}.txt", call / f"{stem}.txt")
        recording = gzip.decompress((folder / f"monitor-seeds-call{number}.jsonl.gz").read_bytes())
        (call / "monitor-seeds.jsonl").write_bytes(recording)
        for run in runs:
            shutil.copytree(folder / run, ft / run)
            (ft / run / "tokenizer.json").write_text("{}")
            (ft / f"{run}.err").write_text("")
            (ft / f"{run}.json").write_text("{}")
        with tarfile.open(call / "seeds.tgz", "w:gz") as archive:
            archive.add(ft, arcname="ft")
        calls.append(call)
    return calls


def device_calls_of_encoder_y(where: Path) -> list[Path]:
    """Y's three calls (the table's logs, an encoder pretrained in the first)."""
    finished = [("optimized-s1",), ("guide-s1", "optimized-s2", "guide-s2", "optimized-s3", "guide-s3"),
                ("optimized-s4", "guide-s4")]  # fmt: skip
    return device_calls_of("2026-12-07-h100-encoder-y", finished, where)


def test_collect_calls_lays_out_a_docs_folder_as_the_committed_ones(tmp_path: Path) -> None:
    """Y's three calls, gathered, give the committed folder file for file (less its README and curves): logs and
    recordings named by call, recordings gzipped, each run's four files, nothing of the machine's home, the
    tokenizers or stderr; and summarize_runs.py reads the result."""
    import gzip

    committed = ROOT / "docs" / "benchmarks" / "2026-12-07-h100-encoder-y"
    calls = device_calls_of_encoder_y(tmp_path / "device")
    dest = tmp_path / "docs" / "2026-12-07-h100-encoder-y"
    done = collect_calls(dest, *calls)
    assert done.returncode == 0, done.stderr
    assert "8 run(s) from 3 call(s)" in done.stdout

    def files(folder: Path) -> set[str]:
        return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}

    assert files(dest) == files(committed) - {"README.md", "curves.png"}
    for name in files(dest):
        ours, theirs = (dest / name).read_bytes(), (committed / name).read_bytes()
        if name.endswith(".gz"):
            ours, theirs = gzip.decompress(ours), gzip.decompress(theirs)
        assert ours == theirs, name
    assert all((dest / name).stat().st_mode & 0o777 == 0o644 for name in files(dest))
    summary = summarize_runs(dest)
    assert summary.returncode == 0 and "GPU busy 86%" in summary.stdout


def test_collect_calls_keeps_the_speed_items_host_log(tmp_path: Path) -> None:
    """The 2026-12-07 item-3 speed call (ITEM=speed, no encoder): its log-host.txt, the host and `bench launch`
    header, comes back as log-host-call1.txt, so summarize_runs.py prints what a launch cost that host."""
    name = "2026-12-07-h100-item3-speed"
    runs = ("optimized-s1", "optimized-s1-batch_size64", "optimized-s1-lr_scalingsqrt", "guide-s1",
            "optimized-s2", "optimized-s2-batch_size64", "optimized-s2-lr_scalingsqrt")  # fmt: skip
    calls = device_calls_of(name, [runs], tmp_path / "device")
    dest = tmp_path / "docs" / name
    done = collect_calls(dest, *calls)
    assert done.returncode == 0, done.stderr
    assert "7 run(s) from 1 call(s)" in done.stdout
    assert (dest / "log-host-call1.txt").read_bytes() == (calls[0] / "log-host.txt").read_bytes()
    summary = summarize_runs(dest)
    assert (
        summary.returncode == 0
        and "host: one eager launch 11.46 µs (median of 1 reading(s))" in summary.stdout
    )


def test_collect_calls_refuses_bad_input_with_one_line(tmp_path: Path) -> None:
    calls = device_calls_of_encoder_y(tmp_path / "device")
    taken = tmp_path / "taken"
    (taken / "x").mkdir(parents=True)
    for args, message in (
        ((taken, *calls), "exists and is not an empty folder"),
        ((tmp_path / "new", tmp_path / "nope"), "no such call folder"),
        ((tmp_path / "new", tmp_path / "device" / "ft"), "no call folder holds a seeds.tgz"),
    ):
        refused = collect_calls(*args)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "seeds.tgz").write_text("not a tarball")
    refused = collect_calls(tmp_path / "new", broken)
    assert refused.returncode == 2 and "not a readable tarball" in refused.stderr
    assert not (tmp_path / "new").exists()


def test_summarize_runs_takes_speed_ratios_from_unrounded_rates() -> None:
    """The 2026-12-07 item-3 speed call: optimized-s1 ran 1,531.6 samples/s to guide-s1's 511.5, 2.99x; the rounded
    rates (1,532 over 511) would read 3.00x, on issue 4's line."""
    table = summarize_runs(ROOT / "docs" / "benchmarks" / "2026-12-07-h100-item3-speed", "--table").stdout
    row = next(line for line in table.splitlines() if line.startswith("| `optimized-s1` |"))
    assert row.split(" | ")[2:4] == ["1,532", "2.99"]
