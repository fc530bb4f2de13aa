"""What a doctor check is: a pure function from a node snapshot to findings.

Each area module (gpu, driver, stack, topology, os, storage) exports ``CHECKS``, a tuple of such
functions. A check never touches the machine — the snapshot holds every reading — so each one is
tested against recorded snapshots and fixture trees. A reading that is :class:`NA` makes the finding
``unknown`` with the reason, never a crash and never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import NA, Finding, Status

Check = Callable[[Snapshot], Iterable[Finding]]


def unknown(
    id: str, area: str, title: str, reason: str, why: str, guide: str | None = None, **evidence: Any
) -> Finding:
    """A finding for a check that could not read what it needs; ``reason`` says what is missing."""
    return Finding(
        id=id,
        area=area,
        title=title,
        status=Status.UNKNOWN,
        evidence={"reason": reason, **evidence},
        why=why,
        guide=guide,
    )


def unavailable(id: str, area: str, title: str, reason: str, why: str, key: str) -> Finding:
    """A reading NVML could not give: not applicable when this GPU lacks the feature, else unknown."""
    if "NOT_SUPPORTED" in reason or "not in this nvidia-ml-py" in reason:
        return Finding(id, area, title, Status.NOT_APPLICABLE, {key: reason}, why)
    return unknown(id, area, title, reason, why)


def read(readings: Mapping[str, Any], key: str) -> Any:
    """One reading; a key an older snapshot lacks reads as NA, like any reading that could not be taken."""
    return readings[key] if key in readings else NA(f"{key} not recorded in this snapshot")


def na_reason(*values: Any) -> str | None:
    """The reason of the first NA among ``values``, or None when all were read."""
    for value in values:
        if isinstance(value, NA):
            return value.reason
    return None


def context_reason(snap: Snapshot, reason: str) -> str:
    """``reason``, prefixed with why this node may hide the input (a container, no root)."""
    host = snap.host
    parts = []
    container = host.get("container")
    if isinstance(container, str) and container:
        parts.append(f"running in a {container} container")
    if host.get("root") == "/" and host.get("is_root") is False:
        parts.append("not running as root")
    return f"{', '.join(parts)}: {reason}" if parts else reason
