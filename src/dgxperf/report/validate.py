"""`dgxperf validate`: guide A §7's validation for this node, phase by phase.

Phases land with their issues; until then validate runs what exists (the node audit) and says plainly
which phases are not yet available, so the README's first command always does something useful.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dgxperf import __version__
from dgxperf.doctor import DoctorReport

VALIDATE_SCHEMA = "dgxperf.validate/0"


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str
    what: str
    available: bool


PHASES = (
    Phase("doctor", "node audit against both guides", True),
    Phase("bench all --quick", "GEMM, HBM, PCIe and NCCL ceilings vs datasheet peaks", False),
    Phase("train baseline / guide / optimized", "guide A §7's table for this node, with telemetry", False),
    Phase("advise", "what slowed each recipe, from its telemetry", False),
    Phase("ablation", "the measured effect of each optimisation on its own", False),
    Phase("report", "Markdown and self-contained HTML report", False),
)


@dataclasses.dataclass
class ValidateResult:
    doctor: DoctorReport

    @property
    def complete(self) -> bool:
        return all(p.available for p in PHASES)

    def to_json(self) -> dict[str, Any]:
        doctor = self.doctor.to_json()
        return {
            "schema": VALIDATE_SCHEMA,
            "tool_version": __version__,
            "phases": [
                {"phase": p.name, "what": p.what, "state": "ran" if p.available else "not yet available"}
                for p in PHASES
            ],
            "doctor": {
                "summary": doctor["summary"],
                "failed": [f["id"] for f in doctor["findings"] if f["status"] == "fail"],
                "warned": [f["id"] for f in doctor["findings"] if f["status"] == "warn"],
            },
            "fingerprint": doctor["fingerprint"],
            "complete": self.complete,
        }
