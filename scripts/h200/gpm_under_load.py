"""Check that dgxperf's GPM sampler reads real activity: sample an idle GPU, then a bf16 GEMM loop, then
a memory-bound copy loop, and print the GPM metrics of each window as JSON.

Run on a Hopper GPU: PYTHONPATH=src python3 scripts/h200/gpm_under_load.py > gpm.json
"""

from __future__ import annotations

import json
import threading
import time

import torch

from dgxperf.hw.nvml import GpmSampler, nvml_session
from dgxperf.results import NA, to_jsonable


def busy(kind: str, stop: threading.Event) -> None:
    torch.cuda.set_device(0)
    if kind == "gemm":
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        while not stop.is_set():
            for _ in range(20):
                a @ b
            torch.cuda.synchronize()
    else:
        src = torch.randn(1 << 30, device="cuda", dtype=torch.float32)  # 4 GiB, far larger than L2
        dst = torch.empty_like(src)
        while not stop.is_set():
            for _ in range(10):
                dst.copy_(src)
            torch.cuda.synchronize()


def window(sampler: GpmSampler, seconds: float) -> object:
    sampler.prime()
    time.sleep(seconds)
    return sampler.read()[0]


def main() -> None:
    torch.ones(1, device="cuda")  # context up before the idle window
    out: dict[str, object] = {}
    with nvml_session() as nv:
        if isinstance(nv, NA):
            raise SystemExit(f"NVML: {nv.reason}")
        handles = nv.handles()
        assert not isinstance(handles, NA)
        sampler = GpmSampler(nv, handles[:1])
        out["idle"] = window(sampler, 1.0)
        for kind in ("gemm", "copy"):
            stop = threading.Event()
            worker = threading.Thread(target=busy, args=(kind, stop))
            worker.start()
            time.sleep(2.0)  # allocation and warm-up stay outside the window
            out[kind] = window(sampler, 2.0)
            stop.set()
            worker.join()
        sampler.close()
    print(json.dumps(to_jsonable(out), indent=1))


if __name__ == "__main__":
    main()
