"""Device-memory capacity rules.

:class:`NearCapacity` (dgxperf's, for guide A §5.2's memory management: gradient accumulation,
``set_per_process_memory_fraction(0.9)``, ``empty_cache``): framebuffer use close to the GPU's total.

What NVML's "used" means matters here: PyTorch's caching allocator keeps freed blocks, so ``fb_used`` is
what the process reserved, not what its tensors hold right now. A job near capacity in NVML is one whose
allocator has grown to (nearly) all of the GPU: the next larger batch or longer sequence is an out-of-
memory error, and before that the allocator frees its cache and retries (``cudaFree`` + ``cudaMalloc``,
which synchronise the device) — a stall that shows as lost time, not as an error.

The total is ``fb_used + fb_free (+ fb_reserved)`` from the same samples; without both, the rule is not
evaluated.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dgxperf.advise.base import GiB, Rule, Suggestion, Thresholds, Window, fmt_gpus, gather, threshold


@dataclasses.dataclass(frozen=True)
class NearCapacityThresholds(Thresholds):
    used_min_pct: float = threshold(
        95.0,
        unit="%",
        doc="Fires when the largest framebuffer use in the window is above this share of the total.",
    )


class NearCapacity(Rule[NearCapacityThresholds]):
    """Framebuffer memory near capacity -> accumulation, activation checkpointing, memory fraction."""

    id = "memory.near_capacity"
    title = "GPU memory near capacity"
    guide = "A §5.2"
    origin = "dgxperf"
    needs = ("fb_used_bytes", "fb_free_bytes")

    @classmethod
    def default_thresholds(cls) -> NearCapacityThresholds:
        return NearCapacityThresholds()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        fired: dict[int, float] = {}
        totals: dict[int, float] = {}
        for i in self.gpus(window):
            total = window.memory_total_bytes(i)
            used = window.stats("fb_used_bytes", i)
            if not total or used is None:
                continue
            pct = 100.0 * used.max / total
            if pct > t.used_min_pct:
                fired[i], totals[i] = pct, total
        if not fired:
            return []
        gpus = tuple(fired)
        pct = max(fired.values())
        total_gib = min(totals.values()) / GiB
        evidence = gather(
            window,
            gpus,
            ("fb_used_bytes", "fb_free_bytes"),
            values={"used_max_pct_of_total": pct, "total_gib": total_gib, "used_min_pct": t.used_min_pct},
        )
        free_gib = evidence.metrics["fb_free_bytes"].min / GiB
        return [
            self.suggest(
                severity="warn",
                why=(
                    f"{fmt_gpus(gpus)}: memory use peaked at {pct:.1f}% of {total_gib:.0f} GiB ({free_gib:.1f} "
                    "GiB left at the worst tick): one larger batch or longer sequence is an out-of-memory error, "
                    "and before that PyTorch's allocator frees its cache and retries, which stalls the GPU."
                ),
                evidence=evidence,
                fix=(
                    "Lower the peak: a smaller micro-batch with gradient accumulation keeps the global batch "
                    "(guide A §5.2), activation checkpointing trades recompute for activation memory, and "
                    "expandable segments cut fragmentation. A memory fraction caps this process so others fit."
                ),
                actions=(
                    "dgxperf train --set batch_size=32 --set grad_accum=2  # e.g. from 64 x 1: same global batch",
                    "torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)  # per Transformer block",
                    "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                    "dgxperf train --set memory_fraction=0.9  "
                    "# guide A §5.2: torch.cuda.set_per_process_memory_fraction(0.9)",
                ),
                expected_effect=(
                    "No speed-up by itself: it removes the risk of an out-of-memory crash and of allocator "
                    "retries. Halving the micro-batch with grad_accum=2 roughly halves activation memory at "
                    "the same global batch; checkpointing every block cuts it further for about a third more "
                    "compute (one extra forward pass)."
                ),
                score=pct,
            )
        ]


RULES: tuple[type[Rule[Any]], ...] = (NearCapacity,)
