"""How ``dgxperf train --gpus N`` reads torchrun's output: rank marks, and the error when a rank dies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dgxperf.train.launch import WorkerOutput, worker_command
from dgxperf.train.recipes import TrainConfig

DATA = Path(__file__).parent.parent / "data" / "torchrun"


def test_rank_marks_are_read_and_stripped() -> None:
    output = WorkerOutput()
    assert output.add("[default1]:dgxperf-log {}") == (1, "dgxperf-log {}")
    assert output.add("[default0]:hello") == (0, "hello")
    assert output.add("W1203 torchrun says something") == (None, "W1203 torchrun says something")
    assert list(output.ranks[1]) == ["dgxperf-log {}"] and list(output.launcher) == [
        "W1203 torchrun says something"
    ]


def test_a_rank_killed_by_abort_is_named_with_its_own_last_lines(tmp_path: Path) -> None:
    # Real torchrun 2.14 output (--tee 3): rank 0 called abort(), torchrun sent SIGTERM to rank 1.
    output = WorkerOutput()
    for line in (DATA / "rank0-abort.txt").read_text().splitlines():
        output.add(line)
    message = output.failure_message(tmp_path / "logs")
    assert message.startswith("rank 0 died (SIGABRT)")
    assert "err from 0" in message and "hello from 0" in message
    assert "from 1" not in message  # the rank torchrun stopped is not the story
    assert str(tmp_path / "logs") in message


def test_without_a_root_cause_the_launcher_tail_is_the_message(tmp_path: Path) -> None:
    output = WorkerOutput()
    for i in range(30):
        output.add(f"launcher line {i}")
    message = output.failure_message(tmp_path)
    assert message.splitlines() == [f"launcher line {i}" for i in range(15, 30)]


def test_a_rank_that_printed_nothing(tmp_path: Path) -> None:
    output = WorkerOutput()
    for line in ["Root Cause (first observed failure):", "[0]:", "  rank      : 2 (local_rank: 2)",
                 "  exitcode  : 1 (pid: 77)"]:  # fmt: skip
        output.add(line)
    assert output.failure_message(tmp_path).startswith("rank 2 died (exit status 1); per-rank logs under")
    assert output.failure_message(tmp_path).endswith("it printed nothing before it died")


def test_worker_command_tees_rank_output_into_the_run_directory(tmp_path: Path) -> None:
    command = worker_command(TrainConfig(), 2, out_dir=tmp_path / "run", cache_dir=tmp_path / "cache", device="cpu",
                             resume=False, checkpoints=True, gemm_ceiling_tflops=None,
                             config_file=tmp_path / "config.json")  # fmt: skip
    assert command[command.index("--log-dir") + 1] == str(tmp_path / "run" / "logs")
    assert command[command.index("--tee") + 1] == "3"
    assert command.index("--tee") < command.index("dgxperf.train.worker")


def test_bad_data_on_two_ranks_is_one_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text('text,label\n"unclosed,1\n', encoding="utf-8")
    env = {**os.environ, "DGXPERF_HOME": str(tmp_path), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "dgxperf", "train", "--device", "cpu", "--gpus", "2", "--preset", "tiny",
         "--set", "task=files", "--set", f"train_file={bad}", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("bad.csv:2") == 1, done.stderr[-2000:]  # both ranks said it; shown once
    assert "Traceback" not in done.stderr
