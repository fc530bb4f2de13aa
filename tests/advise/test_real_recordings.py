"""The advisor on real H200 recordings (tests/data/h200/monitor/, `dgxperf monitor --record` at 1 Hz on
2026-12-03): fourteen workloads from scripts/h200/workloads.py (five in the first batch, six in the
second, three of those re-taken: the first takes are kept as counter-examples; two in the third; one in
the fourth) and the three recipes of a `dgxperf validate` run (preset large). Every rule is judged on
every recording; the table says which ones fire. The capture logs are in capture-log.txt.

What the recordings taught us (each is a test below):
- the elementwise copy loop keeps the SMs 99 % "active" while DRAM runs at 88 %: guide B's memory-bound
  rule (SM < 60 % and DRAM > 80 %) cannot fire on it; dgxperf's DRAM rule (tensor cores idle) does;
- the fp32 baseline recipe (TF32 off) is the textbook "busy GPU, idle tensor cores" case, and the bf16/fp16
  recipes are not;
- pageable host-to-device copies reach only ~8 GB/s, about 13 % of the PCIe Gen5 x16 peak: no PCIe rule
  fires, by design (the fix for pageable copies is pinning, which the bandwidth rules cannot see);
- the input-starved loop as scripts/h200/workloads.py wrote it kept the GPU at 0-2 % utilisation (its
  GPU step was far too short to swing): a GPU idle while a job runs, which no rule covers yet;
- guide A's swing is real once the GPU step is ~0.4 s of bf16 GEMMs per batch, a batch every ~0.75 s from
  two sleeping workers (starved-swing): utilisation jumps 0 % -> 100 % six times in 23 s and
  input.util_swing fires; the same GEMM bursts hold the power cap (sw_power_cap in exactly 12 of 24
  ticks, the rule's 50 %), so health.throttling adds its info, as on the GEMM loop; the four gpu_idle
  ticks of the set-up are not throttling and do not count;
- holding 97 % of the GPU's memory (near-capacity) peaks at 96.7 % of the 140.4 GiB NVML total:
  memory.near_capacity fires; the idle GPU sits at 0.4 %;
- pinned 1 GiB copies read 59.1-59.4 GB/s on GPM's PCIe RX counter (h2d-pinned), 94 % of Gen5 x16's
  63.0 GB/s nominal, above the 55.3 GB/s (87.8 %) `bench pcie` times for the same copy with CUDA events:
  over the busy part guide B's 90 % rule fires (and dgxperf's 80 % ceiling rule, true as well, is
  dropped as the same diagnosis); over the whole recording the ~7 s of set-up (pinning 1 GiB) pull the
  mean to 66 % and no PCIe rule fires;
- guide B's memory-bound signature is hard to produce on the H200: a read+write streaming kernel on 75 of
  the 132 SMs (memory-few-sms) reads SM activity 49.6-50.0 % but DRAM only 74.1-74.6 % (3.58 of the
  4.21 TB/s the full grid streams), and on 66 SMs 49.2 % / 70.5 %. A kernel that only reads does it
  (memory-read-few-sms, second session): 75 programs of 8192 x 16 warps read 4.56 TB/s, more than
  torch.sum on the full grid (4.41 TB/s), at SM activity 49.7-55.7 % and DRAM 85.3-95.6 %. Over its busy
  part guide B's rule fires and dgxperf's DRAM rule is dropped as the same diagnosis; over the whole
  recording (9 s of set-up and calibration first) the guide's whole-window means miss it and only the
  DRAM rule, which averages busy ticks, fires;
- torch's ``copy_`` between two device tensors (memory-copy-engine: ``cudaMemcpyAsync`` device to device)
  did not go to a copy engine: SM activity 97 %, DRAM 85 %, 4.26 TB/s, the same signature as the
  elementwise loop;
- 16 pool processes burning Python on the 16 host cores (cpu-bound) read 79.9-95.1 % CPU per tick, 90 %
  or more in only 5 of 24 ticks: input.cpu_bound now asks for 80 % (18 of 24 ticks), and fires; the
  first take (cpu-bound-small-job, 75-89 %, 0.67 GiB held) fires as well, because its process is
  listed on the GPU, which is what "a job holds the GPU" means when the recording has process readings;
- iowait is a share of all 16 cores' time: eight O_DIRECT readers (iowait) hold it at 49.5-50.2 % and
  input.iowait fires; one reader (iowait-one-reader) reaches 5.9 % at most, under the 1/16 = 6.25 %
  one blocked thread can show, and it does not;
- NVML's event set does deliver XIDs inside the lent machine (fourth batch): a child process writing 4 TiB
  past its buffer from a Triton kernel (xid-app-fault) raised Xid 31 (an MMU fault; the kernel log named
  the process), NVML reported it within the tick, and health.hardware calls it an application error
  (warn), not the critical hardware branch; the GPU went on computing for the recording process.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest

from dgxperf.advise.base import GiB, Window
from dgxperf.advise.engine import run_advise
from dgxperf.advise.rules.bandwidth import PcieRxNearCeiling
from dgxperf.advise.rules.input_pipeline import UtilSwing, swing_cycles
from dgxperf.monitor.sources import read_recording
from dgxperf.samples import Header, Sample

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "tests" / "data" / "h200" / "monitor"

EXPECTED = {
    "idle": set(),
    "gemm": {"health.throttling"},
    "memory": {"bandwidth.dram_bound"},
    "starved": set(),
    "h2d": set(),
    "train-baseline": {"compute.low_tensor"},
    "train-guide": set(),
    "train-optimized": set(),
    "starved-swing": {"input.util_swing", "health.throttling"},
    "near-capacity": {"memory.near_capacity"},
    "h2d-pinned": set(),  # over the whole recording; its busy part fires bandwidth.pcie_rx (test below)
    "memory-few-sms": set(),
    "memory-few-sms-66": set(),
    "cpu-bound": {"input.cpu_bound"},
    "cpu-bound-small-job": {"input.cpu_bound"},
    "iowait": {"input.iowait"},
    "iowait-one-reader": set(),
    "memory-copy-engine": {"bandwidth.dram_bound"},
    "memory-read-few-sms": {"bandwidth.dram_bound"},  # over the whole recording; its busy part: test below
    "xid-app-fault": {"health.hardware"},
    # fifth batch (2026-12-04): recordings with each GPU process's CPU share; details in test_launch.py
    "train-guide-cpu": {"launch.host_bound"},
    "train-optimized-cpu": {"launch.host_bound"},
    "train-baseline-cpu": {"compute.low_tensor"},
}


def load(name: str) -> tuple[Header, list[Sample]]:
    header, samples, warnings = read_recording(RECORDINGS / f"{name}.jsonl")
    assert not warnings, warnings
    assert header.gpus and header.gpus[0].name == "NVIDIA H200"
    return header, samples


H100 = ROOT / "tests" / "data" / "h100" / "monitor"


def load_h100(name: str) -> tuple[Header, list[Sample]]:
    header, samples, warnings = read_recording(H100 / f"{name}.jsonl")
    assert not warnings, warnings
    assert header.gpus and header.gpus[0].name == "NVIDIA H100 80GB HBM3"
    return header, samples


def fired(header: Header, samples: list[Sample], **options: Any) -> dict[str, dict[str, object]]:
    report = run_advise(samples, header, **options).to_json()
    return {s["rule"]: s for s in report["suggestions"]}


def advise(name: str) -> dict[str, dict[str, object]]:
    return fired(*load(name))


def busy_metrics(name: str, util_pct: float = 90.0) -> list[dict[str, float]]:
    """The GPU metrics of the ticks with utilization.gpu above ``util_pct`` (the workload running)."""
    _, samples = load(name)
    return [dict(s.gpus[0].metrics) for s in samples if s.gpus[0].metrics.get("gpu_util_pct", 0) > util_pct]


def host(name: str, metric: str) -> list[float]:
    _, samples = load(name)
    return [float(s.host[metric]) for s in samples]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_which_rules_fire_on_each_real_h200_recording(name: str) -> None:
    assert set(advise(name)) == EXPECTED[name]


def test_every_recording_is_real_and_at_one_hertz() -> None:
    for name in EXPECTED:
        header, samples, _ = read_recording(RECORDINGS / f"{name}.jsonl")
        assert header.source == "nvml" and header.interval_s == 1.0, name
        gaps = [b.t - a.t for a, b in itertools.pairwise(samples)]
        assert len(samples) >= 20 and max(gaps) < 1.5, name


def test_every_committed_recording_is_judged() -> None:
    assert {p.stem for p in RECORDINGS.glob("*.jsonl")} == set(EXPECTED)


def test_gemm_loop_is_power_capped_not_thermal() -> None:
    suggestion = advise("gemm")["health.throttling"]
    assert suggestion["severity"] == "info"
    assert "power" in str(suggestion["title"]).lower()


def test_copy_loop_is_dram_bound_but_guide_b_rule_cannot_see_it() -> None:
    _, samples = load("memory")
    busy = [s.gpus[0].metrics for s in samples if s.gpus[0].metrics.get("gpu_util_pct", 0) > 90]
    assert len(busy) >= 15
    assert min(m["sm_active_pct"] for m in busy) > 90  # SMs "active" while they wait on memory
    assert min(m["dram_active_pct"] for m in busy) > 80
    fired = advise("memory")
    assert "bandwidth.dram_bound" in fired and "bandwidth.memory_bound" not in fired


def test_fp32_baseline_training_has_idle_tensor_cores_and_amp_recipes_do_not() -> None:
    suggestion = advise("train-baseline")["compute.low_tensor"]
    metrics = suggestion["evidence"]["metrics"]  # type: ignore[index]
    assert metrics["tensor_active_pct"]["p50"] < 5 and metrics["sm_active_pct"]["p50"] > 50
    for recipe in ("train-guide", "train-optimized"):
        assert "compute.low_tensor" not in advise(recipe)


def test_pageable_copies_stay_far_below_the_pcie_rules() -> None:
    _, samples = load("h2d")
    rx = [s.gpus[0].metrics.get("pcie_rx_bytes_per_s", 0) for s in samples]
    assert 5e9 < max(rx) < 12e9  # ~8 GB/s of pageable copies vs ~63 GB/s nominal
    assert not {"bandwidth.pcie_rx", "bandwidth.pcie_rx_ceiling"} & set(advise("h2d"))


# ------------------------------------------------------------------------ second batch (2026-12-03)


def test_guide_a_swing_fires_on_the_starved_swing_loop_and_not_on_steady_or_steadily_low_load() -> None:
    swing = advise("starved-swing")["input.util_swing"]
    assert swing["severity"] == "warn"
    evidence = swing["evidence"]
    assert evidence["values"]["swing_cycles"] == 6  # type: ignore[index]
    util = evidence["metrics"]["gpu_util_pct"]  # type: ignore[index]
    assert util["p10"] < 40 and util["p90"] > 85
    # the GEMM loop (100 % once started) and the fp16 recipe (a steady ~36 %, its stalls shorter than a
    # tick) have a low 10th percentile too, but climb from below 40 % to above 85 % at most once
    for steady in ("gemm", "train-guide"):
        header, samples = load(steady)
        assert swing_cycles(Window(samples, header).values("gpu_util_pct", 0), 40, 85) <= 1, steady
        assert "input.util_swing" not in advise(steady), steady


def test_the_swinging_loop_holds_the_power_cap_while_it_computes_and_idle_clocks_do_not_count() -> None:
    header, samples = load("starved-swing")
    reasons = [s.gpus[0].throttle for s in samples]
    assert sum("sw_power_cap" in r for r in reasons) == 12 and sum("gpu_idle" in r for r in reasons) == 4
    throttling = fired(header, samples)["health.throttling"]
    assert throttling["severity"] == "info" and "power" in str(throttling["title"]).lower()
    assert throttling["evidence"]["values"]["share_sw_power_cap"] == 0.5  # type: ignore[index]
    # every capped tick is a computing one: the cap comes from the bf16 GEMM bursts, as on the GEMM loop
    assert all(
        s.gpus[0].metrics["gpu_util_pct"] >= 75 for s in samples if "sw_power_cap" in s.gpus[0].throttle
    )


def test_near_capacity_fires_when_the_gpu_is_97_percent_full_and_not_when_idle() -> None:
    near = advise("near-capacity")["memory.near_capacity"]
    values = near["evidence"]["values"]  # type: ignore[index]
    assert 95 < values["used_max_pct_of_total"] < 98 and 140 < values["total_gib"] < 141
    header, samples = load("idle")
    window = Window(samples, header)
    total = window.memory_total_bytes(0)
    assert total is not None and max(window.values("fb_used_bytes", 0)) / total < 0.01
    assert "memory.near_capacity" not in advise("idle")


def test_iowait_fires_on_eight_direct_readers_and_not_on_one() -> None:
    """iowait is a share of all 16 cores' time: one blocked reader shows at most 1/16 = 6.25 %."""
    eight = host("iowait", "iowait_pct")
    assert sum(v > 40 for v in eight) >= 14 and max(eight) < 51  # ~50 %: 8 of 16 cores waiting
    suggestion = advise("iowait")["input.iowait"]
    assert suggestion["severity"] == "warn"  # the GPU idles meanwhile
    assert suggestion["evidence"]["metrics"]["host.iowait_pct"]["mean"] > 10  # type: ignore[index]
    one = host("iowait-one-reader", "iowait_pct")
    assert 5 < max(one) < 100 / 16
    assert "input.iowait" not in advise("iowait-one-reader")


