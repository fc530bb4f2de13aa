"""Cut a torch.profiler trace down to N of its profiled steps (after SKIP), complete events only, for a test
fixture: ``PYTHONPATH=src python3 scripts/h200/trim_trace.py IN.json.gz OUT.json.gz --skip 2 --steps 2``.
Events are kept from the host's first kept step mark to the end of the GPU timeline's last kept one; flow
arrows and metadata events are dropped."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from dgxperf.train.trace import GPU_STEP_CATEGORY, STEP_PREFIX, load_trace


def trim(trace: dict, steps: int, skip: int = 0) -> dict:
    marks = [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith(STEP_PREFIX)]
    host = sorted((e for e in marks if e.get("cat") != GPU_STEP_CATEGORY), key=lambda e: e["ts"])[
        skip : skip + steps
    ]
    gpu = sorted((e for e in marks if e.get("cat") == GPU_STEP_CATEGORY), key=lambda e: e["ts"])[
        skip : skip + steps
    ]
    start = host[0]["ts"]
    end = max(e["ts"] + e["dur"] for e in host + gpu)
    kept_marks = {id(e) for e in host + gpu}
    kept = [
        e
        for e in trace["traceEvents"]
        if e.get("ph") == "X"
        and "dur" in e
        and start <= e["ts"]
        and e["ts"] + e["dur"] <= end
        and (not str(e.get("name", "")).startswith(STEP_PREFIX) or id(e) in kept_marks)
    ]
    return {key: value for key, value in trace.items() if key != "traceEvents"} | {"traceEvents": kept}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--skip", type=int, default=0)
    args = parser.parse_args()
    trimmed = trim(load_trace(args.source), args.steps, args.skip)
    args.target.write_bytes(gzip.compress(json.dumps(trimmed, separators=(",", ":")).encode(), 9))


if __name__ == "__main__":
    main()
