"""What each torchrun process runs for ``dgxperf train --gpus N``: one rank of :func:`dgxperf.train.loop.train`.

Also usable directly under torchrun or Slurm on several nodes::

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        -m dgxperf.train.worker --config recipe.json --out-dir run/ --cache-dir cache/
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from dgxperf.train.data import DataError
    from dgxperf.train.launch import ERROR_PREFIX, LOG_PREFIX
    from dgxperf.train.loop import RunOptions, TrainError, train
    from dgxperf.train.recipes import RecipeError, TrainConfig, apply_overrides

    parser = argparse.ArgumentParser(prog="dgxperf.train.worker")
    parser.add_argument("--config", required=True, type=Path, help="JSON file of recipe fields")
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument("--cache-dir", required=True, type=Path)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--no-checkpoint", action="store_true")
    parser.add_argument("--gemm-ceiling", type=float, default=None)
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    # A C++ abort (gloo, NCCL) then prints every thread's Python stack to stderr before the process dies.
    faulthandler.enable()

    def emit(record: dict[str, object]) -> None:
        print(LOG_PREFIX + json.dumps(record, default=str), flush=True)

    try:
        fields = json.loads(args.config.read_text())
        config = apply_overrides(TrainConfig(), fields)
        options = RunOptions(
            out_dir=args.out_dir,
            cache_dir=args.cache_dir,
            device=args.device,
            resume=args.resume,
            env=dict(os.environ),
            gemm_ceiling_tflops=args.gemm_ceiling,
            on_log=emit if rank == 0 else None,
            checkpoints=not args.no_checkpoint,
        )
        train(config, options)
    except (RecipeError, DataError) as exc:
        print(f"{ERROR_PREFIX}usage: {exc}", flush=True)
        return 2
    except TrainError as exc:
        print(f"{ERROR_PREFIX}{exc}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    from dgxperf.worker_exit import exit_worker

    exit_worker(main())
