"""Where a training step's time goes: torch.profiler over a few optimizer steps, read back from its trace.

``--set profile_steps=N`` profiles N optimizer steps after ``profile_after`` others (compilation and
warm-up come first), writes the Chrome/Perfetto trace to ``profile/trace.json.gz`` in the run folder,
and puts :func:`summarize_trace`'s answer in ``result.json``. The summary reads only the trace, as Holistic
Trace Analysis does, so it works on any PyTorch profiler trace (``dgxperf.train.trace.load_trace``):

- ``step_ms``: wall time of the host's ``ProfilerStep#`` marks (median, min, max);
- ``gpu_busy_share``: the share of the steps' wall time in which some kernel, copy or memset ran (the
  union over streams, so overlapping kernels count once), over the GPU timeline's copy of the step marks
  where the trace has one. Under 1 the GPU waited for the host. ``gpu_busy_share_steps``: the same for
  each step (batches of different lengths differ);
- ``gpu_lag_ms``: how long after the host's step mark the GPU's begins (median). Near 0, the GPU waits
  for each launch (host bound); tens of ms, the host runs ahead and the GPU is the limit;
- ``bound``: ``host``, ``gpu`` or ``mixed``, from the two above (:func:`bound`);
- ``launches_per_step``: kernel launch calls (``cudaLaunchKernel``, ``cuLaunchKernel``, graph launches);
  ``graph_launches_per_step``: the CUDA-graph replays among them (``cudaGraphLaunch``: one a step when the
  whole step is a graph, ``cuda_graphs=true``);
  ``median_kernel_us``: how long a kernel runs. Many short kernels and a GPU that waits: launch bound;
- ``sync_ms_per_step``: host time in ``cuda*Synchronize`` calls: a step that waits on the GPU on purpose,
  or a copy from unpinned memory, which waits for the work before it (free when the step is GPU bound);
- ``fp32_gemm_share``: the share of the steps' kernel time in fp32 GEMMs on the CUDA cores rather than the
  tensor cores (:func:`is_fp32_gemm`): TF32 off and no autocast, as `baseline` runs;
- ``kernel_classes``: the steps' kernel time by what the kernels do (:func:`kernel_class`: GEMMs, attention,
  elementwise and norms, copies and casts, optimizer, communication), largest first, each in ms a step and
  as a share of the kernel time. On a GPU-bound step it says what the GPU's time went to, and so which lever
  is left (as Holistic Trace Analysis's kernel breakdown does). Each class names its three largest kernels
  (``kernels``, Inductor's numbered copies of one fusion summed: :func:`kernel_family`): which fusion the
  elementwise time goes to, say;
- ``elementwise_groups``: the elementwise class split by what its kernels fuse, read from their names
  (:func:`elementwise_group`: activations, dropout with residual adds and norms, concatenations, other), in
  ms a step and as a share of the class: how much a change to one of them (a bf16 residual stream, say) can win;
- ``top_cpu_ops`` and ``top_kernels``: self time per step of the host's operators, time per step of the
  GPU's kernels.

With the cost of one launch on the host that recorded the trace (``dgxperf bench launch``'s eager figure),
:func:`launch_floor` says how much of a step the launches alone take: the host time no faster GPU can remove,
and what CUDA graphs (one launch a step) would.

The profiled steps run slower than unprofiled ones (the profiler records every call): compare throughput
from a run without it.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

TRACE_FILE = "trace.json.gz"
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
API_CATEGORIES = ("cuda_runtime", "cuda_driver")
STEP_PREFIX = "ProfilerStep#"
GPU_STEP_CATEGORY = "gpu_user_annotation"
TOP = 8
TOP_PER_CLASS = 3
_INDUCTOR_KERNEL = re.compile(r"^(triton_(?:poi|per|red)_.+)_\d+$")
_GRAPH_IDS = ((re.compile(r"CompiledFxGraph [0-9a-z]+"), "CompiledFxGraph"),
              (re.compile(r"Torch-Compiled Region: \d+/\d+"), "Torch-Compiled Region"))  # fmt: skip


class TraceError(Exception):
    """A trace file that cannot be read or holds no profiled step."""


def load_trace(path: Path) -> dict[str, Any]:
    """A Chrome trace as torch.profiler exports it (``.json`` or ``.json.gz``)."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        trace = json.loads(raw)
    except (OSError, ValueError, EOFError) as exc:
        raise TraceError(f"{path}: not a readable trace ({exc})") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError(f"{path}: no traceEvents list (not a PyTorch profiler trace)")
    return trace


