"""Launch-bound rule: the training process's own CPU work, not the GPU, sets the pace.

:class:`HostBoundProcess` (dgxperf's): the GPU runs kernels only part of the time while the process that
holds it keeps at least one core busy. Small kernels, launched one by one from Python, leave the GPU
waiting for the next launch. That is guide A's recipe on the H200: batch 32, fp16 with a GradScaler, FP32
LayerNorm, no compile. It ran the GPU at ~57% utilisation, SM activity 33-60%, clocks at 1,980 MHz with
no throttling, and the host at 6.6-7.0% of 16 cores, i.e. about one core
(``docs/benchmarks/2026-12-04-h200-encoder-g/validate/recordings/guide.jsonl``). The same model at batch
128 with bf16, torch.compile and fused AdamW ran 3.6-4.4x its samples/s. Its rate also followed the host:
from one run to the next on one machine it went 623 → 497 samples/s while the GPU-bound fp32 recipe held
189-190. The first recordings that carried the process's CPU share (2026-12-04, encoder H) showed the
faster recipe is launch bound too: `optimized` at batch 128 with per-block compile kept the GPU ~50% busy
with its process at one core (``tests/data/h200/monitor/train-optimized-cpu.jsonl``). At batch 256 the GPU
was 93% busy over the epoch, against 75% at 128 in the same call, at 1.47x the samples/s
(``docs/benchmarks/2026-12-04-h200-encoder-i/``); the linear lr rule's 2e-4 fine-tuned worse there, hence
the square-root rule in the fix. Replaying the whole step as CUDA graphs (``cuda_graphs=true``) at batch 128
ran an epoch from scratch 1.60x faster than the eager step, with the same logged losses
(``docs/benchmarks/2026-12-05-h200-cuda-graphs/``); fine-tuned from an encoder on an H100 it gave the same
test answers 1.31-1.65x faster, with the GPU's SMs 86% active against 49-61% eager
(``docs/benchmarks/2026-12-05-h100-cuda-graphs-encoder/``), and ``optimized`` has replayed its step since.

The all-cores CPU share cannot see this (one core of 16 is 6%), so the rule reads the CPU share of the
processes on the GPU (``cpu_pct`` in each process entry, 100 = one core; :mod:`dgxperf.hw.proccpu`),
which recordings made since 2026-12-04 have; older ones say "not evaluated". The share is a whole-process
sum because PyTorch launches backward's kernels from an autograd thread and the rest from the main
thread. The two hand off, so neither thread alone reaches 100%.

A GPU-bound process can show ~100% too: CUDA's default synchronisation spins while it waits for the GPU.
But then the GPU is busy, so the rule asks for both: a partly idle GPU (utilisation under 80%) and a process
at one core or more. Ticks below 10% utilisation are not judged: compilation, evaluation set-up and
checkpoint writes keep the CPU busy with the GPU idle, and they are phases, not the training step's pace.
"""

from __future__ import annotations

import dataclasses
import datetime
import statistics
from collections.abc import Mapping
from typing import Any

from dgxperf.advise.base import Rule, Suggestion, Thresholds, Window, fmt_gpus, gather, threshold
from dgxperf.pace import PaceChange, pace_change

STEAL_NOTE_PCT = 5.0  # CPU steal worth a sentence: a host-bound step loses at least that share of its pace


@dataclasses.dataclass(frozen=True)
class HostBoundThresholds(Thresholds):
    gpu_util_max_pct: float = threshold(
        80.0, unit="%", doc="A judged tick counts when utilization.gpu is below this ..."
    )
    process_cpu_min_pct: float = threshold(
        90.0,
        unit="% of one core",
        doc="... while a process on the GPU used at least this much CPU (100 = one core, all threads summed).",
    )
    working_util_min_pct: float = threshold(
        10.0,
        unit="%",
        doc="Only ticks where the GPU runs kernels at least this much are judged (not set-up).",
    )
    min_share: float = threshold(
        0.5, unit="share", doc="Fires when at least this share of the judged ticks count."
    )
    min_ticks: int = threshold(15, unit="ticks", doc="Judge a GPU only with at least this many judged ticks.")


