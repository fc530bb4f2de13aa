"""The project's own shell scripts (set-up, CI, GPU capture, Slurm) pass shellcheck, and every script that
runs on a lent GPU machine keeps NVLink multicast off."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [ROOT / "dgx", ROOT / ".ci" / "run", *sorted((ROOT / "scripts").rglob("*.sh")),
           *sorted((ROOT / "scripts").rglob("*.sbatch"))]  # fmt: skip


@pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="shellcheck not installed (.ci/run installs it)"
)
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shellcheck(script: Path) -> None:
    result = subprocess.run(  # -x: follow the capture scripts' `source` of scripts/h200/env.sh
        ["shellcheck", "-x", "-s", "bash", str(script)], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout


MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
DEVICE_SCRIPTS = [p for p in sorted((ROOT / "scripts" / "h200").glob("*.sh")) if "python3" in p.read_text()]


def test_the_shared_device_environment_turns_multicast_off_and_runs_this_checkout() -> None:
    shown = subprocess.run(
        ["bash", "-c", "source scripts/h200/env.sh && env"], capture_output=True, text=True, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin"}, check=True,
    ).stdout  # fmt: skip
    env = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    assert {k: env.get(k) for k in MULTICAST_OFF} == MULTICAST_OFF
    assert env["PYTHONPATH"] == "src" and env["PYTHONUNBUFFERED"] == "1"


@pytest.mark.parametrize("script", DEVICE_SCRIPTS, ids=lambda p: p.name)
def test_every_device_script_sources_the_shared_environment_before_running_python(script: Path) -> None:
    lines = script.read_text().splitlines()
    sourced = [i for i, line in enumerate(lines) if line.startswith("source ") and "env.sh" in line]
    first_python = next(i for i, line in enumerate(lines) if "python3" in line and not line.startswith("#"))
    assert sourced and sourced[0] < first_python, f"{script.name} must source env.sh before running python3"


def test_the_compile_probe_dry_runs_its_step_graph_variant_on_the_cpu() -> None:
    """The probe's first GPU capture costs device time: its harness, the whole-step variant included, must
    at least run on the CPU (nothing captured there), with the same first losses as the plain step."""
    import json
    import os
    import sys

    result = subprocess.run(
        [sys.executable, "scripts/h200/probe_cudagraph_blocks.py", "--device", "cpu", "--preset", "tiny",
         "--variants", "blocks,step-graph", "--batch", "8", "--length", "16", "--steps", "2", "--repeats", "1"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    plain, graphed = (json.loads(line) for line in result.stdout.splitlines())
    assert plain["ok"] and graphed["ok"], (plain, graphed)
    assert graphed["first_losses"] == plain["first_losses"]
    assert graphed["step_graph"]["captured"] == 0 and plain["step_graph"] is None
