"""advise/rules/launch.py on real H200 training recordings (tests/data/h200/monitor/).

Those recordings predate the per-process CPU share, so each test sets it: a SYNTHETIC edit whose value
comes from the same recordings' host readings. In train-guide the host was 6.2-6.8% busy across 16
cores, i.e. about one core, with guide A's recipe as the only work on the node."""

from __future__ import annotations

import dataclasses
from typing import Any

from dgxperf.advise.base import Window
from dgxperf.advise.engine import run_advise
from dgxperf.advise.rules.launch import HostBoundProcess, process_cpu
from dgxperf.samples import Header, Sample
from tests.advise.test_real_recordings import load


def with_process_cpu(samples: list[Sample], cpu_pct: float, busiest: str = "python3") -> list[Sample]:
    """SYNTHETIC: every process entry of every GPU gets this CPU share (100 = one core)."""
    extra = {"cpu_pct": cpu_pct, "busiest_thread_pct": cpu_pct * 0.6, "busiest_thread": busiest}
    return [
        dataclasses.replace(
            s,
            gpus=tuple(
                dataclasses.replace(g, processes=tuple(dict(p) | extra for p in g.processes)) for g in s.gpus
            ),
        )
        for s in samples
    ]


def report(header: Header, samples: list[Sample], **options: Any) -> dict[str, Any]:
    return run_advise(samples, header, **options).to_json()


def fired(header: Header, samples: list[Sample], **options: Any) -> dict[str, dict[str, Any]]:
    return {s["rule"]: s for s in report(header, samples, **options)["suggestions"]}


def test_guides_recipe_at_one_core_is_launch_bound() -> None:
    header, samples = load("train-guide")
    suggestion = fired(header, with_process_cpu(samples, 100.0))["launch.host_bound"]
    assert suggestion["severity"] == "warn"
    evidence = suggestion["evidence"]
    util = evidence["metrics"]["gpu_util_pct"]["mean"]
    assert 30 <= util <= 60  # the real recording: the GPU ran kernels well under half the time
    assert evidence["values"]["process_cpu_pct_median"] == 100.0
    assert evidence["values"]["busiest_thread"] == "python3" and evidence["values"]["processes"] == [
        "python3"
    ]
    assert evidence["values"]["share_of_judged_ticks"] >= 0.9
    assert f"only {util:.0f}% of the time" in suggestion["why"] and "host bound" in suggestion["why"]
    assert f"~{100 / util:.1f}x" in suggestion["expected_effect"]
    assert any("compile=true" in a for a in suggestion["actions"])
    assert any("fused=True" in a for a in suggestion["actions"])


def test_cpu_steal_on_a_vm_is_named_when_it_matters() -> None:
    header, samples = load("train-guide")
    busy = with_process_cpu(samples, 100.0)
    assert "steal" not in fired(header, busy)["launch.host_bound"]["why"]  # recorded before steal was
    stolen = [dataclasses.replace(s, host=dict(s.host) | {"steal_pct": 12.0}) for s in busy]  # SYNTHETIC
    suggestion = fired(header, stolen)["launch.host_bound"]
    assert "took 12% of this VM's CPU time (steal)" in suggestion["why"]
    assert suggestion["evidence"]["metrics"]["host.steal_pct"]["mean"] == 12.0
    quiet = [dataclasses.replace(s, host=dict(s.host) | {"steal_pct": 1.0}) for s in busy]
    assert "steal" not in fired(header, quiet)["launch.host_bound"]["why"]


def test_a_process_well_under_one_core_is_not_launch_bound() -> None:
    header, samples = load("train-guide")
    assert "launch.host_bound" not in fired(header, with_process_cpu(samples, 30.0))


def test_a_busy_gpu_whose_process_spins_at_one_core_is_gpu_bound() -> None:
    # CUDA's default synchronisation spins while it waits for the GPU, so a GPU-bound process reads ~100% too
    header, samples = load("train-baseline")
    assert "launch.host_bound" not in fired(header, with_process_cpu(samples, 100.0))


def test_a_gpu_doing_nothing_is_not_judged() -> None:
    # "starved": the job holds the GPU and never reaches 10% utilisation: set-up, not the step's pace
    header, samples = load("starved")
    assert "launch.host_bound" not in fired(header, with_process_cpu(samples, 100.0))


def test_recordings_without_process_cpu_say_so() -> None:
    header, samples = load("train-guide")
    data = report(header, samples)
    reasons = {n["rule"]: n["reason"] for n in data["not_evaluated"]}
    assert reasons["launch.host_bound"].startswith("needs process cpu_pct")
    assert "launch.host_bound" not in {s["rule"] for s in data["suggestions"]}


def test_thresholds_are_overridable_and_short_windows_are_not_judged() -> None:
    header, samples = load("train-guide")
    busy = with_process_cpu(samples, 100.0)
    stricter = {"launch.host_bound": {"process_cpu_min_pct": 150}}
    assert "launch.host_bound" not in fired(header, busy, thresholds=stricter)
    rule = HostBoundProcess()
    window = Window(busy, header)
    assert rule.evaluate(window) and rule.missing(window) == ()
    working = [i for i, s in enumerate(busy) if (s.gpus[0].get("gpu_util_pct") or 0) >= 10]
    short = Window(busy[: working[13] + 1], header)  # 14 working ticks: one short of min_ticks
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
