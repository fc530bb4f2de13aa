"""`dgxperf bench` as a user meets it on a machine without a GPU: real processes, clear errors, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import dgxperf, no_traceback


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "nccl", "-b", "1G", "-e", "1M"], "inverted"),
        (["bench", "gemm", "--device", "cpu", "--dtype", "fp7"], "unknown dtype fp7"),
        (["bench", "gemm", "--device", "cpu", "--dtype", "fp8"], "compute capability 8.9"),
        (["bench", "nccl", "--gpus", "8"], "asked for 8 GPUs"),
        (["bench", "nccl", "--dtype", "float7"], "float7"),
        (["bench", "nccl", "--op", "all_scatter"], "all_scatter"),
        (["bench", "gemm", "--device", "cpu", "--shape", "12x"], "MxNxK"),
        (["bench", "memory", "--device", "cpu", "--size", "lots"], "not a number"),
        (["bench", "gemm"], "no CUDA GPU"),
        (["bench", "p2p"], "no CUDA GPU"),
        (["bench", "all", "--quick"], "no CUDA GPU"),
    ],
)
def test_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = dgxperf(*args, home=tmp_path)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stdout + result.stderr


def test_gemm_on_cpu_is_saved_and_listed(tmp_path: Path) -> None:
    result = dgxperf(
        "bench",
        "gemm",
        "--device",
        "cpu",
        "--shape",
        "64",
        "--dtype",
        "fp32",
        "--batches",
        "3",
        "--json",
        home=tmp_path,
    )
    no_traceback(result)
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["schema"] == "dgxperf.bench/1" and data["suite"] == "gemm"
    assert data["summary"]["gemm"]["fp32"]["shape"] == "64x64x64"
    listing = dgxperf("runs", "list", home=tmp_path)
    assert "bench gemm" in listing.stdout


def test_nccl_gloo_two_processes_through_the_cli(tmp_path: Path) -> None:
    result = dgxperf(
        "bench",
        "nccl",
        "--backend",
        "gloo",
        "--gpus",
        "2",
        "-b",
        "1K",
        "-e",
        "16K",
        "-f",
        "4",
        "--op",
        "all_reduce",
        "--op",
        "all_gather",
        "--iters",
        "3",
        "--json",
        home=tmp_path,
    )
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    measurements = data["measurements"]
    assert measurements and all(m["extra"]["wrong"] in (0, None) for m in measurements)
    assert {m["params"]["ranks"] for m in measurements} == {2}
    assert set(data["summary"]["nccl_avg_busbw"]) == {"all_reduce", "all_gather"}
