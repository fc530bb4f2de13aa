"""`dgxperf doctor`: is this node set up the way a fast training node should be, and what exactly to change.

``run_checks`` judges a :class:`~dgxperf.hw.snapshot.Snapshot` with every area's checks. A check that
raises is a dgxperf bug: it becomes an ``unknown`` finding naming the bug, and the other checks still run.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from dgxperf import __version__
from dgxperf.doctor import driver, gpu, os, stack, storage, topology
from dgxperf.doctor.base import Check
from dgxperf.hw.fingerprint import fingerprint_from_snapshot
from dgxperf.hw.snapshot import Snapshot, now_iso
from dgxperf.results import Finding, Status

DOCTOR_SCHEMA = "dgxperf.doctor/1"
AREAS = ("driver", "gpu", "topology", "framework", "os", "storage")
ALL_CHECKS: tuple[Check, ...] = (
    *driver.CHECKS,
    *gpu.CHECKS,
    *topology.CHECKS,
    *stack.CHECKS,
    *os.CHECKS,
    *storage.CHECKS,
)


@dataclasses.dataclass
class DoctorReport:
    findings: list[Finding]
    snapshot: Snapshot
    source: str
    collect_seconds: float
    created_at: str = dataclasses.field(default_factory=now_iso)

    @property
    def counts(self) -> dict[str, int]:
        counts = Counter(f.status.value for f in self.findings)
        return {s.value: counts.get(s.value, 0) for s in Status}

    @property
    def failed(self) -> bool:
        return any(f.status is Status.FAIL for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": DOCTOR_SCHEMA,
            "tool_version": __version__,
            "created_at": self.created_at,
            "hostname": self.snapshot.hostname,
            "source": self.source,
            "collect_seconds": round(self.collect_seconds, 3),
            "fingerprint": fingerprint_from_snapshot(self.snapshot),
            "summary": self.counts,
            "findings": [f.to_json() for f in self.findings],
        }

    def summary_line(self) -> str:
        c = self.counts
        return f"{c['fail']} fail, {c['warn']} warn, {c['pass']} pass, {c['unknown']} unknown"


def run_checks(snap: Snapshot, checks: Sequence[Check] = ALL_CHECKS) -> list[Finding]:
    findings: list[Finding] = []
    for check in checks:
        try:
            findings.extend(check(snap))
        except Exception as exc:  # one broken check must not hide the others' findings
            findings.append(
                Finding(
                    id=f"internal.{check.__name__}",
                    area="internal",
                    title=f"check {check.__name__} crashed",
                    status=Status.UNKNOWN,
                    evidence={"error": f"{type(exc).__name__}: {exc}"},
                    why="This is a bug in dgxperf; please report it with `dgxperf doctor --save-snapshot`.",
                )
            )
    return findings


def diagnose(
    snap: Snapshot, *, source: str, collect_seconds: float, areas: Sequence[str] = AREAS
) -> DoctorReport:
    started = time.perf_counter()
    findings = [f for f in run_checks(snap) if f.area in areas or f.area == "internal"]
    return DoctorReport(findings, snap, source, collect_seconds + time.perf_counter() - started)
