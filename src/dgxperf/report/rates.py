"""Which figures the validate report compares, read from ``validate.json``: shared by the tables
(document.py), the figures (plots.py) and the ablation bookkeeping (validate.py), so all three agree.

- The recipes' rate basis: the whole last epoch when a plan ran two or more epochs, the steady rate when it
  ran one (torch.compile and warm-up then fall inside the only epoch).
- The ablation's references and their spread: each reference recipe runs first and last in its group; an
  effect smaller than how far those two runs came out apart is within the noise of the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The recipes in the order every table and figure lists them.
RECIPES = ("baseline", "guide", "optimized")


def rate_basis(result: Mapping[str, Any]) -> str:
    """Which rate the speed-ups compare: the whole last epoch when the plan ran two or more epochs (the last
    one is free of start-up), the steady rate when it ran one, since torch.compile and warm-up then fall
    inside the only epoch and would make a compiled recipe look slower than it runs."""
    epochs = (result.get("plan") or {}).get("epochs")
    return "steady" if epochs == 1 else "epoch"


def recipe_rates(summary: Mapping[str, Any], basis: str) -> tuple[Any, Any, Any]:
    """samples/s, real tokens/s and MFU of one recipe on ``basis`` (``epoch`` or ``steady``)."""
    if basis == "steady" and summary.get("steady_samples_per_s"):
        return (
            summary["steady_samples_per_s"],
            summary.get("steady_real_tokens_per_s"),
            summary.get("steady_mfu"),
        )
    return summary.get("samples_per_s"), summary.get("real_tokens_per_s"), summary.get("mfu")


def is_reference(row: Mapping[str, Any]) -> bool:
    """An ablation row that runs its recipe unchanged ("optimized", "guide (repeat)")."""
    return bool(str(row["name"]).split(" (")[0] == row["recipe"])


def reference_spread(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per reference recipe, how far apart its repeated ablation runs came out: (fast - slow) / fast."""
    rates: dict[str, list[float]] = {}
    for row in rows:
        if is_reference(row) and row.get("samples_per_s"):
            rates.setdefault(str(row["recipe"]), []).append(float(row["samples_per_s"]))
    return {recipe: (max(r) - min(r)) / max(r) for recipe, r in rates.items() if len(r) > 1}


def within_noise(row: Mapping[str, Any], spread: Mapping[str, float]) -> bool:
    """Whether a variant's effect (``vs_reference``) is smaller than its reference's spread."""
    effect, noise = row.get("vs_reference"), spread.get(str(row.get("recipe")))
    return effect is not None and noise is not None and abs(effect - 1) < noise