def process_cpu(processes: tuple[Mapping[str, Any], ...]) -> Mapping[str, Any] | None:
    """The process entry with the highest CPU share at one tick, or None when none has a reading."""
    measured = [p for p in processes if isinstance(p.get("cpu_pct"), int | float)]
    return max(measured, key=lambda p: float(p["cpu_pct"])) if measured else None


def process_cpu_gap(window: Window) -> tuple[str, ...]:
    """The "not evaluated" reason of a rule that reads the GPU processes' CPU share, when no tick has one."""
    if window.empty or any(
        process_cpu(procs) is not None for i in window.gpu_indices for procs in window.processes(i)
    ):
        return ()
    return ("process cpu_pct (dgxperf monitor records it since 2026-12-04, for the processes it can read)",)


class HostBoundProcess(Rule[HostBoundThresholds]):
    """Partly idle GPU, its process at one core or more -> launch-bound (dgxperf's rule)."""

    id = "launch.host_bound"
    title = "GPU waits for its process's CPU: kernel-launch (host) bound"
    guide = "A §7"
    origin = "dgxperf"
    needs = ("gpu_util_pct",)

    @classmethod
    def default_thresholds(cls) -> HostBoundThresholds:
        return HostBoundThresholds()

    def missing(self, window: Window) -> tuple[str, ...]:
        return (*super().missing(window), *process_cpu_gap(window))

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        fired: dict[int, float] = {}
        masks: dict[int, list[bool]] = {}
        counted: dict[int, list[Mapping[str, Any]]] = {}
        for i in self.gpus(window):
            judged = 0
            mask: list[bool] = []
            top: list[Mapping[str, Any]] = []
            for util, on_gpu in zip(window.raw("gpu_util_pct", i), window.processes(i), strict=True):
                proc = process_cpu(on_gpu)
                if util is None or proc is None or util < t.working_util_min_pct:
                    mask.append(False)
                    continue
                judged += 1
                hit = util < t.gpu_util_max_pct and float(proc["cpu_pct"]) >= t.process_cpu_min_pct
                mask.append(hit)
                if hit:
                    top.append(proc)
            if judged >= t.min_ticks and sum(mask) / judged >= t.min_share:
                fired[i], masks[i], counted[i] = sum(mask) / judged, mask, top
        if not fired:
            return []
        gpus = tuple(fired)
        procs = [p for i in gpus for p in counted[i]]
        cpu = statistics.median(float(p["cpu_pct"]) for p in procs)
        busiest = statistics.mode(p.get("busiest_thread") or "?" for p in procs)
        names = sorted({str(p.get("name") or p.get("pid")) for p in procs})
        evidence = gather(
            window,
            gpus,
            ("gpu_util_pct", "sm_active_pct", "tensor_active_pct", "sm_clock_mhz"),
            where=masks,
            basis=f"ticks with utilization.gpu in [{t.working_util_min_pct:g}, {t.gpu_util_max_pct:g}) % and "
            f"the process at >= {t.process_cpu_min_pct:g}% of a core",
            host=("cpu_util_pct", "steal_pct"),
            values={
                "share_of_judged_ticks": round(min(fired.values()), 3),
                "process_cpu_pct_median": round(cpu, 1),
                "busiest_thread": busiest,
                "processes": names,
            },
        )
        util = evidence.metrics["gpu_util_pct"].mean
        gain = 100.0 / max(util, 1.0)
        steal = evidence.metrics.get("host.steal_pct")
        steal_note = (
            f" The hypervisor also took {steal.mean:.0f}% of this VM's CPU time (steal): the same code runs "
            "slower here than on an unshared host."
            if steal is not None and steal.mean >= STEAL_NOTE_PCT
            else ""
        )
        return [
            self.suggest(
                severity="warn",
                why=(
                    f"{fmt_gpus(gpus)}: in {min(fired.values()):.0%} of the working ticks the GPU ran kernels "
                    f"only {util:.0f}% of the time while its process ({', '.join(names)}) kept "
                    f"{cpu:.0f}% of a core busy (busiest thread: {busiest}). The GPU waits for work from that "
                    "process's CPU: kernel launches from Python, most often; batches prepared in the process "
                    "or pageable copies staged by it do the same. The step is host bound, not GPU bound."
                    f"{steal_note}"
                ),
                evidence=evidence,
                fix=(
                    "Give the GPU more work per launch and launch less: fuse kernels with torch.compile, "
                    "replay the step as a CUDA graph, raise the batch per step, use the fused optimizer, "
                    "and drop per-step host syncs (loss.item(), .cpu(), printing tensors)."
                ),
                actions=(
                    "dgxperf train --set compile=true  # fused kernels: fewer launches per step",
                    "dgxperf train --set cuda_graphs=true  # the whole step replayed as one CUDA graph per "
                    "batch shape (one process, bf16, grad_accum=1)",
                    "model = torch.compile(model, mode='reduce-overhead')  # your own code: torch.compile's "
                    "CUDA graphs (whole-model compile, fixed shapes)",
                    "dgxperf train --set batch_size=<2x> --set lr_reference_batch=<current batch> "
                    "--set lr_scaling=sqrt  # twice the work per launch; Adam's lr x sqrt(2), not x2",
                    "torch.optim.AdamW(params, fused=True)  # or --set fused_optimizer=true",
                    "dgxperf train --set precision=bf16  # no GradScaler: no unscale kernels, no inf check sync",
                    "dgxperf train --set num_workers=8 --set pin_memory=true --set non_blocking=true  "
                    "# if batches are prepared or copied in the process",
                    "dgxperf train --set profile_steps=10  # then `dgxperf trace`: launches a step, GPU busy "
                    "share, the busiest host ops",
                    "py-spy top --pid <pid>  # where the Python threads spend the step",
                ),
                expected_effect=(
                    f"The GPU was idle {100 - util:.0f}% of these ticks: with the host work gone, up to "
                    f"~{gain:.1f}x the samples/s at the same kernels. Fewer, larger kernels also run "
                    "faster; on the H200 dgxperf's optimized recipe ran 2.4-4.6x guide A's recipe, which "
                    "this rule describes; doubling its batch to 256 took the GPU from 75% to 93% busy "
                    "and its samples/s up 1.47x, and replaying its whole step as CUDA graphs "
                    "(cuda_graphs=true, optimized's default) ran an epoch 1.31-1.65x faster at the same batch."
                ),
                score=max(fired.values()),
            )
        ]


