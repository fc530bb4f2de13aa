"""advise/rules/launch.py on real H200 training recordings that carry each GPU process's CPU share
(tests/data/h200/monitor/, recorded 2026-12-04 by `dgxperf validate` and `dgxperf monitor`; how each was
made: capture-log.txt).

- train-guide-cpu: guide A's recipe, fine-tuning epoch 1 (validate's own recording).
- train-optimized-cpu: the `optimized` recipe, compile warm-up then three 7-8 s epochs (validate's).
- train-baseline-cpu: fp32 `baseline`, 90 s cut from the middle of its run (a monitor over the call).

And on an H100 (tests/data/h100/monitor/, 2026-12-05), `optimized` seed 2 fine-tuned twice in a row from one
encoder: train-optimized-eager (the eager step) and train-optimized-graphed (``cuda_graphs=true``, the same
training replayed as CUDA graphs; the same test answers, 1.6x the samples/s).

Only the steal test edits a recording (marked SYNTHETIC): the lent VM's steal stayed under 1%."""

from __future__ import annotations

import dataclasses
from typing import Any

from dgxperf.advise.base import Window
from dgxperf.advise.engine import run_advise
from dgxperf.advise.rules.launch import HostBoundProcess, process_cpu
from dgxperf.samples import Header, Sample
from tests.advise.test_real_recordings import load, load_h100


def report(header: Header, samples: list[Sample], **options: Any) -> dict[str, Any]:
    return run_advise(samples, header, **options).to_json()


def fired(header: Header, samples: list[Sample], **options: Any) -> dict[str, dict[str, Any]]:
    return {s["rule"]: s for s in report(header, samples, **options)["suggestions"]}


def working(samples: list[Sample], at_least: float = 10.0) -> list[int]:
    return [i for i, s in enumerate(samples) if (s.gpus[0].get("gpu_util_pct") or 0) >= at_least]


def test_guides_recipe_is_launch_bound() -> None:
    header, samples = load("train-guide-cpu")
    suggestion = fired(header, samples)["launch.host_bound"]
    assert suggestion["severity"] == "warn"
    evidence = suggestion["evidence"]
    util = evidence["metrics"]["gpu_util_pct"]["mean"]
    assert 40 <= util <= 65  # the GPU ran kernels about half the time, at full clocks
    assert evidence["metrics"]["sm_clock_mhz"]["mean"] == 1980
    cpu = evidence["values"]["process_cpu_pct_median"]
    assert 95 <= cpu <= 110  # one core, all threads summed
    assert evidence["values"]["busiest_thread"] == "python3" and evidence["values"]["processes"] == [
        "python3"
    ]
    assert evidence["values"]["share_of_judged_ticks"] >= 0.9
    assert evidence["metrics"]["host.cpu_util_pct"]["mean"] < 8  # one core of 16: the host looks idle
    assert f"only {util:.0f}% of the time" in suggestion["why"] and "host bound" in suggestion["why"]
    assert "steal" not in suggestion["why"]
    assert f"~{100 / util:.1f}x" in suggestion["expected_effect"]
    assert any("compile=true" in a for a in suggestion["actions"])
    assert any("cuda_graphs=true" in a for a in suggestion["actions"])  # dgxperf's own graphs, measured
    assert any("fused=True" in a for a in suggestion["actions"])
    assert any("profile_steps=10" in a for a in suggestion["actions"])  # the trace that confirms it


def test_the_optimized_recipe_is_launch_bound_too() -> None:
    # What the rule found on its first real recordings: at batch 128 with per-block compile the optimized
    # step still leaves the GPU idle half the time, which is why its samples/s followed the host's speed
    header, samples = load("train-optimized-cpu")
    suggestion = fired(header, samples)["launch.host_bound"]
    values = suggestion["evidence"]["values"]
    assert suggestion["evidence"]["metrics"]["gpu_util_pct"]["mean"] < 70
    assert values["process_cpu_pct_median"] >= 95 and values["share_of_judged_ticks"] >= 0.75


def test_compile_warm_up_with_an_idle_gpu_is_not_judged() -> None:
    # optimized's first minute: torch.compile keeps its process at 80-115% of a core with the GPU at 0%
    header, samples = load("train-optimized-cpu")
    warm_up = samples[: working(samples, at_least=30)[0]]  # up to the first training steps
    assert len(warm_up) >= 50 and len(working(warm_up)) < 15  # a few short warm-up bursts
    assert max(p["cpu_pct"] for s in warm_up for p in s.gpus[0].processes if "cpu_pct" in p) >= 100
    data = report(header, warm_up)
    assert "launch.host_bound" not in {s["rule"] for s in data["suggestions"]}
    assert rule_had_its_inputs_and_stayed_quiet(header, warm_up)


