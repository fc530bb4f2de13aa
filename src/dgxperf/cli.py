"""The command line: parse flags, call one capability, render it with Rich or print its JSON.

This is the only place that reads the environment (DGXPERF_HOME, NCCL_*, CUDA_*) and the clock for
results; capabilities below take what they need as arguments. Exit codes: 0 ok, 1 the command found a
failure (a failed check), 2 usage error (bad flag or input), 3 a bug in dgxperf.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from dgxperf import __version__

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3

app = typer.Typer(
    name="dgxperf",
    help="Performance toolkit for deep-learning training on NVIDIA multi-GPU servers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
runs_app = typer.Typer(help="Saved results: list, show and compare runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")

console = Console()
err_console = Console(stderr=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON (versioned schema).")]


def usage_error(message: str) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(EXIT_USAGE)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def open_store() -> Any:
    from dgxperf.store import RunStore, StoreError, default_store_path

    try:
        return RunStore(default_store_path(os.environ))
    except StoreError as exc:
        err_console.print(f"[yellow]warning:[/] run store unavailable: {exc}", highlight=False)
        return None


def save_run(
    command: str, result: dict[str, Any], fingerprint: dict[str, Any], status: str, summary: str
) -> int | None:
    """Save a result in the run store; a store problem is a warning, never a lost result on screen."""
    from dgxperf.store import StoreError

    store = open_store()
    if store is None:
        return None
    try:
        run_id: int = store.save(
            command=command,
            schema=str(result.get("schema", "")),
            status=status,
            fingerprint=fingerprint,
            result=result,
            argv=sys.argv[1:],
            tool_version=__version__,
            summary=summary,
        )
        return run_id
    except StoreError as exc:
        err_console.print(f"[yellow]warning:[/] result not saved: {exc}", highlight=False)
        return None


def version_callback(value: bool) -> None:
    if value:
        console.print(f"dgxperf {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """dgxperf: is my node set up right, what does it deliver, and why is my training job slow."""


# -- doctor -------------------------------------------------------------------------------------------------


@app.command()
def doctor(
    json_out: JsonFlag = False,
    fix_script: Annotated[
        Path | None,
        typer.Option(
            "--fix-script", help="Write a reviewed-by-a-person shell script fixing failed/warned findings."
        ),
    ] = None,
    save_snapshot: Annotated[
        Path | None,
        typer.Option("--save-snapshot", help="Also save the raw readings (NVML, /proc, /sys) as JSON."),
    ] = None,
    from_snapshot: Annotated[
        Path | None, typer.Option("--from-snapshot", help="Judge a saved snapshot instead of this node.")
    ] = None,
    area: Annotated[
        list[str] | None,
        typer.Option("--area", help="Only these areas: driver, gpu, topology, framework, os, storage."),
    ] = None,
    problems_only: Annotated[
        bool, typer.Option("--problems", help="Show only failed/warned/unknown findings.")
    ] = False,
    root_dir: Annotated[
        Path,
        typer.Option(
            "--root", help="Read /proc, /sys, /etc under this folder (for audits of a mounted image)."
        ),
    ] = Path("/"),
    no_save: Annotated[
        bool, typer.Option("--no-save", help="Do not record the run in the run store.")
    ] = False,
) -> None:
    """Audit this node against both guides: GPU and driver, topology, framework, OS and storage."""
    from dgxperf.doctor import AREAS, diagnose
    from dgxperf.doctor.fixscript import render_fix_script
    from dgxperf.hw.snapshot import Snapshot, SnapshotError, collect_snapshot
    from dgxperf.render import render_doctor

    areas = tuple(area) if area else AREAS
    unknown_areas = [a for a in areas if a not in AREAS]
    if unknown_areas:
        usage_error(f"unknown area {', '.join(unknown_areas)}; choose from {', '.join(AREAS)}")
    if not root_dir.is_dir():
        usage_error(f"--root {root_dir}: not a directory")
    for target in (fix_script, save_snapshot):
        if target is not None and not target.parent.is_dir():
            usage_error(f"cannot write {target}: folder {target.parent} does not exist")

    started = time.perf_counter()
    if from_snapshot is not None:
        try:
            snap = Snapshot.load(from_snapshot)
        except SnapshotError as exc:
            usage_error(str(exc))
        source = f"snapshot {from_snapshot}"
    else:
        if not json_out:
            with err_console.status("reading NVML, /proc and /sys ..."):
                snap = collect_snapshot(root_dir, os.environ)
        else:
            snap = collect_snapshot(root_dir, os.environ)
        source = "live" if str(root_dir) == "/" else f"root {root_dir}"
    report = diagnose(snap, source=source, collect_seconds=time.perf_counter() - started, areas=areas)
    result = report.to_json()

    if save_snapshot is not None:
        snap.save(save_snapshot)
    if fix_script is not None:
        fix_script.write_text(
            render_fix_script(
                report.findings,
                hostname=snap.hostname,
                created_at=report.created_at,
                version=__version__,
                name=fix_script.name,
            )
        )
        fix_script.chmod(0o755)
    run_id = None
    if not no_save:
        run_id = save_run(
            "doctor",
            result,
            result["fingerprint"],
            "failed" if report.failed else "ok",
            report.summary_line(),
        )
    result["run_id"] = run_id

    if json_out:
        print_json(result)
    else:
        render_doctor(console, report, problems_only=problems_only)
        if fix_script is not None:
            console.print(f"fix script written to {fix_script} — review it, then run it as root.")
        if save_snapshot is not None:
            console.print(f"snapshot written to {save_snapshot}")
        if run_id is not None:
            console.print(f"saved as run {run_id} (dgxperf runs show {run_id})", style="dim")
    raise typer.Exit(EXIT_FAILURE if report.failed else EXIT_OK)


# -- validate -----------------------------------------------------------------------------------------------


@app.command()
def validate(json_out: JsonFlag = False) -> None:
    """The guides' quantitative validation in one command (phases land one by one; see the README)."""
    from dgxperf.doctor import diagnose
    from dgxperf.hw.snapshot import collect_snapshot
    from dgxperf.render import render_validate
    from dgxperf.report.validate import ValidateResult

    started = time.perf_counter()
    if json_out:
        snap = collect_snapshot(Path("/"), os.environ)
    else:
        with err_console.status("phase 1/6: doctor ..."):
            snap = collect_snapshot(Path("/"), os.environ)
    report = diagnose(snap, source="live", collect_seconds=time.perf_counter() - started)
    outcome = ValidateResult(report)
    result = outcome.to_json()
    status = "ok" if outcome.complete else "incomplete"
    result["run_id"] = save_run("validate", result, result["fingerprint"], status, report.summary_line())
    if json_out:
        print_json(result)
    else:
        render_validate(console, outcome, result["run_id"])
    raise typer.Exit(EXIT_OK)


