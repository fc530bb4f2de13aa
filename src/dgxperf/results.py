"""Typed, JSON-serialisable results shared by every capability.

Each result type has one versioned schema id (``SCHEMA``); the CLI prints it, the run store keeps it, and
``report``/``advise`` read it back. A value that could not be read is an :class:`NA` carrying the reason,
never an exception and never a made-up number.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class NA:
    """A reading that is not available, with the reason (an NVML error, a missing file, no permission)."""

    reason: str

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"n/a ({self.reason})"


def is_na(value: object) -> bool:
    return isinstance(value, NA)


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "not_applicable"

    @property
    def needs_action(self) -> bool:
        return self in (Status.WARN, Status.FAIL)


@dataclasses.dataclass(frozen=True)
class Fix:
    """How to put a finding right. Nothing here is ever executed by dgxperf.

    ``commands`` are idempotent shell lines a person runs as root. ``sysctl`` settings, ``udev`` rules and
    ``limits`` lines are gathered by the fix script into one drop-in file each, so that they persist
    across reboots. A ``manual`` fix needs judgement (reboot, RMA, rebuild) and is written as a comment.
    """

    summary: str
    commands: tuple[str, ...] = ()
    sysctl: tuple[tuple[str, str], ...] = ()
    udev: tuple[str, ...] = ()
    limits: tuple[str, ...] = ()
    manual: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "commands": list(self.commands),
            "sysctl": {k: v for k, v in self.sysctl},
            "udev": list(self.udev),
            "limits": list(self.limits),
            "manual": self.manual,
        }

    @property
    def shown_commands(self) -> list[str]:
        """What a person would type now, for the human view."""
        shown = [f"sysctl -w {k}='{v}'" for k, v in self.sysctl]
        shown += list(self.commands)
        return shown


@dataclasses.dataclass(frozen=True)
class Finding:
    """One check's verdict, with the evidence it read, why it matters and how to fix it."""

    id: str
    area: str
    title: str
    status: Status
    evidence: Mapping[str, Any]
    why: str
    fix: Fix | None = None
    guide: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "area": self.area,
            "title": self.title,
            "status": self.status.value,
            "evidence": to_jsonable(dict(self.evidence)),
            "why": self.why,
            "guide": self.guide,
            "fix": self.fix.to_json() if self.fix else None,
        }


def to_jsonable(value: Any) -> Any:
    """Turn readings (NA, enums, dataclasses, tuples) into plain JSON values."""
    if isinstance(value, NA):
        return {"na": value.reason}
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_json"):
            return value.to_json()
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def from_jsonable(value: Any) -> Any:
    """Inverse of :func:`to_jsonable` for readings: ``{"na": reason}`` becomes :class:`NA` again."""
    if isinstance(value, dict):
        if set(value) == {"na"}:
            return NA(str(value["na"]))
        return {k: from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    return value
