"""`dgxperf trace FILE`: where the profiled steps of a PyTorch profiler trace spent their time, the summary
that ``dgxperf train --set profile_steps=N`` stores in ``result.json`` (:mod:`dgxperf.train.trace`), for any
trace with step marks: one of your own jobs' as well as dgxperf's.

Registered in :mod:`dgxperf.cli` as ``app.command("trace")(trace)``. Exit codes: 0 done, 2 a file that is not
a profiler trace or has no step marks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

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
    json_out: JsonFlag = False,
) -> None:
    """Where the profiled steps' time went: step time, GPU busy share, launches, syncs, busiest ops and kernels."""
    from dgxperf.render import profile_line
    from dgxperf.train.trace import TraceError, load_trace, summarize_trace

    try:
        summary = summarize_trace(load_trace(path)) | {"trace": str(path)}
    except TraceError as exc:
        usage_error(str(exc))
    if json_out:
        print_json(summary)
        return
    console.print(profile_line(summary), highlight=False)
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
