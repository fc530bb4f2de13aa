"""Launch overhead: how fast this host issues GPU work, one small kernel at a time.

A training step made of many small kernels runs at the rate the host issues them, not at the GPU's. The
profiler counted ~3,700 launches a step for `guide` and ~1,400 for `optimized`'s eager step, with a 10 µs
median kernel (docs/benchmarks/2026-12-04-h200-encoder-k). On two hosts with the same H100, `guide` ran 491
and 845 samples/s plain (docs/benchmarks/2026-12-06-h100-rdrop-recipes): the GPU work was the same, the
host was not. This bench puts a number on the host:

- ``eager``: a one-element in-place add, issued back to back from Python through PyTorch's dispatcher.
  The host clock times the issuing alone (no synchronisation inside a batch; a batch is shorter than
  CUDA's launch queue, so the host never waits for the GPU). That is what each small kernel of an eager
  step costs the host: the floor under an eager step's time per launch. The wall time per op, the kernels
  run and finished, goes beside it (``extra.wall_us_per_op``).
- ``graph``: the same adds recorded as one CUDA graph of ``GRAPH_OPS`` kernels and replayed, timed with
  CUDA events: the time per kernel once the host is out of the way (one launch a replay;
  ``extra.host_us_per_replay`` is what a replay costs the host).
- With ``--device cpu`` only ``eager``, on a CPU tensor: PyTorch's dispatch overhead without a device
  (it then includes the add itself).

Each value is operations per second (higher is better), ``extra.us_per_op`` the same in microseconds;
the median and spread are over timed batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dgxperf.bench.base import BenchError, Measurement, Timing, time_gpu
from dgxperf.bench.device import Device

KINDS = ("eager", "graph")
# Under CUDA's launch queue (about a thousand pending kernels): a batch is issued without the host
# blocking on a full queue, so the host clock times issuing alone.
EAGER_INNER = 500
GRAPH_OPS = 100
GRAPH_REPLAYS = 20


def issue_times(
    op: Callable[[], object], sync: Callable[[], None], *, batches: int, inner: int
) -> tuple[list[float], list[float]]:
    """Seconds per op to issue ``inner`` calls of ``op`` (host clock), and to have them done (host clock,
    after ``sync``), per batch, after one warm-up batch."""
    if batches < 1 or inner < 1:
        raise BenchError(f"batches and ops per batch must be at least 1, not {batches} and {inner}")
    for _ in range(inner):
        op()
    sync()
    issued: list[float] = []
    done: list[float] = []
    for _ in range(batches):
        began = time.perf_counter()
        for _ in range(inner):
            op()
        after_issue = time.perf_counter()
        sync()
        finished = time.perf_counter()
        issued.append((after_issue - began) / inner)
        done.append((finished - began) / inner)
    return issued, done


def measure_eager(device: Device, *, batches: int, inner: int = EAGER_INNER) -> Measurement:
    import torch

    value = torch.zeros(1, device=device.torch_device)

    def op() -> object:
        return value.add_(1.0)

    def sync() -> None:
        if device.cuda:
            torch.cuda.synchronize(device.index)

    issued, done = issue_times(op, sync, batches=batches, inner=inner)
    timing = Timing.of(issued, inner)
    return Measurement(
        bench="launch",
        name="eager launch" if device.cuda else "eager dispatch (CPU)",
        params={"kind": "eager", "op": "add_ on 1 element", "ops_per_batch": inner},
        value=1.0 / timing.median_s,
        unit="ops/s",
        timing=timing,
        extra={
            "us_per_op": round(timing.median_s * 1e6, 3),
            "wall_us_per_op": round(Timing.of(done, inner).median_s * 1e6, 3),
        },
    )


def measure_graph(
    device: Device, *, batches: int, ops: int = GRAPH_OPS, replays: int = GRAPH_REPLAYS
) -> Measurement:
    import torch

    if not device.cuda:
        raise BenchError("the graph launch test records a CUDA graph: it needs a GPU")
    value = torch.zeros(1, device=device.torch_device)
    stream = torch.cuda.Stream(device.index)
    stream.wait_stream(torch.cuda.current_stream(device.index))
    with torch.cuda.stream(stream):  # CUDA graphs are warmed up on a side stream, as PyTorch's docs do
        for _ in range(3):
            value.add_(1.0)
    torch.cuda.current_stream(device.index).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(ops):
            value.add_(1.0)
    per_replay = time_gpu(lambda _: graph.replay(), warmup=3, batches=batches, inner=replays, cuda=True)
    host, _ = issue_times(
        graph.replay, lambda: torch.cuda.synchronize(device.index), batches=batches, inner=replays
    )
    timing = Timing(
        median_s=per_replay.median_s / ops,
        p10_s=per_replay.p10_s / ops,
        p90_s=per_replay.p90_s / ops,
        min_s=per_replay.min_s / ops,
        max_s=per_replay.max_s / ops,
        batches=per_replay.batches,
        inner=replays * ops,
    )
    return Measurement(
        bench="launch",
        name=f"CUDA graph of {ops} kernels",
        params={
            "kind": "graph",
            "op": "add_ on 1 element",
            "kernels_per_graph": ops,
            "replays_per_batch": replays,
        },
        value=1.0 / timing.median_s,
        unit="ops/s",
        timing=timing,
        extra={
            "us_per_op": round(timing.median_s * 1e6, 3),
            "host_us_per_replay": round(Timing.of(host, replays).median_s * 1e6, 3),
        },
    )


def run(device: Device, *, batches: int = 10, progress: Any = None) -> list[Measurement]:
    """``eager`` on any device, and ``graph`` on a GPU."""
    kinds = KINDS if device.cuda else ("eager",)
    results = []
    for kind in kinds:
        results.append(
            measure_eager(device, batches=batches)
            if kind == "eager"
            else measure_graph(device, batches=batches)
        )
        if progress:
            progress(len(results), len(kinds), f"launch {kind}")
    return results


def summarise(measurements: list[Measurement]) -> dict[str, Any]:
    """Microseconds per op by kind, with the eager wall time and the graph's host cost a replay."""
    summary: dict[str, Any] = {}
    for m in measurements:
        summary[m.params["kind"]] = {"us_per_op": m.extra["us_per_op"]} | {
            k: m.extra[k] for k in ("wall_us_per_op", "host_us_per_replay") if k in m.extra
        }
    return summary
