"""`dgxperf plan mig` as a user meets it: the command on a small Typer app, as cli.py registers it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dgxperf.cli_plan_mig import mig
from dgxperf.plan.mig import plan_mig

app = typer.Typer()
app.command("mig")(mig)


@app.callback()
def _root() -> None:
    """A group, so that `mig` is a subcommand as under `dgxperf plan`."""


runner = CliRunner()
HOST = ["--host-cpus", "128", "--host-memory-gb", "1024"]


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["mig", *args], env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_guide_case_needs_room_for_the_cuda_context_by_default() -> None:
    code, out, _ = run("--gpu-model", "a100-80gb", "inference 3GB x1, training 10GB x6", *HOST)
    assert code == 1
    flat = " ".join(out.split())
    assert "NOT a valid MIG layout on 1 x A100-SXM4-80GB" in flat
    assert "smallest profile with >= 10 GB + 0.5 GB CUDA context: 1g.20gb" in flat
    assert "= 13 memory slices; 1 GPU has 8" in flat and "use 2 GPUs (--gpus 2)" in flat
    assert "with --context-gb 0 (no CUDA context reserve) this would be a valid layout on 1 GPU" in flat
    assert "with only 0.20 GB to spare per instance" in flat
    assert "nvidia-smi mig -i" not in out


def test_valid_plan_with_context_gb_0_prints_layout_commands_and_slices() -> None:
    code, out, _ = run(
        "--gpu-model", "a100-80gb", "inference 3GB x1, training 10GB x6", "--context-gb", "0", *HOST
    )
    assert code == 0
    assert "valid MIG layout: 7 instances on 1 of 1 GPU" in out
    assert "GPU0  memory slices 0-7: ABCDEFGx" in out
    assert "sudo nvidia-smi mig -i 0 -cgi 19:0,19:1,19:2,19:3,19:4,19:5,19:6 -C" in out
    assert "CUDA_VISIBLE_DEVICES=$(mig_uuid 0 1g.10gb 7)" in out
    assert "[Slice]" in out and "CPUQuota=10971%" in out  # 6/7 of 128 CPUs, markup left alone
    assert "tight fit" in out and "CUDA context" in out


def test_context_gb_reaches_the_json() -> None:
    code, out, _ = run("-m", "a100-80gb", "t 9GB", "--context-gb", "1.5", "--json", *HOST)
    assert code == 0
    data = json.loads(out)
    assert data["context_gb"] == 1.5 and data["tenants"][0]["assigned_profile"] == "1g.20gb"


def test_words_may_come_as_separate_arguments() -> None:
    code, out, _ = run("-m", "a100-80gb", "inference", "3GB", "x1,", "training", "10GB", "x6", *HOST)
    assert code == 1 and "NOT a valid MIG layout" in out and "1g.20gb" in out
    code, out, _ = run(
        "-m", "a100-80gb", "inference", "3GB", "x1,", "training", "10GB", "x6", "--context-gb", "0", *HOST
    )
    assert code == 0 and "valid MIG layout" in out


def test_no_layout_exits_1_with_why_and_alternatives() -> None:
    code, out, _ = run("--gpu-model", "a100-40gb", "inference 3GB x1, training 10GB x6", *HOST)
    assert code == 1
    assert "NOT a valid MIG layout on 1 x A100-SXM4-40GB" in out
    assert "= 25 memory slices; 1 GPU has 8" in out  # 10 GB + 0.5 GB CUDA context: 3g.20gb each
    assert "use 4 GPUs (--gpus 4)" in out and "nvidia-smi mig -i" not in out


def test_json_output() -> None:
    code, out, _ = run("--gpu-model", "h200", "3g.71gb + 2x1g.18gb", "--gpus", "2", "--json", *HOST)
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "dgxperf.plan.mig/1" and data["gpus"] == 2 and data["valid"]
    assert data["summary"]["gpus_used"] == 1 and data["host"] == {"cpus": 128, "memory_gb": 1024.0}
    assert {i["profile"] for gpu in data["layout"] for i in gpu["instances"]} == {"3g.71gb", "1g.18gb"}


def test_json_output_of_no_layout_still_exits_1() -> None:
    code, out, _ = run("-m", "a100-40gb", "4g + 4g", "--json", *HOST)
    assert code == 1 and json.loads(out)["valid"] is False


def test_host_defaults_to_this_machine() -> None:
    code, out, _ = run("-m", "h100-80gb", "web 3g", "--json")
    assert code == 0
    host = json.loads(out)["host"]
    assert host["cpus"] >= 1 and host["memory_gb"] > 0


def test_list_profiles() -> None:
    code, out, _ = run("--list-profiles", "--gpu-model", "a100-40gb")
    assert code == 0
    assert "1g.10gb" in out and "{0,2,4,6}:2" in out and "9.75 GiB" in out
    code, out, _ = run("--list-profiles", "--json")
    assert code == 0
    data = json.loads(out)
    assert list(data) == ["a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb"]
    assert [p["profile_id"] for p in data["h200-141gb"]] == [19, 20, 15, 14, 9, 5, 0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-m", "b200", "3g"],
            "unknown GPU model 'b200'; choose from a100-40gb, a100-80gb, h100-80gb, h200-141gb",
        ),
        (["3g"], "--gpu-model is needed to plan"),
        (["-m", "h200"], "give the tenants"),
        (["-m", "h200", "web 10GX x2"], "'10GX' is not a count"),
        (["-m", "h200", "3g.20gb"], "its 3g profiles are 3g.71gb"),
        (["-m", "h200", "--gpus", "9", "3g"], "--gpus"),
        (
            ["-m", "a100-80gb", "--context-gb", "-1", "t 3GB"],
            "error: --context-gb -1: the CUDA context reserve per instance is 0 (off) or more GB (default 0.5)",
        ),
        (["-m", "a100-80gb", "--context-gb=-0.25", "3g"], "--context-gb -0.25: the CUDA context reserve"),
        (["-m", "a100-80gb", "--context-gb", "lots", "3g"], "--context-gb"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(args: list[str], message: str) -> None:
    code, out, err = run(*args)
    assert code == 2
    assert message in " ".join((out + err).split())


NVIDIA_SMI_L = """\
GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 3g.20gb     Device  0: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000001)
  MIG 1g.5gb+me   Device  1: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000002)
  MIG 1g.5gb      Device  2: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000003)
  MIG 1g.5gb      Device  3: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000004)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-6d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 1g.5gb      Device  0: (UUID: MIG-bbbbbbbb-0000-5000-8000-000000000001)
