"""One rank of ``dgxperf bench nccl``: the module torchrun (or srun + torchrun) starts on every GPU.

    torchrun --nproc-per-node 8 -m dgxperf.bench.nccl_worker --config '{"ops": ["all_reduce"]}' --out r.json

``--config`` is a JSON object of :class:`dgxperf.bench.nccl.NcclConfig` fields (missing ones take their
defaults), or ``@FILE`` to read it from a file. Rank 0 writes the result JSON to ``--out`` (written to a
temporary file beside it, then renamed, so a reader never sees half a file), or prints it when ``--out``
is absent. Exit status: 0 done, 2 the benchmark cannot run as asked (the reason on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m dgxperf.bench.nccl_worker", description="One rank of the dgxperf NCCL benchmark."
    )
    parser.add_argument("--config", default="{}", help="NcclConfig as a JSON object, or @FILE")
    parser.add_argument("--out", type=Path, default=None, help="where rank 0 writes the result JSON")
    return parser.parse_args(argv)


def _load_config(text: str) -> dict[str, Any]:
    raw = Path(text[1:]).read_text() if text.startswith("@") else text
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("--config must be a JSON object")
    return data


def write_atomically(path: Path, payload: dict[str, Any]) -> None:
    """Write JSON to ``path`` through a temporary file in the same folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle, indent=1)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    from dgxperf.bench.base import BenchError
    from dgxperf.bench.nccl import NcclConfig, run_collectives

    args = _parse(argv)
    try:
        config = NcclConfig.from_json(_load_config(args.config))
        result = run_collectives(config, os.environ)
    except (BenchError, ValueError, OSError) as exc:
        rank = os.environ.get("RANK", "0")
        print(f"dgxperf nccl worker (rank {rank}): {exc}", file=sys.stderr)
        return 2
    if result is None:
        return 0
    payload = result.to_json()
    if args.out is None:
        print(json.dumps(payload, indent=1))
    else:
        write_atomically(args.out, payload)
    return 0


if __name__ == "__main__":
    from dgxperf.worker_exit import exit_worker

    exit_worker(main())