def test_pinned_copies_fire_guide_b_pcie_rule_on_the_busy_part_of_the_recording() -> None:
    """The whole recording (EXPECTED) starts with ~7 s of set-up (pinning 1 GiB): this test judges the
    busy part of the same real recording, from the first tick with utilization.gpu above 90 % on
    (`run_advise`'s ``from_t``), and the sliding windows of ``dgxperf advise --window 10``."""
    header, samples = load("h2d-pinned")
    start = next(s.t for s in samples if s.gpus[0].metrics["gpu_util_pct"] > 90)
    steady = [m["pcie_rx_bytes_per_s"] for m in busy_metrics("h2d-pinned")][1:]  # tick 1: copies start
    assert len(steady) >= 15 and min(steady) > 59e9 and max(steady) < 60e9  # > 55.3 GB/s of bench pcie
    over_busy = fired(header, samples, from_t=start)
    assert set(over_busy) == {"bandwidth.pcie_rx"}
    values = over_busy["bandwidth.pcie_rx"]["evidence"]["values"]  # type: ignore[index]
    assert 90 < values["rx_pct_of_peak"] < 95 and values["link_peak_gbs"] == pytest.approx(63.0, abs=0.1)
    assert values["link_peak_source"].startswith("datasheet")
    # dgxperf's 80 % ceiling rule holds too, and is dropped beside guide B's as the same diagnosis
    alone = run_advise(samples, header, from_t=start, rules=(PcieRxNearCeiling,)).to_json()["suggestions"]
    assert [s["rule"] for s in alone] == ["bandwidth.pcie_rx_ceiling"]
    # whole recording: mean RX 66 % of the peak, nothing; windows of 10 s: the two over the copies fire
    assert not {"bandwidth.pcie_rx", "bandwidth.pcie_rx_ceiling"} & set(fired(header, samples))
    windowed = fired(header, samples, window_s=10)["bandwidth.pcie_rx"]
    assert windowed["scope"] == "window" and windowed["windows"] == {"fired": 2, "evaluated": 4}


