"""`dgxperf plan mig`: print a MIG layout for a set of tenants; the planning is :mod:`dgxperf.plan.mig`.

Registered in :mod:`dgxperf.cli` as ``plan_app.command("mig")(mig)``; the shared CLI helpers come from
:mod:`dgxperf.cli_common`.
Exit codes as everywhere: 0 a valid layout (or the profile list), 1 no valid layout, 2 bad input.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from dgxperf.cli_common import EXIT_FAILURE, EXIT_OK, JsonFlag, console, print_json, usage_error
from dgxperf.plan.mig import CONTEXT_GB, GPU_MODELS, MAX_GPUS, OBJECTIVE, MigPlanError, get_model, plan_mig


def mig(
    tenants: Annotated[
        list[str] | None,
        typer.Argument(
            help='Tenants: profiles ("3g + 2x1g", "3g.71gb + 2x1g.18gb") or needs '
            '("inference 3GB x1, training 10GB x6"; also 2g or 40SM for compute, +me for media).',
            show_default=False,
            metavar="TENANTS",
        ),
    ] = None,
    gpu_model: Annotated[
        str | None, typer.Option("--gpu-model", "-m", help=f"GPU model: {', '.join(GPU_MODELS)}.")
    ] = None,
    gpus: Annotated[
        int, typer.Option("--gpus", "-g", min=1, max=MAX_GPUS, help="GPUs to split the tenants over.")
    ] = 1,
    context_gb: Annotated[
        float,
        typer.Option(
            "--context-gb",
            help="CUDA context reserve (GB) added to each instance's memory need before its profile is chosen: "
            "every process on a MIG instance pays for its CUDA context out of that instance's memory "
            "(typically 0.3-0.6 GB on A100/H100 with lazy loading), so a 10 GB job does not run in a 10.2 GB "
            "1g.10gb. 0 turns it off; profile tenants (3g, 1g.10gb) get none.",
        ),
    ] = CONTEXT_GB,
    host_cpus: Annotated[
        int | None,
        typer.Option(
            "--host-cpus", min=1, help="Host CPUs to split over the tenants [default: this machine's]."
        ),
    ] = None,
    host_memory_gb: Annotated[
        float | None,
        typer.Option(
            "--host-memory-gb",
            min=0.001,
            help="Host memory (GB) to split over the tenants [default: this machine's].",
        ),
    ] = None,
    list_profiles: Annotated[
        bool,
        typer.Option("--list-profiles", help="Print NVIDIA's MIG profile table of --gpu-model (or of all)."),
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Plan a MIG layout: profiles on start slots, nvidia-smi commands, CUDA_VISIBLE_DEVICES, systemd slices.

    Nothing is executed: the commands are printed for a person to review and run.
    """
    from rich.console import Console

    try:
        model = get_model(gpu_model) if gpu_model is not None else None
    except MigPlanError as exc:
        usage_error(str(exc))
    if list_profiles:
        models = [model] if model is not None else [get_model(key) for key in GPU_MODELS]
        if json_out:
            print_json({m.key: [p.to_json() for p in m.profiles] for m in models})
        else:
            for m in models:
                _render_profiles(console, m)
        raise typer.Exit(EXIT_OK)
    if model is None:
        usage_error(f"--gpu-model is needed to plan: {', '.join(GPU_MODELS)}")
    if not tenants:
        usage_error('give the tenants, e.g. "3g + 2x1g" or "inference 3GB x1, training 10GB x6"')
    if host_cpus is None:
        host_cpus = os.cpu_count() or 1
    if host_memory_gb is None:
        host_memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)
    try:
        plan = plan_mig(
            model,
            " ".join(tenants),
            gpus=gpus,
            host_cpus=host_cpus,
            host_memory_gb=host_memory_gb,
            context_gb=context_gb,
        )
    except MigPlanError as exc:
        usage_error(str(exc))
    if json_out:
        print_json(plan.to_json())
    else:
        out: Console = console
        _render_plan(out, plan, " ".join(tenants))
    raise typer.Exit(EXIT_OK if plan.valid else EXIT_FAILURE)