GPU 10: NVIDIA A100-SXM4-40GB (UUID: GPU-7d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 1g.5gb      Device  0: (UUID: MIG-cccccccc-0000-5000-8000-000000000001)
"""


@pytest.mark.skipif(not (shutil.which("bash") and shutil.which("awk")), reason="needs bash and awk")
def test_the_printed_uuid_lookup_reads_nvidia_smi_l(tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{NVIDIA_SMI_L}EOF\n")
    fake.chmod(0o755)
    lines = plan_mig("a100-40gb", "a 1g").cuda_lines()
    start = lines.index("mig_uuid() {  # GPU index, profile, k")
    function = "\n".join(lines[start : start + 5])
    calls = [
        "0 1g.5gb 1",
        "0 1g.5gb 2",
        "0 1g.5gb 3",
        "0 1g.5gb+me 1",
        "0 3g.20gb 1",
        "1 1g.5gb 1",
        "10 1g.5gb 1",
    ]
    script = function + "\n" + "\n".join(f'echo "[$(mig_uuid {c})]"' for c in calls)
    out = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"},
    ).stdout.split()
    assert out == [
        "[MIG-aaaaaaaa-0000-5000-8000-000000000003]",
        "[MIG-aaaaaaaa-0000-5000-8000-000000000004]",
        "[]",  # only two plain 1g.5gb on GPU0: the +me one is not one of them
        "[MIG-aaaaaaaa-0000-5000-8000-000000000002]",
        "[MIG-aaaaaaaa-0000-5000-8000-000000000001]",
        "[MIG-bbbbbbbb-0000-5000-8000-000000000001]",
        "[MIG-cccccccc-0000-5000-8000-000000000001]",  # "GPU 1:" is not "GPU 10:"
    ]
