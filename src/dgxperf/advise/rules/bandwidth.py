"""Bandwidth rules: device memory (DRAM/HBM) and the PCIe link.

Guide B §4.1's "dgx-monitor" has two rules, implemented verbatim (their thresholds are the guide's):

- ``sm_activity < 60% and mem_bandwidth > 80%`` -> memory-bandwidth bound (:class:`MemoryBound`);
- ``pcie_rx > 90%`` -> PCIe receive saturated, consider GPUDirect (:class:`PcieRxSaturated`).

Both miss real cases on the H200, measured, so dgxperf adds one rule beside each, labelled as ours:

- A DRAM-bound kernel keeps the SMs busy. The H200's 4 GiB device-copy loop read SM active 99.4 %, tensor
  active 0 %, DRAM 89.0 % (``tests/data/h200/gpm_under_load.json``): guide B's SM < 60 % never holds,
  so its rule stays silent on the most memory-bound loop there is. GPM's "SM active" counts an SM as
  active while any warp is resident, and a streaming kernel keeps warps resident waiting on memory.
  :class:`DramBound` fires on what that loop does show: DRAM above 80 % of its peak while the tensor
  pipes are idle, over the ticks the GPU is busy.
- Whether a saturated PCIe link passes 90 % depends on what measures it. The H200's best pinned
  host-to-device copy, timed by ``bench pcie``, ran 55.3 GB/s, 87.8 % of Gen5 x16's 63.0 GB/s
  (``tests/data/h200/bench/bench-pcie.json``; packet headers and link-layer traffic take the rest), while
  GPM's RX counter during such copies read 59.1-59.4 GB/s, 94 % (``tests/data/h200/monitor/
  h2d-pinned.jsonl``, NVML's unit MiB/s), so guide B's rule does fire on that recording's busy part. On a
  link whose counter reads nearer the payload rate it would stay silent; :class:`PcieRxNearCeiling` fires
  at 80 % of the nominal peak for that case.

Each dgxperf rule is suppressed when the guide's rule fires on the same GPUs and range (same diagnosis).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dgxperf.advise.base import (
    Evidence,
    Rule,
    Suggestion,
    Thresholds,
    Window,
    fmt_gpus,
    gather,
    threshold,
)
from dgxperf.hw.specs import link_peak_gbs

GUIDE_B_MONITOR = "B §4.1"

MEMORY_BOUND_ACTIONS = (
    "dgxperf train --set compile=true --set precision=bf16 --set fused_optimizer=true",
    "model = torch.compile(model)  # fuses chains of elementwise ops (bias, GELU, dropout, residual) into one kernel",
    "with torch.autocast('cuda', dtype=torch.bfloat16): ...  # 2-byte activations instead of 4",
    "dgxperf train --set batch_size=128 --set grad_accum=1  "
    "# e.g. from 64 x 2: same global batch, each weight read serves twice the samples",
)


def _memory_bound_effect(window: Window, gpus: tuple[int, ...], dram_pct: float) -> str:
    peak = next((s.hbm_bandwidth_gbs for i in gpus if (s := window.spec(i)) is not None), None)
    at = f" (~{dram_pct / 100 * peak:,.0f} of {peak:,.0f} GB/s)" if peak else ""
    return (
        f"DRAM already runs at {dram_pct:.0f}% of its peak{at}, so these kernels can only get faster by "
        "moving fewer bytes: bf16 instead of fp32 halves them (up to ~2x on those kernels), and fusing k "
        "elementwise ops reads and writes the tensor once instead of k times."
    )


@dataclasses.dataclass(frozen=True)
class MemoryBoundThresholds(Thresholds):
    sm_active_max_pct: float = threshold(
        60.0, unit="%", doc="Guide B: fires when the mean SM activity is below this ..."
    )
    dram_active_min_pct: float = threshold(
        80.0, unit="%", doc="... and the mean DRAM bandwidth use is above this (both over the window)."
    )


class MemoryBound(Rule[MemoryBoundThresholds]):
    """Guide B §4.1, verbatim: SM activity < 60 % and memory bandwidth > 80 % -> memory-bandwidth bound.

    Means over the whole window, as the guide's snapshot rule would see a dashboard. It does NOT fire on
    the H200's device-copy loop (SM active 99.4 %): see the module docstring and :class:`DramBound`. It
    does fire on a kernel that only reads, on 75 of the 132 SMs (SM active 55 %, DRAM 94 %: ``tests/data/
    h200/monitor/memory-read-few-sms.jsonl``, over its busy part).
    """

    id = "bandwidth.memory_bound"
    title = "Memory-bandwidth bound (guide B's rule)"
    guide = GUIDE_B_MONITOR
    origin = "guide"
    needs = ("sm_active_pct", "dram_active_pct")

    @classmethod
    def default_thresholds(cls) -> MemoryBoundThresholds:
        return MemoryBoundThresholds()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        fired: dict[int, float] = {}
        for i in self.gpus(window):
            sm, dram = window.mean("sm_active_pct", i), window.mean("dram_active_pct", i)
            if (
                sm is not None
                and dram is not None
                and sm < t.sm_active_max_pct
                and dram > t.dram_active_min_pct
            ):
                fired[i] = dram
        if not fired:
            return []
        gpus = tuple(fired)
        evidence = gather(
            window,
            gpus,
            ("sm_active_pct", "dram_active_pct", "tensor_active_pct"),
            values={"sm_active_max_pct": t.sm_active_max_pct, "dram_active_min_pct": t.dram_active_min_pct},
        )
        dram = evidence.metrics["dram_active_pct"].mean
        sm = evidence.metrics["sm_active_pct"].mean
        return [
            self.suggest(
                severity="warn",
                why=(
                    f"{fmt_gpus(gpus)}: SMs active {sm:.0f}% of the time (< {t.sm_active_max_pct:g}%) while "
                    f"DRAM bandwidth use is {dram:.0f}% (> {t.dram_active_min_pct:g}%): the kernels wait on "
                    "memory, not on arithmetic (guide B: optimise the data access pattern)."
                ),
                evidence=evidence,
                fix=(
                    "Move fewer bytes per step: fuse elementwise ops (torch.compile), keep activations in "
                    "bf16, and use a larger batch so each weight read serves more samples."
                ),
                actions=MEMORY_BOUND_ACTIONS,
                expected_effect=_memory_bound_effect(window, gpus, dram),
                score=max(fired.values()),
            )
        ]


@dataclasses.dataclass(frozen=True)
class DramBoundThresholds(Thresholds):
    dram_active_min_pct: float = threshold(
        80.0, unit="%", doc="Fires when DRAM bandwidth use, averaged over busy ticks, is above this ..."
    )
    tensor_active_max_pct: float = threshold(
        10.0, unit="%", doc="... while tensor-pipe activity over the same ticks is below this."
    )
    busy_util_min_pct: float = threshold(
        50.0, unit="%", doc="A tick is busy when utilization.gpu (else SM activity) is at least this."
    )
    min_busy_share: float = threshold(
        0.5, unit="share", doc="Judge a GPU only when at least this share of the window's ticks are busy."
    )


class DramBound(Rule[DramBoundThresholds]):
    """dgxperf's memory-bound rule (not guide B's): DRAM > 80 % with the tensor pipes idle, while busy.

    Founded on the H200 measurements: bf16 GEMM loop DRAM 17 % / tensor 93 %; device-copy loop DRAM 89 %
    / tensor 0 % / SM active 99.4 %. Guide B's SM < 60 % condition cannot see the latter; this rule does.
    """

    id = "bandwidth.dram_bound"
    title = "DRAM-bandwidth bound with idle tensor cores (dgxperf's rule)"
    guide = GUIDE_B_MONITOR
    origin = "dgxperf"
    needs = ("dram_active_pct", "tensor_active_pct")
    suppressed_by = (MemoryBound.id,)

    @classmethod
    def default_thresholds(cls) -> DramBoundThresholds:
        return DramBoundThresholds()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        fired: dict[int, float] = {}
        masks: dict[int, list[bool]] = {}
        for i in self.gpus(window):
            busy = window.busy(i, t.busy_util_min_pct)
            if not busy or sum(busy) / len(busy) < t.min_busy_share:
                continue
            dram = window.mean("dram_active_pct", i, busy)
            tensor = window.mean("tensor_active_pct", i, busy)
            if dram is None or tensor is None:
                continue
            if dram > t.dram_active_min_pct and tensor < t.tensor_active_max_pct:
                fired[i], masks[i] = dram, busy
        if not fired:
            return []
        gpus = tuple(fired)
        evidence = gather(
            window,
            gpus,
            ("dram_active_pct", "tensor_active_pct", "sm_active_pct", "gpu_util_pct"),
            where=masks,
            basis=f"busy ticks (gpu_util_pct >= {t.busy_util_min_pct:g})",
            values={
                "busy_share": sum(sum(m) for m in masks.values()) / sum(len(m) for m in masks.values()),
                "dram_active_min_pct": t.dram_active_min_pct,
                "tensor_active_max_pct": t.tensor_active_max_pct,
            },
        )
        dram = evidence.metrics["dram_active_pct"].mean
        tensor = evidence.metrics["tensor_active_pct"].mean
        sm = evidence.metrics.get("sm_active_pct")
        sm_note = (
            f" SM activity reads {sm.mean:.0f}% because a streaming kernel keeps warps resident while they "
            "wait on memory, which is why guide B's SM < 60% test misses this case."
            if sm is not None and sm.mean >= 60
            else ""
        )
        return [
            self.suggest(
                severity="warn",
                why=(
                    f"{fmt_gpus(gpus)}: while busy, DRAM bandwidth use is {dram:.0f}% and the tensor cores "
                    f"are active {tensor:.0f}% of the time: the time goes to memory-bound kernels "
                    f"(elementwise ops, norms, optimizer updates, copies), not matrix math.{sm_note}"
                ),
                evidence=evidence,
                fix=(
                    "Cut the bytes the memory-bound kernels move: fuse them (torch.compile, a fused "
                    "optimizer), keep activations in bf16, and avoid needless copies (.contiguous(), "
                    ".clone(), dtype round trips)."
                ),
                actions=MEMORY_BOUND_ACTIONS,
                expected_effect=_memory_bound_effect(window, gpus, dram),
                score=max(fired.values()),
            )
        ]


# ------------------------------------------------------------------------------------------------ PCIe


def link_peak(window: Window, gpu: int) -> tuple[float | None, str]:
    """Nominal PCIe peak per direction (GB/s) of a GPU's link, and where it came from.

    From the datasheet (hw/specs: the board's PCIe generation x lanes), with ``dgxperf bench pcie``'s
    formula so advise and bench measure against the same peak; ``(None, "unknown")`` for a GPU the table
    does not know. The recording header (``dgxperf.recording/1``) does not carry the link's generation
    and width; if it gains them (NVML's max link generation/width: the current one drops at idle), they
    should come first here, since a board in a narrower slot has a lower peak than its datasheet's.
    """
    spec = window.spec(gpu)
    if spec is not None and (peak := link_peak_gbs(spec.pcie_gen, spec.pcie_lanes)):
        return peak, f"datasheet {spec.key}: Gen{spec.pcie_gen} x{spec.pcie_lanes}"
    return None, "unknown"


PCIE_ACTIONS = (
    "dgxperf train --set pin_memory=true --set non_blocking=true",
    "DataLoader(..., pin_memory=True); batch = batch.to('cuda', non_blocking=True)",
    "send compact dtypes over the link (uint8 images, int32/int16 token ids, bf16) and convert on the GPU",
    "GPUDirect RDMA for NCCL over InfiniBand: the nvidia_peermem module loaded "
    "(`dgxperf doctor --area driver` checks it)",
    "GPUDirect Storage (cuFile, e.g. kvikio) to read data files straight into GPU memory",
)


@dataclasses.dataclass(frozen=True)
class PcieRxThresholds(Thresholds):
    rx_min_pct_of_peak: float = threshold(
        90.0, unit="%", doc="Guide B: fires when mean PCIe RX is above this share of the link's peak."
    )
    measured_peak_min_gbs: float = threshold(
        10.0,
        unit="GB/s",
        doc=(
            "With no known link peak the window's own maximum stands in for it (guide B's rule then asks "
            "'is RX on a plateau at its maximum'); only when that maximum is above this, since an idle link "
            "reads a few MiB/s."
        ),
    )


def _rx_stats(window: Window, gpu: int) -> tuple[float, float] | None:
    stats = window.stats("pcie_rx_bytes_per_s", gpu)
    return (stats.mean / 1e9, stats.max / 1e9) if stats is not None else None


class PcieRxSaturated(Rule[PcieRxThresholds]):
    """Guide B §4.1, verbatim: PCIe RX > 90 % -> receive bandwidth saturated, consider GPUDirect RDMA.

    The peak is the link's nominal one (:func:`link_peak`); with none known, the measured maximum of the
    window (reported as such, severity info). On the H200, GPM's RX counter read 94 % of the nominal peak
    during pinned H2D copies (the copies' own payload rate: 87.8 %), so it fires there on the copies' busy
    ticks; :class:`PcieRxNearCeiling` (80 %) covers counters that read nearer the payload rate.
    """

    id = "bandwidth.pcie_rx"
    title = "PCIe receive bandwidth saturated (guide B's rule)"
    guide = GUIDE_B_MONITOR
    origin = "guide"
    needs = ("pcie_rx_bytes_per_s",)

    @classmethod
    def default_thresholds(cls) -> PcieRxThresholds:
        return PcieRxThresholds()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        fired: dict[int, tuple[float, float, str]] = {}
        for i in self.gpus(window):
            rx = _rx_stats(window, i)
            if rx is None:
                continue
            mean_gbs, max_gbs = rx
            peak, source = link_peak(window, i)
            if peak is None:
                if max_gbs < t.measured_peak_min_gbs:
                    continue
                peak, source = max_gbs, "measured maximum of this window (no link peak known)"
            pct = 100.0 * mean_gbs / peak
            if pct > t.rx_min_pct_of_peak:
                fired[i] = (pct, peak, source)
        return _pcie_suggestions(self, window, fired, t.rx_min_pct_of_peak)


@dataclasses.dataclass(frozen=True)
class PcieRxCeilingThresholds(Thresholds):
    rx_min_pct_of_peak: float = threshold(
        80.0,
        unit="%",
        doc=(
            "Fires when mean PCIe RX is above this share of the nominal link peak; 80 % of Gen5 x16 is 91 % "
            "of the 55.3 GB/s the H200's pinned H2D copy reached (87.8 % of nominal)."
        ),
    )


class PcieRxNearCeiling(Rule[PcieRxCeilingThresholds]):
    """dgxperf's PCIe rule (not guide B's): RX above 80 % of the nominal peak is at the practical ceiling.

    Needs a known link peak (header or datasheet); a measured maximum says nothing about the ceiling.
    """

    id = "bandwidth.pcie_rx_ceiling"
    title = "PCIe receive bandwidth at the link's practical ceiling (dgxperf's rule)"
    guide = GUIDE_B_MONITOR
    origin = "dgxperf"
    needs = ("pcie_rx_bytes_per_s",)
    suppressed_by = (PcieRxSaturated.id,)

    @classmethod
    def default_thresholds(cls) -> PcieRxCeilingThresholds:
        return PcieRxCeilingThresholds()

    def missing(self, window: Window) -> tuple[str, ...]:
        gaps = super().missing(window)
        if gaps or window.empty:
            return gaps
        if not any(link_peak(window, i)[0] for i in self.gpus(window)):
            return ("the PCIe link's peak (GPU model not in hw/specs)",)
        return ()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        fired: dict[int, tuple[float, float, str]] = {}
        for i in self.gpus(window):
            rx = _rx_stats(window, i)
            peak, source = link_peak(window, i)
            if rx is None or peak is None:
                continue
            pct = 100.0 * rx[0] / peak
            if pct > t.rx_min_pct_of_peak:
                fired[i] = (pct, peak, source)
        return _pcie_suggestions(self, window, fired, t.rx_min_pct_of_peak)


def _pcie_suggestions(
    rule: Rule[PcieRxThresholds] | Rule[PcieRxCeilingThresholds],
    window: Window,
    fired: dict[int, tuple[float, float, str]],
    limit_pct: float,
) -> list[Suggestion]:
    if not fired:
        return []
    gpus = tuple(fired)
    pct = max(p for p, _, _ in fired.values())
    peak, source = next((pk, src) for _, pk, src in fired.values())
    measured = source.startswith("measured")
    evidence: Evidence = gather(
        window,
        gpus,
        ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s", "gpu_util_pct"),
        values={
            "rx_pct_of_peak": pct,
            "link_peak_gbs": peak,
            "link_peak_source": source,
            "rx_min_pct_of_peak": limit_pct,
        },
    )
    rx_gbs = evidence.metrics["pcie_rx_bytes_per_s"].mean / 1e9
    return [
        rule.suggest(
            severity="info" if measured else "warn",
            why=(
                f"{fmt_gpus(gpus)}: the GPU receives {rx_gbs:.1f} GB/s over PCIe on average, {pct:.0f}% of "
                f"{peak:.1f} GB/s ({source}): host-to-device traffic is at the link's limit, so every byte "
                "copied in costs step time."
            ),
            evidence=evidence,
            fix=(
                "Make sure copies are pinned and asynchronous, then move fewer bytes over the link: "
                "compact dtypes converted on the GPU, data kept resident on the GPU across epochs, and "
                "GPUDirect (RDMA for the network, Storage for files) so data skips the host bounce."
            ),
            actions=PCIE_ACTIONS,
            expected_effect=(
                "The link is the ceiling: halving the bytes sent (uint8 or bf16 instead of fp32) halves the "
                "copy time; pageable copies run at a fraction of pinned ones (the H200's bench pcie: 14.6 "
                "vs 55.3 GB/s), so a pageable pipeline gains most from pin_memory alone."
                if not measured
                else "Unknown link peak: compare with `dgxperf bench pcie` on this node; if RX is at the "
                "pinned H2D figure there, halving the bytes sent halves the copy time."
            ),
            score=pct,
        )
    ]


RULES: tuple[type[Rule[Any]], ...] = (MemoryBound, DramBound, PcieRxSaturated, PcieRxNearCeiling)