def test_pageable_copies_do_not_reach_the_ceiling_rule_even_while_they_run() -> None:
    header, samples = load("h2d")
    start = next(s.t for s in samples if s.gpus[0].metrics.get("pcie_rx_bytes_per_s", 0) > 5e9)
    report = run_advise(samples, header, from_t=start, rules=(PcieRxNearCeiling,)).to_json()
    assert report["range"]["samples"] >= 15 and report["suggestions"] == []


@pytest.mark.parametrize(
    ("name", "dram_low", "dram_high"), [("memory-few-sms", 74, 75), ("memory-few-sms-66", 67, 71)]
)
def test_guide_b_memory_bound_rule_cannot_fire_on_a_kernel_on_half_the_sms(
    name: str, dram_low: float, dram_high: float
) -> None:
    """The finding: on the H200, a streaming kernel on few enough SMs for SM activity < 60 % (75 or 66
    programs on 132 SMs) reaches only ~70-74 % DRAM activity, so guide B's SM < 60 % and DRAM > 80 %
    never hold together; with every SM streaming, DRAM passes 80 % but SM activity is 99 % (`memory`)."""
    busy = busy_metrics(name)
    assert len(busy) >= 14
    assert all(47 < m["sm_active_pct"] < 50 for m in busy)  # < 60: guide B's first condition holds
    assert all(dram_low < m["dram_active_pct"] < dram_high for m in busy)  # < 80: its second does not
    assert all(m["tensor_active_pct"] == 0 for m in busy)
    rules = advise(name)
    assert "bandwidth.memory_bound" not in rules and "bandwidth.dram_bound" not in rules


