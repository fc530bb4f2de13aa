"""The project's own shell scripts (set-up, CI, GPU capture, Slurm) pass shellcheck."""

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
    result = subprocess.run(["shellcheck", "-s", "bash", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
