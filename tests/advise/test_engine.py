"""The advise engine: whole range plus sliding windows, deduplication, ordering, "not evaluated" reasons,
threshold overrides from a mapping or a YAML/JSON file, and the versioned report.

Recordings here are the DERIVED H200 ones described in ``tests/advise/__init__.py`` (the monitor's
committed ``tests/data/monitor/h200-derived-gemm.jsonl`` among them, read with the real recording
reader), plus SYNTHETIC edits where a test says so. Real H200 recordings will replace them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from dgxperf.advise import (
    ADVICE_SCHEMA,
    ALL_RULES,
    AdviceReport,
    AdviseError,
    build_rules,
    load_thresholds,
    rule_catalog,
    run_advise,
)
from dgxperf.advise.base import GPM_METRICS, Window
from dgxperf.advise.engine import sliding_windows
from dgxperf.monitor.sources import read_recording
from tests.advise import ADVISE_DATA, MONITOR_FIXTURE, copy, derived, edit, gemm, stack, swing


def by_rule(report: AdviceReport) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in report.to_json()["suggestions"]:
        out.setdefault(s["rule"], []).append(s)
    return out


def status(report: AdviceReport, rule_id: str) -> dict[str, Any]:
    return next(r for r in report.to_json()["rules"] if r["id"] == rule_id)


# ======================================================================= the monitor's derived fixture


def test_advise_on_the_committed_derived_h200_recording() -> None:
    """10 idle, 20 bf16-GEMM, 10 device-copy ticks (derived from real H200 readings)."""
    header, samples, warnings = read_recording(MONITOR_FIXTURE)
    assert not warnings
    report = run_advise(samples, header, window_s=10)
    data = json.loads(json.dumps(report.to_json()))
    assert data["schema"] == ADVICE_SCHEMA == "dgxperf.advice/1"
    assert data["range"] == {
        "start_t": samples[0].t,
        "end_t": samples[-1].t,
        "duration_s": 39.0,
        "samples": 40,
    }
    assert data["windows"] == 7 and data["window_s"] == 10.0
    rules = by_rule(report)
    # the copy phase is a quarter of the recording: only a sliding window shows it
    (dram,) = rules["bandwidth.dram_bound"]
    assert dram["scope"] == "window" and dram["severity"] == "warn"
    assert dram["evidence"]["start_t"] >= samples[30].t - 10  # the window reaches into the copy phase
    assert dram["windows"]["fired"] >= 1 and dram["windows"]["evaluated"] == 7
    # guide B's memory-bound rule was evaluated and did not fire (SM activity 99.4 % in the copy phase)
    assert "bandwidth.memory_bound" not in rules
    assert status(report, "bandwidth.memory_bound")["evaluated"] is True
    # the GEMM phase is power-capped (real bench-gemm readings): info
    assert [s["severity"] for s in rules["health.throttling"]] == ["info"]
    # severity order: warn before info
    severities = [s["severity"] for s in data["suggestions"]]
    assert severities == sorted(severities, key=["critical", "warn", "info"].index)
    # no host CPU or I/O wait readings in the derived recording: said, not raised
    not_evaluated = {n["rule"]: n["reason"] for n in data["not_evaluated"]}
    assert not_evaluated["input.cpu_bound"].startswith("needs host cpu_util_pct")
    assert "the recording has no host readings" in not_evaluated["input.cpu_bound"]
    assert not_evaluated["input.iowait"].startswith("needs host iowait_pct")
    # nor the CPU share of the GPU's processes (recorded since 2026-12-04)
    assert not_evaluated["launch.host_bound"].startswith("needs process cpu_pct")
    assert not_evaluated["launch.host_slowed"] == not_evaluated["launch.host_bound"]
    assert set(not_evaluated) == {
        "input.cpu_bound",
        "input.iowait",
        "launch.host_bound",
        "launch.host_slowed",
    }


# ============================================================================ range vs sliding windows


def test_a_transient_problem_is_found_in_its_worst_window() -> None:
    """Ten minutes of GEMM with one minute of device copy in the middle: over the whole range DRAM use is
    low, so only the sliding windows see the memory-bound minute; the evidence is that minute."""
    header, samples = derived(("gemm", 300), ("copy", 60), ("gemm", 240))
    copy_start, copy_end = samples[300].t, samples[359].t
    whole = [s for cls in ALL_RULES for s in cls().evaluate(Window(samples, header))]
    assert "bandwidth.dram_bound" not in {s.rule for s in whole}
    report = run_advise(samples, header, window_s=60)
    (dram,) = by_rule(report)["bandwidth.dram_bound"]
    assert dram["scope"] == "window"
    ev = dram["evidence"]
    overlap = min(ev["end_t"], copy_end) - max(ev["start_t"], copy_start)
    assert overlap >= 0.5 * 60, ev  # the worst window is mostly the copy minute
    assert ev["metrics"]["dram_active_pct"]["mean"] > 80
    assert 1 <= dram["windows"]["fired"] <= 3


def test_a_steady_problem_is_reported_once_over_the_range() -> None:
    header, samples = copy(300)
    report = run_advise(samples, header, window_s=60)
    (dram,) = by_rule(report)["bandwidth.dram_bound"]
    assert dram["scope"] == "range"
    assert (dram["evidence"]["start_t"], dram["evidence"]["end_t"]) == (samples[0].t, samples[-1].t)
    assert dram["windows"]["fired"] == dram["windows"]["evaluated"] == report.windows == 9


def test_sliding_windows_cover_the_range_with_half_overlap() -> None:
    header, samples = gemm(300)
    windows = sliding_windows(Window(samples, header), 60)
    assert windows[0].start_t == samples[0].t and windows[-1].end_t == samples[-1].t
    assert all(w.duration_s <= 60 for w in windows)
    assert [round(w.start_t - samples[0].t) for w in windows[:3]] == [0, 30, 60]
    assert sliding_windows(Window(samples[:50], header), 60) == []  # shorter than a window: range only


# =========================================================================== deduplication and order


def test_dgxperf_memory_rule_is_suppressed_when_guide_bs_fires() -> None:
    """SYNTHETIC: the copy loop with SM activity 55 %: both memory rules hold; the guide's is reported."""
    header, samples = copy(30)
    low_sm = edit(samples, metrics={"sm_active_pct": 55.0})
    direct = {s.rule for cls in ALL_RULES for s in cls().evaluate(Window(low_sm, header))}
    assert {"bandwidth.memory_bound", "bandwidth.dram_bound"} <= direct
    rules = by_rule(run_advise(low_sm, header))
    assert "bandwidth.memory_bound" in rules and "bandwidth.dram_bound" not in rules