def test_guide_b_memory_bound_rule_fires_on_a_read_only_kernel_on_57_percent_of_the_sms() -> None:
    """Reads alone on 75 programs (memory-read-few-sms) pass both of guide B's conditions on every busy
    tick; judged from the first busy tick on (`run_advise`'s ``from_t``) the guide's rule fires and
    dgxperf's DRAM rule, true as well, is dropped as the same diagnosis. Over the whole recording the
    set-up and calibration ticks pull the guide's whole-window means under its thresholds."""
    busy = busy_metrics("memory-read-few-sms")
    assert len(busy) >= 10
    assert all(49 < m["sm_active_pct"] < 56 for m in busy)  # < 60 %
    assert all(85 < m["dram_active_pct"] < 96 for m in busy)  # > 80 %
    assert all(m["tensor_active_pct"] == 0 for m in busy)
    header, samples = load("memory-read-few-sms")
    start = next(s.t for s in samples if s.gpus[0].metrics["gpu_util_pct"] > 90)
    over_busy = fired(header, samples, from_t=start)
    assert set(over_busy) == {"bandwidth.memory_bound"}
    metrics = over_busy["bandwidth.memory_bound"]["evidence"]["metrics"]  # type: ignore[index]
    assert metrics["sm_active_pct"]["mean"] < 60 < 80 < metrics["dram_active_pct"]["mean"]
    assert set(fired(header, samples)) == {"bandwidth.dram_bound"}  # the whole recording