# ------------------------------------------------------------------------------------ the host slowed


@dataclasses.dataclass(frozen=True)
class HostSlowedThresholds(Thresholds):
    min_drop: float = threshold(
        0.25,
        unit="share",
        doc="Fires when the GPU's busy share (SM activity, else utilization.gpu) after the change is at least "
        "this much below the share before it, relative ...",
    )
    process_cpu_min_pct: float = threshold(
        90.0,
        unit="% of one core",
        doc="... while the process kept at least this much CPU busy on both sides (host bound: 100 = one core) ...",
    )
    max_cpu_change: float = threshold(
        0.15, unit="share", doc="... its CPU share changing by at most this much (relative) ..."
    )
    max_clock_change: float = threshold(
        0.03,
        unit="share",
        doc="... and the SM clock's median by at most this much: a GPU clock change is another diagnosis.",
    )
    working_util_min_pct: float = threshold(
        10.0,
        unit="%",
        doc="Only ticks where the GPU runs kernels at least this much are judged (not set-up).",
    )
    min_side_ticks: int = threshold(
        30,
        unit="ticks",
        doc="Each side of the change holds at least this many judged ticks of the process: a phase (an "
        "evaluation, a checkpoint) is not a change of pace.",
    )


@dataclasses.dataclass(frozen=True)
class _Tick:
    index: int  # the tick's position in the window
    t: float
    busy: float
    cpu: float
    clock: float | None


def _busy_metric(window: Window, gpu: int) -> str:
    """What measures how busy the GPU kept: SM activity (GPM, Hopper) is finer than utilization.gpu, which counts a
    tick busy when any kernel ran."""
    return "sm_active_pct" if window.has("sm_active_pct", gpu) else "gpu_util_pct"