def _complete_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    events = []
    for event in trace["traceEvents"]:
        if isinstance(event, dict) and event.get("ph") == "X" and "ts" in event and "dur" in event:
            events.append(event)
    return events


def _busy_us(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Length of the union of ``intervals`` clipped to [start, end]."""
    clipped = sorted((max(s, start), min(e, end)) for s, e in intervals if e > start and s < end)
    busy, reach = 0.0, start
    for s, e in clipped:
        if e > reach:
            busy += e - max(s, reach)
            reach = e
    return busy


def _is_launch(name: str) -> bool:
    return "LaunchKernel" in name or "GraphLaunch" in name or name.startswith("cuLaunch")


def is_fp32_gemm(name: str) -> bool:
    """A GEMM kernel that multiplies in fp32 on the CUDA cores (FFMA), not on the tensor cores. cuBLAS and
    CUTLASS name them ``*sgemm*`` (``cutlass_80_simt_sgemm_*``) or ``*gemm_f32f32_f32f32_*_ffma_*``; their
    TF32 kernels say ``tf32``. The two kinds ran 83% of `baseline`'s kernel time on an H100 (fp32, TF32
    off), and no kernel of the bf16 or fp16 recipes' traces is one (tests/data/train/profile/)."""
    lower = name.lower()
    return (
        "gemm" in lower
        and "tf32" not in lower
        and any(k in lower for k in ("sgemm", "ffma", "f32f32_f32f32"))
    )


# (class, words any of which in a kernel's lower-cased name puts it there), tried in this order: an attention
# kernel's name can hold "gemm" (wgmma), a cast's "copy", so the narrower classes come first
KERNEL_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("communication", ("nccl",)),
    ("attention", ("fmha", "flash", "sdpa", "attention", "cudnn::fusion")),
    # the fused optimizer, and the foreach kernels of grad clipping and GradScaler's unscale
    ("optimizer", ("multi_tensor_apply", "fusedoptim", "fused_adam")),
    ("gemm", ("gemm", "nvjet", "cutlass", "splitkreduce", "xmma")),
    ("copy", ("copy_kernel", "direct_copy", "batchedcopy", "fillfunctor")),
)
_PURE_CAST = re.compile(r"^triton_\w+_fused__to_copy_\d+$")  # an Inductor kernel that only casts


def kernel_class(name: str) -> str:
    """What a kernel does, from its name: ``communication``, ``attention``, ``optimizer``, ``gemm``,
    ``copy`` (copies, casts and fills), else ``elementwise`` (activations, dropout, norms, reductions,
    Inductor's fused kernels). Names as cuBLAS (``nvjet_*``, ``*gemm*``), cuDNN's and PyTorch's attention,
    ATen and Inductor (``triton_*``) give them; the real traces' kernels are classed in tests/train/."""
    lower = name.lower()
    for label, words in KERNEL_CLASSES:
        if any(word in lower for word in words):
            return label
    return "copy" if _PURE_CAST.match(lower) else "elementwise"


def kernel_family(name: str) -> str:
    """An Inductor kernel's name without its trailing number (``triton_poi_fused_gelu_view_8`` and ``_9`` are
    ``triton_poi_fused_gelu_view``): Inductor numbers the kernels of each graph it compiles, so one fusion
    compiled for several block shapes, or in several graphs, has several names. Other kernels keep theirs."""
    match = _INDUCTOR_KERNEL.match(name)
    return match.group(1) if match else name


# what an elementwise kernel fuses, from words in its name (Inductor's fusions name their ops, as ATen's
# kernels do theirs); the first group that matches wins, so a GELU fused with a dropout counts as activation
ELEMENTWISE_GROUPS = (
    ("activation", re.compile(r"gelu|silu|swish|relu|sigmoid|tanh")),
    ("dropout_residual_norm", re.compile(r"dropout|layer_norm|rms_norm|group_norm|batch_norm")),
    ("concatenation", re.compile(r"(?:^|_)cat(?:_|$)")),
)


