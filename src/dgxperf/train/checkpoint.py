"""Atomic checkpoints that let a killed run resume as if it had never stopped.

A checkpoint is a folder ``step-<N>``: ``state.pt`` (model, optimizer, scaler, scheduler, sampler position,
step, epoch, history — written by rank 0) and ``rng-rank<R>.pt`` (each rank's Python, NumPy, torch CPU and
CUDA generator states, since dropout draws differ per rank). It is written under a temporary name and
renamed into place, and ``latest`` is a one-line file replaced atomically, so a kill -9 at any moment
leaves either the previous checkpoint or the new one, never half of one.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

from dgxperf.atomic import atomic_write

LATEST = "latest"


class CheckpointError(Exception):
    """A checkpoint that is missing or cannot be read."""


def rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _atomic_save(obj: Any, path: Path) -> None:
    import torch

    with atomic_write(path) as handle:
        torch.save(obj, handle)


def save(
    directory: Path, step: int, state: dict[str, Any], *, rank: int, barrier: Any, keep: int = 2
) -> Path:
    """Write checkpoint ``step`` (collective: every rank calls it; ``barrier()`` synchronises the ranks)."""
    final = directory / f"step-{step:08d}"
    staging = directory / f".step-{step:08d}.partial"
    if rank == 0:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    barrier()
    _atomic_save(rng_state(), staging / f"rng-rank{rank}.pt")
    if rank == 0:
        _atomic_save(state, staging / "state.pt")
    barrier()
    if rank == 0:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
        pointer = directory / (LATEST + ".tmp")
        pointer.write_text(final.name + "\n")
        os.replace(pointer, directory / LATEST)
        _prune(directory, keep)
    barrier()
    return final


def _prune(directory: Path, keep: int) -> None:
    steps = sorted(p for p in directory.glob("step-*") if p.is_dir())
    for old in steps[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def latest(directory: Path) -> Path | None:
    pointer = directory / LATEST
    if not pointer.exists():
        return None
    path = directory / pointer.read_text().strip()
    return path if (path / "state.pt").exists() else None


def load(path: Path, *, rank: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The shared state and this rank's RNG state (None when the checkpoint was written by fewer ranks)."""
    import torch

    try:
        state = torch.load(path / "state.pt", map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError) as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc}") from exc
    rng_file = path / f"rng-rank{rank}.pt"
    rng = torch.load(rng_file, map_location="cpu", weights_only=False) if rng_file.exists() else None
    return state, rng
