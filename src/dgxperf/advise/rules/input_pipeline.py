"""Input-pipeline rules: the GPU waits for data.

- :class:`UtilSwing` is guide A §6.1's symptom, "GPU utilisation swinging between 30 % and 90 %", with
  its fix: more DataLoader workers, ``pin_memory=True`` with ``non_blocking=True``.
- :class:`CpuBound` (dgxperf's): the GPU idles while the host CPU is saturated, so more workers will not
  help; the preprocessing itself has to get cheaper or move to the GPU.
- :class:`IoWait` (dgxperf's, on guide B §4.1's "storage I/O wait" panel): the CPUs wait on storage;
  ``dgxperf doctor --area storage`` checks the fixes both guides give (scheduler ``none``, ``noatime``).

A limit of 1 Hz telemetry, stated here because it shapes the thresholds: NVML's utilization.gpu is the
share of the last sample period in which a kernel ran, so stalls much shorter than the sampling interval
average out into a steady 60-70 % rather than a swing. The swing rule therefore asks for repeated
low-to-high cycles, not just a wide spread, so that a job that starts (idle, then busy) does not fire it;
and asks for them several times a minute, so that a recording of jobs run one after another, each starting
up and evaluating between epochs, does not fire it either
(``tests/data/h100/monitor/two-fine-tunes.jsonl``, ``sequential-fine-tunes.jsonl``).

Per-tick host CPU readings have a like limit, and it sets :class:`CpuBound`'s threshold at 80 %, not 90 %,
measured on the H200's host (16 cores, ``tests/data/h200/monitor/cpu-bound.jsonl``): 16 pool processes
burning Python on all 16 cores, the GPU holding 4.7 GiB at 0 % utilisation, read 79.9-95.1 % busy per
tick (mean 87.6 % over the 19 working ticks), because each tick's /proc/stat delta includes the gaps
between the pool's rounds of tasks. Only 5 of its 24 ticks reached 90 % (21 %, short of the rule's half),
while 18 reached 80 % (75 %). No other H200 recording comes near: the highest host reading in any of the
others is 25.7 % (one tick of the bf16 + compile training run), most sit at 0-7 %. The first take of that
workload (``cpu-bound-small-job.jsonl``: 75-89 %, 0.67 GiB on the GPU) fires too, since its process is
listed on the GPU (see :func:`job_on_gpu`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dgxperf.advise.base import GiB, Rule, Suggestion, Thresholds, Window, fmt_gpus, gather, threshold

INPUT_ACTIONS = (
    "dgxperf train --set num_workers=8 --set pin_memory=true --set non_blocking=true",
    "DataLoader(ds, batch_size=..., num_workers=8, pin_memory=True, persistent_workers=True, prefetch_factor=4)",
    "x = x.to('cuda', non_blocking=True)  # with pinned memory the copy overlaps compute",
    "nvidia-smi dmon -s pucvmet  # guide A §6.1: watch power, utilisation, clocks while it trains",
)


def swing_cycles(values: list[float], low: float, high: float) -> int:
    """How many times the series climbs from below ``low`` to above ``high`` (hysteresis: a value between
    the two keeps the previous state, so jitter around one level does not count)."""
    cycles, state = 0, None
    for v in values:
        if v < low:
            state = "low"
        elif v > high:
            if state == "low":
                cycles += 1
            state = "high"
    return cycles


@dataclasses.dataclass(frozen=True)
class UtilSwingThresholds(Thresholds):
    low_pct: float = threshold(
        40.0, unit="%", doc="Guide A's swing reaches ~30 %: fires when the 10th percentile is below this ..."
    )
    high_pct: float = threshold(
        85.0, unit="%", doc="... the 90th percentile is above this (guide A: ~90 %) ..."
    )
    min_cycles: int = threshold(
        3,
        unit="count",
        doc="... and utilisation climbs from below low_pct to above high_pct this many times ...",
    )
    min_cycles_per_min: float = threshold(
        6.0,
        unit="per minute",
        doc=(
            "... at least this often (a stall every 10 s or sooner). Jobs that start, evaluate and stop one "
            "after another climb too: fine-tunes of 5-s epochs on an H100, each a process of ~50 s, climbed "
            "3 times each, 6 times in 90 s for two (4.0 a minute) and 8 in 202 s for four; the input-starved "
            "loop climbed 6 times in 23 s (15.6 a minute)."
        ),
    )
    min_samples: int = threshold(10, unit="count", doc="Judge a GPU only with at least this many readings.")


class UtilSwing(Rule[UtilSwingThresholds]):
    """Guide A §6.1: GPU utilisation swinging between ~30 % and ~90 % -> the input pipeline stalls it."""

    id = "input.util_swing"
    title = "GPU utilisation swings: the input pipeline stalls the GPU (guide A's rule)"
    guide = "A §6.1"
    origin = "guide"
    needs = ("gpu_util_pct",)
    # When the GPU's own process keeps a core busy the swing is its host work, launches or batches made in
    # the process, and launch.host_bound says so with the workers among its fixes: an eager `optimized` on
    # the H200 swung 6 times in a minute with its process at one core (encoder K's call4-seeds.jsonl).
    suppressed_by = ("launch.host_bound",)

    @classmethod
    def default_thresholds(cls) -> UtilSwingThresholds:
        return UtilSwingThresholds()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        fired: dict[int, float] = {}
        cycles: dict[int, int] = {}
        for i in self.gpus(window):
            values = window.values("gpu_util_pct", i)
            stats = window.stats("gpu_util_pct", i)
            if stats is None or len(values) < t.min_samples:
                continue
            n = swing_cycles(values, t.low_pct, t.high_pct)
            often = n * 60 >= t.min_cycles_per_min * max(window.duration_s, 1.0)
            if stats.p10 < t.low_pct and stats.p90 > t.high_pct and n >= t.min_cycles and often:
                fired[i], cycles[i] = stats.p90 - stats.p10, n
        if not fired:
            return []
        gpus = tuple(fired)
        evidence = gather(
            window,
            gpus,
            ("gpu_util_pct", "sm_active_pct", "pcie_rx_bytes_per_s"),
            host=("cpu_util_pct", "iowait_pct"),
            values={"swing_cycles": min(cycles.values()), "low_pct": t.low_pct, "high_pct": t.high_pct},
        )
        util = evidence.metrics["gpu_util_pct"]
        gain = util.p90 / util.mean if util.mean > 0 else float("inf")
        return [
            self.suggest(
                severity="warn",
                why=(
                    f"{fmt_gpus(gpus)}: utilisation swings between {util.p10:.0f}% (p10) and {util.p90:.0f}% "
                    f"(p90), climbing from below {t.low_pct:g}% to above {t.high_pct:g}% {min(cycles.values())} times "
                    f"in {window.duration_s:.0f} s: the GPU computes a batch, then waits for the next one "
                    "(guide A §6.1)."
                ),
                evidence=evidence,
                fix=(
                    "Feed the GPU ahead of time: more DataLoader workers (guide A: CPU cores x 2; more than "
                    "the cores per GPU rank rarely helps), pinned host memory and asynchronous copies."
                ),
                actions=INPUT_ACTIONS,
                expected_effect=(
                    f"GPU busy time up to ~{util.p90:.0f}% (from a mean of {util.mean:.0f}%) if the input "
                    f"pipeline was the only stall: up to ~{gain:.1f}x the samples/s."
                ),
                score=max(fired.values()),
            )
        ]


@dataclasses.dataclass(frozen=True)
class CpuBoundThresholds(Thresholds):
    gpu_util_max_pct: float = threshold(
        50.0, unit="%", doc="A tick counts as GPU-starved when utilization.gpu is below this ..."
    )
    cpu_util_min_pct: float = threshold(
        80.0,
        unit="%",
        doc=(
            "... while the host CPU (all cores) is at least this busy. 80, not 90: on the H200's host, "
            "16 workers saturating all 16 cores (cpu-bound.jsonl) read 79.9-95.1 % per tick, 90 % or more "
            "in only 5 of 24 ticks; per-tick /proc/stat includes the gaps between the pool's task rounds."
        ),
    )
    min_share: float = threshold(
        0.5, unit="share", doc="Fires when at least this share of the window's ticks are such ticks ..."
    )
    job_fb_used_min_gib: float = threshold(
        2.0,
        unit="GiB",
        doc=(
            "... and a job holds the GPU: median framebuffer use above this (an idle H200 with a CUDA "
            "context holds 0.6 GiB), or processes listed on it."
        ),
    )


def job_on_gpu(window: Window, gpu: int, min_fb_gib: float) -> bool | None:
    """Does a job hold the GPU? ``None`` when the recording cannot say (no memory or process readings)."""
    if any(window.processes(gpu)):
        return True
    fb = window.stats("fb_used_bytes", gpu)
    if fb is None:
        return None
    return fb.p50 >= min_fb_gib * GiB


class CpuBound(Rule[CpuBoundThresholds]):
    """dgxperf's rule: the GPU idles while the host CPU is saturated -> data loading/preprocessing bound.

    "All cores" CPU use is a blunt signal on a 128-core node: a loader limited to 4 workers starves the
    GPU with the CPU 3 % busy. That case shows as a utilisation swing or low utilisation, not here; this
    rule is for the case where adding workers cannot help because there is no CPU left.
    """

    id = "input.cpu_bound"
    title = "GPU idle while the host CPU is saturated: preprocessing bound"
    guide = "A §6.1"
    origin = "dgxperf"
    needs = ("gpu_util_pct",)
    needs_host = ("cpu_util_pct",)

    @classmethod
    def default_thresholds(cls) -> CpuBoundThresholds:
        return CpuBoundThresholds()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        if not window.host_has("cpu_util_pct"):
            return []
        cpu = window.host_raw("cpu_util_pct")
        fired: dict[int, float] = {}
        masks: dict[int, list[bool]] = {}
        unknown_job: list[int] = []
        for i in self.gpus(window):
            job = job_on_gpu(window, i, t.job_fb_used_min_gib)
            if job is False:
                continue  # an idle GPU beside a busy CPU is someone else's CPU job, not a starved GPU
            util = window.raw("gpu_util_pct", i)
            starved = [
                u is not None and c is not None and u < t.gpu_util_max_pct and c >= t.cpu_util_min_pct
                for u, c in zip(util, cpu, strict=True)
            ]
            share = sum(starved) / len(starved) if starved else 0.0
            if share >= t.min_share:
                fired[i], masks[i] = share, starved
                if job is None:
                    unknown_job.append(i)
        if not fired:
            return []
        gpus = tuple(fired)
        values: dict[str, Any] = {
            "starved_share": min(fired.values()),
            "gpu_util_max_pct": t.gpu_util_max_pct,
            "cpu_util_min_pct": t.cpu_util_min_pct,
        }
        if unknown_job:
            values["job_presence"] = "not recorded (no memory or process readings): assumed"
        evidence = gather(
            window,
            gpus,
            ("gpu_util_pct", "fb_used_bytes"),
            host=("cpu_util_pct", "load1", "iowait_pct"),
            values=values,
        )
        idle = min(fired.values())
        return [
            self.suggest(
                severity="warn",
                why=(
                    f"{fmt_gpus(gpus)}: in {idle:.0%} of the ticks the GPU ran kernels less than "
                    f"{t.gpu_util_max_pct:g}% of the time while the host CPU was over {t.cpu_util_min_pct:g}% "
                    "busy: data loading and preprocessing cannot keep up, and there is no CPU left for "
                    "more DataLoader workers."
                ),
                evidence=evidence,
                fix=(
                    "Make preprocessing cheaper or move it off the CPU: tokenise/decode once and cache the "
                    "result, run augmentation on the GPU, cap intra-op threads per process so workers do "
                    "not fight, and look for other processes using the CPU."
                ),
                actions=(
                    "export DGXPERF_HOME=/local/nvme/dgxperf  "
                    "# dgxperf train caches encoded data under $DGXPERF_HOME/cache",
                    "export OMP_NUM_THREADS=$(( $(nproc) / <ranks per node> ))  "
                    "# one thread pool per rank, not per core",
                    "DataLoader(..., num_workers=<cores per rank - 1>)  # more workers than cores only adds switching",
                    "torchvision.transforms.v2 on CUDA tensors, or NVIDIA DALI, for image decode/augmentation",
                    "top -o %CPU  # find other processes on the node's CPUs",
                ),
                expected_effect=(
                    f"The GPU was starved in {idle:.0%} of the window: removing the CPU bottleneck gives up "
                    f"to ~{1 / max(1e-9, 1 - idle):.1f}x the samples/s if nothing else limits the step."
                    if idle < 1
                    else "The GPU was starved throughout: the whole step time is preprocessing."
                ),
                score=max(fired.values()),
            )
        ]


@dataclasses.dataclass(frozen=True)
class IoWaitThresholds(Thresholds):
    iowait_min_pct: float = threshold(
        10.0, unit="%", doc="Fires when the host's mean I/O wait (share of CPU time) is above this."
    )
    gpu_busy_pct: float = threshold(
        90.0,
        unit="%",
        doc="When the GPUs' mean utilisation is above this anyway, storage keeps up for now: info, not warn.",
    )


class IoWait(Rule[IoWaitThresholds]):
    """dgxperf's rule on guide B §4.1's storage I/O wait panel: high iowait -> storage bound."""

    id = "input.iowait"
    title = "High I/O wait: the data loader waits on storage"
    guide = "B §4.1"
    origin = "dgxperf"
    needs_host = ("iowait_pct",)

    @classmethod
    def default_thresholds(cls) -> IoWaitThresholds:
        return IoWaitThresholds()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        iowait = window.host_stats("iowait_pct")
        if iowait is None or not window.host_has("iowait_pct") or iowait.mean <= t.iowait_min_pct:
            return []
        gpus = window.gpus_with("gpu_util_pct")
        evidence = gather(
            window,
            gpus,
            ("gpu_util_pct",),
            host=("iowait_pct", "cpu_util_pct"),
            values={"iowait_min_pct": t.iowait_min_pct},
        )
        util = evidence.metrics.get("gpu_util_pct")
        starving = util is None or util.mean < t.gpu_busy_pct
        util_note = f"; the GPUs ran kernels {util.mean:.0f}% of the time" if util is not None else ""
        return [
            self.suggest(
                severity="warn" if starving else "info",
                why=(
                    f"The host's CPUs spent {iowait.mean:.0f}% of their time waiting for I/O (p90 "
                    f"{iowait.p90:.0f}%){util_note}: reading the training data is slow."
                ),
                evidence=evidence,
                fix=(
                    "Check the data disk's settings both guides give (I/O scheduler none, noatime, "
                    "nr_requests 1024) with dgxperf doctor; put the dataset on local NVMe or in memory; "
                    "read ahead with more workers and a larger prefetch."
                ),
                actions=(
                    "dgxperf doctor --area storage  "
                    "# scheduler none, rotational 0, nr_requests, noatime (A §2.2, B §2.3)",
                    "copy the dataset to local NVMe (or /dev/shm when it fits) before training",
                    "DataLoader(..., num_workers=8, prefetch_factor=4, persistent_workers=True)",
                    "pack small files into large shards (WebDataset tar, Parquet, one .npy per split)",
                ),
                expected_effect=(
                    f"GPU busy time up to ~{util.p90:.0f}% (the level of its busy stretches, from a mean of "
                    f"{util.mean:.0f}%) if storage was the only stall."
                    if util is not None and starving
                    else "The GPUs keep up for now; a larger model step or more GPUs will make storage the "
                    "bottleneck first."
                ),
                score=iowait.mean,
            )
        ]


RULES: tuple[type[Rule[Any]], ...] = (UtilSwing, CpuBound, IoWait)