def rule_had_its_inputs_and_stayed_quiet(header: Header, samples: list[Sample]) -> bool:
    rule = HostBoundProcess()
    window = Window(samples, header)
    return rule.missing(window) == () and rule.evaluate(window) == []


def test_a_busy_gpu_whose_process_spins_at_one_core_is_gpu_bound() -> None:
    # CUDA's default synchronisation spins while it waits for the GPU: fp32 baseline's process reads ~100%
    header, samples = load("train-baseline-cpu")
    shares = [p["cpu_pct"] for s in samples for p in s.gpus[0].processes if "cpu_pct" in p]
    assert len(shares) >= 80 and min(shares) >= 95
    busy = [s for s in samples if (s.gpus[0].get("gpu_util_pct") or 0) >= 95]
    assert len(busy) >= len(samples) - 1  # one tick in 90 read 0%
    assert "launch.host_bound" not in fired(header, samples)


def test_cpu_steal_on_a_vm_is_named_when_it_matters() -> None:
    header, samples = load("train-guide-cpu")
    stolen = [dataclasses.replace(s, host=dict(s.host) | {"steal_pct": 12.0}) for s in samples]  # SYNTHETIC
    suggestion = fired(header, stolen)["launch.host_bound"]
    assert "took 12% of this VM's CPU time (steal)" in suggestion["why"]
    assert suggestion["evidence"]["metrics"]["host.steal_pct"]["mean"] == 12.0
    quiet = [dataclasses.replace(s, host=dict(s.host) | {"steal_pct": 1.0}) for s in samples]  # SYNTHETIC
    assert "steal" not in fired(header, quiet)["launch.host_bound"]["why"]


def test_recordings_without_process_cpu_say_so() -> None:
    header, samples = load("train-guide")  # recorded before the monitor read process CPU shares
    data = report(header, samples)
    reasons = {n["rule"]: n["reason"] for n in data["not_evaluated"]}
    assert reasons["launch.host_bound"].startswith("needs process cpu_pct")
    assert "launch.host_bound" not in {s["rule"] for s in data["suggestions"]}


def test_thresholds_are_overridable_and_short_windows_are_not_judged() -> None:
    header, samples = load("train-guide-cpu")
    stricter = {"launch.host_bound": {"process_cpu_min_pct": 150}}
    assert "launch.host_bound" not in fired(header, samples, thresholds=stricter)
    looser_gpu = {"launch.host_bound": {"gpu_util_max_pct": 30}}  # guide's GPU was busier than 30%
    assert "launch.host_bound" not in fired(header, samples, thresholds=looser_gpu)
    rule = HostBoundProcess()
    assert rule.evaluate(Window(samples, header)) and rule.missing(Window(samples, header)) == ()
    short = Window(samples[: working(samples)[13] + 1], header)  # 14 working ticks: one short of min_ticks
    assert rule.evaluate(short) == []
    assert rule.with_overrides({"min_ticks": 14}).evaluate(short)  # it was the length that kept it quiet


def test_process_cpu_picks_the_busiest_measured_process() -> None:
    procs = (
        {"pid": 1},
        {"pid": 2, "cpu_pct": 40.0},
        {"pid": 3, "cpu_pct": 120.0},
        {"pid": 4, "cpu_pct": "x"},
    )
    assert process_cpu(procs) == {"pid": 3, "cpu_pct": 120.0}
    assert process_cpu(({"pid": 1},)) is None and process_cpu(()) is None


def test_replaying_the_step_as_cuda_graphs_quiets_the_rule_on_an_h100() -> None:
    """The rule's own fix, measured: the eager step fires it, the same training replayed does not."""
    header, eager = load_h100("train-optimized-eager")
    suggestion = fired(header, eager)["launch.host_bound"]
    assert suggestion["evidence"]["metrics"]["gpu_util_pct"]["mean"] < 60
    assert suggestion["evidence"]["values"]["process_cpu_pct_median"] >= 95  # one core, launching
    header, graphed = load_h100("train-optimized-graphed")
    assert len(working(graphed, at_least=95)) >= 15  # the epochs: the GPU busy every tick
    assert "launch.host_bound" not in fired(header, graphed)
    assert rule_had_its_inputs_and_stayed_quiet(header, graphed)  # judged, not skipped for want of data
