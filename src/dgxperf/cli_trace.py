"""`dgxperf trace FILE [AFTER]`: where the profiled steps of a PyTorch profiler trace spent their time, the
summary that ``dgxperf train --set profile_steps=N`` stores in ``result.json`` (:mod:`dgxperf.train.trace`),
for any trace with step marks: one of your own jobs' as well as dgxperf's. With a second trace, the two side by
side (a change's before and after).

Registered in :mod:`dgxperf.cli` as ``app.command("trace")(trace)``. Exit codes: 0 done, 2 a file that is not
a profiler trace or has no step marks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dgxperf.cli_common import JsonFlag, console, print_json, usage_error


def trace(
    path: Annotated[
        Path,
        typer.Argument(
            help="A torch.profiler Chrome trace (.json or .json.gz), e.g. OUT/profile/trace.json.gz."
        ),
    ],
    after: Annotated[
        Path | None,
        typer.Argument(help="A second trace: both side by side, PATH as before and this as after."),
    ] = None,
    launch_us: Annotated[
        float | None,
        typer.Option(
            "--launch-us",
            min=0.001,
            help="What one launch costs the host that recorded the trace (`dgxperf bench launch`, eager µs): "
            "adds how much of each step the launches alone take.",
        ),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Where the profiled steps' time went: step time, GPU busy share, launches, syncs, kernel time by class,
    elementwise time by what the kernels fuse, busiest ops and kernels."""
    from dgxperf.render import ELEMENTWISE_GROUP_WORDS, KERNEL_CLASS_WORDS, profile_line
    from dgxperf.train.trace import TraceError, launch_floor, load_trace, summarize_trace

    def summarized(trace_path: Path) -> dict[str, Any]:
        summary = summarize_trace(load_trace(trace_path)) | {"trace": str(trace_path)}
        if launch_us is not None:
            summary["launch_floor"] = launch_floor(summary, launch_us)
        return summary

    try:
        summary = summarized(path)
        other = summarized(after) if after is not None else None
    except TraceError as exc:
        usage_error(str(exc))
    if other is not None:
        show_comparison(summary, other, json_out)
        return
    if json_out:
        print_json(summary)
        return
    console.print(profile_line(summary), highlight=False)
    if summary["kernel_classes"]:
        classes = Table(title="kernel time by class", title_justify="left")
        for column in ("class", "ms a step", "share", "largest kernels (ms a step)"):
            classes.add_column(column, justify="right" if column in ("ms a step", "share") else "left")
        for row in summary["kernel_classes"]:
            largest = "\n".join(f"{k['name']} {k['ms_per_step']:.3f}" for k in row["kernels"])
            classes.add_row(
                KERNEL_CLASS_WORDS[row["class"]],
                f"{row['ms_per_step']:.3f}",
                f"{100 * row['share']:.1f}%",
                largest,
            )
        console.print(classes)
    if summary.get("elementwise_groups"):
        groups = Table(
            title="elementwise time by what the kernels fuse (from their names)", title_justify="left"
        )
        for column in ("fused", "ms a step", "share of elementwise"):
            groups.add_column(column, justify="left" if column == "fused" else "right")
        for row in summary["elementwise_groups"]:
            groups.add_row(
                ELEMENTWISE_GROUP_WORDS[row["group"]],
                f"{row['ms_per_step']:.3f}",
                f"{100 * row['share']:.1f}%",
            )
        console.print(groups)
    for title, rows, key in (
        ("busiest host operators (self time)", summary["top_cpu_ops"], "self_ms_per_step"),
        ("busiest kernels", summary["top_kernels"], "ms_per_step"),
    ):
        if not rows:
            continue
        table = Table(title=title, title_justify="left")
        table.add_column("name")
        table.add_column("ms a step", justify="right")
        for row in rows:
            table.add_row(row["name"], f"{row[key]:.3f}")
        console.print(table)


def show_comparison(before: dict[str, Any], after: dict[str, Any], json_out: bool) -> None:
    from dgxperf.render import ELEMENTWISE_GROUP_WORDS, KERNEL_CLASS_WORDS
    from dgxperf.train.trace import compare_summaries

    compared = compare_summaries(before, after)
    if json_out:
        print_json({"before": before, "after": after, **compared})
        return
    table = Table(title=f"before {before['trace']}\nafter  {after['trace']}", title_justify="left")
    for column in ("figure", "before", "after", "after / before"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for row in compared["figures"]:
        table.add_row(row["figure"], _shown(row["before"]), _shown(row["after"]), _shown(row["ratio"]))
    console.print(table)
    # an older summary has no classes or groups: no rows rather than wrong zeros
    if compared["kernel_classes"]:
        title = "kernel time by class (ms a step)"
        console.print(_before_after(title, "class", compared["kernel_classes"], "class", KERNEL_CLASS_WORDS))
    if compared["elementwise_groups"]:
        title = "elementwise time by what the kernels fuse (ms a step)"
        console.print(
            _before_after(title, "fused", compared["elementwise_groups"], "group", ELEMENTWISE_GROUP_WORDS)
        )
    title = "busiest host operators (self time, ms a step)"
    console.print(_before_after(title, "name", compared["top_cpu_ops"], "name"))


def _shown(value: Any) -> str:
    return "—" if value is None else f"{value:,.3f}".rstrip("0").rstrip(".")


def _before_after(
    title: str, heading: str, rows: list[dict[str, Any]], label: str, words: dict[str, str] | None = None
) -> Table:
    """One table of ``compare_summaries``' rows: each row's ``label`` (in ``words`` where given), before, after."""
    table = Table(title=title, title_justify="left")
    for column in (heading, "before", "after"):
        table.add_column(column, justify="left" if column == heading else "right")
    for row in rows:
        name = words[row[label]] if words else row[label]
        table.add_row(name, _shown(row["before"]), _shown(row["after"]))
    return table