def test_suppression_only_applies_to_the_same_gpus() -> None:
    """SYNTHETIC, 2 GPUs: GPU 0 with SM 55 % (guide B fires), GPU 1 the real copy (only ours fires)."""
    header, samples = copy(30)
    header2, two = stack(header, [edit(samples, metrics={"sm_active_pct": 55.0}), samples])
    rules = by_rule(run_advise(two, header2))
    assert [s["evidence"]["gpus"] for s in rules["bandwidth.memory_bound"]] == [[0]]
    assert [s["evidence"]["gpus"] for s in rules["bandwidth.dram_bound"]] == [[1]]


def test_critical_first_then_warn_then_info() -> None:
    """SYNTHETIC: a hardware XID on the stalling GEMM loop (util swing: warn, power cap: info)."""
    header, samples = swing()
    with_xid = edit(samples, events=[{"type": "xid", "gpu": 0, "xid": 79}], ticks=slice(7, 8))
    report = run_advise(with_xid, header)
    assert [(s.severity, s.rule) for s in report.suggestions] == [
        ("critical", "health.hardware"),
        ("warn", "input.util_swing"),
        ("info", "health.throttling"),
    ]


def test_one_gpu_among_eight() -> None:
    """GPU 3 runs the derived copy loop, the other seven the derived GEMM loop."""
    header, g = gemm(30)
    _, c = copy(30)
    c = [dataclasses.replace(s, t=x.t) for s, x in zip(c, g, strict=True)]
    header8, samples8 = stack(header, [c if i == 3 else g for i in range(8)])
    rules = by_rule(run_advise(samples8, header8))
    assert [s["evidence"]["gpus"] for s in rules["bandwidth.dram_bound"]] == [[3]]
    assert [s["evidence"]["gpus"] for s in rules["health.throttling"]] == [[0, 1, 2, 4, 5, 6, 7]]


