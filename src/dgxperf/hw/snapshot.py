"""A node snapshot: every raw reading doctor judges, gathered once, saved and replayable.

Collecting (this package, which touches the hardware) is kept apart from judging (``dgxperf.doctor``,
pure functions of a snapshot), so that a snapshot recorded on a real H200 is a test fixture on a
machine without a GPU, and a user can send us theirs with ``dgxperf doctor --save-snapshot``.

Layout (JSON; a reading that could not be taken is ``{"na": "reason"}``)::

    {"schema": "dgxperf.snapshot/1", "collected_at": ISO-8601, "hostname": str,
     "nvml": see dgxperf.hw.nvml.collect_nvml,
     "host": see dgxperf.hw.host.collect_host,
     "software": see dgxperf.hw.software.collect_software,
     "env": {NAME: value} for the variables named in dgxperf.hw.software.RELEVANT_ENV}
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dgxperf.results import from_jsonable, to_jsonable

SNAPSHOT_SCHEMA = "dgxperf.snapshot/1"


class SnapshotError(Exception):
    """A snapshot file that cannot be read back."""


@dataclasses.dataclass
class Snapshot:
    collected_at: str
    hostname: str
    nvml: dict[str, Any]
    host: dict[str, Any]
    software: dict[str, Any]
    env: dict[str, str]

    @property
    def gpus(self) -> list[dict[str, Any]]:
        gpus: list[dict[str, Any]] = self.nvml.get("gpus", [])
        return gpus

    @property
    def nvml_reachable(self) -> bool:
        return bool(self.nvml.get("reachable"))

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SNAPSHOT_SCHEMA,
            "collected_at": self.collected_at,
            "hostname": self.hostname,
            "nvml": to_jsonable(self.nvml),
            "host": to_jsonable(self.host),
            "software": to_jsonable(self.software),
            "env": dict(self.env),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Snapshot:
        schema = data.get("schema")
        if schema != SNAPSHOT_SCHEMA:
            raise SnapshotError(f"not a dgxperf snapshot (schema {schema!r}, expected {SNAPSHOT_SCHEMA!r})")
        return cls(
            collected_at=str(data.get("collected_at", "")),
            hostname=str(data.get("hostname", "")),
            nvml=from_jsonable(data.get("nvml", {})),
            host=from_jsonable(data.get("host", {})),
            software=from_jsonable(data.get("software", {})),
            env={str(k): str(v) for k, v in data.get("env", {}).items()},
        )

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: Path) -> Snapshot:
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise SnapshotError(f"cannot read snapshot {path}: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise SnapshotError(f"{path} is not JSON (line {exc.lineno}: {exc.msg})") from exc
        if not isinstance(data, dict):
            raise SnapshotError(f"{path} is not a dgxperf snapshot")
        return cls.from_json(data)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def collect_snapshot(root: Path, env: Mapping[str, str], *, gpm_sample_s: float = 0.2) -> Snapshot:
    """Read everything doctor needs from this node. Never raises for a missing GPU, file or permission."""
    from dgxperf.hw.host import collect_host
    from dgxperf.hw.nvml import collect_nvml
    from dgxperf.hw.software import collect_software, relevant_env

    host = collect_host(root)
    return Snapshot(
        collected_at=now_iso(),
        hostname=socket.gethostname(),
        nvml=collect_nvml(root, gpm_sample_s=gpm_sample_s),
        host=host,
        software=collect_software(),
        env=relevant_env(env),
    )
