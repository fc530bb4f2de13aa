"""GPU checks: the H200 recording passes them; each failure is that recording with one reading changed."""

from __future__ import annotations

from typing import Any

import pytest

from dgxperf.doctor import gpu as gpu_checks
from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import NA, Finding, Status

from .snapshots import h200


def run(check: Any, snap: Snapshot) -> Finding:
    findings = list(check(snap))
    assert len(findings) == len(snap.gpus) == 1
    return findings[0]


def changed(**readings: Any) -> Snapshot:
    snap = h200()
    snap.gpus[0].update(readings)
    return snap


def test_the_h200_recording_passes_every_gpu_check() -> None:
    snap = h200()
    for check in gpu_checks.CHECKS:
        finding = run(check, snap)
        assert finding.status is Status.PASS, (finding.id, finding.evidence)
        assert finding.id.endswith(".gpu0")
        assert finding.fix is None


def test_no_gpus_no_findings() -> None:
    snap = h200()
    snap.nvml["gpus"] = []
    assert all(list(check(snap)) == [] for check in gpu_checks.CHECKS)


def test_persistence_off_warns_with_the_nvidia_smi_line() -> None:
    finding = run(gpu_checks.check_persistence, changed(persistence_mode=0))
    assert finding.status is Status.WARN
    assert finding.fix is not None and "nvidia-smi -i 0 -pm 1" in finding.fix.commands
    assert finding.guide == "B §2.1"
    unknown = run(gpu_checks.check_persistence, changed(persistence_mode=NA("NVML_ERROR_NO_PERMISSION: x")))
    assert unknown.status is Status.UNKNOWN and "NO_PERMISSION" in unknown.evidence["reason"]


def test_power_limit_below_default_warns() -> None:
    finding = run(gpu_checks.check_power_limit, changed(power_limit_w=500.0))
    assert finding.status is Status.WARN
    assert finding.evidence["enforced_w"] == 500.0 and finding.evidence["default_w"] == 700.0
    assert finding.fix is not None and finding.fix.commands == ("nvidia-smi -i 0 -pl 700",)


@pytest.mark.parametrize(
    ("reasons", "status"),
    [
        (["gpu_idle"], Status.PASS),
        (["sw_power_cap"], Status.PASS),
        (["sw_thermal_slowdown"], Status.WARN),
        (["hw_slowdown", "hw_power_brake_slowdown"], Status.FAIL),
    ],
)
def test_throttle_reasons(reasons: list[str], status: Status) -> None:
    assert run(gpu_checks.check_clocks_events, changed(clocks_event_reasons=reasons)).status is status


def test_ecc_mode_disabled_or_pending() -> None:
    off = run(gpu_checks.check_ecc_mode, changed(ecc_mode_current=0, ecc_mode_pending=0))
    assert off.status is Status.WARN and off.fix is not None and off.fix.manual
    pending = run(gpu_checks.check_ecc_mode, changed(ecc_mode_current=1, ecc_mode_pending=0))
    assert pending.status is Status.WARN
    consumer = run(gpu_checks.check_ecc_mode, changed(ecc_mode_current=NA("NVML_ERROR_NOT_SUPPORTED: x")))
    assert consumer.status is Status.NOT_APPLICABLE


def test_ecc_errors() -> None:
    assert run(gpu_checks.check_ecc_errors, changed(ecc_volatile_uncorrected=2)).status is Status.FAIL
    assert run(gpu_checks.check_ecc_errors, changed(ecc_aggregate_uncorrected=1)).status is Status.WARN
    corrected = run(gpu_checks.check_ecc_errors, changed(ecc_volatile_corrected=10))
    assert corrected.status is Status.PASS and corrected.evidence["volatile_corrected"] == 10


