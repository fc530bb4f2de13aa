"""Running a recipe on N processes: ``dgxperf train --gpus N`` starts torchrun itself and follows rank 0.

Rank 0 of the workers prints one line per log record, ``dgxperf-log {json}``; the parent turns those
into its progress display and passes rank 0's other lines through. Errors come back as
``dgxperf-error message`` and exit status 1; usage errors (bad data, bad recipe) as status 2.

torchrun tees each rank's output (``[default0]:...`` on our pipe, files under ``OUT/logs``), so when a
rank dies without a word of ours — a C++ abort in a collective, a signal — the error names that rank and
quotes its own last lines, not only torchrun's summary of exit codes.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dgxperf.train.recipes import TrainConfig

LOG_PREFIX = "dgxperf-log "
ERROR_PREFIX = "dgxperf-error "
# torchrun --tee marks each worker line with its local rank; its own lines carry no mark.
_RANK_LINE = re.compile(r"^\[default(\d+)\]:(.*)$")
_ROOT_CAUSE = re.compile(r"rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
_EXIT = re.compile(r"exitcode\s*:\s*(-?\d+).*?(?:\((SIG\w+)\))?\s*$")


class LaunchError(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def worker_command(
    config: TrainConfig,
    nproc: int,
    *,
    out_dir: Path,
    cache_dir: Path,
    device: str,
    resume: bool,
    checkpoints: bool,
    gemm_ceiling_tflops: float | None,
    config_file: Path,
) -> list[str]:
    config_file.write_text(json.dumps(dataclasses.asdict(config)))
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
        "--log-dir", str(out_dir / "logs"), "--tee", "3",
        "-m", "dgxperf.train.worker",
        "--config", str(config_file), "--out-dir", str(out_dir), "--cache-dir", str(cache_dir), "--device", device,
    ]  # fmt: skip
    if resume:
        command.append("--resume")
    if not checkpoints:
        command.append("--no-checkpoint")
    if gemm_ceiling_tflops:
        command += ["--gemm-ceiling", str(gemm_ceiling_tflops)]
    return command


def launch(
    config: TrainConfig,
    nproc: int,
    *,
    env: Mapping[str, str],
    out_dir: Path,
    cache_dir: Path,
    device: str,
    resume: bool = False,
    checkpoints: bool = True,
    gemm_ceiling_tflops: float | None = None,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the workers to the end and return rank 0's result (``out_dir/result.json``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        command = worker_command(
            config, nproc, out_dir=out_dir, cache_dir=cache_dir, device=device, resume=resume,
            checkpoints=checkpoints, gemm_ceiling_tflops=gemm_ceiling_tflops, config_file=Path(scratch) / "config.json",
        )  # fmt: skip
        errors: list[str] = []
        output = WorkerOutput()
        process = subprocess.Popen(
            command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert process.stdout is not None
        try:
            for line in process.stdout:
                line = line.rstrip("\n")
                rank, line = output.add(line)
                marker = line.find(LOG_PREFIX)
                if marker >= 0 and on_log is not None:
                    on_log(json.loads(line[marker + len(LOG_PREFIX) :]))
                    continue
                marker = line.find(ERROR_PREFIX)
                if marker >= 0:
                    errors.append(line[marker + len(ERROR_PREFIX) :])
                    continue
                # Only rank 0 speaks live: the other ranks repeat it, or fail in turn once it has failed
                # (a peer's "connection closed" traceback), and torchrun's own lines are its banner and
                # its summary of exit codes. All of it stays in OUT/logs and feeds failure_message.
                if on_line is not None and rank == 0:
                    on_line(line)
            status = process.wait()
        except KeyboardInterrupt:
            process.terminate()
            process.wait()
            raise
    if status != 0:
        usage = any(e.startswith("usage: ") for e in errors)
        # Every rank reports the same bad input: say it once.
        message = "; ".join(dict.fromkeys(e.removeprefix("usage: ") for e in errors))
        if not message:
            message = output.failure_message(out_dir / "logs")
        raise LaunchError(message or f"the workers exited with status {status}", 2 if usage else 1)
    result_file = out_dir / "result.json"
    if not result_file.exists():
        raise LaunchError(f"the workers finished but wrote no {result_file}", 1)
    result: dict[str, Any] = json.loads(result_file.read_text())
    return result


class WorkerOutput:
    """The last lines torchrun printed itself and the last lines of each rank (``--tee`` marks them)."""

    def __init__(self) -> None:
        self.launcher: collections.deque[str] = collections.deque(maxlen=40)
        self.ranks: dict[int, collections.deque[str]] = {}

    def add(self, raw: str) -> tuple[int | None, str]:
        """Keep one line; return its local rank (None: torchrun's own) and the line without the mark."""
        marked = _RANK_LINE.match(raw)
        if marked is None:
            self.launcher.append(raw)
            return None, raw
        rank, line = int(marked.group(1)), marked.group(2)
        self.ranks.setdefault(rank, collections.deque(maxlen=20)).append(line)
        return rank, line

    def failure_message(self, log_dir: Path) -> str:
        """Which rank failed first and how (torchrun's "Root Cause"), with that rank's own last lines."""
        root: int | None = None
        how = ""
        seen_root_cause = False
        for line in self.launcher:
            if "Root Cause" in line:
                seen_root_cause = True
            elif seen_root_cause and root is None and (match := _ROOT_CAUSE.search(line)):
                root = int(match.group(2))
            elif root is not None and not how and (match := _EXIT.search(line)):
                how = match.group(2) or f"exit status {match.group(1)}"
        if root is None:
            return "\n".join(list(self.launcher)[-15:])
        last = [line for line in self.ranks.get(root, []) if line.strip()][-12:]
        head = f"rank {root} died ({how or 'see below'}); per-rank logs under {log_dir}"
        if not last:
            return f"{head}; it printed nothing before it died"
        return head + "; its last lines:\n" + "\n".join(f"  {line}" for line in last)