# ====================================================================================== not evaluated


def test_without_gpm_the_gpm_rules_are_not_evaluated_and_the_rest_still_run() -> None:
    """An A100 without DCGM has no GPM: the stalling loop with every GPM metric removed."""
    header, samples = swing()
    no_gpm = edit(samples, metrics={m: None for m in GPM_METRICS})
    report = run_advise(no_gpm, header)
    reasons = {r.id: str(r.reason) for r in report.not_evaluated}
    assert reasons["bandwidth.memory_bound"] == (
        "needs sm_active_pct, dram_active_pct (GPM profiling metrics need a Hopper-or-newer GPU "
        "(NVML GPM) or DCGM)"
    )
    assert reasons["compute.low_tensor"].startswith("needs tensor_active_pct, sm_active_pct")
    assert "input.util_swing" in by_rule(report)


def test_an_empty_range_is_a_report_not_an_error() -> None:
    header, _ = gemm(5)
    for samples, (from_t, to_t) in (([], (None, None)), (gemm(5)[1], (1.0, 2.0))):
        report = run_advise(samples, header, from_t=from_t, to_t=to_t)
        assert report.suggestions == () and report.samples == 0
        assert {r.reason for r in report.not_evaluated} == {"no samples in the range"}
        assert len(report.not_evaluated) == len(ALL_RULES)
        json.dumps(report.to_json())
    assert run_advise([], None).to_json()["range"]["start_t"] is None


def test_from_and_to_select_the_range() -> None:
    header, samples, _ = read_recording(MONITOR_FIXTURE)
    gemm_only = run_advise(samples, header, from_t=samples[10].t, to_t=samples[29].t, window_s=10)
    assert gemm_only.samples == 20 and (gemm_only.start_t, gemm_only.end_t) == (samples[10].t, samples[29].t)
    assert "bandwidth.dram_bound" not in by_rule(gemm_only)
    copy_only = run_advise(samples, header, from_t=samples[30].t)
    assert copy_only.samples == 10 and "bandwidth.dram_bound" in by_rule(copy_only)
    with pytest.raises(AdviseError, match=r"starts .* after it ends"):
        run_advise(samples, header, from_t=samples[20].t, to_t=samples[10].t)


def test_samples_out_of_order_are_sorted() -> None:
    header, samples = derived(("gemm", 300), ("copy", 60), ("gemm", 240))
    forward = run_advise(samples, header).to_json()
    backward = run_advise(list(reversed(samples)), header).to_json()
    assert forward == backward


@pytest.mark.parametrize("bad", [0, -5, float("nan"), float("inf")])
def test_a_bad_window_is_a_clear_error(bad: float) -> None:
    header, samples = gemm(5)
    with pytest.raises(AdviseError, match="window_s must be a positive number"):
        run_advise(samples, header, window_s=bad)


# ========================================================================================== thresholds


def test_thresholds_from_a_mapping_change_the_verdict_and_are_reported() -> None:
    header, samples = copy(30)
    assert "bandwidth.memory_bound" not in by_rule(run_advise(samples, header))
    report = run_advise(samples, header, thresholds={"bandwidth.memory_bound": {"sm_active_max_pct": 100}})
    rules = by_rule(report)
    assert "bandwidth.memory_bound" in rules and "bandwidth.dram_bound" not in rules  # suppressed
    assert status(report, "bandwidth.memory_bound")["thresholds"] == {
        "sm_active_max_pct": 100.0,
        "dram_active_min_pct": 80.0,
    }


