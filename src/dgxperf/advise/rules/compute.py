"""Compute rules: is the arithmetic on the tensor cores?

:class:`LowTensorActivity` (dgxperf's, for guide A §4.2's AMP recipe and §7's "Tensor Cores: -57 % matmul
time"): the GPU is busy, its SMs are working, DRAM is not the limit, and yet the tensor pipes are nearly
idle. In a Transformer training step the matmuls dominate; when they are not on the tensor cores they run
in fp32 on the FP32 pipe, i.e. AMP (bf16/fp16) and TF32 are not in effect.

Real numbers it is calibrated on (H200, ``tests/data/h200/gpm_under_load.json``): a bf16 GEMM loop shows
tensor active 93 %; the device-copy loop shows tensor 0 % with DRAM 89 %, which is memory-bound work the
bandwidth rules own, so this rule stays out of windows whose DRAM use is high.

Checked against the training recordings since (busy ticks; ``tests/data/h200/monitor/``,
``tests/data/h100/monitor/``): the fp32 baseline recipe (TF32 off) reads tensor 0.9 % with the FP32 pipe
67 % busy, the mixed-precision recipes tensor 13-32 % with the FP32 pipe at 2-4 % (a Transformer step spends
much of its time in non-matmul kernels, and a launch-bound one idles between them). The first threshold,
tensor below 20 %, sat inside that range: on an H100 `guide` and `optimized` one after another read 19.8 %
with the SMs 59 % active and were told their matmuls were not in AMP. So the rule asks for tensor activity
below 10 % and, where the recording has it, the FP32 pipe at least 20 % busy: the arithmetic must be
somewhere, and a busy SM that is on neither pipe is doing elementwise or memory work, not fp32 matmuls.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dgxperf.advise.base import Rule, Suggestion, Thresholds, Window, fmt_gpus, gather, threshold
from dgxperf.hw.specs import peak_tflops


@dataclasses.dataclass(frozen=True)
class LowTensorThresholds(Thresholds):
    tensor_active_max_pct: float = threshold(
        10.0,
        unit="%",
        doc=(
            "Fires when tensor-pipe activity, averaged over busy ticks, is below this (the fp32 baseline "
            "recipe: 0.9 %; the mixed-precision recipes, launch bound or not: 13-32 %) ..."
        ),
    )
    sm_active_min_pct: float = threshold(
        50.0, unit="%", doc="... while the SMs are active at least this much over the same ticks ..."
    )
    dram_active_max_pct: float = threshold(
        60.0,
        unit="%",
        doc="... and DRAM use is at most this (above it the step is memory-bound: the bandwidth rules' case).",
    )
    fp32_active_min_pct: float = threshold(
        20.0,
        unit="%",
        doc=(
            "... and, where the recording has it, the FP32 pipe is at least this active: matmuls off the "
            "tensor cores run there (the fp32 baseline: 67 %; the mixed-precision recipes: 2-4 %)."
        ),
    )
    busy_util_min_pct: float = threshold(
        50.0, unit="%", doc="A tick is busy when utilization.gpu (else SM activity) is at least this."
    )
    min_busy_share: float = threshold(
        0.5, unit="share", doc="Judge a GPU only when at least this share of the window's ticks are busy."
    )


class LowTensorActivity(Rule[LowTensorThresholds]):
    """Busy GPU, low tensor activity -> AMP/TF32 not in effect (dgxperf's rule)."""

    id = "compute.low_tensor"
    title = "Busy GPU with idle tensor cores: AMP/TF32 not in effect"
    guide = "A §4.2"
    origin = "dgxperf"
    needs = ("tensor_active_pct", "sm_active_pct")

    @classmethod
    def default_thresholds(cls) -> LowTensorThresholds:
        return LowTensorThresholds()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        fired: dict[int, float] = {}
        masks: dict[int, list[bool]] = {}
        for i in self.gpus(window):
            busy = window.busy(i, t.busy_util_min_pct)
            if not busy or sum(busy) / len(busy) < t.min_busy_share:
                continue
            tensor = window.mean("tensor_active_pct", i, busy)
            sm = window.mean("sm_active_pct", i, busy)
            dram = window.mean("dram_active_pct", i, busy)  # optional: absent means "not known to be high"
            fp32 = window.mean("fp32_active_pct", i, busy)  # optional as well
            if tensor is None or sm is None:
                continue
            if (
                tensor < t.tensor_active_max_pct
                and sm >= t.sm_active_min_pct
                and (dram is None or dram <= t.dram_active_max_pct)
                and (fp32 is None or fp32 >= t.fp32_active_min_pct)
            ):
                fired[i], masks[i] = t.tensor_active_max_pct - tensor, busy
        if not fired:
            return []
        gpus = tuple(fired)
        values: dict[str, Any] = {"tensor_active_max_pct": t.tensor_active_max_pct}
        spec = next((s for i in gpus if (s := window.spec(i)) is not None), None)
        bf16 = peak_tflops(spec, "bf16") if spec else None
        fp32 = peak_tflops(spec, "fp32") if spec else None
        if spec and bf16 and fp32:
            values.update({"gpu_spec": spec.key, "peak_bf16_tflops": bf16, "peak_fp32_tflops": fp32})
        evidence = gather(
            window,
            gpus,
            ("tensor_active_pct", "sm_active_pct", "dram_active_pct", "fp32_active_pct", "fp16_active_pct"),
            where=masks,
            basis=f"busy ticks (gpu_util_pct >= {t.busy_util_min_pct:g})",
            values=values,
        )
        m = evidence.metrics
        fp32_pipe = m.get("fp32_active_pct")
        fp32_note = (
            f"; the FP32 pipe is active {fp32_pipe.mean:.0f}%, so the arithmetic runs there"
            if fp32_pipe
            else ""
        )
        if spec and bf16 and fp32:
            effect = (
                f"Matmuls up to ~{bf16 / fp32:.0f}x faster on the tensor cores (datasheet dense peaks of the "
                f"{spec.name}: bf16 {bf16:g} vs fp32 {fp32:g} TFLOP/s); the step gains in proportion to its "
                "matmul share (guide A §7 reports -57% matmul time from Tensor Cores)."
            )
        else:
            effect = (
                "Matmuls several times faster on the tensor cores (on Ampere and Hopper the dense bf16 "
                "peak is about 15x the fp32 one); the step gains in proportion to its matmul share."
            )
        return [
            self.suggest(
                severity="warn",
                why=(
                    f"{fmt_gpus(gpus)}: while busy, SMs are active {m['sm_active_pct'].mean:.0f}% but the "
                    f"tensor cores only {m['tensor_active_pct'].mean:.0f}%{fp32_note}: the matmuls are not "
                    "running in bf16/fp16 (AMP) or TF32."
                ),
                evidence=evidence,
                fix=(
                    "Train in mixed precision (bf16 autocast on Ampere and newer; guide A §4.2 uses fp16 with "
                    "a GradScaler), or at least let fp32 matmuls use TF32."
                ),
                actions=(
                    "dgxperf train --set precision=bf16",
                    "with torch.autocast('cuda', dtype=torch.bfloat16): loss = model(batch)",
                    "torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True  "
                    "# or dgxperf train --set precision=tf32",
                ),
                expected_effect=effect,
                score=max(fired.values()),
            )
        ]


RULES: tuple[type[Rule[Any]], ...] = (LowTensorActivity,)
