"""advise/rules/launch.py on real H200 training recordings that carry each GPU process's CPU share
(tests/data/h200/monitor/, recorded 2026-12-04 by `dgxperf validate` and `dgxperf monitor`; how each was
made: capture-log.txt).

- train-guide-cpu: guide A's recipe, fine-tuning epoch 1 (validate's own recording).
- train-optimized-cpu: the `optimized` recipe, compile warm-up then three 7-8 s epochs (validate's).
- train-baseline-cpu: fp32 `baseline`, 90 s cut from the middle of its run (a monitor over the call).

And on an H100 (tests/data/h100/monitor/, 2026-12-05), `optimized` seed 2 fine-tuned twice in a row from one
encoder: train-optimized-eager (the eager step) and train-optimized-graphed (``cuda_graphs=true``, the same
training replayed as CUDA graphs; the same test answers, 1.6x the samples/s).

And on an H100 (tests/data/h100/monitor/guide-host-slowed, 2026-12-07): `guide` seed 1 then `optimized` seed 2 from
one encoder, on a host whose CPU slowed in the middle of `guide` (its logged steps ~520 -> ~310 samples/s).

Only the steal test and launch.host_slowed's must-not-fire variants edit a recording (marked SYNTHETIC): the lent
VM's steal stayed under 1%."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from dgxperf.advise.base import Window
from dgxperf.advise.engine import run_advise
from dgxperf.advise.rules.launch import HostBoundProcess, HostSlowed, process_cpu
from dgxperf.monitor.sources import read_recording
from dgxperf.samples import Header, Sample
from tests.advise.test_real_recordings import ROOT, load, load_h100


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


# ================================================================================== launch.host_slowed

GUIDE_PID = 1541  # guide seed 1 in guide-host-slowed.jsonl; optimized seed 2 ran after it as another process


def test_a_host_that_slows_in_the_middle_of_a_host_bound_run_is_named() -> None:
    """The real case: guide's SMs from ~71% to ~44% active at 10:22:25 UTC with the process at one core and the SM
    clock at 1,980 MHz on both sides; the GPU-bound optimized run after it is another process, not judged with it."""
    header, samples = load_h100("guide-host-slowed")
    suggestion = fired(header, samples)["launch.host_slowed"]
    values = suggestion["evidence"]["values"]
    assert suggestion["severity"] == "warn" and suggestion["scope"] == "range"
    assert values["pid"] == GUIDE_PID and values["change_at"].startswith("2026-12-07T10:22:2")
    assert (round(values["busy_pct_before"]), round(values["busy_pct_after"])) == (71, 44)
    assert 0.35 < values["drop"] < 0.4
    assert 99 < values["process_cpu_pct_before"] < 102 and 99 < values["process_cpu_pct_after"] < 102
    assert values["ticks_before"] >= 30 and values["ticks_after"] >= 30
    assert (
        values["steal_pct_before"] < 0.05 < values["steal_pct_after"] < 1
    )  # appeared, and too small to explain
    assert suggestion["evidence"]["metrics"]["sm_clock_mhz"]["mean"] > 1950
    why = suggestion["why"]
    assert (
        values["busy_metric"] == "sm_active_pct"
        and "its SMs were active 44% of the time instead of 71%" in why
    )
    assert "from 10:22:2" in why and "pid 1541" in why and "host bound" in why and "not comparable" in why
    assert "at 1980 MHz" in why and "steal" in why
    assert "~1.6x" in suggestion["expected_effect"]
    # the actions only read: dgxperf writes no governor, clock or affinity (hands off the host)
    assert all(
        word not in a for a in suggestion["actions"] for word in ("cpupower", "sysctl", " -g ", "echo ")
    )
    assert any("scaling_governor" in a and "read-only" in a for a in suggestion["actions"])
    assert any("--recipe optimized" in a for a in suggestion["actions"])
    # the same process is launch bound, which the other rule says with its own fixes
    assert "launch.host_bound" in fired(header, samples)


def test_host_slowed_stays_quiet_on_every_other_committed_recording() -> None:
    """Real runs whose pace held (guide, optimized, baseline, eager and graphed, on H200s and H100s): judged where
    they carry process CPU shares, never fired."""
    judged = 0
    for folder in (ROOT / "tests/data/h200/monitor", ROOT / "tests/data/h100/monitor"):
        for path in sorted(folder.glob("*.jsonl")):
            if path.stem == "guide-host-slowed":
                continue
            header, samples, _ = read_recording(path)
            window = Window(samples, header)
            rule = HostSlowed()
            assert rule.evaluate(window) == [], path.name
            judged += rule.missing(window) == ()
    assert judged == JUDGED_ELSEWHERE


JUDGED_ELSEWHERE = 8  # the other fixtures that carry process CPU shares (H200: 3, H100: 5)


def slowed_with(change: Any) -> tuple[Header, list[Sample]]:
    """guide-host-slowed with each GPU reading after the change edited by ``change(gpu_sample) -> dict``."""
    header, samples = load_h100("guide-host-slowed")
    at = HostSlowed().evaluate(Window(samples, header))[0].evidence.values["change_at"]
    moment = datetime.datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    edited = [
        dataclasses.replace(s, gpus=tuple(dataclasses.replace(g, **change(g)) for g in s.gpus))
        if s.t >= moment
        else s
        for s in samples
    ]
    return header, edited


def test_host_slowed_gives_way_when_the_gpu_clock_or_the_process_share_moved_too() -> None:
    """A GPU clock that fell with the pace is another diagnosis (health.throttling's), and a process that did less
    CPU work did less, so neither is read as a slower host."""

    def clock_down(g: Any) -> dict[str, Any]:
        return {"metrics": dict(g.metrics) | {"sm_clock_mhz": 1600.0}}  # SYNTHETIC

    def half_a_core(g: Any) -> dict[str, Any]:
        return {"processes": tuple(dict(p) | {"cpu_pct": 60.0} for p in g.processes)}  # SYNTHETIC

    for change, allowing_it in (
        (clock_down, {"max_clock_change": 0.25}),
        (half_a_core, {"process_cpu_min_pct": 50, "max_cpu_change": 0.5}),
    ):
        header, samples = slowed_with(change)
        window = Window(samples, header)
        assert HostSlowed().evaluate(window) == [], change.__name__
        assert HostSlowed().with_overrides(allowing_it).evaluate(window), (
            change.__name__
        )  # that check, no other


def test_host_slowed_thresholds_and_short_windows() -> None:
    header, samples = load_h100("guide-host-slowed")
    window = Window(samples, header)
    assert HostSlowed().evaluate(window)
    assert HostSlowed().with_overrides({"min_drop": 0.45}).evaluate(window) == []  # it fell ~38%
    assert HostSlowed().with_overrides({"min_side_ticks": 80}).evaluate(window) == []  # 41 ticks before it
    # the engine's one-minute sliding windows never hold 30 judged ticks on each side: only the range fires
    assert fired(header, samples)["launch.host_slowed"]["windows"]["fired"] == 0
    reasons = {n["rule"]: n["reason"] for n in report(*load("train-guide"))["not_evaluated"]}
    assert reasons["launch.host_slowed"].startswith("needs process cpu_pct")


def test_host_slowed_reads_utilization_where_the_gpu_has_no_sm_activity() -> None:
    """GPUs without GPM (before Hopper, no DCGM) give utilization.gpu alone: the same moment, in its words."""
    header, samples = load_h100("guide-host-slowed")
    no_gpm = [
        dataclasses.replace(
            s,
            gpus=tuple(
                dataclasses.replace(g, metrics={k: v for k, v in g.metrics.items() if k != "sm_active_pct"})
                for g in s.gpus
            ),
        )
        for s in samples
    ]  # SYNTHETIC: the H100's own readings less one metric
    (suggestion,) = HostSlowed().evaluate(Window(no_gpm, header))
    values = suggestion.evidence.values
    assert values["busy_metric"] == "gpu_util_pct" and values["change_at"].startswith("2026-12-07T10:22:2")
    assert (round(values["busy_pct_before"]), round(values["busy_pct_after"])) == (92, 55)
    assert "it ran kernels 55% of the time instead of 92%" in suggestion.why


GZIPPED_H200 = sorted((ROOT / "docs" / "benchmarks").glob("2026-12-04-h200-encoder-[hij]/monitor/*.jsonl.gz"))


def test_host_slowed_stays_quiet_on_the_gzipped_h200_recordings_it_can_judge() -> None:
    """Encoders H-J's calls on the H200 (2026-12-04), with process CPU shares: judged, quiet. Encoder H's guide-s2
    logged a 23% fall, its SMs 17.5% less active (45.4% -> 37.5%): under the rule's 25%."""
    assert len(GZIPPED_H200) == 8
    for path in GZIPPED_H200:
        header, samples, warnings = read_recording(path)
        window = Window(samples, header)
        assert warnings == [] and HostSlowed().missing(window) == (), path.name
        assert HostSlowed().evaluate(window) == [], path.name
    header, samples, _ = read_recording(GZIPPED_H200[0].with_name("call3.jsonl.gz"))
    (smaller,) = HostSlowed().with_overrides({"min_drop": 0.15}).evaluate(Window(samples, header))
    values = smaller.evidence.values  # guide-s2's process, with the rule's threshold lowered to 15%
    assert values["pid"] == 2210 and values["drop"] == 0.175
    assert (values["busy_pct_before"], values["busy_pct_after"]) == (45.4, 37.5)