def test_thresholds_from_a_yaml_file() -> None:
    loaded = load_thresholds(ADVISE_DATA / "thresholds.yaml")
    assert loaded == {
        "bandwidth.memory_bound": {"sm_active_max_pct": 100},
        "input.util_swing": {"min_cycles": 4},
    }
    header, samples = swing(cycles=4)  # 4 stalls but only 3 climbs from an idle tick
    assert "input.util_swing" in by_rule(run_advise(samples, header))
    assert "input.util_swing" not in by_rule(run_advise(samples, header, thresholds=loaded))


def test_thresholds_from_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"memory.near_capacity": {"used_min_pct": 0.1}}))
    header, samples = gemm(10)
    assert "memory.near_capacity" in by_rule(run_advise(samples, header, thresholds=load_thresholds(path)))


def test_a_typo_in_a_thresholds_file_names_the_real_thresholds() -> None:
    loaded = load_thresholds(ADVISE_DATA / "thresholds-typo.yaml")
    header, samples = gemm(5)
    with pytest.raises(AdviseError) as err:
        run_advise(samples, header, thresholds=loaded)
    assert str(err.value) == (
        "rule 'bandwidth.memory_bound' has no threshold 'sm_activity_max_pct'; its thresholds: "
        "sm_active_max_pct, dram_active_min_pct"
    )


def test_unknown_rule_ids_and_bad_shapes_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(
        AdviseError, match=r"unknown rule id 'bandwidth\.memory_bnd'.*bandwidth\.memory_bound"
    ):
        build_rules({"bandwidth.memory_bnd": {"x": 1}})
    with pytest.raises(AdviseError, match="must be a mapping"):
        build_rules({"bandwidth.memory_bound": 5})  # type: ignore[dict-item]
    for text, message in (
        ("[1, 2]", "expected a mapping of rule ids"),
        ("bandwidth.memory_bound: 70", "must be a mapping of names"),
        ("a: [", "is not valid YAML or JSON"),
    ):
        path = tmp_path / "bad.yaml"
        path.write_text(text)
        with pytest.raises(AdviseError, match=message):
            load_thresholds(path)
    with pytest.raises(AdviseError, match="cannot read thresholds file"):
        load_thresholds(tmp_path / "missing.yaml")
    assert load_thresholds(_empty(tmp_path)) == {}


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing overridden\n")
    return path


def test_rule_catalog_documents_every_rule() -> None:
    catalog = rule_catalog()
    assert [r["id"] for r in catalog] == [cls.id for cls in ALL_RULES]
    guide_rules = {r["id"] for r in catalog if r["origin"] == "guide"}
    assert guide_rules == {"bandwidth.memory_bound", "bandwidth.pcie_rx", "input.util_swing"}
    memory_bound = next(r for r in catalog if r["id"] == "bandwidth.memory_bound")
    assert memory_bound["guide"] == "B §4.1"
    assert memory_bound["thresholds"]["sm_active_max_pct"]["value"] == 60.0
    assert memory_bound["thresholds"]["dram_active_min_pct"]["unit"] == "%"


# ======================================================================================== scale


def test_an_hour_of_eight_gpus_is_advised_quickly() -> None:
    """3,600 ticks x 8 GPUs (the derived GEMM loop with a copy minute): the engine's cost stays small
    enough for `advise --live` to run every few seconds over a minute and over an hour on demand."""
    header, samples = derived(("gemm", 1800), ("copy", 60), ("gemm", 1740))
    header8, samples8 = stack(header, [samples] * 8)
    started = time.perf_counter()
    report = run_advise(samples8, header8, window_s=60)
    elapsed = time.perf_counter() - started
    assert "bandwidth.dram_bound" in by_rule(report)
    assert elapsed < 60, f"{elapsed:.1f} s"
