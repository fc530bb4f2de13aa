"""A folder of fine-tunes from capture_seeds.sh (RECIPE-sSEED[-FIELDvalue...] run folders), summed up: each run's
test accuracy, speed and what it set beyond its recipe, then every variant paired with the plain run of the
same recipe, seed and encoder that differs from it in the fewest fields (review by review: difference, 95%
interval, McNemar's exact p; how far apart the logged step losses are), and each variant's mean difference
over its seeds. Run as

    PYTHONPATH=src python3 scripts/h200/summarize_runs.py FOLDER [FOLDER ...] [--json | --table]

(--table: issue 4's Markdown table, one row per run, for a docs/benchmarks README). Where the folder keeps the
calls' logs and NVML recordings (log-seeds[-callN].txt, monitor-seeds[-callN].jsonl), each run's line also says
how busy the GPU was over its epochs (SM active; gpu_busy), and where the calls' logs open with `bench
launch` (host_header.sh), what one kernel launch cost that host (host_launch). Then each run of another
recipe against `guide` of its seed and encoder (issue 4's two lines, seed by seed: the paired difference, and
the whole fine-tune's speed against guide's; against_guide). Last, each recipe's plain
runs with the same fields from one encoder: how many, their mean and range, how many reached issue 4's 86%,
and a majority vote of their test answers; and the same over every recipe's runs with fields several share.

e.g. on docs/benchmarks/2026-12-04-h200-encoder-j/seeds. A variant's fields are read from each run's recorded
`recipe_changes` (the fields that differed from its recipe when it ran), so the folder names are only labels;
results written before that was recorded are read against the recipe of their day: today's, with `optimized`'s
CUDA graphs off (the only default changed since). A run's reference is
the run whose fields are a subset of its own with the most fields: with SET="max_len=256" for all and
max_len=128 for some, a 256-token run with ema_decay pairs with the plain 256-token run, and that one with
the 128-token run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from dgxperf.monitor.sources import RecordingError, read_recording
from dgxperf.pace import pace_line, step_pace_change
from dgxperf.render import profile_line
from dgxperf.report.validate import read_metrics_records
from dgxperf.train import recipes
from dgxperf.train.paired import PredictionsError, compare_runs, load_predictions

# fields that leave the encoder's training as it was (ngram_fusion only adds a model after the test)
NOT_A_VARIANT = {"seed", "init_from", "data_dir", "epochs", "profile_steps", "profile_after", "ngram_fusion"}
# Defaults a recipe gained after runs were recorded without `recipe_changes`: such a run had the old value.
DEFAULTS_BEFORE_RECIPE_CHANGES = {"optimized": {"cuda_graphs": False}}


def recipe_changes(result: dict[str, Any]) -> dict[str, Any]:
    """The fields the run set beyond its recipe, as the recipe stood when the run was made."""
    if result.get("recipe_changes") is not None:
        return dict(result["recipe_changes"])
    config = result.get("config") or {}
    base = recipes.to_dict(recipes.get_recipe(result["recipe"]))
    base.update(DEFAULTS_BEFORE_RECIPE_CHANGES.get(result["recipe"], {}))
    return {k: v for k, v in config.items() if base.get(k) != v}


def peak_gb(epochs: list[dict[str, Any]], key: str) -> float | None:
    """The largest of the epochs' ``key`` (bytes) in GB, or None for a run without epochs."""
    return round(max(e.get(key) or 0 for e in epochs) / 1e9, 1) if epochs else None


def average_effect(average: dict[str, Any] | None) -> dict[str, Any] | None:
    """A run's weight average (``ema_decay`` > 0) against its own trained weights, or None without one."""
    if not average:
        return None
    paired = average["paired"]
    return {"decay": average["decay"], "unaveraged_test_accuracy": paired["accuracy_b"]} | {
        k: paired[k] for k in ("difference", "difference_ci95", "p_value", "a_only", "b_only")
    }


