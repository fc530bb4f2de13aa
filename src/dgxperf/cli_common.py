"""What every command module shares: the consoles, the --json flag, exit codes and the two ways out
(a usage error, a JSON result). Kept apart from :mod:`dgxperf.cli` so that command modules it
registers (``cli_plan_memory``, ``cli_plan_mig``) can import these at the top without a cycle."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3

console = Console()
err_console = Console(stderr=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON (versioned schema).")]


def usage_error(message: str) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(EXIT_USAGE)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")