def elementwise_group(name: str) -> str:
    """What an elementwise kernel fuses: ``activation``, ``dropout_residual_norm`` (dropout, the residual adds
    Inductor fuses with it, and norms), ``concatenation`` (e.g. a fused QKV projection's gradient) or
    ``other``."""
    lower = kernel_family(name).lower()
    return next((label for label, words in ELEMENTWISE_GROUPS if words.search(lower)), "other")


def _elementwise_groups(kernel_time: dict[str, float], steps: int) -> list[dict[str, Any]]:
    by_group: dict[str, float] = defaultdict(float)
    for name, us in kernel_time.items():
        if kernel_class(name) == "elementwise":
            by_group[elementwise_group(name)] += us
    total = sum(by_group.values())
    return [
        {"group": label, "ms_per_step": round(us / 1e3 / steps, 3), "share": round(us / total, 4)}
        for label, us in sorted(by_group.items(), key=lambda item: -item[1])
    ]


def _largest(
    times: dict[str, float], steps: int, count: int, field: str = "ms_per_step"
) -> list[dict[str, Any]]:
    """The ``count`` largest of ``times`` (µs over the steps by name), in ms a step under ``field``, largest
    first."""
    ranked = sorted(times.items(), key=lambda item: -item[1])[:count]
    return [{"name": name[:120], field: round(us / 1e3 / steps, 3)} for name, us in ranked]


def _class_times(kernel_time: dict[str, float], steps: int) -> list[dict[str, Any]]:
    by_class: dict[str, float] = defaultdict(float)
    by_family: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, us in kernel_time.items():
        label = kernel_class(name)
        by_class[label] += us
        by_family[label][kernel_family(name)] += us
    total = sum(by_class.values())
    return [
        {
            "class": label,
            "ms_per_step": round(us / 1e3 / steps, 3),
            "share": round(us / total, 4),
            "kernels": _largest(by_family[label], steps, TOP_PER_CLASS),
        }
        for label, us in sorted(by_class.items(), key=lambda item: -item[1])
    ]


def _op_name(name: str) -> str:
    """An operator's name, with torch.compile's per-graph ids dropped (``## Call CompiledFxGraph f3k… ##``,
    ``Torch-Compiled Region: 0/4``): each compiled graph (per block shape, forward and backward) has its
    own, and what matters is their time together."""
    for pattern, plain in _GRAPH_IDS:
        name = pattern.sub(plain, name)
    return name


def _self_times(ops: list[dict[str, Any]]) -> dict[str, float]:
    """Self time (µs) per operator name: each op's duration less that of the ops nested in it, per thread."""
    per_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for op in ops:
        per_thread[(op.get("pid"), op.get("tid"))].append(op)
    totals: dict[str, float] = defaultdict(float)
    for thread_ops in per_thread.values():
        thread_ops.sort(key=lambda op: (float(op["ts"]), -float(op["dur"])))
        stack: list[list[Any]] = []  # [end, name, self time so far]
        for op in thread_ops:
            start, dur = float(op["ts"]), float(op["dur"])
            while stack and stack[-1][0] <= start:
                _, name, own = stack.pop()
                totals[name] += own
            if stack:
                stack[-1][2] -= dur  # the parent did not spend this time itself
            stack.append([start + dur, _op_name(str(op["name"])), dur])
        for _, name, own in stack:
            totals[name] += own
    return totals


def _step_marks(events: list[dict[str, Any]], gpu: bool) -> list[tuple[float, float]]:
    """The ``ProfilerStep#`` spans, sorted: the host's (``user_annotation``), or with ``gpu`` the copies
    that a CUDA trace also holds on the GPU's timeline (``gpu_user_annotation``)."""
    return sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in events
        if str(e.get("name", "")).startswith(STEP_PREFIX) and (e.get("cat") == GPU_STEP_CATEGORY) == gpu
    )


