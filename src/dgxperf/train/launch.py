"""Running a recipe on N processes: ``dgxperf train --gpus N`` starts torchrun itself and follows rank 0.

Rank 0 of the workers prints one line per log record, ``dgxperf-log {json}``; the parent turns those
into its progress display and passes every other line through. Errors come back as
``dgxperf-error message`` and exit status 1; usage errors (bad data, bad recipe) as status 2.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dgxperf.train.recipes import TrainConfig

LOG_PREFIX = "dgxperf-log "
ERROR_PREFIX = "dgxperf-error "


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
        tail: list[str] = []
        process = subprocess.Popen(
            command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert process.stdout is not None
        try:
            for line in process.stdout:
                line = line.rstrip("\n")
                marker = line.find(LOG_PREFIX)
                if marker >= 0 and on_log is not None:
                    on_log(json.loads(line[marker + len(LOG_PREFIX) :]))
                    continue
                marker = line.find(ERROR_PREFIX)
                if marker >= 0:
                    errors.append(line[marker + len(ERROR_PREFIX) :])
                    continue
                tail = [*tail, line][-30:]
                if on_line is not None:
                    on_line(line)
            status = process.wait()
        except KeyboardInterrupt:
            process.terminate()
            process.wait()
            raise
    if status != 0:
        usage = any(e.startswith("usage: ") for e in errors)
        message = "; ".join(e.removeprefix("usage: ") for e in errors) if errors else "\n".join(tail[-15:])
        raise LaunchError(message or f"the workers exited with status {status}", 2 if usage else 1)
    result_file = out_dir / "result.json"
    if not result_file.exists():
        raise LaunchError(f"the workers finished but wrote no {result_file}", 1)
    result: dict[str, Any] = json.loads(result_file.read_text())
    return result
