"""Tokenizers: normalisation, special tokens, truncation, unknown characters, files, fingerprints."""

from __future__ import annotations

import collections
import json
import random
import sys
from pathlib import Path

import pytest

from dgxperf.train import tokenizer as T
from dgxperf.train.data import DataError
from dgxperf.train.tokenizer import (
    CLS_ID,
    PAD_ID,
    SEP_ID,
    UNK_ID,
    CharTokenizer,
    build_tokenizer,
    load_tokenizer,
)

TEXTS = [
    "这本书很好看，推荐！",
    "质量不好，退货了。",
    "好看的书，好评",
    "Hello World 好书",
    "物流很快，书很新",
]


def test_special_tokens_have_fixed_ids() -> None:
    tok = CharTokenizer.train(TEXTS)
    assert tok.vocab[:4] == ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
    assert (PAD_ID, UNK_ID, CLS_ID, SEP_ID) == (0, 1, 2, 3)
    assert tok.vocab_size == len(tok.vocab)


def test_normalisation_folds_width_and_case_and_whitespace() -> None:
    assert T.normalise("ＡＢＣ，Ｈｅｌｌｏ！") == "abc,hello!"
    assert (
        T.normalise("  好\u200b书\t\n  很\u3000 好 ") == "好书 很 好"
    )  # zero-width dropped, spaces collapsed
    assert T.normalise("") == ""
    tok = CharTokenizer.train(["abc,hello! 好书"] * 2)
    assert tok.encode("ＡＢＣ，ＨＥＬＬＯ！", 32) == tok.encode("abc,hello!", 32)
    assert UNK_ID not in tok.encode("ＡＢＣ，ＨＥＬＬＯ！", 32)


def test_vocabulary_order_and_min_freq() -> None:
    tok = CharTokenizer.train(TEXTS)  # default min_freq 2
    assert T.DEFAULT_CHAR_MIN_FREQ == 2
    counts = collections.Counter("".join(T.normalise(t) for t in TEXTS))
    assert tok.vocab[4] == "好" and counts["好"] == max(counts.values())
    # Most frequent first, ties by code point: the same texts always give the same ids.
    keys = [(-counts[c], c) for c in tok.vocab[4:]]
    assert keys == sorted(keys)
    assert {c for c, n in counts.items() if n >= 2} == set(tok.vocab[4:])
    assert "推" not in tok.vocab  # seen once: [UNK]
    assert tok.ids("推荐") == [UNK_ID, UNK_ID]
    everything = CharTokenizer.train(TEXTS, min_freq=1)
    assert "推" in everything.vocab and everything.vocab_size > tok.vocab_size
    assert CharTokenizer.train(TEXTS, min_freq=1, max_vocab=10).vocab_size == 10
    with pytest.raises(DataError, match="min_freq must be at least 1"):
        CharTokenizer.train(TEXTS, min_freq=0)


def test_encode_frames_and_truncation_keeps_sep() -> None:
    tok = CharTokenizer.train(TEXTS, min_freq=1)
    ids = tok.encode("好书", 16)
    assert ids[0] == CLS_ID and ids[-1] == SEP_ID and tok.tokens(ids[1:-1]) == ["好", "书"]
    long = tok.encode("好" * 100, 10)
    assert len(long) == 10 and long[0] == CLS_ID and long[-1] == SEP_ID
    assert tok.tokens(long[1:-1]) == ["好"] * 8
    assert tok.encode("好书", 2) == [CLS_ID, SEP_ID]
    assert tok.encode("", 8) == [CLS_ID, SEP_ID]
    assert tok.encode_batch(["好", "书好"], 3) == [
        [CLS_ID, *tok.ids("好"), SEP_ID],
        [CLS_ID, *tok.ids("书"), SEP_ID],
    ]
    with pytest.raises(DataError, match="max_len must be at least 2"):
        tok.encode("好", 1)


def test_unknown_characters_map_to_unk() -> None:
    tok = CharTokenizer.train(TEXTS, min_freq=1)
    ids = tok.ids("好龘书😀")
    assert ids[1] == UNK_ID and ids[3] == UNK_ID and UNK_ID not in (ids[0], ids[2])