def test_device_to_device_copy_runs_on_the_sms_not_a_copy_engine() -> None:
    busy = busy_metrics("memory-copy-engine")
    steady = busy[2:]  # the first busy ticks hold the 4 GiB allocation and the timed warm-up
    assert len(steady) >= 12 and all(m["sm_active_pct"] > 95 for m in steady)
    assert all(m["dram_active_pct"] > 84 for m in steady)
    assert "bandwidth.memory_bound" not in advise("memory-copy-engine")


def test_cpu_bound_fires_on_workers_saturating_every_core_at_80_not_90_percent() -> None:
    cpu = host("cpu-bound", "cpu_util_pct")
    assert min(c for c in cpu if c > 50) > 79 and max(cpu) < 96
    assert sum(c >= 90 for c in cpu) == 5 and sum(c >= 80 for c in cpu) == 18  # of 24 ticks
    suggestion = advise("cpu-bound")["input.cpu_bound"]
    assert suggestion["evidence"]["values"]["starved_share"] == 0.75  # type: ignore[index]
    assert suggestion["evidence"]["metrics"]["fb_used_bytes"]["p50"] > 4 * GiB  # type: ignore[index]
    header, samples = load("cpu-bound")
    at_90 = fired(header, samples, thresholds={"input.cpu_bound": {"cpu_util_min_pct": 90}})
    assert "input.cpu_bound" not in at_90  # the old threshold missed it
    # no GPU-idle recording with a quiet host fires it: the starved loop's CPU stays under 20 %
    assert max(host("starved", "cpu_util_pct")) < 20 and "input.cpu_bound" not in advise("starved")
    assert "input.cpu_bound" not in advise("idle")


def test_cpu_bound_small_job_counts_as_a_job_through_its_process_not_its_memory() -> None:
    """The first take (0.67 GiB on the GPU, CPU 75-89 %) fires because its process is listed on the GPU.
    DERIVED from the real recordings: with the process lists removed (a recorder without process
    readings), only the framebuffer says whether a job holds the GPU, and 0.67 GiB (an idle CUDA context
    holds 0.6) does not, while cpu-bound's 4.67 GiB does."""
    _, samples = load("cpu-bound-small-job")
    assert any(s.gpus[0].processes for s in samples)
    values = advise("cpu-bound-small-job")["input.cpu_bound"]["evidence"]["values"]  # type: ignore[index]
    assert values["starved_share"] == pytest.approx(14 / 24, abs=1e-3)  # 75-89 %: 14 ticks at 80 % or more

    def without_processes(name: str) -> dict[str, dict[str, object]]:
        header, samples = load(name)
        bare = [
            dataclasses.replace(s, gpus=tuple(dataclasses.replace(g, processes=()) for g in s.gpus))
            for s in samples
        ]
        return fired(header, bare)

    assert "input.cpu_bound" not in without_processes("cpu-bound-small-job")
    assert "input.cpu_bound" in without_processes("cpu-bound")


# ------------------------------------------------------------------------ fourth batch (2026-12-03)


def test_a_real_mmu_fault_is_an_application_xid_not_a_hardware_fault() -> None:
    header, samples = load("xid-app-fault")
    events = [e for s in samples for e in s.events if e.get("type") == "xid"]
    assert [(e["gpu"], e["xid"]) for e in events] == [(0, 31)]
    hardware = fired(header, samples)["health.hardware"]
    assert hardware["severity"] == "warn"
    assert "XID 31" in str(hardware["why"]) and "application" in str(hardware["why"])
    assert any("CUDA_LAUNCH_BLOCKING=1" in action for action in hardware["actions"])  # type: ignore[attr-defined]
    # the counters that would make it a hardware fault stayed at zero through the fault
    for name in ("ecc_dbe_volatile", "remapped_pending", "pcie_replay"):
        assert {s.gpus[0].metrics[name] for s in samples} == {0.0}, name