# capture_seeds.sh's log: "== optimized seed 2 (rdrop_share=0.5) 10:26:40 (limit 442 s)" ... "exit 0 10:27:47"
RUN_STARTED = re.compile(r"^== (\S+) seed (\d+) (?:\((\S+)\) )?(\d\d:\d\d:\d\d) \(limit")
RUN_EXITED = re.compile(r"^exit \d+ (\d\d:\d\d:\d\d)")


def run_windows(log_text: str, started_at: datetime.datetime) -> dict[str, tuple[float, float]]:
    """Each run folder's name -> (start, exit) in UNIX seconds, from a capture_seeds.sh log whose monitor
    started at ``started_at`` (the log prints times of day only: one before the monitor's is the next day)."""

    def at(clock: str) -> float:
        moment = datetime.datetime.combine(
            started_at.date(), datetime.time.fromisoformat(clock), datetime.timezone.utc
        )
        if moment < started_at - datetime.timedelta(minutes=1):
            moment += datetime.timedelta(days=1)
        return moment.timestamp()

    windows: dict[str, tuple[float, float]] = {}
    name, began = None, 0.0
    for line in log_text.splitlines():
        if started := RUN_STARTED.match(line):
            recipe, seed, fields, clock = started.groups()
            name = f"{recipe}-s{seed}" + "".join(
                f"-{f.replace('=', '')}" for f in (fields or "").split(",") if f
            )
            began = at(clock)
        elif (exited := RUN_EXITED.match(line)) and name:
            windows[name] = (began, at(exited.group(1)))  # a run cut and run again: its last window counts
            name = None
    return windows


def gpu_busy(folder: Path, runs: list[dict[str, Any]]) -> dict[str, float]:
    """Each run's GPU busy share (NVML's SM active, %, of the first GPU) from the monitor recordings a capture
    folder keeps beside its logs (``log-seeds[-callN].txt`` with ``monitor-seeds[-callN].jsonl[.gz]``): the mean
    over the busiest stretch of the run's window as long as its epochs together (dev passes between them
    included), so start-up, compile and the test pass fall outside it. Runs without a recording are left out."""
    epochs = {r["run"]: sum(r["epoch_seconds"]) for r in runs}
    busy: dict[str, float] = {}
    for log in sorted(folder.glob("log-seeds*.txt")):
        recording = folder / f"monitor-seeds{log.stem.removeprefix('log-seeds')}.jsonl"
        # committed gzipped since 2026-12-07, to keep the tree a device call carries small
        if not recording.exists():
            recording = recording.with_name(recording.name + ".gz")
        try:
            header, samples, _ = read_recording(recording)
            started_at = datetime.datetime.fromisoformat(header.started_at.replace("Z", "+00:00"))
        except (RecordingError, ValueError):
            continue
        for name, (began, ended) in run_windows(log.read_text(), started_at).items():
            if name not in epochs:
                continue
            active = [
                pct
                for s in samples
                if began <= s.t <= ended and s.gpus and (pct := s.gpus[0].get("sm_active_pct")) is not None
            ]
            width = min(len(active), max(1, round(epochs[name] / header.interval_s)))
            if active:
                busy[name] = max(sum(active[i : i + width]) / width for i in range(len(active) - width + 1))
    return busy


def host_launch(folder: Path) -> dict[str, Any] | None:
    """What one kernel launch cost the host the runs ran on: the `== bench launch:` lines that
    host_header.sh wrote at the head of each call's log (log-host.txt, log-table*.txt), as medians over the
    calls. guide's speed, and so optimized's ratio to it, follows that figure. None without such a line."""
    prefix = "== bench launch: "
    readings: list[dict[str, Any]] = []
    for log in sorted([*folder.glob("log-host*.txt"), *folder.glob("log-table*.txt")]):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(prefix):
                try:
                    readings.append(json.loads(line[len(prefix) :]))
                except ValueError:
                    continue  # a cut line: the other calls still count
    eager = [r["eager"]["us_per_op"] for r in readings if "us_per_op" in r.get("eager", {})]
    graph = [r["graph"]["us_per_op"] for r in readings if "us_per_op" in r.get("graph", {})]
    if not eager:
        return None
    return {
        "readings": len(eager),
        "eager_us": statistics.median(eager),
        "graph_us": statistics.median(graph) if graph else None,
    }