def summarize_trace(trace: dict[str, Any], drop_last: bool = False) -> dict[str, Any]:
    """The summary described in the module docstring; raises TraceError when the trace has no step mark.
    ``drop_last``: the last mark is not a whole step (profiling stopped inside it, after training)."""
    events = _complete_events(trace)
    steps = _step_marks(events, gpu=False)
    gpu_steps = _step_marks(events, gpu=True)
    if drop_last:
        steps, gpu_steps = steps[:-1], gpu_steps[:-1]
    if not steps:
        raise TraceError("the trace has no ProfilerStep# marks: profile with a schedule and call step()")
    start, end = steps[0][0], steps[-1][1]
    # the GPU runs behind the host: its busy share is measured over its own copy of the step marks
    gpu_start, gpu_end = (gpu_steps[0][0], gpu_steps[-1][1]) if gpu_steps else (start, end)

    def inside(event: dict[str, Any]) -> bool:
        return start <= float(event["ts"]) < end

    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    gpu_intervals = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu]
    api = [e for e in events if e.get("cat") in API_CATEGORIES and inside(e)]
    kernels = [e for e in gpu if e.get("cat") == "kernel" and inside(e)]
    ops = [e for e in events if e.get("cat") == "cpu_op" and inside(e)]
    count = len(steps)
    wall = [(e - s) / 1e3 for s, e in steps]

    launches, graph_launches = [], []
    for s, e in steps:
        called = [str(a["name"]) for a in api if s <= float(a["ts"]) < e]
        launches.append(sum(1 for name in called if _is_launch(name)))
        graph_launches.append(sum(1 for name in called if "GraphLaunch" in name))
    kernel_time: dict[str, float] = defaultdict(float)
    for k in kernels:
        kernel_time[str(k["name"])] += float(k["dur"])
    sync_us = sum(float(a["dur"]) for a in api if "Synchronize" in str(a["name"]))
    kernel_us = sum(kernel_time.values())
    fp32_gemm_us = sum(us for name, us in kernel_time.items() if is_fp32_gemm(name))
    self_times = _self_times(ops)
    busy_share = (
        round(_busy_us(gpu_intervals, gpu_start, gpu_end) / (gpu_end - gpu_start), 4) if gpu else None
    )
    lag_ms = (
        round(statistics.median(g[0] - h[0] for h, g in zip(steps, gpu_steps, strict=False)) / 1e3, 2)
        if gpu_steps
        else None
    )
    return {
        "steps": count,
        "step_ms": round(statistics.median(wall), 3),
        "step_ms_min": round(min(wall), 3),
        "step_ms_max": round(max(wall), 3),
        "gpu_busy_share": busy_share,
        "gpu_busy_share_steps": [round(_busy_us(gpu_intervals, s, e) / (e - s), 2) for s, e in gpu_steps]
        if gpu and gpu_steps
        else None,
        "gpu_lag_ms": lag_ms,
        "bound": bound(busy_share, lag_ms),
        "launches_per_step": statistics.median(launches) if api else None,
        "graph_launches_per_step": statistics.median(graph_launches) if api else None,
        "median_kernel_us": round(statistics.median(float(k["dur"]) for k in kernels), 2)
        if kernels
        else None,
        "sync_ms_per_step": round(sync_us / 1e3 / count, 3) if api else None,
        "fp32_gemm_share": round(fp32_gemm_us / kernel_us, 4) if kernel_us else None,
        "kernel_classes": _class_times(kernel_time, count) if kernel_us else [],
        "elementwise_groups": _elementwise_groups(kernel_time, count),
        "top_cpu_ops": _largest(self_times, count, TOP, field="self_ms_per_step"),
        "top_kernels": _largest(kernel_time, count, TOP),
    }


def launch_floor(summary: dict[str, Any], launch_us: float) -> dict[str, Any] | None:
    """The host time a step's launches take at ``launch_us`` each, and its share of the step; None for a trace
    without launch calls (no CUDA API events) or step time."""
    launches, step_ms = summary.get("launches_per_step"), summary.get("step_ms")
    if launches is None or not step_ms:
        return None
    ms = launches * launch_us / 1e3
    return {"launch_us": launch_us, "ms_per_step": round(ms, 3), "share_of_step": round(ms / step_ms, 3)}


def bound(busy_share: float | None, lag_ms: float | None) -> str | None:
    """What limits the profiled steps: ``gpu`` when the GPU is busy at least 90% of them; ``host`` when it
    is busy under 80% and starts each step within 2 ms of the host (it waits for launches, not for work
    queued ahead); else ``mixed`` (some steps one, some the other, as at a batch that sits on the edge);
    None without GPU activity or GPU step marks. On the H200: `optimized` at batch 128 host, at 256 mixed
    over ten steps and gpu over the last seven (``2026-12-04-h200-encoder-k``)."""
    if busy_share is None or lag_ms is None:
        return None
    if busy_share >= 0.9:
        return "gpu"
    if busy_share < 0.8 and lag_ms < 2:
        return "host"
    return "mixed"


