"""GPU health rules: clock throttling, and hardware errors (ECC, row remapping, XIDs, PCIe replays).

Both only ever say what a person should check: dgxperf never changes power limits, clocks or resets a
GPU (DESIGN.md, "Where things run").

Throttling, calibrated on the H200 (``tests/data/h200/bench/bench-gemm.json``): under each of the ten
sustained bf16 GEMM shapes the GPU reported ``sw_power_cap``, with the SM clock at 1245-1965 MHz instead
of its 1980 MHz maximum (power read 298-695 W of the 700 W limit at the sampling instant); the fp32 GEMMs,
which leave the tensor cores idle, ran at 1980 MHz without a cap in 8 of 9 shapes. That is the board
holding its power limit, not a fault, so a sustained power cap is *info* (and *warn* only when the
enforced limit is below the datasheet's TDP).
Thermal slowdown is *warn*; the hardware slowdowns (``hw_slowdown``, ``hw_thermal_slowdown``,
``hw_power_brake_slowdown``: the GPU protecting itself from heat or a power-supply event) are *critical*,
as ``dgxperf doctor`` fails them. ``gpu_idle`` and the clock-setting reasons are not throttling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from dgxperf.advise.base import (
    Evidence,
    Rule,
    Severity,
    Suggestion,
    Thresholds,
    Window,
    fmt_gpus,
    gather,
    threshold,
)
from dgxperf.hw.xid import APPLICATION_XIDS, HARDWARE_XIDS

HW_SLOWDOWN = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
THERMAL = ("sw_thermal_slowdown",)
POWER_CAP = ("sw_power_cap",)
CLOCK_METRICS = ("sm_clock_mhz", "power_w", "power_limit_w", "temp_gpu_c", "temp_mem_c", "gpu_util_pct")


def reason_shares(window: Window, gpu: int, reasons: Sequence[str]) -> tuple[float, int]:
    """(share of the GPU's ticks with any of ``reasons``, number of such ticks)."""
    known = sum(r is not None for r in window.throttle(gpu))
    hits = sum(window.throttled(gpu, reasons))
    return (hits / known if known else 0.0), hits


@dataclasses.dataclass(frozen=True)
class ThrottlingThresholds(Thresholds):
    hw_slowdown_min_ticks: int = threshold(
        1, unit="count", doc="Critical when a hardware slowdown reason is seen on at least this many ticks."
    )
    thermal_min_share: float = threshold(
        0.05, unit="share", doc="Warn when sw_thermal_slowdown is on at least this share of the ticks."
    )
    power_cap_min_share: float = threshold(
        0.5, unit="share", doc="Info when sw_power_cap is on at least this share of the ticks (sustained)."
    )
    power_limit_min_pct_of_tdp: float = threshold(
        95.0,
        unit="%",
        doc="A sustained power cap is warn, not info, when the enforced limit is below this share of the TDP.",
    )


class Throttling(Rule[ThrottlingThresholds]):
    """Power or thermal throttling -> cooling / power limit, for a person to check."""

    id = "health.throttling"
    title = "GPU clocks throttled"
    guide = "A §6.1"
    origin = "dgxperf"

    @classmethod
    def default_thresholds(cls) -> ThrottlingThresholds:
        return ThrottlingThresholds()

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        hw: dict[int, int] = {}
        thermal: dict[int, float] = {}
        power: dict[int, float] = {}
        for i in window.gpu_indices:
            _, hw_ticks = reason_shares(window, i, HW_SLOWDOWN)
            if hw_ticks >= max(1, t.hw_slowdown_min_ticks):
                hw[i] = hw_ticks
            share, _ = reason_shares(window, i, THERMAL)
            if share >= t.thermal_min_share and share > 0:
                thermal[i] = share
            share, _ = reason_shares(window, i, POWER_CAP)
            if share >= t.power_cap_min_share and share > 0:
                power[i] = share
        out: list[Suggestion] = []
        if hw:
            out.append(self._hardware(window, hw))
        if thermal:
            out.append(self._thermal(window, thermal))
        if power:
            out.append(self._power(window, power))
        return out

    def _evidence(
        self, window: Window, gpus: tuple[int, ...], reasons: Sequence[str], values: Mapping[str, Any]
    ) -> Evidence:
        """Clock, power and temperature over the ticks with ``reasons`` on (the throttled ticks: idle
        ticks at 345 MHz would drag an "SM clock while capped" mean down), plus every reason's share."""
        shares = {
            f"share_{name}": max(reason_shares(window, i, (name,))[0] for i in gpus)
            for name in (*HW_SLOWDOWN, *THERMAL, *POWER_CAP)
        }
        masks = {i: window.throttled(i, reasons) for i in gpus}
        return gather(
            window,
            gpus,
            CLOCK_METRICS,
            where=masks,
            basis="ticks with " + " or ".join(reasons),
            values={**{k: v for k, v in shares.items() if v}, **values},
        )

    def _hardware(self, window: Window, hw: dict[int, int]) -> Suggestion:
        gpus = tuple(hw)
        evidence = self._evidence(window, gpus, HW_SLOWDOWN, {"hw_slowdown_ticks": max(hw.values())})
        return self.suggest(
            severity="critical",
            title="GPU hardware slowdown: the GPU protects itself",
            why=(
                f"{fmt_gpus(gpus)}: a hardware slowdown reason (hw_slowdown, hw_thermal_slowdown or "
                f"hw_power_brake_slowdown) was on in {max(hw.values())} tick(s): the GPU cut its clocks to "
                "protect itself from overheating or a power-supply event, whatever the software does."
            ),
            evidence=evidence,
            fix=(
                "A person checks the node's cooling and power: inlet temperature, fans and airflow, the power "
                "supplies and the BMC's event log; dgxperf changes nothing."
            ),
            actions=tuple(
                [
                    f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {i}  # clock-event reasons and counters"
                    for i in gpus
                ]
                + [
                    "ipmitool sel list  # the BMC's event log: PSU and thermal events",
                    "dgxperf doctor --area gpu",
                ]
            ),
            expected_effect=(
                "Hardware slowdown can cut the SM clock by half or more while it lasts; with the cause fixed "
                "the clocks return to what the power limit allows."
            ),
            score=float(max(hw.values())),
        )

    def _thermal(self, window: Window, thermal: dict[int, float]) -> Suggestion:
        gpus = tuple(thermal)
        evidence = self._evidence(
            window, gpus, THERMAL, {"thermal_min_share": self.thresholds.thermal_min_share}
        )
        temp = evidence.metrics.get("temp_gpu_c")
        temp_note = f" (GPU temperature up to {temp.max:.0f} C)" if temp else ""
        return self.suggest(
            severity="warn",
            title="GPU thermal slowdown",
            why=(
                f"{fmt_gpus(gpus)}: sw_thermal_slowdown in {max(thermal.values()):.0%} of the ticks{temp_note}: "
                "the GPU lowers its clocks because it runs above its slowdown temperature."
            ),
            evidence=evidence,
            fix=(
                "A person checks cooling: inlet temperature, fans, airflow and blanking panels, and whether "
                "this GPU runs hotter than its neighbours."
            ),
            actions=tuple(
                [
                    f"nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {i}  # slowdown threshold vs current"
                    for i in gpus
                ]
                + ["dgxperf doctor --area gpu"]
            ),
            expected_effect=(
                "With the GPU below its slowdown temperature, clocks return to the power-limited level; the "
                "gain is the clock lost while throttled (compare sm_clock_mhz in the evidence with the "
                "unthrottled GPUs)."
            ),
            score=max(thermal.values()),
        )

    def _power(self, window: Window, power: dict[int, float]) -> Suggestion:
        t = self.thresholds
        gpus = tuple(power)
        values: dict[str, Any] = {}
        lowered: list[int] = []
        for i in gpus:
            spec = window.spec(i)
            limit = window.mean("power_limit_w", i)
            if spec is not None and limit is not None:
                values[f"gpu{i}_power_limit_pct_of_tdp"] = 100.0 * limit / spec.tdp_w
                if 100.0 * limit / spec.tdp_w < t.power_limit_min_pct_of_tdp:
                    lowered.append(i)
        evidence = self._evidence(window, gpus, POWER_CAP, values)
        clock = evidence.metrics.get("sm_clock_mhz")
        watts = evidence.metrics.get("power_w")
        clock_note = (
            f"; SM clock {clock.mean:.0f} MHz on average (p10 {clock.p10:.0f}, p90 {clock.p90:.0f}) while capped"
            if clock is not None
            else ""
        )
        watts_note = f", drawing {watts.mean:.0f} W on average" if watts is not None else ""
        severity: Severity = "warn" if lowered else "info"
        why = (
            f"{fmt_gpus(gpus)}: sw_power_cap in {max(power.values()):.0%} of the ticks{watts_note}{clock_note}: "
            "the GPU holds its power limit by lowering its clock. "
        )
        why += (
            f"The enforced limit of {fmt_gpus(lowered)} is below the board's TDP: someone lowered it."
            if lowered
            else "Under a sustained heavy load this is how the GPU is designed to run (the H200 does it "
            "under every large bf16 GEMM)."
        )
        return self.suggest(
            severity=severity,
            title="GPU power-capped" + (" below its TDP" if lowered else " (sustained load)"),
            why=why,
            evidence=evidence,
            fix=(
                "A person checks that the enforced power limit equals the default (a lowered limit costs "
                "clock under load) and restores it if it was lowered by mistake; dgxperf never changes it."
            ),
            actions=tuple(
                [f"nvidia-smi -q -d POWER -i {i}  # enforced vs default power limit" for i in gpus]
                + ["nvidia-smi -i <gpu> -pl <default W>  # by the node's owner, only if it was lowered"]
            ),
            expected_effect=(
                "Restoring the default limit gives back the clock the lower limit took, up to the ratio "
                "of the limits under a power-bound load."
                if lowered
                else "Nothing to gain in software: training sees the sustained clock (the H200's bf16 GEMM ran "
                "13% below its burst rate under this cap, see `dgxperf bench gemm`)."
            ),
            score=max(power.values()),
        )


@dataclasses.dataclass(frozen=True)
class HardwareThresholds(Thresholds):
    sbe_min_increase: int = threshold(
        10,
        unit="count",
        doc="Info when corrected (single-bit) ECC errors rise by at least this in the window.",
    )
    pcie_replay_min_increase: int = threshold(
        100, unit="count", doc="Warn when the PCIe replay counter rises by at least this in the window."
    )


HEALTH_COUNTERS = ("ecc_dbe_volatile", "remapped_pending", "ecc_sbe_volatile", "pcie_replay")


def _increase(window: Window, metric: str, gpu: int) -> float:
    values = window.values(metric, gpu)
    return max(values) - min(values) if values else 0.0


def xid_events(window: Window) -> list[tuple[float, int | None, int]]:
    """``[(t, gpu or None, xid)]`` of the window's XID events; events without a readable code are skipped."""
    out = []
    for t, event in window.events("xid"):
        code = event.get("xid", event.get("value", event.get("code")))
        gpu = event.get("gpu", event.get("index"))
        try:
            xid = int(code)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        # The sampler writes gpu -1 when NVML could not name the device: unattributed, not a GPU index.
        out.append((t, gpu if isinstance(gpu, int) and not isinstance(gpu, bool) and gpu >= 0 else None, xid))
    return out


class HardwareErrors(Rule[HardwareThresholds]):
    """ECC / XID / row-remap pending -> hardware (critical). Also PCIe replays (warn) and rising
    corrected ECC errors (info). The XID classes are ``dgxperf doctor``'s (``doctor.driver``)."""

    id = "health.hardware"
    title = "GPU hardware errors"
    guide = None
    origin = "dgxperf"

    @classmethod
    def default_thresholds(cls) -> HardwareThresholds:
        return HardwareThresholds()

    def missing(self, window: Window) -> tuple[str, ...]:
        if window.empty or xid_events(window):
            return ()
        if any(window.has(m, i) for m in HEALTH_COUNTERS for i in window.gpu_indices):
            return ()
        return ("one of " + ", ".join(HEALTH_COUNTERS) + " (or XID events)",)

    def evaluate(self, window: Window) -> list[Suggestion]:
        t = self.thresholds
        xids = xid_events(window)
        critical: dict[int, list[str]] = {}
        warn_replay: dict[int, float] = {}
        info_sbe: dict[int, float] = {}
        for i in window.gpu_indices:
            dbe = window.values("ecc_dbe_volatile", i)
            if dbe and max(dbe) > 0:
                critical.setdefault(i, []).append(
                    f"{max(dbe):.0f} uncorrected ECC error(s) since the driver loaded"
                )
            pending = window.values("remapped_pending", i)
            if pending and max(pending) >= 1:
                critical.setdefault(i, []).append("a row remap is pending (needs a GPU reset)")
            if (rise := _increase(window, "pcie_replay", i)) >= max(1, t.pcie_replay_min_increase):
                warn_replay[i] = rise
            if (rise := _increase(window, "ecc_sbe_volatile", i)) >= max(1, t.sbe_min_increase):
                info_sbe[i] = rise
        hw_xids = [(ts, g, x) for ts, g, x in xids if x in HARDWARE_XIDS]
        other_xids = [(ts, g, x) for ts, g, x in xids if x not in HARDWARE_XIDS]
        for _, g, x in hw_xids:
            critical.setdefault(g if g is not None else -1, []).append(f"hardware XID {x}")
        out: list[Suggestion] = []
        if critical:
            out.append(self._critical(window, critical, hw_xids))
        if other_xids:
            out.append(self._app_xids(window, other_xids))
        if warn_replay:
            gpus = tuple(warn_replay)
            out.append(
                self.suggest(
                    severity="warn",
                    title="PCIe replays rising: link errors",
                    why=(
                        f"{fmt_gpus(gpus)}: the PCIe replay counter rose by {max(warn_replay.values()):.0f} in "
                        f"{window.duration_s:.0f} s: packets are being resent, a sign of a marginal link "
                        "(riser, cable, seating) that can also down-train the link."
                    ),
                    evidence=gather(
                        window, gpus, ("pcie_replay",), values={"replay_increase": max(warn_replay.values())}
                    ),
                    fix=(
                        "A person checks the GPU's seating, riser and the link's width/generation; "
                        "dgxperf doctor shows the link."
                    ),
                    actions=(
                        "dgxperf doctor --area gpu  # PCIe link width/generation vs max, replay counter",
                        "nvidia-smi -q -d PCIE",
                    ),
                    expected_effect="Replays cost link bandwidth; a down-trained link halves it per lost generation.",
                    score=max(warn_replay.values()),
                )
            )
        if info_sbe:
            gpus = tuple(info_sbe)
            out.append(
                self.suggest(
                    severity="info",
                    title="Corrected ECC errors rising",
                    why=(
                        f"{fmt_gpus(gpus)}: corrected (single-bit) ECC errors rose by {max(info_sbe.values()):.0f} "
                        "in the window: corrected, so no harm yet, but a steady stream points to failing memory."
                    ),
                    evidence=gather(
                        window, gpus, ("ecc_sbe_volatile",), values={"sbe_increase": max(info_sbe.values())}
                    ),
                    fix="Watch this GPU; if it keeps rising, a person plans a reset (row remapping) or an RMA.",
                    actions=(
                        "dgxperf doctor --area gpu  # ECC counts and row remapping",
                        "nvidia-smi -q -d ECC,ROW_REMAPPER",
                    ),
                    expected_effect="No speed effect; it is an early warning before uncorrected errors crash jobs.",
                    score=max(info_sbe.values()),
                )
            )
        return out

    def _critical(
        self, window: Window, critical: dict[int, list[str]], hw_xids: list[tuple[float, int | None, int]]
    ) -> Suggestion:
        gpus = tuple(sorted(i for i in critical if i >= 0))
        reasons = sorted({r for rs in critical.values() for r in rs})
        values: dict[str, Any] = {"reasons": reasons}
        if hw_xids:
            values["xids"] = [{"t": ts, "gpu": g, "xid": x} for ts, g, x in hw_xids[:20]]
        evidence = gather(window, gpus, ("ecc_dbe_volatile", "remapped_pending"), values=values)
        return self.suggest(
            severity="critical",
            title="GPU hardware error: drain and check the GPU",
            why=(
                f"{fmt_gpus(gpus) if gpus else 'A GPU'}: {'; '.join(reasons)}. Jobs on this GPU can crash or "
                "compute on corrupted memory until it is reset or replaced."
            ),
            evidence=evidence,
            fix=(
                "A person drains the node, collects a bug report, and has the GPU reset when idle (a pending "
                "row remap takes effect then) or replaced; dgxperf resets nothing."
            ),
            actions=(
                "dgxperf doctor --area gpu --area driver  # ECC, row remapping, XIDs in the kernel log",
                "sudo nvidia-bug-report.sh",
                "nvidia-smi -r -i <gpu>  # by the node's owner, with the GPU idle; or reboot the node",
            ),
            expected_effect="Not a speed issue: it keeps jobs from crashing or training on corrupted memory.",
            score=float(len(reasons)),
        )

    def _app_xids(self, window: Window, xids: list[tuple[float, int | None, int]]) -> Suggestion:
        gpus = tuple(sorted({g for _, g, _ in xids if g is not None}))
        codes = sorted({x for _, _, x in xids})
        app = [c for c in codes if c in APPLICATION_XIDS]
        values = {"xids": [{"t": ts, "gpu": g, "xid": x} for ts, g, x in xids[:20]]}
        return self.suggest(
            severity="warn",
            title="GPU errors (XIDs) reported",
            why=(
                f"{fmt_gpus(gpus) if gpus else 'A GPU'}: XID {', '.join(str(c) for c in codes)}"
                + (
                    " — application errors (illegal memory access, a kernel killed or timed out): usually a bug "
                    "in the program or a library, not the hardware."
                    if app == codes
                    else ": look the codes up in NVIDIA's XID table (docs.nvidia.com/deploy/xid-errors)."
                )
            ),
            evidence=gather(window, gpus, ("gpu_util_pct",), values=values),
            fix=(
                "Find the process that hit it (the kernel log names the pid) and rerun it with "
                "CUDA_LAUNCH_BLOCKING=1 to locate the kernel."
            ),
            actions=(
                "dgxperf doctor --area driver  # XIDs in the kernel log, with pid and process name",
                "CUDA_LAUNCH_BLOCKING=1 python train.py  # synchronous launches: the error names the failing kernel",
            ),
            expected_effect="Not a speed issue: the job that hit it failed or will fail.",
            score=float(len(xids)),
        )


RULES: tuple[type[Rule[Any]], ...] = (Throttling, HardwareErrors)
