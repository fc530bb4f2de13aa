"""Per-GPU checks from NVML: persistence, power, throttling, ECC and memory health, PCIe, MIG, compute mode,
other tenants' memory, the datasheet match and GPM. One finding per GPU, ids ending in ``.gpu<index>``.

Fix lines name the GPU with ``-i <index>``; they are for a person to review — dgxperf never applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from dgxperf.doctor.base import na_reason, read, unavailable, unknown
from dgxperf.hw.snapshot import Snapshot
from dgxperf.hw.specs import match_spec
from dgxperf.results import NA, Finding, Fix, Status

AREA = "gpu"
GiB = 1024**3

# Throttle reasons that mean the hardware protects itself (fail) or is running hot (warn).
HARDWARE_THROTTLE = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
SOFTWARE_THROTTLE = {"sw_thermal_slowdown"}

# Memory the driver and CUDA context of an idle GPU use; more than this with no process listed is odd.
IDLE_MEMORY_BYTES = 2 * GiB


def _label(gpu: dict[str, Any]) -> str:
    name = read(gpu, "name")
    return f"GPU {gpu['index']} ({name})" if not isinstance(name, NA) else f"GPU {gpu['index']}"


def _on_off(value: Any) -> Any:
    return value if isinstance(value, NA) else ("enabled" if value else "disabled")


def per_gpu(check: Callable[[dict[str, Any], Snapshot], Finding]) -> Callable[[Snapshot], Iterable[Finding]]:
    """Run a one-GPU check over every GPU NVML lists; no GPUs, no findings (driver checks explain why)."""

    def run(snap: Snapshot) -> Iterable[Finding]:
        return [check(gpu, snap) for gpu in snap.gpus]

    run.__name__ = check.__name__
    run.__doc__ = check.__doc__
    return run


@per_gpu
def check_persistence(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.persistence.gpu{i}", f"{_label(gpu)}: persistence mode"
    why = (
        "Without persistence the driver tears the GPU down when the last process exits, so every job start "
        "pays seconds of re-initialisation and clocks/ECC state is reloaded (guide B §2.1)."
    )
    mode = read(gpu, "persistence_mode")
    if isinstance(mode, NA):
        return unknown(fid, AREA, title, mode.reason, why, guide="B §2.1")
    evidence = {"persistence_mode": "enabled" if mode else "disabled"}
    if mode:
        return Finding(fid, AREA, title, Status.PASS, evidence, why, guide="B §2.1")
    fix = Fix(
        "enable persistence (better: run the nvidia-persistenced daemon)",
        commands=(
            f"nvidia-smi -i {i} -pm 1",
            "# persistent across reboots: systemctl enable --now nvidia-persistenced",
        ),
    )
    return Finding(fid, AREA, title, Status.WARN, evidence, why, fix, guide="B §2.1")


@per_gpu
def check_power_limit(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.power_limit.gpu{i}", f"{_label(gpu)}: power limit"
    why = "A power limit below the default caps clocks under load: matrix throughput drops with it (guide B §2.1)."
    limit, default, maximum = (
        read(gpu, "power_limit_w"),
        read(gpu, "power_default_w"),
        read(gpu, "power_max_w"),
    )
    reason = na_reason(limit, default)
    if reason:
        return unknown(fid, AREA, title, reason, why, guide="B §2.1")
    evidence = {
        "enforced_w": limit,
        "default_w": default,
        "max_w": maximum,
        "draw_w": read(gpu, "power_draw_w"),
    }
    if limit < default - 1:
        fix = Fix(
            f"restore the default power limit of {default:g} W",
            commands=(f"nvidia-smi -i {i} -pl {default:g}",),
        )
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix, guide="B §2.1")
    return Finding(fid, AREA, title, Status.PASS, evidence, why, guide="B §2.1")


@per_gpu
def check_clocks_events(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.clocks_events.gpu{i}", f"{_label(gpu)}: clock throttling now"
    why = "Hardware slowdown, thermal or power-brake throttling cut clocks whatever the software does."
    reasons = read(gpu, "clocks_event_reasons")
    if isinstance(reasons, NA):
        return unknown(fid, AREA, title, reasons.reason, why)
    evidence = {
        "reasons": reasons,
        "temperature_c": read(gpu, "temperature_c"),
        "slowdown_temperature_c": read(gpu, "temperature_slowdown_c"),
        "clock_sm_mhz": read(gpu, "clock_sm_mhz"),
        "clock_sm_max_mhz": read(gpu, "clock_sm_max_mhz"),
    }
    hardware = sorted(HARDWARE_THROTTLE.intersection(reasons))
    if hardware:
        fix = Fix(
            "check cooling, power supply and the BMC's event log; `nvidia-smi -q -d PERFORMANCE` shows counters",
            manual=True,
        )
        return Finding(fid, AREA, title, Status.FAIL, evidence, why, fix)
    if SOFTWARE_THROTTLE.intersection(reasons):
        fix = Fix(
            "improve cooling or airflow; the GPU is above its software slowdown temperature", manual=True
        )
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
    return Finding(fid, AREA, title, Status.PASS, evidence, why)


@per_gpu
def check_ecc_mode(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.ecc_mode.gpu{i}", f"{_label(gpu)}: ECC mode"
    why = "Without ECC a flipped bit in HBM silently corrupts weights or gradients."
    current, pending = read(gpu, "ecc_mode_current"), read(gpu, "ecc_mode_pending")
    if isinstance(current, NA):
        return unavailable(fid, AREA, title, current.reason, why, "ecc")
    evidence = {"current": _on_off(current), "pending": _on_off(pending)}
    if not current:
        fix = Fix(
            "enable ECC (takes effect after a reboot)", commands=(f"nvidia-smi -i {i} -e 1",), manual=True
        )
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
    if not isinstance(pending, NA) and pending != current:
        fix = Fix("a change of ECC mode is pending: reboot the node when it is drained", manual=True)
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
    return Finding(fid, AREA, title, Status.PASS, evidence, why)


@per_gpu
def check_ecc_errors(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.ecc_errors.gpu{i}", f"{_label(gpu)}: ECC error counts"
    why = "Uncorrected ECC errors crash jobs (XID 48/94/95) and point to failing memory."
    keys = ("volatile_uncorrected", "aggregate_uncorrected", "volatile_corrected", "aggregate_corrected")
    counts = {k: read(gpu, f"ecc_{k}") for k in keys}
    if all(isinstance(v, NA) for v in counts.values()):
        first = counts["volatile_uncorrected"]
        reason = first.reason if isinstance(first, NA) else "no ECC counters"
        return unavailable(fid, AREA, title, reason, why, "ecc")
    volatile = counts["volatile_uncorrected"]
    aggregate = counts["aggregate_uncorrected"]
    if isinstance(volatile, int) and volatile > 0:
        fix = Fix(
            "drain the node; collect `nvidia-bug-report.sh`; reset the GPU when idle or RMA it", manual=True
        )
        return Finding(fid, AREA, title, Status.FAIL, counts, why, fix)
    if isinstance(aggregate, int) and aggregate > 0:
        fix = Fix("watch this GPU: it has had uncorrected errors before (see remapped rows)", manual=True)
        return Finding(fid, AREA, title, Status.WARN, counts, why, fix)
    return Finding(fid, AREA, title, Status.PASS, counts, why)


@per_gpu
def check_memory_health(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.memory_health.gpu{i}", f"{_label(gpu)}: row remapping / page retirement"
    why = (
        "A pending row remap or page retirement needs a GPU reset to take effect; a remap failure means RMA."
    )
    rows = read(gpu, "remapped_rows")
    pages = {k: read(gpu, k) for k in ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending")}
    reset_fix = Fix(
        "drain the node, then reset the GPU (`nvidia-smi -r -i <index>` by its owner) or reboot", manual=True
    )
    if isinstance(rows, dict):
        evidence: dict[str, Any] = {"remapped_rows": rows}
        if rows.get("failure"):
            fix = Fix(
                "row remapping failed: the GPU needs an RMA; collect `nvidia-bug-report.sh`", manual=True
            )
            return Finding(fid, AREA, title, Status.FAIL, evidence, why, fix)
        if rows.get("pending"):
            return Finding(fid, AREA, title, Status.FAIL, evidence, why, reset_fix)
        if rows.get("uncorrectable", 0) > 0:
            fix = Fix("rows were remapped after uncorrectable errors: watch this GPU", manual=True)
            return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
        return Finding(fid, AREA, title, Status.PASS, evidence, why)
    if not isinstance(pages["retired_pages_pending"], NA):
        evidence = {"retired_pages": pages}
        if pages["retired_pages_pending"]:
            return Finding(fid, AREA, title, Status.FAIL, evidence, why, reset_fix)
        dbe = pages["retired_pages_dbe"]
        if isinstance(dbe, int) and dbe > 0:
            fix = Fix("pages were retired after double-bit errors: watch this GPU", manual=True)
            return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
        return Finding(fid, AREA, title, Status.PASS, evidence, why)
    reason = rows.reason if isinstance(rows, NA) else "no remapping or retirement data"
    return unavailable(fid, AREA, title, reason, why, "remapped_rows")


@per_gpu
def check_pcie_link(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.pcie_link.gpu{i}", f"{_label(gpu)}: PCIe link"
    why = (
        "A link trained below its width or generation caps host<->GPU copies (data loading, offload); "
        "an idle GPU lowering its generation to save power is normal."
    )
    gen, width = read(gpu, "pcie_gen_current"), read(gpu, "pcie_width_current")
    gen_max, width_max = read(gpu, "pcie_gen_max"), read(gpu, "pcie_width_max")
    gpu_gen_max = read(gpu, "pcie_gen_gpu_max")
    reason = na_reason(gen, width, gen_max, width_max)
    evidence = {
        "current": f"Gen{gen} x{width}",
        "max_of_link": f"Gen{gen_max} x{width_max}",
        "max_of_gpu": gpu_gen_max if isinstance(gpu_gen_max, NA) else f"Gen{gpu_gen_max}",
        "replay_counter": read(gpu, "pcie_replay_counter"),
    }
    if reason:
        return unknown(fid, AREA, title, reason, why)
    if width < width_max:
        fix = Fix(
            "the link trained narrower than it can: reseat the GPU or check the riser/slot", manual=True
        )
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
    if isinstance(gpu_gen_max, int) and gen_max < gpu_gen_max:
        fix = Fix(
            f"the slot or riser limits this Gen{gpu_gen_max} GPU to Gen{gen_max}: "
            "check the BIOS PCIe settings and the slot",
            manual=True,
        )
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
    if gen < gen_max:
        evidence["note"] = (
            "below max generation now: normal at idle (ASPM); `dgxperf bench pcie` checks under load"
        )
    return Finding(fid, AREA, title, Status.PASS, evidence, why)


@per_gpu
def check_mig(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.mig.gpu{i}", f"{_label(gpu)}: MIG mode"
    why = "With MIG on, a training job sees one slice of the GPU, not all of it (guide B §5.3)."
    current, pending = read(gpu, "mig_mode_current"), read(gpu, "mig_mode_pending")
    if isinstance(current, NA):
        return unavailable(fid, AREA, title, current.reason, why, "mig")
    evidence = {"current": _on_off(current), "pending": _on_off(pending)}
    if current:
        fix = Fix(
            "MIG is on: fine for multi-tenant inference; for whole-GPU training ask the owner to disable it",
            commands=(f"# nvidia-smi -i {i} -mig 0   (needs the GPU idle; see `dgxperf plan mig`)",),
            manual=True,
        )
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix, guide="B §5.3")
    if not isinstance(pending, NA) and pending != current:
        fix = Fix("a MIG mode change is pending a GPU reset or reboot", manual=True)
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix, guide="B §5.3")
    return Finding(fid, AREA, title, Status.PASS, evidence, why, guide="B §5.3")


@per_gpu
def check_compute_mode(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.compute_mode.gpu{i}", f"{_label(gpu)}: compute mode"
    why = (
        "'Prohibited' refuses every CUDA context; exclusive modes refuse a second process (e.g. a profiler)."
    )
    mode = read(gpu, "compute_mode")
    if isinstance(mode, NA):
        return unknown(fid, AREA, title, mode.reason, why)
    evidence = {"compute_mode": mode}
    if mode == "prohibited":
        fix = Fix("set the default compute mode", commands=(f"nvidia-smi -i {i} -c DEFAULT",))
        return Finding(fid, AREA, title, Status.FAIL, evidence, why, fix)
    if mode == "exclusive_thread":
        fix = Fix(
            "exclusive-thread mode is deprecated; use DEFAULT", commands=(f"nvidia-smi -i {i} -c DEFAULT",)
        )
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
    return Finding(fid, AREA, title, Status.PASS, evidence, why)


@per_gpu
def check_other_processes(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.memory_in_use.gpu{i}", f"{_label(gpu)}: memory held by other processes"
    why = "Memory another process holds is memory your batch cannot use, and its kernels share the SMs."
    procs, used, total = (
        read(gpu, "processes"),
        read(gpu, "memory_used_bytes"),
        read(gpu, "memory_total_bytes"),
    )
    evidence: dict[str, Any] = {"memory_used_bytes": used, "memory_total_bytes": total, "processes": procs}
    if isinstance(procs, list) and procs:
        held = sum(p.get("used_bytes") or 0 for p in procs)
        evidence["held_bytes"] = held
        names = ", ".join(f"{p.get('name')}[{p.get('pid')}]" for p in procs)
        fix = Fix(f"free GPU {i} before benchmarking or training: {names}", manual=True)
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
    if isinstance(used, int) and used > IDLE_MEMORY_BYTES:
        fix = Fix(
            f"{used / GiB:.1f} GiB in use with no process listed (another container?): find it with `nvidia-smi`",
            manual=True,
        )
        return Finding(fid, AREA, title, Status.WARN, evidence, why, fix)
    if isinstance(procs, NA) and isinstance(used, NA):
        return unknown(fid, AREA, title, procs.reason, why)
    return Finding(fid, AREA, title, Status.PASS, evidence, why)


@per_gpu
def check_spec(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.datasheet.gpu{i}", f"{_label(gpu)}: datasheet peaks known"
    why = "bench and train report results as % of the datasheet peak; an unknown model gets absolute figures only."
    name, memory = read(gpu, "name"), read(gpu, "memory_total_bytes")
    if isinstance(name, NA):
        return unknown(fid, AREA, title, name.reason, why)
    spec = match_spec(name, memory if isinstance(memory, int) else None)
    if spec is None:
        fix = Fix(f"add '{name}' to dgxperf.hw.specs (a table row) to get %-of-peak figures", manual=True)
        return Finding(fid, AREA, title, Status.WARN, {"nvml_name": name}, why, fix)
    evidence = {
        "nvml_name": name,
        "spec": spec.key,
        "bf16_tflops": spec.tflops.get("bf16"),
        "hbm_gbs": spec.hbm_bandwidth_gbs,
        "nvlink_gbs": spec.nvlink_bandwidth_gbs,
        "pcie_gen": spec.pcie_gen,
    }
    return Finding(fid, AREA, title, Status.PASS, evidence, why)


@per_gpu
def check_gpm(gpu: dict[str, Any], snap: Snapshot) -> Finding:
    i = gpu["index"]
    fid, title = f"gpu.gpm.gpu{i}", f"{_label(gpu)}: GPM profiling metrics"
    why = (
        "GPM (Hopper+) gives SM, tensor and DRAM activity without DCGM: `dgxperf monitor` and `advise` use it "
        "to tell compute-bound from memory-bound (guide B §4.1)."
    )
    supported, sample = read(gpu, "gpm_supported"), read(gpu, "gpm")
    if supported is False:
        return Finding(fid, AREA, title, Status.NOT_APPLICABLE, {"gpm": "not supported (pre-Hopper)"}, why)
    if isinstance(supported, NA):
        return unavailable(fid, AREA, title, supported.reason, why, "gpm")
    if isinstance(sample, dict):
        return Finding(fid, AREA, title, Status.PASS, {"sample": sample}, why, guide="B §4.1")
    reason = sample.reason if isinstance(sample, NA) else "no sample"
    fix = Fix("GPM answered 'supported' but sampling failed: update the driver / nvidia-ml-py", manual=True)
    return Finding(fid, AREA, title, Status.WARN, {"error": reason}, why, fix, guide="B §4.1")


CHECKS = (
    check_persistence,
    check_power_limit,
    check_clocks_events,
    check_ecc_mode,
    check_ecc_errors,
    check_memory_health,
    check_pcie_link,
    check_mig,
    check_compute_mode,
    check_other_processes,
    check_spec,
    check_gpm,
)