def _render_profiles(console: Any, model: Any) -> None:
    from rich.table import Table

    table = Table(
        title=f"MIG profiles of {model.name} ({model.key}); source: {model.source}",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    for column, justify in (
        ("profile", "left"),
        ("ID", "right"),
        ("compute slices", "right"),
        ("memory slices", "right"),
        ("memory", "right"),
        ("SMs", "right"),
        ("max", "right"),
        ("placements", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for p in model.profiles:
        table.add_row(
            p.name,
            str(p.profile_id),
            f"{p.compute_slices}/7",
            f"{p.memory_slices}/8",
            f"{p.memory_gib:.2f} GiB = {p.memory_gb:.1f} GB",
            str(p.sms),
            str(p.max_instances),
            p.placements,
        )
    console.print(table)
    console.print(
        "placements as `nvidia-smi mig -lgipp` prints them: {allowed start slots}:memory slices taken; "
        "memory as `nvidia-smi mig -lgip` reports it" + (f"; {model.note}" if model.note else ""),
        style="dim",
        highlight=False,
        markup=False,
    )


def _lines(console: Any, lines: list[str], indent: int = 2) -> None:
    """Shell and unit-file text verbatim: no markup (``[Slice]``), no highlighting, no wrapping."""
    from rich.text import Text

    for line in lines:
        style = "dim" if line.lstrip().startswith("#") else ""
        console.print(Text(" " * indent + line, style=style), soft_wrap=True, highlight=False)


def _render_plan(console: Any, plan: Any, request: str) -> None:
    from rich.table import Table
    from rich.text import Text

    model = plan.model
    console.print(
        Text.assemble(
            ("dgxperf plan mig", "bold"),
            f" — {plan.gpus} x {model.name} ({model.key}) — {request}",
        ),
        highlight=False,
    )
    console.print(Text(plan.headline(), style="bold green" if plan.valid else "bold red"), highlight=False)

    table = Table(title="tenants", title_justify="left", title_style="bold cyan", box=None, pad_edge=False)
    for column in ("tenant", "asked", "n", "profile (ID)", "memory", "SMs", "why"):
        table.add_column(column, overflow="fold", justify="right" if column in ("n", "SMs") else "left")
    for d in plan.demands:
        p = d.profile
        table.add_row(
            d.spec.name,
            d.spec.text,
            str(d.spec.count),
            f"{p.name} ({p.profile_id})" if p else "—",
            f"{p.memory_gib:.2f} GiB" if p else "—",
            str(p.sms) if p else "—",
            d.why,
        )
    console.print(table)

    for layout in plan.layouts:
        if not layout.instances:
            continue
        gpu = Table(
            title=f"GPU{layout.gpu}  memory slices 0-7: {layout.slot_map()}"
            + ("  (x: stranded)" if layout.stranded else ""),
            title_justify="left",
            title_style="bold cyan",
            box=None,
            pad_edge=False,
        )
        for column in ("", "start:size", "profile (ID)", "tenant", "memory", "SMs"):
            gpu.add_column(column, justify="right" if column == "SMs" else "left")
        ordered = sorted(layout.instances, key=lambda i: i.start)
        for letter, inst in zip("ABCDEFGH", ordered, strict=False):
            gpu.add_row(
                letter,
                f"{inst.start}:{inst.profile.size}",
                f"{inst.profile.name} ({inst.profile.profile_id})",
                f"{inst.tenant} #{inst.instance}",
                f"{inst.profile.memory_gib:.2f} GiB",
                str(inst.profile.sms),
            )
        console.print(gpu)

    if plan.reasons:
        console.print(Text("why not", style="bold cyan"))
        for reason in plan.reasons:
            console.print(Text(f"  - {reason}"), highlight=False)
    if plan.alternatives:
        console.print(Text("nearest valid alternatives", style="bold cyan"))
        for alt in plan.alternatives:
            console.print(Text(f"  - {alt.summary}"), highlight=False)
            if alt.layout:
                console.print(Text(f"      {alt.layout_text()}", style="dim"), highlight=False)
    for note in plan.notes:
        console.print(Text.assemble(("note: ", "yellow"), note), highlight=False)

    console.print(Text(f"objective — {OBJECTIVE}", style="dim"), highlight=False)
    if not plan.valid:
        return

    console.print(Text("\nnvidia-smi commands (dgxperf runs none of them)", style="bold cyan"))
    _lines(console, plan.commands())
    console.print(Text("\nCUDA_VISIBLE_DEVICES per tenant instance", style="bold cyan"))
    _lines(console, plan.cuda_lines())
    units = plan.slice_units()
    if units:
        console.print(
            Text(
                f"\nsystemd slices (cgroup v2): host CPUs and memory split by compute slices "
                f"(host: {plan.host_cpus} CPUs, {plan.host_memory_gb:g} GB)",
                style="bold cyan",
            )
        )
        for unit in units.values():
            _lines(console, unit["text"].splitlines())
            _lines(console, ["# then: sudo systemctl daemon-reload; one process per instance:", *unit["run"]])
            console.print()