def test_fingerprint_is_stable_and_sensitive() -> None:
    a = CharTokenizer.train(TEXTS)
    shuffled = TEXTS[:]
    random.Random(0).shuffle(shuffled)
    assert CharTokenizer.train(shuffled).fingerprint == a.fingerprint  # input order does not matter
    assert len(a.fingerprint) == 64
    assert CharTokenizer.train(TEXTS, min_freq=1).fingerprint != a.fingerprint
    assert CharTokenizer.train([*TEXTS, "新字新字"]).fingerprint != a.fingerprint


def test_save_load_round_trip(tmp_path: Path) -> None:
    tok = CharTokenizer.train(TEXTS, min_freq=1)
    path = tmp_path / "run" / "tokenizer.json"
    tok.save(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["schema"] == T.TOKENIZER_SCHEMA and doc["kind"] == "char"
    assert doc["fingerprint"] == tok.fingerprint and doc["normalization"] == T.NORMALIZATION
    loaded = load_tokenizer(path)
    assert isinstance(loaded, CharTokenizer)
    assert loaded.vocab == tok.vocab and loaded.fingerprint == tok.fingerprint
    assert loaded.encode("这本书很好看 ＡＢＣ 龘", 12) == tok.encode("这本书很好看 ＡＢＣ 龘", 12)
    assert [p.name for p in path.parent.iterdir()] == ["tokenizer.json"]  # no temporary file left


def test_load_rejects_damaged_or_foreign_files(tmp_path: Path) -> None:
    tok = CharTokenizer.train(TEXTS)
    path = tmp_path / "tok.json"
    tok.save(path)
    doc = json.loads(path.read_text(encoding="utf-8"))

    def write(d: object) -> Path:
        path.write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
        return path

    with pytest.raises(DataError, match="fingerprint does not match"):
        load_tokenizer(write(doc | {"vocab": [*doc["vocab"], "新"]}))
    with pytest.raises(DataError, match=r"not a dgxperf\.tokenizer/1 file"):
        load_tokenizer(write({"schema": "something/else"}))
    with pytest.raises(DataError, match="unknown tokenizer kind 'bpe'"):
        load_tokenizer(write(doc | {"kind": "bpe"}))
    with pytest.raises(DataError, match="retrain the tokenizer"):
        load_tokenizer(write(doc | {"normalization": "nfc/0"}))
    with pytest.raises(DataError, match="incomplete tokenizer file"):
        load_tokenizer(write({k: v for k, v in doc.items() if k != "vocab"}))
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError, match="invalid JSON"):
        load_tokenizer(path)
    with pytest.raises(DataError, match="cannot read the tokenizer file"):
        load_tokenizer(tmp_path / "absent.json")


def test_build_tokenizer_checks_kind_and_options() -> None:
    assert isinstance(build_tokenizer("char", TEXTS, min_freq=1), CharTokenizer)
    with pytest.raises(DataError, match="unknown tokenizer kind 'bpe'; choose one of: char, wordpiece"):
        build_tokenizer("bpe", TEXTS)
    with pytest.raises(DataError, match="takes no option"):
        build_tokenizer("char", TEXTS, vocab_size=100)


def test_wordpiece_without_the_tokenizers_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers -> ImportError
    with pytest.raises(DataError, match="`pip install tokenizers`, or use the character tokenizer"):
        build_tokenizer("wordpiece", TEXTS)


def test_wordpiece_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    texts = [*TEXTS, "testing the tokenizer", "tokenizers test well", "Testing again", "ＡＢＣ testing"] * 20
    tok = build_tokenizer("wordpiece", texts, vocab_size=120, min_freq=2)
    assert isinstance(tok, T.WordPieceTokenizer)
    assert tok.vocab[:4] == T.SPECIAL_TOKENS and tok.vocab_size <= 120
    ids = tok.encode("这本书 TESTING ＡＢＣ 龘", 64)
    tokens = tok.tokens(ids)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert tokens[1:4] == ["这", "本", "书"]  # CJK characters are split one by one
    assert "abc" in tokens and "[UNK]" in tokens  # full width folded, case folded; 龘 unseen
    assert "".join(t.removeprefix("##") for t in tokens[4:6]) == "testing" or "testing" in tokens
    truncated = tok.encode("这本书 " * 50, 8)
    assert len(truncated) == 8 and truncated[-1] == SEP_ID
    path = tmp_path / "wp.json"
    tok.save(path)
    loaded = load_tokenizer(path)
    assert isinstance(loaded, T.WordPieceTokenizer) and loaded.fingerprint == tok.fingerprint
    assert loaded.encode_batch(texts[:8], 16) == tok.encode_batch(texts[:8], 16)