def test_row_remapping() -> None:
    rows = {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}
    pending = run(gpu_checks.check_memory_health, changed(remapped_rows=rows))
    assert pending.status is Status.FAIL and "reset" in pending.fix.summary  # type: ignore[union-attr]
    failed = run(
        gpu_checks.check_memory_health, changed(remapped_rows={**rows, "pending": False, "failure": True})
    )
    assert failed.status is Status.FAIL and "RMA" in failed.fix.summary  # type: ignore[union-attr]
    remapped = run(gpu_checks.check_memory_health, changed(remapped_rows={**rows, "pending": False}))
    assert remapped.status is Status.WARN


def test_page_retirement_on_pre_ampere_gpus() -> None:
    volta = changed(
        remapped_rows=NA("NVML_ERROR_NOT_SUPPORTED: x"),
        retired_pages_sbe=0,
        retired_pages_dbe=1,
        retired_pages_pending=0,
    )
    assert run(gpu_checks.check_memory_health, volta).status is Status.WARN
    volta.gpus[0]["retired_pages_pending"] = 1
    assert run(gpu_checks.check_memory_health, volta).status is Status.FAIL


def test_pcie_link_degraded_width_and_slot_limited_generation() -> None:
    narrow = run(gpu_checks.check_pcie_link, changed(pcie_width_current=8))
    assert narrow.status is Status.WARN and "x8" in narrow.evidence["current"]
    slot = run(gpu_checks.check_pcie_link, changed(pcie_gen_max=4, pcie_gen_current=4))
    assert slot.status is Status.WARN and "Gen5 GPU to Gen4" in slot.fix.summary  # type: ignore[union-attr]
    idle = run(gpu_checks.check_pcie_link, changed(pcie_gen_current=1))
    assert idle.status is Status.PASS and "normal at idle" in idle.evidence["note"]


def test_mig_and_compute_mode() -> None:
    assert run(gpu_checks.check_mig, changed(mig_mode_current=1, mig_mode_pending=1)).status is Status.WARN
    assert run(gpu_checks.check_mig, changed(mig_mode_pending=1)).status is Status.WARN
    prohibited = run(gpu_checks.check_compute_mode, changed(compute_mode="prohibited"))
    assert prohibited.status is Status.FAIL
    assert prohibited.fix is not None and prohibited.fix.commands == ("nvidia-smi -i 0 -c DEFAULT",)
    assert run(gpu_checks.check_compute_mode, changed(compute_mode="exclusive_process")).status is Status.PASS


def test_other_processes_holding_memory() -> None:
    procs = [{"pid": 4242, "name": "python3", "used_bytes": 30 * 2**30}]
    finding = run(gpu_checks.check_other_processes, changed(processes=procs))
    assert finding.status is Status.WARN
    assert finding.evidence["held_bytes"] == 30 * 2**30
    assert "python3[4242]" in finding.fix.summary  # type: ignore[union-attr]
    hidden = run(gpu_checks.check_other_processes, changed(memory_used_bytes=40 * 2**30))
    assert hidden.status is Status.WARN and "no process listed" in hidden.fix.summary  # type: ignore[union-attr]


def test_datasheet_match_and_unknown_model() -> None:
    finding = run(gpu_checks.check_spec, h200())
    assert finding.evidence["spec"] == "h200-sxm"
    assert finding.evidence["hbm_gbs"] == 4800
    unknown = run(gpu_checks.check_spec, changed(name="NVIDIA GeForce RTX 4090"))
    assert unknown.status is Status.WARN


def test_gpm_sample_recorded_and_failure_paths() -> None:
    finding = run(gpu_checks.check_gpm, h200())
    assert set(finding.evidence["sample"]) >= {"sm_util", "any_tensor_util", "dram_bw_util"}
    assert run(gpu_checks.check_gpm, changed(gpm_supported=False)).status is Status.NOT_APPLICABLE
    broken = run(gpu_checks.check_gpm, changed(gpm=NA("GPM sampling failed: ArgumentError")))
    assert broken.status is Status.WARN


def test_snapshot_without_a_reading_is_unknown_not_a_crash() -> None:
    snap = h200()
    del snap.gpus[0]["persistence_mode"]
    finding = run(gpu_checks.check_persistence, snap)
    assert finding.status is Status.UNKNOWN and "not recorded" in finding.evidence["reason"]
