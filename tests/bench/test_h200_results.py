"""The bench results recorded on the H200 (tests/data/h200/bench) replayed on the CPU: every figure is what
its own timing and formula say, and the committed figures meet the claims in docs/benchmarks/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dgxperf.bench import nccl
from dgxperf.bench.base import Measurement, Timing
from dgxperf.bench.suite import summarise

BENCH = Path(__file__).resolve().parent.parent / "data" / "h200" / "bench"


def load(name: str) -> dict[str, Any]:
    return json.loads((BENCH / name).read_text())


def as_measurement(data: dict[str, Any]) -> Measurement:
    timing = Timing(**{k: data["timing"][k] for k in Timing.__dataclass_fields__})
    return Measurement(
        data["bench"],
        data["name"],
        data["params"],
        data["value"],
        data["unit"],
        timing,
        data["peak"],
        data["extra"],
    )


@pytest.mark.parametrize("name", ["bench-gemm.json", "bench-all-quick.json"])
def test_gemm_figures_are_flops_over_the_median_time(name: str) -> None:
    for m in load(name)["measurements"]:
        if m["bench"] != "gemm":
            continue
        p = m["params"]
        flops = 2 * p["m"] * p["n"] * p["k"]
        assert m["value"] == pytest.approx(flops / m["timing"]["median_s"] / 1e12, rel=1e-4)
        assert m["pct_of_peak"] == pytest.approx(100 * m["value"] / m["peak"], abs=0.01)


def test_summaries_recompute_from_the_measurements() -> None:
    for name in ("bench-gemm.json", "bench-memory.json", "bench-pcie.json"):
        data = load(name)
        assert summarise([as_measurement(m) for m in data["measurements"]]) == data["summary"]


def test_memory_and_pcie_bytes_over_time() -> None:
    for m in load("bench-memory.json")["measurements"]:
        assert m["value"] == pytest.approx(
            m["params"]["bytes_moved"] / m["timing"]["median_s"] / 1e9, rel=1e-4
        )
    for m in load("bench-pcie.json")["measurements"]:
        assert m["value"] == pytest.approx(
            m["params"]["size_bytes"] / m["timing"]["median_s"] / 1e9, rel=1e-4
        )
        assert m["peak"] == pytest.approx(63.0, rel=1e-3)  # Gen5 x16 per direction


def test_nccl_single_rank_figures_follow_nccl_tests_formulas() -> None:
    data = load("bench-nccl.json")
    assert data["nccl"]["ranks"] == 1 and data["nccl"]["wrong"] == 0
    for m in data["measurements"]:
        extra = m["extra"]
        assert extra["wrong"] in (0, None)
        assert extra["busbw_gbs"] == pytest.approx(
            extra["algbw_gbs"] * nccl.busbw_factor(m["params"]["op"], 1)
        )


def test_the_committed_figures_meet_the_issue() -> None:
    gemm = load("bench-gemm.json")["summary"]["gemm"]["bf16"]
    assert gemm["burst_tflops"] >= 700
    assert load("bench-memory.json")["summary"]["memory"]["copy"]["gbs"] >= 4000
    assert load("bench-pcie.json")["summary"]["pcie"]["h2d_pinned"]["gbs"] >= 50
    checks = load("crosscheck.json")["results"]
    assert len(checks) == 6 and all(abs(c["ratio"] - 1) <= 0.03 for c in checks)
    log = (BENCH / "capture-log.txt").read_text().splitlines()
    quick = log[log.index("== bench all --quick") + 1]
    assert quick.startswith("wall ") and float(quick.split()[1]) <= 60
