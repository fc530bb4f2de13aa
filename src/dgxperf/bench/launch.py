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

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from dgxperf.bench.base import BenchError, Measurement, Timing, time_gpu
from dgxperf.bench.device import Device

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
    return _per_op(
        "eager launch" if device.cuda else "eager dispatch (CPU)",
        {"kind": "eager", "op": "add_ on 1 element", "ops_per_batch": inner},
        Timing.of(issued, inner),
        wall_us_per_op=_us(Timing.of(done, inner).median_s),
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
    # one replay runs `ops` kernels: per kernel, every figure of the replay's timing divided by them
    per_kernel = dataclasses.replace(
        per_replay,
        **{f: getattr(per_replay, f) / ops for f in ("median_s", "p10_s", "p90_s", "min_s", "max_s")},
        inner=replays * ops,
    )
    return _per_op(
        f"CUDA graph of {ops} kernels",
        {"kind": "graph", "op": "add_ on 1 element", "kernels_per_graph": ops, "replays_per_batch": replays},
        per_kernel,
        host_us_per_replay=_us(Timing.of(host, replays).median_s),
    )


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _per_op(name: str, params: dict[str, Any], timing: Timing, **extra: float) -> Measurement:
    """A launch measurement: operations a second (higher is better), and the same as µs an op in ``extra``."""
    return Measurement(
        bench="launch",
        name=name,
        params=params,
        value=1.0 / timing.median_s,
        unit="ops/s",
        timing=timing,
        extra={"us_per_op": _us(timing.median_s), **extra},
    )


def run(device: Device, *, batches: int = 10, progress: Any = None) -> list[Measurement]:
    """``eager`` on any device, and ``graph`` on a GPU (:func:`skipped` says so on a CPU)."""
    tests = [measure_eager] + ([measure_graph] if device.cuda else [])
    results = []
    for test in tests:
        results.append(test(device, batches=batches))
        if progress:
            progress(len(results), len(tests), f"launch {results[-1].params['kind']}")
    return results


def skipped(device: Device) -> list[str]:
    """The notes for what :func:`run` leaves out on this device."""
    return (
        []
        if device.cuda
        else ["graph skipped: a CUDA graph needs a GPU; on a CPU eager times dispatch alone"]
    )


def summarise(measurements: list[Measurement]) -> dict[str, Any]:
    """Microseconds per op by kind, with the eager wall time and the graph's host cost a replay."""
    summary: dict[str, Any] = {}
    for m in measurements:
        summary[m.params["kind"]] = {"us_per_op": m.extra["us_per_op"]} | {
            k: m.extra[k] for k in ("wall_us_per_op", "host_us_per_replay") if k in m.extra
        }
    return summary
