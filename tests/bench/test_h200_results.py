"""The bench results recorded on the H200 (tests/data/h200/bench) and on an H100 (tests/data/h100/bench,
2026-12-06) replayed on the CPU: every figure is what its own timing and formula say, and the committed
figures meet the claims in docs/benchmarks/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dgxperf.bench import nccl
from dgxperf.bench.base import Measurement, Timing
from dgxperf.bench.suite import summarise

BENCH = Path(__file__).resolve().parent.parent / "data" / "h200" / "bench"
H100 = BENCH.parents[1] / "h100" / "bench"


def load(name: str, folder: Path = BENCH) -> dict[str, Any]:
    return json.loads((folder / name).read_text())


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


@pytest.mark.parametrize(
    ("folder", "name"),
    [(BENCH, "bench-gemm.json"), (BENCH, "bench-all-quick.json"), (H100, "bench-gemm.json")],
)
def test_gemm_figures_are_flops_over_the_median_time(folder: Path, name: str) -> None:
    for m in load(name, folder)["measurements"]:
        if m["bench"] != "gemm":
            continue
        p = m["params"]
        flops = 2 * p["m"] * p["n"] * p["k"]
        assert m["value"] == pytest.approx(flops / m["timing"]["median_s"] / 1e12, rel=1e-4)
        assert m["pct_of_peak"] == pytest.approx(100 * m["value"] / m["peak"], abs=0.01)


@pytest.mark.parametrize("folder", [BENCH, H100])
def test_summaries_recompute_from_the_measurements(folder: Path) -> None:
    for name in ("bench-gemm.json", "bench-memory.json", "bench-pcie.json"):
        data = load(name, folder)
        assert summarise([as_measurement(m) for m in data["measurements"]]) == data["summary"]


@pytest.mark.parametrize("folder", [BENCH, H100])
def test_memory_and_pcie_bytes_over_time(folder: Path) -> None:
    for m in load("bench-memory.json", folder)["measurements"]:
        assert m["value"] == pytest.approx(
            m["params"]["bytes_moved"] / m["timing"]["median_s"] / 1e9, rel=1e-4
        )
    for m in load("bench-pcie.json", folder)["measurements"]:
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


def test_the_h100_figures_are_against_the_h100s_datasheet_and_meet_its_readme() -> None:
    """docs/benchmarks/2026-12-06-h100-graphs-ablation/README.md quotes these; the H100 SXM's own peaks."""
    from dgxperf.hw.specs import match_spec, peak_tflops

    gemm = load("bench-gemm.json", H100)
    spec = match_spec(gemm["device"]["name"], gemm["device"]["memory_bytes"])
    assert spec is not None and spec.key == gemm["device"]["spec"] == "h100-sxm"
    for m in gemm["measurements"]:  # DGEMM runs on Hopper's FP64 tensor cores: their peak
        dtype = "fp64_tensor" if m["params"]["dtype"] == "fp64" else m["params"]["dtype"]
        assert m["peak"] == pytest.approx(peak_tflops(spec, dtype), rel=1e-3)
    summary = gemm["summary"]["gemm"]
    assert round(summary["bf16"]["tflops"]) == 727 and summary["bf16"]["pct_of_peak"] == 73.5
    assert round(summary["fp8"]["tflops"]) == 1285
    # the sustained GEMMs ran at the 700 W cap, the bursts mostly not
    capped = [m for m in gemm["measurements"] if "sw_power_cap" in m["extra"]["gpu_state"]["throttle"]]
    assert len(capped) == 55 and len(gemm["measurements"]) == 66
    memory = load("bench-memory.json", H100)["summary"]["memory"]
    assert memory["copy"]["gbs"] == pytest.approx(3029.6) and memory["write"]["pct_of_peak"] == 98.3
    pcie = load("bench-pcie.json", H100)["summary"]["pcie"]
    assert pcie["h2d_pinned"]["gbs"] == pytest.approx(55.12)
