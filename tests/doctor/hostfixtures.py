"""Fixture host trees (tests/data/hosts/<name>/: a fake ``/``) and Snapshots built from them.

git keeps only the executable bit of a file, so the permissions a tree needs (``/dev/nvidia*`` modes) are
listed in the tree's ``.modes`` file (``path octal-mode`` per line) and applied to a copy: tests always
read a copy under ``tmp_path``, which they may also change to make a variant.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from dgxperf.hw.host import collect_host
from dgxperf.hw.snapshot import Snapshot

HOSTS = Path(__file__).resolve().parent.parent / "data" / "hosts"
NAMES = ("tuned-dgx", "stock-server", "no-driver", "container")

NVML_DOWN: dict[str, Any] = {
    "reachable": False,
    "error": "NVML_ERROR_LIBRARY_NOT_FOUND: NVML Shared Library Not Found",
    "gpus": [],
}
NVML_UP: dict[str, Any] = {"reachable": True, "error": None, "driver_version": "580.159.04", "gpus": []}


def host_tree(name: str, dest: Path) -> Path:
    """Copy the fixture tree ``name`` to ``dest/name`` (symlinks kept as links) with its modes applied."""
    src = HOSTS / name
    root = dest / name
    shutil.copytree(src, root, symlinks=True)
    modes = root / ".modes"
    if modes.exists():
        for line in modes.read_text().splitlines():
            if line.strip():
                rel, mode = line.split()
                (root / rel).chmod(int(mode, 8))
    return root


def snapshot_of(root: Path, nvml: dict[str, Any] | None = None) -> Snapshot:
    return Snapshot(
        collected_at="",
        hostname="t",
        nvml=dict(NVML_DOWN if nvml is None else nvml),
        host=collect_host(root),
        software={},
        env={},
    )


def snapshot(name: str, dest: Path, nvml: dict[str, Any] | None = None) -> Snapshot:
    """A Snapshot of the fixture tree ``name`` (copied under ``dest``)."""
    return snapshot_of(host_tree(name, dest), nvml)


def write(root: Path, rel: str, text: str) -> None:
    """Change one file of a copied tree (replacing a symlink or directory if one is there)."""
    path = root / rel
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def by_id(findings: Any) -> dict[str, Any]:
    """Findings keyed by id; fails on duplicate ids."""
    result: dict[str, Any] = {}
    for finding in findings:
        assert finding.id not in result, f"duplicate finding id {finding.id}"
        result[finding.id] = finding
    return result


def run_checks(checks: Any, snap: Snapshot) -> dict[str, Any]:
    return by_id(f for check in checks for f in check(snap))
