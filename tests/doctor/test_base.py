from __future__ import annotations

from typing import Any

from dgxperf.doctor.base import context_reason, na_reason, read
from dgxperf.hw.snapshot import Snapshot
from dgxperf.results import NA


def test_context_reason_without_root() -> None:
    host: dict[str, Any] = {"root": "/", "is_root": False, "container": None}
    snap = Snapshot("", "t", {}, host, {}, {})
    assert context_reason(snap, "x") == "not running as root: x"
    host["container"] = "podman"
    assert context_reason(snap, "x") == "running in a podman container, not running as root: x"
    assert context_reason(Snapshot("", "t", {}, {"root": "/tmp/t"}, {}, {}), "x") == "x"


def test_read_gives_na_for_keys_an_older_snapshot_lacks() -> None:
    assert read({"a": 1}, "a") == 1
    missing = read({}, "persistence_mode")
    assert isinstance(missing, NA) and "persistence_mode" in missing.reason


def test_na_reason_names_the_first_missing_reading() -> None:
    assert na_reason(1, NA("first"), NA("second")) == "first"
    assert na_reason(1, 2) is None
