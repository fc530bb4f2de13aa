"""Tokenizers for Chinese text classification: character-level (the default) and WordPiece.

Both share one interface (:class:`Tokenizer`), one set of special tokens with fixed ids
(``[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3``, so the model, the collate function and the loop never have to
ask) and one file format (JSON with a schema id and a fingerprint), so a run can save the tokenizer it
trained with and a resumed or evaluated run can prove it encodes text the same way.

Why character-level is the default: Chinese has no spaces, and the characters themselves carry most of
the meaning; Google's ``bert-base-chinese`` splits every CJK character into its own token for the same
reason. A character vocabulary built from 14k reviews has a few thousand entries, needs no external
segmenter, and is fully determined by the training split.

Normalisation (both kinds): Unicode NFKC, which folds full-width forms into half-width ones (``ＡＢＣ``
-> ``ABC``, ``，`` -> ``,``, ideographic space -> space) and compatibility characters into their plain
forms, then lower case. A review written with a full-width ``Ｔ`` and one with ``t`` therefore get the
same ids. Control and format characters (zero-width spaces, BOMs) are dropped and runs of whitespace
become one space, so spacing noise does not cost sequence length.

Vocabularies are built from the TRAINING split only: a character first seen in dev or test maps to
``[UNK]``, as it would for any text the model meets after training.
"""

from __future__ import annotations

import abc
import collections
import hashlib
import itertools
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from dgxperf.atomic import atomic_write
from dgxperf.train.data import DataError

TOKENIZER_SCHEMA = "dgxperf.tokenizer/1"

PAD_ID, UNK_ID, CLS_ID, SEP_ID = 0, 1, 2, 3
SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")

# Part of every fingerprint: change it whenever normalise() changes, so cached encodings are rebuilt.
NORMALIZATION = "nfkc+lower+drop-control+collapse-space/1"

DEFAULT_CHAR_MIN_FREQ = 2
DEFAULT_WORDPIECE_VOCAB = 8000


class _CharMap(dict[int, "str | None"]):
    """``str.translate`` table filled on first sight of each character: whitespace -> " ", control and
    format characters -> deleted, anything else -> itself. Looking a character up in C is much faster
    than asking ``unicodedata`` for every character of every text."""

    def __missing__(self, code: int) -> str | None:
        ch = chr(code)
        out = " " if ch.isspace() else None if unicodedata.category(ch) in ("Cc", "Cf") else ch
        self[code] = out
        return out


_CHAR_MAP = _CharMap()
_SPACE_RUNS = re.compile(" {2,}")


def normalise(text: str) -> str:
    """NFKC, lower case, control/format characters dropped, whitespace runs collapsed, ends stripped."""
    if not unicodedata.is_normalized("NFKC", text):  # the check is 30x cheaper than normalising
        text = unicodedata.normalize("NFKC", text)
    text = text.lower().translate(_CHAR_MAP)
    return _SPACE_RUNS.sub(" ", text).strip()


