"""Gather the files that device calls on one warm machine brought back into one docs/benchmarks/ folder, in the
layout the committed folders share, so that summarize_runs.py and the tally tests read it as they are:

    python3 scripts/h200/collect_calls.py docs/benchmarks/DATE-CARD-WHAT/ CALL1_DIR CALL2_DIR ...

Each CALL_DIR is one call's copy of $OUT (card.txt, log-callN.txt, log-host.txt, log-seeds.txt, log-table.txt,
monitor-seeds.jsonl, pretrain.json, seeds.tgz), given in the order the calls ran. Per call N its logs become
log-host-callN.txt, log-seeds-callN.txt and log-table-callN.txt and its NVML recording monitor-seeds-callN.jsonl.gz
(gzipped, to keep the tree a device call carries small). Every call's seeds.tgz is unpacked in order, so a later
call's copy of a run replaces an earlier one's; of each run's folder only what the docs keep is copied (result,
metrics, the test and dev answers, a profiled run's trace), and nothing of the machine's dgxperf home, tokenizers or
stderr files.
The destination must not exist or be empty. Errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

RUN_FILES = (
    "result.json",
    "metrics.jsonl",
    "test_predictions.json",
    "dev_predictions.json",
    "profile/trace.json.gz",
)
TOP_FILES = ("durations", "encoder.id")


class CollectError(Exception):
    """Bad input: printed as one line."""


def unpack_runs(calls: list[Path], scratch: Path) -> Path:
    """Every call's seeds.tgz unpacked into one folder, in call order; returns the folder holding the runs."""
    tarballs = [call / "seeds.tgz" for call in calls if (call / "seeds.tgz").is_file()]
    if not tarballs:
        raise CollectError("no call folder holds a seeds.tgz: nothing ran to the end of a run")
    for tarball in tarballs:
        try:
            with tarfile.open(tarball) as archive:
                archive.extractall(scratch, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise CollectError(f"{tarball}: not a readable tarball ({exc})") from None
    # capture_seeds.sh packs its runs under ft/
    return scratch / "ft" if (scratch / "ft").is_dir() else scratch


def copy_runs(runs: Path, dest: Path) -> list[str]:
    """Each run folder's kept files, and the top-level files the docs keep; returns the runs' names."""
    names = []
    for folder in sorted(p for p in runs.iterdir() if p.is_dir() and (p / "result.json").is_file()):
        for name in RUN_FILES:
            if (folder / name).is_file():
                (dest / folder.name / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / name, dest / folder.name / name)
        names.append(folder.name)
    for name in TOP_FILES:
        if (runs / name).is_file():
            shutil.copyfile(runs / name, dest / name)
    return names


def copy_call_files(calls: list[Path], dest: Path) -> None:
    """Logs and recordings named by call; the first card.txt and pretrain.json found."""
    for number, call in enumerate(calls, start=1):
        for log in sorted(call.glob("log-call*.txt")):
            shutil.copyfile(log, dest / log.name)
        # log-host.txt: the speed item's host and `bench launch` header, which summarize_runs.py reads
        for stem in ("log-host", "log-seeds", "log-table"):
            if (call / f"{stem}.txt").is_file():
                shutil.copyfile(call / f"{stem}.txt", dest / f"{stem}-call{number}.txt")
        recording = call / "monitor-seeds.jsonl"
        if recording.is_file():
            packed = gzip.compress(recording.read_bytes(), compresslevel=9, mtime=0)
            (dest / f"monitor-seeds-call{number}.jsonl.gz").write_bytes(packed)
        for name in ("card.txt", "pretrain.json"):
            if (call / name).is_file() and not (dest / name).exists():
                shutil.copyfile(call / name, dest / name)


def collect(dest: Path, calls: list[Path]) -> list[str]:
    for call in calls:
        if not call.is_dir():
            raise CollectError(f"{call}: no such call folder")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise CollectError(f"{dest}: exists and is not an empty folder; name a new one")
    with tempfile.TemporaryDirectory() as scratch:
        runs = unpack_runs(calls, Path(scratch))
        dest.mkdir(parents=True, exist_ok=True)
        names = copy_runs(runs, dest)
    copy_call_files(calls, dest)
    for path in dest.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="the new docs/benchmarks/ folder")
    parser.add_argument("calls", type=Path, nargs="+", help="each call's copy of $OUT, in the order they ran")
    args = parser.parse_args(argv)
    try:
        names = collect(args.dest, args.calls)
    except CollectError as exc:
        print(f"collect_calls: {exc}", file=sys.stderr)
        return 2
    print(f"{args.dest}: {len(names)} run(s) from {len(args.calls)} call(s): {' '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