def host_line(host: dict[str, Any]) -> str:
    graph = f", a replayed kernel {host['graph_us']:.2f} µs" if host["graph_us"] is not None else ""
    return (
        f"host: one eager launch {host['eager_us']:.2f} µs (median of {host['readings']} reading(s)){graph}"
    )


def describe(folder: Path) -> dict[str, Any] | None:
    """One run's figures, or None for a folder without a finished run."""
    try:
        result = json.loads((folder / "result.json").read_text())
    except (OSError, ValueError):
        return None
    config = result.get("config") or {}
    variant = {k: v for k, v in recipe_changes(result).items() if k not in NOT_A_VARIANT}
    epochs = result.get("epochs") or []
    pretrain = (result.get("init") or {}).get("pretrain") or {}
    fusion = result.get("ngram_fusion") or {}
    return {
        "run": folder.name,
        "folder": str(folder),
        "recipe": result["recipe"],
        "seed": config.get("seed"),
        "encoder": (pretrain.get("sha256") or "")[:12] or None,
        "variant": variant,
        "test_accuracy": result["test"]["accuracy"],
        "samples_per_s": [round(e["samples_per_s"]) for e in epochs if e.get("samples_per_s")],
        # unrounded, for ratios: 1,532 over 511 reads 3.00x where 1,531.6 over 511.5 is 2.99x (2026-12-07)
        "exact_samples_per_s": [e["samples_per_s"] for e in epochs if e.get("samples_per_s")],
        "epoch_seconds": [round(e["epoch_seconds"], 1) for e in epochs],
        # unrounded, for the whole fine-tune's speed against guide's (against_guide)
        "train_seconds": sum(e["epoch_seconds"] for e in epochs),
        "peak_memory_gb": peak_gb(epochs, "peak_memory_bytes"),
        # what the card held: the graphs' recording kept 64 GB reserved against a 20 GB peak (2026-12-05)
        "peak_reserved_gb": peak_gb(epochs, "peak_reserved_bytes"),
        "cuda_graphs": result.get("cuda_graphs"),
        # ema_decay > 0: the average against the very weights it averaged, on the same test reviews
        "weight_average": average_effect(result.get("weight_average")),
        # the encoder averaged with the token n-gram model at the weight dev chose (runs from 2026-12-06)
        "fused_test_accuracy": (fusion.get("test") or {}).get("accuracy"),
        "fusion_weight": fusion.get("weight"),
        "bound": (result.get("profile") or {}).get("bound"),
        # steps under the profiler run slower, and the run repeats a seed: main() reports it apart
        "profiled": bool(config.get("profile_steps")),
        "profile": result.get("profile"),
        # from the logged steps, so runs written before result.json carried it have it too
        "pace_change": step_pace_change(read_metrics_records(folder / "metrics.jsonl", "step")),
        "real_tokens_per_s": [round(e["real_tokens_per_s"]) for e in epochs if e.get("real_tokens_per_s")],
        "mfu": [e.get("mfu") for e in epochs],
        "dev_accuracy": [e.get("dev_accuracy") for e in epochs],
    }


def step_losses(folder: Path) -> dict[int, float]:
    """The logged training loss at each logged step (metrics.jsonl), or nothing when the file is missing."""
    records = read_metrics_records(folder / "metrics.jsonl", "step")
    return {r["step"]: r["loss"] for r in records if r.get("loss") is not None}


def loss_gap(run: Path, reference: Path) -> dict[str, Any]:
    """How far two runs' logged losses are apart at the steps both logged: a variant meant to compute the
    same step (cuda_graphs) should be ~0; one that changes the training shows how soon it departs."""
    mine, theirs = step_losses(run), step_losses(reference)
    steps = sorted(set(mine) & set(theirs))
    gaps = [abs(mine[s] - theirs[s]) for s in steps]
    return {"steps_compared": len(steps), "step_loss_max_abs_diff": max(gaps) if gaps else None}