# -- runs ---------------------------------------------------------------------------------------------------


def _store_or_exit() -> Any:
    from dgxperf.store import RunStore, StoreError, default_store_path

    try:
        return RunStore(default_store_path(os.environ))
    except StoreError as exc:
        usage_error(str(exc))


@runs_app.command("list")
def runs_list(
    json_out: JsonFlag = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs, newest first.")] = 20,
    command: Annotated[str | None, typer.Option("--command", help="Only runs of this command.")] = None,
) -> None:
    """List saved runs, newest first."""
    from dgxperf.render import render_runs
    from dgxperf.store import StoreError

    store = _store_or_exit()
    try:
        records = store.list(limit=limit, command=command)
    except StoreError as exc:
        usage_error(str(exc))
    if json_out:
        print_json([{k: v for k, v in r.to_json().items() if k not in ("result",)} for r in records])
        return
    render_runs(console, records, store.path)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[int, typer.Argument(help="The run's id (see `dgxperf runs list`).")],
    json_out: JsonFlag = False,
) -> None:
    """Show one saved run: its fingerprint and full result."""
    from dgxperf.render import render_run
    from dgxperf.store import StoreError

    store = _store_or_exit()
    try:
        record = store.get(run_id)
    except StoreError as exc:
        usage_error(str(exc))
    if json_out:
        print_json(record.to_json())
        return
    render_run(console, record)


@runs_app.command("compare")
def runs_compare(
    a: Annotated[int, typer.Argument(help="First run id.")],
    b: Annotated[int, typer.Argument(help="Second run id.")],
    json_out: JsonFlag = False,
) -> None:
    """Put two runs side by side: what differs in the node and in the results."""
    from dgxperf.render import render_comparison
    from dgxperf.store import StoreError, compare

    store = _store_or_exit()
    try:
        first, second = store.get(a), store.get(b)
    except StoreError as exc:
        usage_error(str(exc))
    comparison = compare(first, second)
    if json_out:
        print_json({"a": a, "b": b, **comparison.to_json()})
        return
    render_comparison(console, first, second, comparison)


# -- schema -------------------------------------------------------------------------------------------------


@app.command()
def schema(name: Annotated[str, typer.Argument(help="Result type: doctor, snapshot, run.")]) -> None:
    """Print the JSON Schema of a result type (what --json prints)."""
    from importlib import resources

    files = {"doctor": "doctor.v1.json", "snapshot": "snapshot.v1.json", "run": "run.v1.json"}
    if name not in files:
        usage_error(f"unknown schema {name!r}; choose from {', '.join(files)}")
    sys.stdout.write(resources.files("dgxperf.schemas").joinpath(files[name]).read_text())


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # a bug: one line, not a traceback, unless asked for
        if os.environ.get("DGXPERF_DEBUG"):
            raise
        err_console.print(
            f"[bold red]dgxperf bug:[/] {type(exc).__name__}: {exc}\n"
            "Please report it; rerun with DGXPERF_DEBUG=1 for the traceback.",
            highlight=False,
        )
        sys.exit(EXIT_BUG)
