"""The validate report's figures, as PNG bytes (matplotlib, Agg): embedded in the HTML as data URIs and
written next to the Markdown, so the report needs no network and no other file to be read.

Each function takes the validate result (``validate.json``) and returns ``None`` when its data is absent
(a phase that failed or was skipped), so the report shows what exists and says what does not.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from dgxperf.report.rates import rate_basis, recipe_rates, reference_spread, within_noise

COLORS = {"baseline": "#7f7f7f", "guide": "#1f77b4", "optimized": "#2ca02c"}


def _figure(width: float = 7.0, height: float = 3.2) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    return fig, ax


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _ok_recipes(result: Mapping[str, Any]) -> dict[str, Any]:
    return {name: run for name, run in result.get("recipes", {}).items() if "summary" in run}


def throughput(result: Mapping[str, Any]) -> bytes | None:
    runs = _ok_recipes(result)
    if not runs:
        return None
    fig, ax = _figure(6.0, 2.8)
    basis = rate_basis(result)
    names = list(runs)
    rates = [recipe_rates(runs[n]["summary"], basis)[0] or 0 for n in names]
    bars = ax.barh(names, rates, color=[COLORS.get(n, "#444") for n in names])
    for bar, rate in zip(bars, rates, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {rate:,.0f}", va="center")
    ax.set_xlabel("training samples/s, " + ("steady state" if basis == "steady" else "over the last epoch"))
    ax.invert_yaxis()
    ax.margins(x=0.15)
    return _png(fig)


def loss_curves(result: Mapping[str, Any]) -> bytes | None:
    runs = {n: r for n, r in _ok_recipes(result).items() if r.get("steps")}
    if not runs:
        return None
    fig, ax = _figure()
    for name, run in runs.items():
        steps = [s for s in run["steps"] if s.get("loss") is not None]
        ax.plot([s["step"] for s in steps], [s["loss"] for s in steps], label=name, color=COLORS.get(name))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    ax.legend()
    ax.grid(alpha=0.3)
    return _png(fig)


def accuracy_curves(result: Mapping[str, Any]) -> bytes | None:
    runs = {n: r for n, r in _ok_recipes(result).items() if r.get("epochs")}
    if not runs:
        return None
    fig, ax = _figure()
    for name, run in runs.items():
        epochs = [e for e in run["epochs"] if e.get("dev_accuracy") is not None]
        ax.plot(
            [e["epoch"] for e in epochs],
            [100 * e["dev_accuracy"] for e in epochs],
            marker="o",
            label=name,
            color=COLORS.get(name),
        )
    ax.set_xlabel("epoch")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("dev accuracy (%)")
    ax.legend()
    ax.grid(alpha=0.3)
    return _png(fig)


TIMELINE_SERIES = {
    "gpu_util_pct": "GPU utilisation",
    "sm_active_pct": "SM active",
    "tensor_active_pct": "tensor active",
    "dram_active_pct": "DRAM active",
    "host_cpu_pct": "host CPU",
}


def timeline(advice: Mapping[str, Any]) -> bytes | None:
    """One recipe's telemetry over its run: GPU 0's activity (GPM) or, without a GPU, the host's CPU."""
    series = advice.get("timeline") or {}
    if len(series.get("t", [])) < 2:
        return None
    fig, ax = _figure(7.0, 2.6)
    for key, label in TIMELINE_SERIES.items():
        values = series.get(key)
        if values:
            ax.plot(series["t"], [v if v is not None else float("nan") for v in values], label=label)
    ax.set_ylim(0, 105)
    ax.set_xlabel("seconds since the recording started")
    ax.set_ylabel("%")
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, 1.18), frameon=False)
    ax.grid(alpha=0.3)
    return _png(fig)


def ablation(result: Mapping[str, Any]) -> bytes | None:
    rows = [r for r in result.get("ablation", []) if r.get("vs_reference")]
    if not rows:
        return None
    spread = reference_spread(result.get("ablation", []))
    fig, ax = _figure(7.0, 0.35 * len(rows) + 1.0)
    names = [r["name"] for r in rows]
    effects = [100 * (r["vs_reference"] - 1) for r in rows]
    colors = [
        "#aaaaaa" if within_noise(r, spread) else "#2ca02c" if e >= 0 else "#d62728"
        for r, e in zip(rows, effects, strict=True)
    ]
    ax.barh(names, effects, color=colors)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(
        "throughput change vs its reference recipe (%)"
        + (
            "; grey: within the spread of the reference's two runs"
            if any(spread.get(str(r.get("recipe"))) for r in rows)
            else ""
        )
    )
    ax.invert_yaxis()
    ax.grid(alpha=0.3, axis="x")
    return _png(fig)


def bench_peaks(result: Mapping[str, Any]) -> bytes | None:
    summary = (result.get("bench") or {}).get("summary") or {}
    bars: list[tuple[str, float]] = []
    for group in ("gemm", "memory", "pcie"):
        for name, entry in (summary.get(group) or {}).items():
            if isinstance(entry, Mapping) and entry.get("pct_of_peak") is not None:
                bars.append((f"{group} {name}", float(entry["pct_of_peak"])))
    if not bars:
        return None
    fig, ax = _figure(7.0, 0.3 * len(bars) + 1.0)
    ax.barh([b[0] for b in bars], [b[1] for b in bars], color="#1f77b4")
    ax.axvline(100, color="black", linewidth=0.8)
    ax.set_xlabel("% of the datasheet peak (bench all --quick)")
    ax.invert_yaxis()
    ax.grid(alpha=0.3, axis="x")
    return _png(fig)


def all_figures(result: Mapping[str, Any]) -> dict[str, bytes]:
    """Every figure that has data, by a stable name (also its file name in the report folder)."""
    figures: dict[str, bytes | None] = {
        "throughput": throughput(result),
        "loss": loss_curves(result),
        "accuracy": accuracy_curves(result),
        "ablation": ablation(result),
        "bench": bench_peaks(result),
    }
    for recipe, advice in (result.get("advice") or {}).items():
        figures[f"timeline-{recipe}"] = timeline(advice)
    return {name: png for name, png in figures.items() if png}