def reference_of(run: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run of the same recipe, seed and encoder whose fields are a strict subset of ``run``'s, the
    largest such: the one that differs from it in the fewest fields."""
    mine = run["variant"].items()
    candidates = [
        other
        for other in runs
        if (other["recipe"], other["seed"], other["encoder"]) == (run["recipe"], run["seed"], run["encoder"])
        and other["variant"].items() < mine
    ]
    return max(candidates, key=lambda other: len(other["variant"]), default=None)


def pairs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run against its reference (:func:`reference_of`), answer by answer."""
    out = []
    for run in runs:
        reference = reference_of(run, runs)
        if reference is None:
            continue
        change = {k: v for k, v in run["variant"].items() if reference["variant"].get(k) != v}
        try:
            compared = compare_runs(Path(run["folder"]), Path(reference["folder"]))
        except PredictionsError as exc:
            out.append({"run": run["run"], "against": reference["run"], "change": change, "error": str(exc)})
            continue
        speed = (
            statistics.median(run["exact_samples_per_s"])
            / statistics.median(reference["exact_samples_per_s"])
            if run["exact_samples_per_s"] and reference["exact_samples_per_s"]
            else None
        )
        # dev accuracy epoch by epoch, run minus reference: where a change's mechanism shows before test does
        dev = [
            None if mine is None or theirs is None else mine - theirs
            for mine, theirs in zip(run["dev_accuracy"], reference["dev_accuracy"], strict=False)
        ]
        pair = {"run": run["run"], "against": reference["run"], "change": change, "speed_ratio": speed}
        out.append(
            pair
            | {"dev_difference_by_epoch": dev}
            | compared
            | loss_gap(Path(run["folder"]), Path(reference["folder"]))
        )
    return out


def by_change(paired: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each change's paired differences over its seeds: the mean, how many pairs and how many went down (a
    field enters a recipe at +0.6 points over six pairs with at most one negative: PENDING.md), and the
    mean dev difference at each epoch that every pair logged."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in paired:
        if "difference" in p:
            label = ",".join(f"{k}={v}" for k, v in sorted(p["change"].items()))
            groups.setdefault(label, []).append(p)
    out = []
    for label, group in sorted(groups.items()):
        differences = [p["difference"] for p in group]
        dev_rows = [p.get("dev_difference_by_epoch") or [] for p in group]
        epochs = min(len(row) for row in dev_rows)
        dev = [
            statistics.mean(column) if None not in column else None
            for column in ([row[e] for row in dev_rows] for e in range(epochs))
        ]
        out.append(
            {
                "change": label,
                "pairs": len(group),
                "mean_difference": statistics.mean(differences),
                "negative_pairs": sum(d < 0 for d in differences),
                "mean_dev_difference_by_epoch": dev,
            }
        )
    return out


GOAL = 0.86  # issue 4: every recipe reaches 86% test accuracy


def vote_accuracy(folders: list[str]) -> float | None:
    """Test accuracy of a majority vote of the runs' test answers, a tie going to the answer of the first run
    that gave one of the tied labels (encoder M's README, 86.46% over eight seeds), or None when a run has no
    usable answers or the runs were scored on different splits."""
    try:
        answers = [load_predictions(Path(folder)) for folder in folders]
    except PredictionsError:
        return None
    gold = answers[0]["gold"]
    if any(a["gold"] != gold or a.get("split_hash") != answers[0].get("split_hash") for a in answers):
        return None
    right = 0
    for i, label in enumerate(gold):
        counts: dict[int, int] = {}  # in the runs' order, which max() keeps among equal counts
        for a in answers:
            counts[a["predictions"][i]] = counts.get(a["predictions"][i], 0) + 1
        right += max(counts, key=counts.__getitem__) == label
    return right / len(gold)


def group_summary(label: str, group: list[dict[str, Any]]) -> dict[str, Any]:
    """How many runs, their mean test accuracy and range, how many reached issue 4's goal, and their vote."""
    accuracies = [r["test_accuracy"] for r in group]
    fused = [r["fused_test_accuracy"] for r in group]
    return {
        "runs_of": label,
        "runs": len(group),
        "mean_test_accuracy": statistics.fmean(accuracies),
        "range": [min(accuracies), max(accuracies)],
        "at_or_above_goal": sum(a >= GOAL for a in accuracies),
        "vote_test_accuracy": vote_accuracy([r["folder"] for r in group]),
        # only when every run of the group has one: a mean over some runs would compare other runs
        "mean_fused_test_accuracy": statistics.fmean(fused) if None not in fused else None,
        "fused_at_or_above_goal": sum(a >= GOAL for a in fused) if None not in fused else None,
    }


def by_recipe(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each recipe's runs with the same fields from one encoder (:func:`group_summary`); then, for fields that
    several recipes ran with (none, or one SET for the whole folder), all those runs together."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        fields = ",".join(f"{k}={v}" for k, v in sorted(r["variant"].items()))
        groups.setdefault((fields, r["recipe"], r["encoder"] or "none"), []).append(r)
    out = []
    for fields in sorted({key[0] for key in groups}):
        mine = {key: group for key, group in groups.items() if key[0] == fields}
        for (_, recipe, encoder), group in sorted(mine.items()):
            out.append(group_summary(f"{recipe}{f' ({fields})' if fields else ''}, encoder {encoder}", group))
        if len({recipe for _, recipe, _ in mine}) > 1:
            together = [r for group in mine.values() for r in group]
            out.append(group_summary(f"all recipes{f' ({fields})' if fields else ''}", together))
    return out


def guide_of(run: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The `guide` run with ``run``'s seed and encoder that it is measured against: the one with the same variant
    (both with a weight average, say), else guide's own recipe; None without either."""
    guides = [
        r
        for r in runs
        if r["recipe"] == "guide" and (r["seed"], r["encoder"]) == (run["seed"], run["encoder"])
    ]
    return next((r for r in guides if r["variant"] == run["variant"]), None) or next(
        (r for r in guides if not r["variant"]), None
    )


def speed_vs_guide(run: dict[str, Any], runs: list[dict[str, Any]]) -> list[float] | None:
    """Each epoch's samples/s over that epoch of its `guide` run (:func:`guide_of`; the 3x line is per epoch),
    or None without one."""
    guide = guide_of(run, runs)
    if guide is None:
        return None
    mine, theirs = run["exact_samples_per_s"], guide["exact_samples_per_s"]
    if not mine or len(mine) != len(theirs):
        return None
    return [m / t for m, t in zip(mine, theirs, strict=True)]


def against_guide(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run of another recipe against its `guide` run (:func:`guide_of`), answer by answer (issue 4's
    within-0.5-points line, seed by seed: difference, 95% interval, McNemar's exact p), with how many times
    guide's time the whole fine-tune's epochs took it (issue 4's 3x line over the fine-tune)."""
    out = []
    for run in runs:
        guide = guide_of(run, runs) if run["recipe"] != "guide" else None
        if guide is None:
            continue
        pair: dict[str, Any] = {"run": run["run"], "against": guide["run"], "label": group_label(run)}
        mine, theirs = run["train_seconds"], guide["train_seconds"]
        same_epochs = len(run["epoch_seconds"]) == len(guide["epoch_seconds"]) and mine > 0
        pair["whole_speed_ratio"] = theirs / mine if same_epochs else None
        try:
            out.append(pair | compare_runs(Path(run["folder"]), Path(guide["folder"])))
        except PredictionsError as exc:
            out.append(pair | {"error": str(exc)})
    return out


def against_guide_by_recipe(paired: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each recipe's (and variant's) seed pairs against guide: the mean difference, how many went down, and the
    range of whole-fine-tune speed ratios."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in paired:
        if "difference" in p:
            groups.setdefault(p["label"], []).append(p)
    out = []
    for label, group in sorted(groups.items()):
        ratios = [p["whole_speed_ratio"] for p in group if p["whole_speed_ratio"] is not None]
        out.append(
            {
                "runs_of": label,
                "pairs": len(group),
                "mean_difference": statistics.fmean(p["difference"] for p in group),
                "negative_pairs": sum(p["difference"] < 0 for p in group),
                "whole_speed_ratio_range": [min(ratios), max(ratios)] if ratios else None,
            }
        )
    return out


def test_cell(run: dict[str, Any]) -> str:
    """The test accuracy; with a weight average, the average's and the trained weights' (the recipe's own)."""
    average = run["weight_average"]
    fused = run.get("fused_test_accuracy")
    with_ngrams = f" (with n-grams {100 * fused:.2f}%)" if fused is not None else ""
    if not average:
        return f"{100 * run['test_accuracy']:.2f}%{with_ngrams}"
    return (
        f"{100 * run['test_accuracy']:.2f}% averaged, {100 * average['unaveraged_test_accuracy']:.2f}% trained"
        f"{with_ngrams}"
    )


def markdown_table(runs: list[dict[str, Any]]) -> str:
    """Issue 4's table, one row per run: per epoch its seconds, samples/s and speed against `guide` (same seed
    and encoder), the last epoch's real tokens/s and MFU, peak memory, dev accuracy per epoch, and test."""

    def joined(values: list[Any], fmt: str) -> str:
        return " / ".join(format(v, fmt) if v is not None else "-" for v in values) or "-"

    lines = [
        "| run | epoch s | samples/s | x guide | real tokens/s | MFU | peak memory | dev acc by epoch | test |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        ratio = speed_vs_guide(r, runs)
        mfu = r["mfu"][-1] if r["mfu"] else None
        peak = f"{r['peak_memory_gb']} GB" if r["peak_memory_gb"] else "-"
        lines.append(
            f"| `{r['run']}` | {joined(r['epoch_seconds'], '.1f')} | {joined(r['samples_per_s'], ',')} "
            f"| {joined(ratio, '.2f') if ratio and r['recipe'] != 'guide' else '-'} "
            f"| {format(r['real_tokens_per_s'][-1], ',') if r['real_tokens_per_s'] else '-'} "
            f"| {f'{mfu:.1%}' if mfu is not None else '-'} "
            f"| {peak} "
            f"| {joined([100 * a if a is not None else None for a in r['dev_accuracy']], '.2f')} "
            f"| {test_cell(r)} |"
        )
    return "\n".join(lines)


def group_label(run: dict[str, Any]) -> str:
    fields = ",".join(f"{k}={v}" for k, v in run["variant"].items())
    return str(run["recipe"]) + (f" ({fields})" if fields else "")


def write_curves(runs: list[dict[str, Any]], path: Path) -> None:
    """Dev accuracy by epoch and the logged training loss by step, each run thin and each recipe-and-variant
    group's mean thick: the curves issue 4 asks for beside the final figures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(group_label(run), []).append(run)
    fig, (dev_ax, loss_ax) = plt.subplots(1, 2, figsize=(11, 4))
    for index, (label, group) in enumerate(sorted(groups.items())):
        color = f"C{index % 10}"
        devs = [[100 * d for d in r["dev_accuracy"] if d is not None] for r in group]
        for dev in devs:
            dev_ax.plot(range(1, len(dev) + 1), dev, color=color, alpha=0.3, linewidth=0.8)
        longest = max(len(d) for d in devs)
        mean = [statistics.fmean(d[e] for d in devs if len(d) > e) for e in range(longest)]
        dev_ax.plot(
            range(1, longest + 1),
            mean,
            color=color,
            linewidth=2.2,
            marker="o",
            label=f"{label}, {len(group)}",
        )
        losses = [step_losses(Path(r["folder"])) for r in group]
        for loss in losses:
            loss_ax.plot(
                sorted(loss), [loss[s] for s in sorted(loss)], color=color, alpha=0.25, linewidth=0.6
            )
        common = sorted(set.intersection(*(set(loss) for loss in losses))) if losses else []
        loss_ax.plot(
            common, [statistics.fmean(loss[s] for loss in losses) for s in common], color=color, linewidth=2
        )
    dev_ax.set(xlabel="epoch", ylabel="dev accuracy (%)", title="dev accuracy (thin: runs, thick: mean)")
    dev_ax.xaxis.get_major_locator().set_params(integer=True)
    loss_ax.set(xlabel="step", ylabel="training loss (cross-entropy)", title="logged training loss")
    dev_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--table", action="store_true", help="print issue 4's Markdown table of the runs")
    parser.add_argument(
        "--curves", type=Path, metavar="PNG", help="also draw dev accuracy and loss curves there"
    )
    args = parser.parse_args()
    runs = []
    hosts: dict[str, dict[str, Any]] = {}
    for folder in args.folders:
        if not folder.is_dir():
            print(f"{folder}: not a folder", file=sys.stderr)
            return 2
        if host := host_launch(folder):
            hosts[str(folder)] = host
        found = [r for child in sorted(folder.iterdir()) if child.is_dir() and (r := describe(child))]
        busy = gpu_busy(folder, found)
        for r in found:
            r["gpu_busy_pct"] = round(busy[r["run"]], 1) if r["run"] in busy else None
        runs += found
    if not runs:
        print("no finished runs (folders with a result.json) there", file=sys.stderr)
        return 2
    # a profiled run is its seed's run again, slowed by the profiler: counted in no group, pair or table
    profiled = [r for r in runs if r["profiled"]]
    runs = [r for r in runs if not r["profiled"]]
    if args.curves:
        if not args.curves.parent.is_dir():
            print(f"{args.curves.parent}: no such folder for the curves", file=sys.stderr)
            return 2
        write_curves(runs, args.curves)
    if args.table:
        print(markdown_table(runs))
        for folder, host in hosts.items():
            print(f"\n{folder}: {host_line(host)}")
        for r in runs:
            if r["pace_change"]:
                print(f"\n{r['run']}: {pace_line(r['pace_change'])}")
        return 0
    paired = pairs(runs)
    guide_pairs = against_guide(runs)
    if args.json:
        print(json.dumps({"runs": runs, "pairs": paired, "changes": by_change(paired), "recipes": by_recipe(runs),
                          "against_guide": guide_pairs, "against_guide_by_recipe": against_guide_by_recipe(guide_pairs),
                          "profiled": profiled, "hosts": hosts}, indent=1))  # fmt: skip
        return 0
    for folder, host in hosts.items():
        print(f"{folder}: {host_line(host)}")
    for r in runs:
        fields = ",".join(f"{k}={v}" for k, v in r["variant"].items()) or "-"
        pool = (r["cuda_graphs"] or {}).get("capture_pool_bytes")
        memory = f"  memory {r['peak_memory_gb']} GB peak, {r['peak_reserved_gb']} GB reserved" + (
            f", graphs' pool {pool / 1e9:.1f} GB" if pool is not None else ""
        )
        fused = (
            f" (with n-grams {100 * r['fused_test_accuracy']:.2f}%, weight {r['fusion_weight']:.2f})"
            if r["fused_test_accuracy"] is not None
            else ""
        )
        busy_note = f", GPU busy {r['gpu_busy_pct']:.0f}%" if r["gpu_busy_pct"] is not None else ""
        pace_note = f"; {pace_line(r['pace_change'])}" if r["pace_change"] else ""
        print(f"{r['run']:<48} {r['recipe']:<9} seed {r['seed']}  test {100 * r['test_accuracy']:.2f}%{fused}  "
              f"samples/s {r['samples_per_s']}  {fields}{memory if r['peak_memory_gb'] else ''}"
              f"{busy_note}{pace_note}")  # fmt: skip
    for r in profiled:
        print(f"{r['run']:<48} {r['recipe']:<9} seed {r['seed']}  test {100 * r['test_accuracy']:.2f}%  "
              f"samples/s {r['samples_per_s']}, profiled (in no group, pair or table): "
              f"{profile_line(r['profile'] or {'error': 'no profile recorded'})}")  # fmt: skip
    averaged = [r for r in runs if r["weight_average"]]
    for r in averaged:
        a = r["weight_average"]
        low, high = a["difference_ci95"]
        print(f"{r['run']}: its weight average (decay {a['decay']}) {100 * a['difference']:+.2f} points over "
              f"its trained weights ({100 * a['unaveraged_test_accuracy']:.2f}%; 95% {100 * low:+.2f} to "
              f"{100 * high:+.2f}, {a['a_only']} reviews right only averaged, {a['b_only']} only trained, "
              f"McNemar p = {a['p_value']:.3g})")  # fmt: skip
    if averaged:
        mean = sum(r["weight_average"]["difference"] for r in averaged) / len(averaged)
        print(
            f"weight average: {100 * mean:+.2f} points over its own trained weights, mean of {len(averaged)} run(s)"
        )
    for p in paired:
        if "error" in p:
            print(f"{p['run']} vs {p['against']}: {p['error']}")
            continue
        low, high = p["difference_ci95"]
        speed = f", speed x{p['speed_ratio']:.2f}" if p["speed_ratio"] else ""
        gap = (
            f", step losses at most {p['step_loss_max_abs_diff']:.2g} apart over {p['steps_compared']} logged steps"
            if p["steps_compared"]
            else ""
        )
        print(f"{p['run']} vs {p['against']}: {100 * p['difference']:+.2f} points "
              f"(95% {100 * low:+.2f} to {100 * high:+.2f}, McNemar p = {p['p_value']:.3g}){speed}{gap}")  # fmt: skip
    for change in by_change(paired):
        dev = " / ".join(
            "?" if d is None else f"{100 * d:+.2f}" for d in change["mean_dev_difference_by_epoch"]
        )
        print(f"{change['change']}: {100 * change['mean_difference']:+.2f} points over {change['pairs']} pair(s), "
              f"{change['negative_pairs']} negative" + (f"; dev by epoch {dev}" if dev else ""))  # fmt: skip
    for p in guide_pairs:
        if "error" in p:
            print(f"{p['run']} vs {p['against']}: {p['error']}")
            continue
        low, high = p["difference_ci95"]
        whole = p["whole_speed_ratio"]
        print(f"{p['run']} vs {p['against']} (same seed and encoder): {100 * p['difference']:+.2f} points "
              f"(95% {100 * low:+.2f} to {100 * high:+.2f}, McNemar p = {p['p_value']:.2g}, "
              f"{p['a_only'] + p['b_only']} discordant)"
              + (f", whole fine-tune {whole:.2f}x guide's speed" if whole is not None else ""))  # fmt: skip
    for summary in against_guide_by_recipe(guide_pairs):
        ratios = summary["whole_speed_ratio_range"]
        print(f"{summary['runs_of']} against guide: {100 * summary['mean_difference']:+.2f} points over "
              f"{summary['pairs']} seed pair(s), {summary['negative_pairs']} negative"
              + (f"; whole fine-tune {ratios[0]:.2f}-{ratios[1]:.2f}x guide's speed" if ratios else ""))  # fmt: skip
    for summary in by_recipe(runs):
        low, high = summary["range"]
        vote = summary["vote_test_accuracy"]
        print(f"{summary['runs_of']}: {summary['runs']} run(s), test mean {100 * summary['mean_test_accuracy']:.2f}% "
              f"({100 * low:.2f}-{100 * high:.2f}%), {summary['at_or_above_goal']} at or above {GOAL:.0%}"
              + (f", their vote {100 * vote:.2f}%" if vote is not None else "")
              + (f"; with n-grams mean {100 * summary['mean_fused_test_accuracy']:.2f}%, "
                 f"{summary['fused_at_or_above_goal']} at or above {GOAL:.0%}"
                 if summary["mean_fused_test_accuracy"] is not None else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