class HostSlowed(Rule[HostSlowedThresholds]):
    """Host-bound process, same CPU share, same GPU clock, less GPU work from one moment on -> the host's CPU
    got slower (dgxperf's rule).

    A host-bound step runs at the pace of the core its process holds, so when that core slows (another tenant
    on a shared host, a frequency or power cap), the GPU gets less work for the same CPU time. Seen on a lent
    H100 on 2026-12-07 (``tests/data/h100/monitor/guide-host-slowed.jsonl``): in the middle of a run of guide
    A's recipe its logged steps fell from ~520 to ~310 samples/s and stayed there for the rest of the session;
    the process held one core throughout, the SM clock stayed at 1,980 MHz and the SMs went from 73% to 44%
    active; CPU steal rose from 0 to ~0.4% of the 16 cores at that second, then fell back to 0 while the pace
    stayed low. dgxperf's GPU-bound ``optimized`` moved 1% over the same minutes. The split is judged per
    process, since a recording over several runs holds several processes, each with its own pace.
    """

    id = "launch.host_slowed"
    title = "The host's CPU slowed in the middle of a host-bound run"
    guide = "A §7"
    origin = "dgxperf"
    needs = ("gpu_util_pct",)

    @classmethod
    def default_thresholds(cls) -> HostSlowedThresholds:
        return HostSlowedThresholds()

    def missing(self, window: Window) -> tuple[str, ...]:
        return (*super().missing(window), *process_cpu_gap(window))

    def _ticks_by_process(self, window: Window, gpu: int) -> dict[Any, list[_Tick]]:
        t = self.thresholds
        busy_metric = _busy_metric(window, gpu)
        by_pid: dict[Any, list[_Tick]] = {}
        for index, (time, util, busy, clock, on_gpu) in enumerate(
            zip(
                window.times,
                window.raw("gpu_util_pct", gpu),
                window.raw(busy_metric, gpu),
                window.raw("sm_clock_mhz", gpu),
                window.processes(gpu),
                strict=True,
            )
        ):
            proc = process_cpu(on_gpu)
            if util is None or busy is None or proc is None or util < t.working_util_min_pct:
                continue
            key = proc.get("pid", proc.get("name"))
            by_pid.setdefault(key, []).append(_Tick(index, time, float(busy), float(proc["cpu_pct"]), clock))
        return by_pid

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        found: list[tuple[PaceChange, int, Any, list[_Tick]]] = []
        for gpu in self.gpus(window):
            for pid, ticks in self._ticks_by_process(window, gpu).items():
                change = pace_change([x.busy for x in ticks], min_side=t.min_side_ticks, min_drop=t.min_drop)
                if change is None:
                    continue
                k = change.index
                before, after = ticks[:k], ticks[k:]
                cpu_before = statistics.median(x.cpu for x in before)
                cpu_after = statistics.median(x.cpu for x in after)
                clocks_before = [x.clock for x in before if x.clock is not None]
                clocks_after = [x.clock for x in after if x.clock is not None]
                if min(cpu_before, cpu_after) < t.process_cpu_min_pct:
                    continue
                if abs(cpu_after / cpu_before - 1) > t.max_cpu_change:
                    continue
                if clocks_before and clocks_after:
                    clock_before = statistics.median(clocks_before)
                    if (
                        clock_before <= 0
                        or abs(statistics.median(clocks_after) / clock_before - 1) > t.max_clock_change
                    ):
                        continue
                found.append((change, gpu, pid, ticks))
        if not found:
            return []
        return [self._suggestion(window, *max(found, key=lambda f: f[0].drop))]

    def _suggestion(
        self, window: Window, change: PaceChange, gpu: int, pid: Any, ticks: list[_Tick]
    ) -> Suggestion:
        before, after = ticks[: change.index], ticks[change.index :]
        drop = change.drop

        def mask(side: list[_Tick]) -> list[bool]:
            marked = [False] * len(window)
            for tick in side:
                marked[tick.index] = True
            return marked

        busy_before, busy_after = change.before, change.after
        cpu_before = statistics.median(x.cpu for x in before)
        cpu_after = statistics.median(x.cpu for x in after)
        clocks = [x.clock for x in ticks if x.clock is not None]
        busy_words = (
            "its SMs were active" if _busy_metric(window, gpu) == "sm_active_pct" else "it ran kernels"
        )
        steal = [
            window.host_stats("steal_pct", mask(side)) if window.host_has("steal_pct") else None
            for side in (before, after)
        ]
        change_at = datetime.datetime.fromtimestamp(after[0].t, datetime.timezone.utc)
        at = change_at.strftime("%H:%M:%S UTC")
        evidence = gather(
            window,
            (gpu,),
            ("gpu_util_pct", "sm_active_pct", "sm_clock_mhz"),
            where={gpu: mask(after)},
            basis=f"the process's working ticks after the change at {at}",
            host=("cpu_util_pct", "steal_pct"),
            host_where=mask(after),
            values={
                "pid": pid,
                "change_at": change_at.isoformat().replace("+00:00", "Z"),
                "busy_metric": _busy_metric(window, gpu),
                "busy_pct_before": round(busy_before, 1),
                "busy_pct_after": round(busy_after, 1),
                "drop": round(drop, 3),
                "process_cpu_pct_before": round(cpu_before, 1),
                "process_cpu_pct_after": round(cpu_after, 1),
                "ticks_before": len(before),
                "ticks_after": len(after),
                "steal_pct_before": round(steal[0].mean, 2) if steal[0] else None,
                "steal_pct_after": round(steal[1].mean, 2) if steal[1] else None,
            },
        )
        clock = f", the SM clock at {statistics.median(clocks):.0f} MHz" if clocks else ""
        steal_note = (
            f" CPU steal was {steal[0].mean:.2f}% of the host's CPU time before and {steal[1].mean:.2f}% after: "
            "it shows when the hypervisor takes this VM's cores, not when a neighbour shares them, so a small "
            "figure does not clear the host."
            if steal[0] and steal[1]
            else ""
        )
        return self.suggest(
            severity="warn",
            why=(
                f"{fmt_gpus((gpu,))}: from {at} {busy_words} {busy_after:.0f}% of the time instead of "
                f"{busy_before:.0f}% ({drop:.0%} less), while its process (pid {pid}) kept "
                f"{cpu_before:.0f}% then {cpu_after:.0f}% of a core busy{clock} on both sides. The same CPU time "
                "now buys less GPU work: the step is host bound and the host's core got slower (another tenant on "
                "a shared host, a CPU frequency or power cap). Timings of host-bound recipes from before and after "
                f"this moment are not comparable.{steal_note}"
            ),
            evidence=evidence,
            fix=(
                "Check the host, read-only, before trusting or comparing timings from it; rerun the comparison "
                "side by side on one host and within minutes; and make the step GPU bound, so that the host's "
                "pace matters less."
            ),
            actions=(
                "cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor | sort | uniq -c  # read-only: the "
                "CPU frequency governor ('performance' on a training node)",
                "grep MHz /proc/cpuinfo | sort | uniq -c  # read-only: the cores' clocks now",
                "mpstat -P ALL 1 5  # read-only (sysstat): each core's %steal and load",
                "taskset -cp <pid>  # read-only: the cores the process may run on",
                "dgxperf bench launch  # the host's cost of one kernel launch now; rerun it to see it move",
                "dgxperf train --recipe optimized  # a GPU-bound step (CUDA graphs, batch 128): the host's pace "
                "barely reaches it",
            ),
            expected_effect=(
                f"At the earlier pace the GPU got ~{busy_before / max(busy_after, 1.0):.1f}x the work per second. "
                "On the lent H100 whose host slowed on 2026-12-07, guide A's recipe went from ~520 to ~310 "
                "samples/s, while dgxperf's GPU-bound optimized recipe moved 1% over the same minutes."
            ),
            score=drop,
        )


RULES: tuple[type[Rule[Any]], ...] = (HostBoundProcess, HostSlowed)