class Tokenizer(abc.ABC):
    """What the data pipeline needs from a tokenizer: content ids, a vocabulary, a fingerprint, a file.

    ``ids(text)`` gives the ids of the text itself (no special tokens, no truncation); ``encode`` adds
    ``[CLS]``/``[SEP]`` and truncates. Keeping the two apart lets :func:`dgxperf.train.data.encode`
    measure how many texts were cut without encoding twice.
    """

    kind: ClassVar[str]

    @property
    @abc.abstractmethod
    def vocab(self) -> tuple[str, ...]:
        """Every token, in id order (the four special tokens first)."""

    @abc.abstractmethod
    def ids(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens and without truncation."""

    @abc.abstractmethod
    def _options(self) -> dict[str, Any]:
        """The training options that, with the vocabulary, define how text is encoded."""

    @abc.abstractmethod
    def to_json(self) -> dict[str, Any]:
        """Everything needed to rebuild this tokenizer (written by :meth:`save`)."""

    def ids_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.ids(t) for t in texts]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def fingerprint(self) -> str:
        """sha256 of (kind, normalisation, options, vocabulary): equal fingerprints encode text equally.

        The encoded-data cache is keyed by it, so a tokenizer trained on another split, with another
        minimum frequency or after a change to :func:`normalise`, never reuses stale token ids.
        """
        payload = {
            "kind": self.kind,
            "normalization": NORMALIZATION,
            "options": self._options(),
            "vocab": list(self.vocab),
        }
        blob = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def encode(self, text: str, max_len: int) -> list[int]:
        """``[CLS] tokens... [SEP]``, at most ``max_len`` ids; truncation cuts the text, never ``[SEP]``."""
        return _frame(self.ids(text), max_len)

    def encode_batch(self, texts: Sequence[str], max_len: int) -> list[list[int]]:
        return [_frame(ids, max_len) for ids in self.ids_batch(texts)]

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """The token strings of ``ids`` (for inspection and tests)."""
        vocab = self.vocab
        return [vocab[i] for i in ids]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the tokenizer as JSON, atomically (a reader never sees half a file)."""
        doc = {
            "schema": TOKENIZER_SCHEMA,
            "kind": self.kind,
            **self.to_json(),
            "fingerprint": self.fingerprint,
        }
        with atomic_write(Path(path)) as handle:
            handle.write((json.dumps(doc, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))


def _frame(ids: list[int], max_len: int) -> list[int]:
    if max_len < 2:
        raise DataError(f"max_len must be at least 2 ([CLS] and [SEP]), got {max_len}")
    return [CLS_ID, *ids[: max_len - 2], SEP_ID]


class CharTokenizer(Tokenizer):
    """One token per (normalised) character; characters rarer than ``min_freq`` in training -> [UNK].

    Why ``min_freq`` defaults to 2, not 1: a character seen once in training gets an embedding row
    trained on a single example, which is mostly noise (typos, rare variants, emoji), and with
    ``min_freq=1`` ``[UNK]`` never occurs in training at all, so its embedding stays at its random
    initial value while dev and test texts do contain unseen characters. With 2, singletons become
    ``[UNK]`` in training, and the model learns what "a character I do not know" looks like.
    """

    kind: ClassVar[str] = "char"

    def __init__(self, vocab: Sequence[str], *, min_freq: int = DEFAULT_CHAR_MIN_FREQ) -> None:
        if tuple(vocab[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise DataError(f"a character vocabulary must start with {', '.join(SPECIAL_TOKENS)}")
        self._vocab = tuple(vocab)
        self._index = {tok: i for i, tok in enumerate(self._vocab)}
        if len(self._index) != len(self._vocab):
            raise DataError("a character vocabulary holds the same token twice")
        self.min_freq = min_freq

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        min_freq: int = DEFAULT_CHAR_MIN_FREQ,
        max_vocab: int | None = None,
    ) -> CharTokenizer:
        """Build the vocabulary from ``texts`` (the training split): frequent characters first.

        Order: descending count, ties by code point, so the same texts always give the same ids
        whatever order they come in. ``max_vocab`` (special tokens included) caps the size.
        """
        if min_freq < 1:
            raise DataError(f"min_freq must be at least 1, got {min_freq}")
        counts: collections.Counter[str] = collections.Counter()
        for text in texts:
            counts.update(normalise(text))
        chars = sorted((c for c, n in counts.items() if n >= min_freq), key=lambda c: (-counts[c], c))
        if max_vocab is not None:
            chars = chars[: max(0, max_vocab - len(SPECIAL_TOKENS))]
        return cls([*SPECIAL_TOKENS, *chars], min_freq=min_freq)

    @property
    def vocab(self) -> tuple[str, ...]:
        return self._vocab

    def ids(self, text: str) -> list[int]:
        return list(map(self._index.get, normalise(text), itertools.repeat(UNK_ID)))

    def _options(self) -> dict[str, Any]:
        return {"min_freq": self.min_freq}

    def to_json(self) -> dict[str, Any]:
        return {"normalization": NORMALIZATION, "options": self._options(), "vocab": list(self._vocab)}


class WordPieceTokenizer(Tokenizer):
    """WordPiece subwords trained with Hugging Face ``tokenizers`` on the training split.

    The normaliser is NFKC followed by BERT's (lower case, control characters dropped); the
    pre-tokenizer is BERT's (whitespace and punctuation). With ``split_cjk=True`` (default, as
    ``bert-base-chinese``) every CJK character is its own word, so Chinese stays character-level and
    subwords form for Latin-script words and numbers; with ``split_cjk=False`` WordPiece learns
    multi-character Chinese pieces from runs between punctuation (words longer than 100 characters
    become ``[UNK]``, a WordPiece limit).

    Training is not reproducible bit for bit: ``tokenizers`` breaks ties between equally frequent
    merges in hash-map order, which changes from process to process (huggingface/tokenizers#1794), so
    two trainings on the same texts can give different vocabularies and fingerprints. Train once (one
    rank), :meth:`save` it with the run, and :func:`load_tokenizer` it on the other ranks and on resume.
    The character tokenizer has no such issue: every rank may build its own.
    """

    kind: ClassVar[str] = "wordpiece"

    def __init__(self, backend: Any, *, vocab_size: int, min_freq: int, split_cjk: bool) -> None:
        self._backend = backend
        size = backend.get_vocab_size(with_added_tokens=True)
        self._vocab = tuple(backend.id_to_token(i) for i in range(size))
        if self._vocab[: len(SPECIAL_TOKENS)] != SPECIAL_TOKENS:
            raise DataError(f"a WordPiece vocabulary must start with {', '.join(SPECIAL_TOKENS)}")
        self.target_vocab_size = vocab_size
        self.min_freq = min_freq
        self.split_cjk = split_cjk

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int = DEFAULT_WORDPIECE_VOCAB,
        min_freq: int = DEFAULT_CHAR_MIN_FREQ,
        split_cjk: bool = True,
    ) -> WordPieceTokenizer:
        tk = _import_tokenizers()
        backend = tk.Tokenizer(tk.models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
        backend.normalizer = _wordpiece_normalizer(tk, split_cjk)
        backend.pre_tokenizer = tk.pre_tokenizers.BertPreTokenizer()
        trainer = tk.trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_freq,
            special_tokens=list(SPECIAL_TOKENS),
            show_progress=False,
        )
        backend.train_from_iterator(list(texts), trainer)
        return cls(backend, vocab_size=vocab_size, min_freq=min_freq, split_cjk=split_cjk)

    @property
    def vocab(self) -> tuple[str, ...]:
        return self._vocab

    def ids(self, text: str) -> list[int]:
        return list(self._backend.encode(text, add_special_tokens=False).ids)

    def ids_batch(self, texts: Sequence[str]) -> list[list[int]]:
        # The Rust backend encodes a batch on all cores; one call instead of one per text.
        return [list(e.ids) for e in self._backend.encode_batch(list(texts), add_special_tokens=False)]

    def _options(self) -> dict[str, Any]:
        return {"vocab_size": self.target_vocab_size, "min_freq": self.min_freq, "split_cjk": self.split_cjk}

    def to_json(self) -> dict[str, Any]:
        return {
            "normalization": NORMALIZATION,
            "options": self._options(),
            "vocab": list(self._vocab),
            "backend": json.loads(self._backend.to_str()),
        }


def _wordpiece_normalizer(tk: Any, split_cjk: bool) -> Any:
    bert = tk.normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=split_cjk, strip_accents=False, lowercase=True
    )
    return tk.normalizers.Sequence([tk.normalizers.NFKC(), bert])


def _import_tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError as exc:
        raise DataError(
            "the WordPiece tokenizer needs the `tokenizers` package: `pip install tokenizers`, "
            "or use the character tokenizer (kind 'char')"
        ) from exc
    return tokenizers


def build_tokenizer(kind: str, train_texts: Iterable[str], **opts: Any) -> Tokenizer:
    """Train a tokenizer of ``kind`` ("char" or "wordpiece") on the training texts.

    ``opts`` go to the kind's ``train``: ``min_freq``/``max_vocab`` for "char";
    ``vocab_size``/``min_freq``/``split_cjk`` for "wordpiece".
    """
    allowed = {"char": {"min_freq", "max_vocab"}, "wordpiece": {"vocab_size", "min_freq", "split_cjk"}}
    if kind not in allowed:
        raise DataError(f"unknown tokenizer kind {kind!r}; choose one of: char, wordpiece")
    unknown = sorted(set(opts) - allowed[kind])
    if unknown:
        raise DataError(f"tokenizer {kind!r} takes no option(s) {', '.join(unknown)}")
    if kind == "char":
        return CharTokenizer.train(train_texts, **opts)
    return WordPieceTokenizer.train(train_texts, **opts)


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """Read a tokenizer written by :meth:`Tokenizer.save`; a damaged or foreign file is a DataError."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"{p}: cannot read the tokenizer file: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: not a tokenizer file (invalid JSON: {exc})") from exc
    if not isinstance(doc, dict) or doc.get("schema") != TOKENIZER_SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else None
        raise DataError(f"{p}: not a {TOKENIZER_SCHEMA} file (schema: {found!r})")
    if doc.get("normalization") != NORMALIZATION:
        raise DataError(
            f"{p}: written with normalisation {doc.get('normalization')!r}, this dgxperf uses "
            f"{NORMALIZATION!r}; retrain the tokenizer"
        )
    kind = doc.get("kind")
    opts = doc.get("options") or {}
    try:
        tok: Tokenizer
        if kind == "char":
            tok = CharTokenizer(doc["vocab"], min_freq=int(opts["min_freq"]))
        elif kind == "wordpiece":
            tk = _import_tokenizers()
            backend = tk.Tokenizer.from_str(json.dumps(doc["backend"]))
            tok = WordPieceTokenizer(
                backend,
                vocab_size=int(opts["vocab_size"]),
                min_freq=int(opts["min_freq"]),
                split_cjk=bool(opts["split_cjk"]),
            )
        else:
            raise DataError(f"{p}: unknown tokenizer kind {kind!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{p}: incomplete tokenizer file ({type(exc).__name__}: {exc})") from exc
    if tok.fingerprint != doc.get("fingerprint"):
        raise DataError(
            f"{p}: the fingerprint does not match the vocabulary (the file was edited or damaged)"
        )
    return tok
