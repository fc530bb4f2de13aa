"""The docs point at files that exist: README.md and the device plan (docs/benchmarks/PENDING.md) name
scripts, result folders and sources, and a renamed or removed one would send a reader, or the next device
session, to nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATH = re.compile(r"(?:scripts|docs/benchmarks|src/dgxperf|tests)/[A-Za-z0-9_./-]+")


def named_paths(text: str) -> set[str]:
    return {match.rstrip(".") for match in PATH.findall(text)}


def test_named_paths_are_found_as_written() -> None:
    text = (
        "see `scripts/h200/capture_graphs.sh`, then docs/benchmarks/2026-12-04-h200-encoder-k/. "
        "And src/dgxperf/train/probe.py."
    )
    assert named_paths(text) == {
        "scripts/h200/capture_graphs.sh",
        "docs/benchmarks/2026-12-04-h200-encoder-k/",
        "src/dgxperf/train/probe.py",
    }


@pytest.mark.parametrize("doc", ["README.md", "docs/benchmarks/PENDING.md"])
def test_every_path_a_doc_names_exists(doc: str) -> None:
    paths = named_paths((ROOT / doc).read_text())
    assert paths, f"{doc} names no path: the pattern is wrong"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"{doc} names paths that do not exist: {missing}"