class StepProfiler:
    """torch.profiler over optimizer steps ``after + 1 .. after + steps`` (one unrecorded warm-up step in
    between, as torch's schedule wants); call :meth:`step` after every optimizer step and :meth:`finish`
    once training ends. Only the process that writes the result profiles."""

    def __init__(self, out_dir: Path, steps: int, after: int, cuda: bool) -> None:
        import torch.profiler as tp

        self.out_dir = out_dir
        self.path = out_dir / TRACE_FILE
        self.summary: dict[str, Any] | None = None
        self._stopped_early = False
        activities = [tp.ProfilerActivity.CPU] + ([tp.ProfilerActivity.CUDA] if cuda else [])
        self._profiler = tp.profile(
            activities=activities,
            schedule=tp.schedule(wait=after, warmup=1, active=steps, repeat=1),
            on_trace_ready=self._ready,
            acc_events=True,  # one cycle (repeat=1), so nothing accumulates; it silences torch's warning
        )
        self._profiler.start()
        self._steps = steps
        self._after = after

    def _ready(self, profiler: Any) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(self.path))
        try:
            # stopped by finish(): the last mark runs from the last optimizer step to the stop, not a step
            self.summary = summarize_trace(load_trace(self.path), drop_last=self._stopped_early)
        except TraceError as exc:
            self.summary = {"error": str(exc)}

    def step(self) -> None:
        self._profiler.step()

    def finish(self) -> dict[str, Any]:
        """The summary, with the trace's path; or why there is none (the run ended first)."""
        self._stopped_early = True  # had the profiled steps all run, the trace would be written already
        self._profiler.stop()
        if self.summary is None:
            return {
                "error": f"the run ended before step {self._after + 2}, where the {self._steps} profiled "
                "steps begin: lower profile_after",
                "requested_steps": self._steps,
                "trace": None,
            }
        return {**self.summary, "requested_steps": self._steps, "trace": str(self.path)}


COMPARED = (
    "step_ms",
    "gpu_busy_share",
    "gpu_lag_ms",
    "launches_per_step",
    "graph_launches_per_step",
    "median_kernel_us",
    "sync_ms_per_step",
    "fp32_gemm_share",
)


def compare_summaries(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Two summaries side by side (``dgxperf trace BEFORE AFTER``): each figure of both with after/before,
    and the busiest host operators of either by name. An operator outside one summary's top list has no
    figure there (None): the summary keeps only the top ones."""
    figures = []
    for key in COMPARED:
        a, b = before.get(key), after.get(key)
        ratio = round(b / a, 3) if isinstance(a, int | float) and isinstance(b, int | float) and a else None
        figures.append({"figure": key, "before": a, "after": b, "ratio": ratio})
    ops = _side_by_side(before, after, "top_cpu_ops", "name", "self_ms_per_step", missing=None)
    # a class one trace ran none of is 0 there; a summary without classes (older) gives no rows at all
    classes = (
        _side_by_side(before, after, "kernel_classes", "class", "ms_per_step", missing=0.0)
        if before.get("kernel_classes") and after.get("kernel_classes")
        else []
    )
    groups = (
        _side_by_side(before, after, "elementwise_groups", "group", "ms_per_step", missing=0.0)
        if before.get("elementwise_groups") and after.get("elementwise_groups")
        else []
    )
    return {"figures": figures, "kernel_classes": classes, "elementwise_groups": groups, "top_cpu_ops": ops}


def _side_by_side(
    before: dict[str, Any], after: dict[str, Any], key: str, label: str, value: str, missing: float | None
) -> list[dict[str, Any]]:
    """The rows of both summaries' ``key`` list matched by ``label``, largest ``value`` first; ``missing``
    where one summary has no such row."""
    mine = {row[label]: row[value] for row in before.get(key) or []}
    theirs = {row[label]: row[value] for row in after.get(key) or []}
    names = sorted(set(mine) | set(theirs), key=lambda n: -max(mine.get(n, 0), theirs.get(n, 0)))
    return [{label: n, "before": mine.get(n, missing), "after": theirs.get(n, missing)} for n in names]
