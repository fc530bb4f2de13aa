"""`dgxperf plan memory` as a user meets it: the report, --json, and one-line errors for bad input."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from dgxperf.cli_plan_memory import memory
from dgxperf.plan import memory as pm

app = typer.Typer()
app.command("memory")(memory)


@app.callback()
def _group() -> None:
    """A group, so the command is called by name as under `dgxperf plan`."""


def run(*args: str) -> typer.testing.Result:
    return CliRunner().invoke(app, ["memory", *args], env={"COLUMNS": "160"})


def test_report_names_the_peak_its_parts_and_the_gpus() -> None:
    result = run("--vocab", "21128", "--batch", "64", "--fused")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "large, 325.1M params" in out and "peak" in out and "backward start" in out
    for part in ("weights", "optimizer states", "saved activations", "autocast weight copies", "cuBLAS"):
        assert part in out
    for gpu in ("V100 32GB", "A100 40GB", "A100 80GB", "H100 80GB", "H200 141GB", "L40S 48GB"):
        assert gpu in out
    assert "no bf16" in out  # the V100
    assert "Korthikanti" in out


def test_json_is_the_estimate_and_the_gpu_table() -> None:
    result = run(
        "--preset", "base", "-b", "16", "-s", "256", "--precision", "fp32", "--checkpointing", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == pm.SCHEMA
    inputs = pm.MemoryInputs(
        pm.shape_from_preset("base", max_len=256), seq_len=256, micro_batch=16, precision="fp32",
        activation_checkpointing=True,
    )  # fmt: skip
    assert data["peak_bytes"] == pm.estimate(inputs).peak_bytes
    assert sum(data["components"].values()) == data["peak_bytes"]
    assert [g["gpu"] for g in data["gpus"]] == [g.name for g in pm.GPU_MODELS]
    assert all(g["max_micro_batch"] >= 16 for g in data["gpus"])
    assert data["saved_per_block"][0]["name"] == "ln1.input"


def test_explicit_shape_rough_size_tensors_and_notes() -> None:
    shape = run("--layers", "4", "--hidden", "256", "--tensors", "--sharding", "zero3")
    assert shape.exit_code == 0, shape.output
    assert "4 layers x 256 (4 heads, ffn 1024)" in shape.output
    assert "gelu.input" in shape.output and "shards nothing" in shape.output
    rough = run("--params", "350e6", "--json")
    assert rough.exit_code == 0, rough.output
    data = json.loads(rough.stdout)
    assert data["model"]["inferred"] and any("rough" in note for note in data["notes"])
    offload = run("--gpus", "8", "--sharding", "zero2", "--offload", "--optimizer", "lamb")
    assert offload.exit_code == 0 and "host memory" in offload.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "huge"], "unknown preset 'huge'"),
        (["--batch", "0"], "micro-batch must be a positive integer"),
        (["--layers", "2", "--hidden", "100", "--heads", "3"], "heads (3) must divide hidden (100)"),
        (["--precision", "fp8"], "unknown precision 'fp8'"),
        (["--optimizer", "adam"], "unknown optimizer 'adam'"),
        (["--sharding", "zero4"], "unknown sharding 'zero4'"),
        (["--preset", "base", "--params", "1e8"], "not several"),
        (["--layers", "2"], "needs --hidden"),
        (["--params", "-5"], "positive"),
        (["--gpus", "0"], "gpus must be a positive integer"),
        (["--margin", "-1"], "--margin"),
        (["--optimizer", "sgd", "--fused"], "fused optimizer"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