# ------------------------------------------------------------------ an H100 (2026-12-05, twenty-first session)


@pytest.mark.parametrize(
    ("name", "climbs", "seconds"), [("two-fine-tunes", 6, 90), ("sequential-fine-tunes", 8, 202)]
)
def test_jobs_run_one_after_another_are_not_an_input_stall(name: str, climbs: int, seconds: int) -> None:
    """Fine-tunes run one after another (tests/data/h100/monitor/, capture-log.txt): each process starts up
    with the GPU idle, trains 5-s epochs with a dev pass between them, and exits, so utilisation climbs from
    below 40 % to above 85 % three times a run: enough climbs for guide A's swing, but 4.0 a minute at most,
    where the starved loop climbed 15.6 times a minute. Only the power cap is reported: the graphed step
    held sw_power_cap."""
    header, samples = load_h100(name)
    window = Window(samples, header)
    assert swing_cycles(window.values("gpu_util_pct", 0), 40, 85) == climbs
    assert round(window.duration_s) == seconds
    assert set(fired(header, samples)) == {"health.throttling"}
    # the count alone calls it a stall, as the rule did before it asked for a rate
    assert "input.util_swing" in fired(
        header, samples, thresholds={"input.util_swing": {"min_cycles_per_min": 0}}
    )


def test_the_starved_loop_swings_faster_than_the_rate_the_rule_asks_for() -> None:
    header, samples = load("starved-swing")
    window = Window(samples, header)
    climbs = swing_cycles(window.values("gpu_util_pct", 0), 40, 85)
    assert climbs * 60 / window.duration_s == pytest.approx(15.65, abs=0.01)


def test_mixed_precision_recipes_are_not_told_to_use_amp() -> None:
    """`guide` (fp16 AMP) between two `optimized` runs (bf16) on an H100 (guide-between-optimized.jsonl): over
    the busy ticks the tensor pipes read 19.8 % and the SMs 59 %, which the first threshold (tensor under 20 %)
    called "matmuls not in AMP". The FP32 pipe's 2.7 % says the matmuls are not there either; the fp32
    baseline on the H200 reads tensor 0.9 % and FP32 67 %. guide's launch-bound host is what it reports."""
    header, samples = load_h100("guide-between-optimized")
    window = Window(samples, header)
    busy = window.busy(0, 50)
    tensor, sm, fp32 = (
        window.mean(m, 0, busy) for m in ("tensor_active_pct", "sm_active_pct", "fp32_active_pct")
    )
    assert tensor is not None and sm is not None and fp32 is not None
    assert 19 < tensor < 20 and sm > 50 and fp32 < 5
    assert set(fired(header, samples)) == {"launch.host_bound"}
    first = {"compute.low_tensor": {"tensor_active_max_pct": 20, "fp32_active_min_pct": 0}}
    assert "compute.low_tensor" in fired(header, samples, thresholds=first)  # the rule as it was
    baseline = advise("train-baseline")["compute.low_tensor"]["evidence"]["metrics"]  # type: ignore[index]
    assert baseline["tensor_active_pct"]["mean"] < 1 and baseline["fp32_active_pct"]["mean"] > 60


def test_a_swing_from_the_host_process_is_reported_as_host_bound_only() -> None:
    """Three eager `optimized` fine-tunes on the H200 (encoder K, docs/benchmarks/2026-12-04-h200-encoder-k/
    monitor/call4-seeds.jsonl): utilisation climbed 6 times in one minute while the process kept a core busy.
    Guide A's swing rule holds there, but the gaps are the process's own host work, which launch.host_bound
    reports with the DataLoader workers among its fixes; the swing is dropped as the same finding."""
    path = ROOT / "docs" / "benchmarks" / "2026-12-04-h200-encoder-k" / "monitor" / "call4-seeds.jsonl"
    header, samples, warnings = read_recording(path)
    assert not warnings
    assert set(fired(header, samples)) == {"launch.host_bound"}
    alone = run_advise(samples, header, rules=[UtilSwing]).to_json()["suggestions"]
    assert [s["rule"] for s in alone] == ["input.util_swing"]
    assert alone[0]["evidence"]["values"]["swing_cycles"] == 6
