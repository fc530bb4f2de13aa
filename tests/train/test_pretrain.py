"""`dgxperf pretrain` on the CPU: BERT masking, the token stream, a tiny masked-LM run on a subset of the real
reviews, loading its folder, fine-tuning from it through the real training loop, and the command line.

One pretraining run (module fixture) serves the tests that need a pretrained folder; every run shares one
encoded-data cache, so each further run costs the review loading and a few steps only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from dgxperf.cli import app
from dgxperf.train import recipes
from dgxperf.train.data import DataError, EncodedSplit, synthetic_task
from dgxperf.train.loop import Prepared, RunOptions, train
from dgxperf.train.model import Encoder, ModelConfig, preset
from dgxperf.train.pretrain import (
    CHECKPOINT_FILE,
    ENCODER_FILE,
    ENCODER_SCHEMA,
    EPOCHS_LOG,
    HEAD_PREFIXES,
    PRETRAIN_SCHEMA,
    RESULT_FILE,
    TOKENIZER_FILE,
    PretrainError,
    PretrainInputError,
    PretrainSettings,
    check_config,
    held_out_batches,
    held_out_every,
    held_out_loss,
    load_pretrained,
    mask_tokens,
    mlm_logits,
    pretrain,
    pretrain_identity,
    probe_every,
    read_encoder,
    span_cover,
    span_lengths,
    token_stream,
)
from dgxperf.train.tokenizer import CLS_ID, PAD_ID, SEP_ID, UNK_ID, load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "src" / "dgxperf" / "schemas"
QUICK = {"preset": "tiny", "train_samples": "300"}
# 300 reviews hold ~17.5k tokens: 137 rows of 128, 17 steps of 8 rows an epoch.
SETTINGS = PretrainSettings(epochs=2, lr=1e-3, batch_size=8)
FIRST_PLAIN_ID = max(PAD_ID, CLS_ID, SEP_ID, UNK_ID) + 1
runner = CliRunner()


def config(recipe: str = "baseline", **extra: str) -> recipes.TrainConfig:
    return recipes.build_config(recipe, overrides={**QUICK, **extra})


def assert_valid(schema_file: str, data: Any) -> None:
    schema = json.loads((SCHEMAS / schema_file).read_text())
    jsonschema.Draft202012Validator(schema).validate(data)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@dataclasses.dataclass
class Pretrained:
    folder: Path
    result: dict[str, Any]
    seen: list[dict[str, Any]]


@pytest.fixture(scope="module")
def pretrained(home: Path) -> Pretrained:
    seen: list[dict[str, Any]] = []
    folder = home / "pretrained"
    result = pretrain(config(), SETTINGS, folder, home / "cache", device="cpu", on_epoch=seen.append)
    return Pretrained(folder, result, seen)


def epochs_logged(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / EPOCHS_LOG).read_text().splitlines()]


def model_config_of(result: dict[str, Any]) -> ModelConfig:
    return ModelConfig(**{k: v for k, v in result["model"].items() if k != "params"})


# -- masking -------------------------------------------------------------------------------------------------

VOCAB = 3000


def batch_with_specials(rows: int = 512, length: int = 128, seed: int = 1) -> torch.Tensor:
    """Plain ids (no [UNK]) framed like real rows: [CLS] first, [SEP]s inside, padding at the end of half."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(FIRST_PLAIN_ID, VOCAB, (rows, length), generator=g)
    ids[:, 0] = CLS_ID
    ids[torch.rand((rows, length), generator=g) < 0.05] = SEP_ID
    ids[::2, -24:] = PAD_ID
    return ids


def test_held_out_batches_are_fixed_and_leave_training_randomness_alone() -> None:
    text = [CLS_ID, *range(FIRST_PLAIN_ID, FIRST_PLAIN_ID + 40), SEP_ID]
    split = EncodedSplit.from_sequences([text] * 30, [0] * 30, max_len=64, truncated_share=0.0)
    settings = PretrainSettings(batch_size=4, mask_span=3)
    cpu_state = torch.get_rng_state()
    first = held_out_batches(split, 32, 4, VOCAB, settings, "cpu")
    again = held_out_batches(split, 32, 4, VOCAB, settings, "cpu")
    assert torch.equal(torch.get_rng_state(), cpu_state)  # its own generator: training's draws are unchanged
    assert len(first) == 10  # 30 texts x 41 tokens (no [CLS]) = 1,230 tokens: 38 rows of 32, batches of 4
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first, again, strict=True))
    assert all((t != -100).any() for _, t in first)
    other_seed = held_out_batches(split, 32, 4, VOCAB, dataclasses.replace(settings, seed=5), "cpu")
    assert not torch.equal(first[0][1], other_seed[0][1])
    short = EncodedSplit.from_sequences(
        [[CLS_ID, FIRST_PLAIN_ID, SEP_ID]], [0], max_len=64, truncated_share=0.0
    )
    assert held_out_batches(short, 32, 4, VOCAB, settings, "cpu") == []


def test_the_probe_runs_about_four_times_a_run() -> None:
    assert [probe_every(n) for n in (1, 2, 4, 80, 83)] == [1, 1, 1, 20, 20]


def test_held_out_loss_is_measured_about_twenty_times_a_run() -> None:
    assert [held_out_every(n) for n in (1, 2, 19, 20, 39, 40, 80, 200)] == [1, 1, 1, 1, 1, 2, 4, 10]


def test_held_out_loss_is_the_mean_over_predicted_tokens_with_dropout_off(pretrained: Pretrained) -> None:
    model = Encoder(model_config_of(pretrained.result))
    load_pretrained(model, pretrained.folder)
    model.train()
    vocab = pretrained.result["model"]["vocab_size"]
    ids = torch.randint(FIRST_PLAIN_ID, vocab, (6, 128), generator=torch.Generator().manual_seed(0))
    batches = [mask_tokens(ids[:4], vocab, 0.15, torch.Generator().manual_seed(1)),
               mask_tokens(ids[4:], vocab, 0.15, torch.Generator().manual_seed(2))]  # fmt: skip
    loss = held_out_loss(model, batches, contextlib.nullcontext())
    assert model.training  # put back in training mode
    model.eval()
    with torch.no_grad():
        logits = torch.cat([mlm_logits(model, inputs) for inputs, _ in batches])
    targets = torch.cat([t for _, t in batches])
    expected = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
    assert loss == pytest.approx(float(expected), rel=1e-5)
    assert held_out_loss(model, [], contextlib.nullcontext()) is None


def test_span_cover_marks_each_start_and_its_length() -> None:
    lengths = torch.tensor([[2, 0, 0, 3, 0, 0], [0, 0, 0, 0, 4, 0], [1, 1, 0, 0, 0, 0]])
    expected = torch.tensor([[1, 1, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1], [1, 1, 0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(span_cover(lengths, span_max=4), expected)  # the 4-span is cut by the row's end


def test_span_lengths_follow_spanbert() -> None:
    lengths = span_lengths((4000, 128), 0.15, 10, torch.Generator().manual_seed(0), "cpu")
    drawn = lengths[lengths > 0].float()
    assert int(drawn.min()) == 1 and int(drawn.max()) == 10
    # SpanBERT's law, geometric p = 0.2 cut at 10 and renormalised, has mean 3.80; ~20k spans drawn
    assert abs(float(drawn.mean()) - 3.80) < 0.1


@pytest.mark.parametrize(("mask_prob", "span_max"), [(0.15, 10), (0.15, 3), (0.3, 10)])
def test_mask_tokens_in_spans(mask_prob: float, span_max: int) -> None:
    ids = batch_with_specials()
    inputs, targets = mask_tokens(ids, VOCAB, mask_prob, torch.Generator().manual_seed(0), span_max)
    special = (ids == PAD_ID) | (ids == CLS_ID) | (ids == SEP_ID)
    chosen = targets != -100
    assert not (chosen & special).any()
    assert torch.equal(inputs[~chosen], ids[~chosen]) and torch.equal(targets[chosen], ids[chosen])
    # overlapping spans still cover about mask_prob of the plain tokens (the start rate allows for overlap)
    assert abs(int(chosen.sum()) / int((~special).sum()) - mask_prob) < 0.02
    # chosen tokens come in runs, longer than single-token masking's chance neighbours (~1 / (1 - mask_prob))
    single = mask_tokens(ids, VOCAB, mask_prob, torch.Generator().manual_seed(0))[1] != -100
    assert mean_run(chosen) > mean_run(single) + 0.5
    assert abs(mean_run(single) - 1 / (1 - mask_prob)) < 0.1


def mean_run(chosen: torch.Tensor) -> float:
    starts = chosen & ~torch.nn.functional.pad(chosen, (1, 0))[:, :-1]
    return int(chosen.sum()) / int(starts.sum())


@pytest.mark.parametrize("mask_prob", [0.15, 0.4])
def test_mask_tokens_follows_bert(mask_prob: float) -> None:
    ids = batch_with_specials()
    inputs, targets = mask_tokens(ids, VOCAB, mask_prob, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == ids.shape and inputs.dtype == ids.dtype
    special = (ids == PAD_ID) | (ids == CLS_ID) | (ids == SEP_ID)
    chosen = targets != -100
    # specials are never chosen and never changed; every unchosen token is left alone
    assert not (chosen & special).any()
    assert torch.equal(inputs[~chosen], ids[~chosen])
    # the targets of the chosen positions are the original ids
    assert torch.equal(targets[chosen], ids[chosen])
    plain = int((~special).sum())
    n = int(chosen.sum())
    # ~50k plain tokens: the share's standard deviation is below 0.0025, so 0.012 is > 4.5 sigma
    assert abs(n / plain - mask_prob) < 0.012
    got, original = inputs[chosen], ids[chosen]
    to_unk = got == UNK_ID
    unchanged = got == original
    randomised = ~to_unk & ~unchanged
    # > 7k chosen tokens: each share's standard deviation is below 0.005
    assert abs(float(to_unk.float().mean()) - 0.8) < 0.025
    assert abs(float(randomised.float().mean()) - 0.1) < 0.02  # (a random id equal to the original: 1/3000)
    assert abs(float(unchanged.float().mean()) - 0.1) < 0.02
    assert bool(((got[randomised] >= FIRST_PLAIN_ID) & (got[randomised] < VOCAB)).all())
    assert bool(((inputs >= 0) & (inputs < VOCAB)).all())


def test_mask_tokens_is_deterministic_under_a_seed() -> None:
    ids = batch_with_specials(64, 128)
    a = mask_tokens(ids, VOCAB, 0.15, torch.Generator().manual_seed(7))
    b = mask_tokens(ids, VOCAB, 0.15, torch.Generator().manual_seed(7))
    c = mask_tokens(ids, VOCAB, 0.15, torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


def test_mask_tokens_leaves_an_all_special_row_alone() -> None:
    ids = torch.tensor([[CLS_ID, SEP_ID, PAD_ID, PAD_ID]] * 50)
    inputs, targets = mask_tokens(ids, VOCAB, 0.99, torch.Generator().manual_seed(0))
    assert torch.equal(inputs, ids) and bool((targets == -100).all())


# -- the token stream ----------------------------------------------------------------------------------------


def test_token_stream_drops_cls_and_keeps_each_sep() -> None:
    seqs = [[CLS_ID, 5, 6, SEP_ID], [CLS_ID, 7, SEP_ID], [CLS_ID, SEP_ID], [CLS_ID, 8, 9, 10, SEP_ID]]
    split = EncodedSplit.from_sequences(seqs, [0, 1, 0, 1], max_len=8, truncated_share=0.0)
    stream = token_stream(split)
    assert stream.dtype == torch.int64
    assert stream.tolist() == [5, 6, SEP_ID, 7, SEP_ID, SEP_ID, 8, 9, 10, SEP_ID]
    assert stream.numel() == split.tokens - len(split)
    assert int((stream == SEP_ID).sum()) == len(split) and CLS_ID not in stream.tolist()
    empty = EncodedSplit.from_sequences([], [], max_len=8, truncated_share=0.0)
    assert token_stream(empty).numel() == 0 and token_stream(empty).dtype == torch.int64


def test_token_stream_of_a_real_sized_split() -> None:
    task = synthetic_task(100, 16, 50)
    stream = token_stream(task.train)
    assert stream.numel() == 50 * 15
    assert stream.view(50, 15)[:, -1].eq(SEP_ID).all()
    assert torch.equal(
        stream.view(50, 15)[:, :-1], torch.from_numpy(np.asarray(task.train.ids)).view(50, 16)[:, 1:-1]
    )


# -- settings and recipes it refuses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("epochs", 0, "epochs=0: pretrain at least one epoch"),
        ("lr", 0.0, r"lr=0.0 is not a learning rate \(0 < lr < 1\)"),
        ("lr", 2.0, r"lr=2.0 is not a learning rate"),
        ("lr", -1e-4, "is not a learning rate"),
        ("batch_size", 0, "batch_size=0 must be at least 1"),
        ("mask_prob", 0.0, r"mask_prob=0.0 must be in \(0, 1\)"),
        ("mask_prob", 1.0, r"mask_prob=1.0 must be in \(0, 1\)"),
        ("mask_span", 0, "mask_span=0 must be 1 \\(single tokens\\) to 32"),
        ("mask_span", 33, "mask_span=33 must be 1"),
        ("warmup_share", 1.0, r"warmup_share=1.0 must be in \[0, 1\)"),
        ("warmup_share", -0.1, "warmup_share=-0.1 must be in"),
        ("objective", "bert", "objective='bert': choose from mlm, electra"),
    ],
)
def test_settings_validate_refuses(field: str, value: Any, message: str) -> None:
    with pytest.raises(PretrainError, match=message):
        dataclasses.replace(PretrainSettings(), **{field: value}).validate()


def test_settings_defaults_and_edges_validate() -> None:
    PretrainSettings().validate()
    PretrainSettings(epochs=1, lr=1e-6, batch_size=1, mask_prob=0.01, warmup_share=0.0).validate()


REFUSED = [
    ({"task": "synthetic"}, "baseline", "synthetic data has no text to pretrain on"),
    ({}, "guide", r"fp16 would need a loss scaler: --set precision=bf16"),
    ({"precision": "fp16"}, "baseline", "fp16 would need a loss scaler"),
    (
        {"init_from": "/somewhere"},
        "baseline",
        "init_from is for fine-tuning; pretraining starts from scratch",
    ),
]


@pytest.mark.parametrize(
    ("extra", "recipe", "message"), REFUSED, ids=["synthetic", "guide", "fp16", "init_from"]
)
def test_pretrain_refuses_before_touching_anything(
    tmp_path: Path, extra: dict[str, str], recipe: str, message: str
) -> None:
    cfg = config(recipe, **extra)
    with pytest.raises(PretrainInputError, match=message):
        check_config(cfg)
    with pytest.raises(PretrainInputError, match=message):
        pretrain(cfg, SETTINGS, tmp_path / "out", tmp_path / "cache", device="cpu")
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_pretrain_accepts_bf16_and_the_optimized_recipe() -> None:
    check_config(config("optimized"))
    check_config(config(precision="bf16"))


def test_pretrain_refuses_bad_settings_first(tmp_path: Path) -> None:
    with pytest.raises(PretrainError, match="mask_prob"):
        pretrain(
            config(), PretrainSettings(mask_prob=1.0), tmp_path / "out", tmp_path / "cache", device="cpu"
        )
    assert not (tmp_path / "out").exists()


# -- a real run ----------------------------------------------------------------------------------------------


def test_pretrain_writes_the_folder_and_learns(pretrained: Pretrained) -> None:
    folder, result = pretrained.folder, pretrained.result
    assert {p.name for p in folder.iterdir()} == {ENCODER_FILE, TOKENIZER_FILE, RESULT_FILE, EPOCHS_LOG}
    assert json.loads((folder / RESULT_FILE).read_text()) == result
    assert epochs_logged(folder) == result["epochs"]  # the same records, written as each epoch ended
    assert_valid("pretrain.v1.json", result)
    assert (
        result["schema"] == PRETRAIN_SCHEMA and result["recipe"] == "baseline" and result["device"] == "cpu"
    )
    assert result["out_dir"] == str(folder)
    assert result["settings"] == dataclasses.asdict(SETTINGS)
    assert result["data"]["subset"] == {"train": 300, "dev": 64, "test": 64}
    assert result["model"]["hidden"] == 64 and result["model"]["layers"] == 2  # preset tiny
    assert result["steps_per_epoch"] == result["rows_per_epoch"] // SETTINGS.batch_size >= 10
    assert result["tokens_per_epoch"] == result["steps_per_epoch"] * SETTINGS.batch_size * 128
    epochs = result["epochs"]
    assert pretrained.seen == epochs  # on_epoch saw every record
    assert [e["epoch"] for e in epochs] == [1, 2] and {e["epochs"] for e in epochs} == {2}
    assert all(e["type"] == "pretrain_epoch" and e["tokens_per_s"] > 0 for e in epochs)
    # warm-up, then linear decay to zero: the first epoch ends past the warm-up (1/16 of the steps)
    assert 0 < epochs[0]["lr"] < SETTINGS.lr and epochs[-1]["lr"] == 0.0
    losses = [e["loss"] for e in epochs]
    vocab = result["model"]["vocab_size"]
    assert all(math.isfinite(x) for x in losses)
    # a random guess costs ln(vocab) = 8.2 nats; the seeded run goes 7.85 -> 7.33
    assert losses[-1] < losses[0] < math.log(vocab) + 1
    assert result["final_loss"] == losses[-1] < math.log(vocab)
    assert result["tokens_per_s_steady"] == epochs[1]["tokens_per_s"]
    # held out: the dev texts' masked-LM loss after each epoch, falling too in so short a run
    dev = [e["dev_loss"] for e in epochs]
    assert all(math.isfinite(x) for x in dev) and dev[-1] < dev[0] < math.log(vocab) + 1
    assert result["final_dev_loss"] == dev[-1]
    # a linear probe of the frozen encoder after each epoch here (every epochs // 4, and the last)
    probes = [e["probe"] for e in epochs]
    assert all(0.5 <= p["dev_accuracy"] <= 1 and 0.5 <= p["train_accuracy"] <= 1 for p in probes)
    assert result["final_probe"] == probes[-1]
    assert result["total_seconds"] >= sum(e["seconds"] for e in epochs)
    assert load_tokenizer(folder / TOKENIZER_FILE).vocab_size == vocab


def test_span_masking_pretrains_and_is_recorded(home: Path, tmp_path: Path) -> None:
    settings = dataclasses.replace(SETTINGS, mask_span=10)
    result = pretrain(config(), settings, tmp_path / "spans", home / "cache", device="cpu")
    assert_valid("pretrain.v1.json", result)
    assert result["settings"]["mask_span"] == 10
    losses = [e["loss"] for e in result["epochs"]]
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]


def test_electra_pretrains_its_discriminator_and_keeps_only_it(home: Path, tmp_path: Path) -> None:
    """Replaced-token detection: the generator (a quarter of the width) fills the masks, the discriminator
    learns to spot its samples, and encoder.pt holds the discriminator, which fine-tuning loads."""
    settings = dataclasses.replace(SETTINGS, objective="electra")
    folder = tmp_path / "electra"
    result = pretrain(config(), settings, folder, home / "cache", device="cpu")
    assert_valid("pretrain.v1.json", result)
    assert result["settings"]["objective"] == "electra"
    generator, model = result["generator"], result["model"]
    assert (generator["hidden"], generator["layers"], generator["ffn"]) == (
        16,
        2,
        64,
    )  # tiny: 64 x 2, ffn 256
    assert generator["params"] < model["params"]
    epochs = result["epochs"]
    replaced = [e["discriminator_loss"] for e in epochs]
    # At most 15% of positions are replaced, so always answering "original" scores the binary entropy of
    # 0.15 (0.423 nats) or less; the seeded run goes 0.46 -> 0.33.
    assert replaced[-1] < replaced[0] and replaced[-1] < 0.423
    assert all(e["loss"] == pytest.approx(e["generator_loss"] + 50 * e["discriminator_loss"]) for e in epochs)
    dev = [e["dev_loss"] for e in epochs]
    assert all(math.isfinite(x) for x in dev) and dev[-1] < dev[0]
    saved = read_encoder(folder)
    assert saved["model_config"]["hidden"] == 64
    assert set(saved["state"]) == {
        k for k in Encoder(model_config_of(result)).state_dict() if not k.startswith(HEAD_PREFIXES)
    }
    fresh = Encoder(model_config_of(result))
    assert load_pretrained(fresh, folder)["pretrain"]["settings"]["objective"] == "electra"


def test_electra_corrupts_only_masked_positions_with_plain_sampled_tokens() -> None:
    from dgxperf.train.electra import corrupt

    ids = batch_with_specials(rows=64, length=32)
    _, targets = mask_tokens(ids, VOCAB, 0.3, torch.Generator().manual_seed(0))
    logits = torch.randn(64, 32, VOCAB, generator=torch.Generator().manual_seed(1))
    kept = logits.clone()
    corrupted, replaced = corrupt(ids, targets, logits, torch.Generator().manual_seed(2))
    assert torch.equal(logits, kept)  # the generator's logits are read, never written
    masked = targets != -100
    assert torch.equal(corrupted[~masked], ids[~masked])  # unmasked positions untouched
    assert bool((corrupted[masked] >= FIRST_PLAIN_ID).all())  # never a special token
    assert torch.equal(replaced, (corrupted != ids).float())
    again, _ = corrupt(ids, targets, logits, torch.Generator().manual_seed(2))
    assert torch.equal(again, corrupted)  # seeded
    # a confident generator is sampled as it predicts: samples equal to the original are not "replaced"
    sure = torch.full((64, 32, VOCAB), -30.0).scatter_(2, ids.clamp(min=FIRST_PLAIN_ID).unsqueeze(-1), 30.0)
    copied, flagged = corrupt(ids, targets, sure, torch.Generator().manual_seed(3))
    plain = masked & (ids >= FIRST_PLAIN_ID)
    assert torch.equal(copied[plain], ids[plain]) and not bool(flagged[plain].any())


def test_electra_generator_is_a_quarter_of_the_width() -> None:
    from dgxperf.train.electra import generator_config

    large = generator_config(preset("large", vocab_size=3635, num_labels=2, max_len=128))
    assert (large.hidden, large.heads, large.ffn, large.layers) == (256, 4, 1024, 24)
    tiny = generator_config(preset("tiny", vocab_size=50, num_labels=2, max_len=32))
    assert tiny.hidden % tiny.heads == 0 and tiny.hidden == 16


def test_the_encoder_file_holds_the_encoder_without_its_head(pretrained: Pretrained) -> None:
    saved = torch.load(pretrained.folder / ENCODER_FILE, map_location="cpu", weights_only=True)
    assert set(saved) == {"schema", "model_config", "state"} and saved["schema"] == ENCODER_SCHEMA
    assert read_encoder(pretrained.folder)["model_config"] == saved["model_config"]
    model_config = model_config_of(pretrained.result)
    assert saved["model_config"] == model_config.to_json()
    keys = set(saved["state"])
    assert not any(k.startswith(("pooler.", "classifier.")) for k in keys)
    everything = set(Encoder(model_config).state_dict())
    assert keys == {k for k in everything if not k.startswith(HEAD_PREFIXES)}
    assert everything - keys == {"pooler.weight", "pooler.bias", "classifier.weight", "classifier.bias"}
    assert all(torch.isfinite(t).all() for t in saved["state"].values())


def test_too_little_text_for_one_batch(home: Path, tmp_path: Path) -> None:
    settings = dataclasses.replace(SETTINGS, batch_size=100_000)
    with pytest.raises(
        PretrainInputError, match=r"tokens: not one batch of 100000 rows of 128; lower --batch-size"
    ):
        pretrain(config(), settings, tmp_path / "out", home / "cache", device="cpu")
    assert not (tmp_path / "out" / ENCODER_FILE).exists()


def fake_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """No reviews: random sequences of 32 tokens, so that a run takes a fraction of a second."""

    def prepare(config: recipes.TrainConfig, options: RunOptions, context: Any) -> Prepared:
        task = synthetic_task(50, 32, 64)
        return Prepared(task, preset("tiny", vocab_size=50, num_labels=2, max_len=32), {"task": "fake"})

    monkeypatch.setattr("dgxperf.train.loop.prepare_data", prepare)


def test_a_non_finite_loss_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dgxperf.train import pretrain as module

    fake_data(monkeypatch)
    real_loss = module.mlm_loss
    monkeypatch.setattr(module, "mlm_loss", lambda *a: real_loss(*a) * float("nan"))
    with pytest.raises(
        PretrainError, match=r"the masked-LM loss became nan in epoch 1: lower the learning rate"
    ):
        pretrain(
            config(), dataclasses.replace(SETTINGS, batch_size=4), tmp_path, tmp_path / "c", device="cpu"
        )
    assert not (tmp_path / ENCODER_FILE).exists()


def test_out_of_memory_says_what_to_lower(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def oom(*args: Any) -> None:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr("dgxperf.train.loop.prepare_data", oom)
    with pytest.raises(
        PretrainError, match=r"out of memory with batches of 8 rows of 128 tokens: try --batch-size 4"
    ) as info:
        pretrain(config(), SETTINGS, tmp_path, tmp_path / "c", device="cpu")
    assert not isinstance(info.value, PretrainInputError)  # a run that stopped, not bad input


def test_a_compile_failure_says_to_pretrain_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torch._inductor.exc import InductorError

    def fails(*args: Any) -> None:
        raise InductorError(AssertionError("CudaKernelParamCache not populated for triton_poi_x"), None)

    monkeypatch.setattr("dgxperf.train.loop.prepare_data", fails)
    with pytest.raises(
        PretrainError, match=r"^torch.compile failed \(AssertionError: .*\): run with --set compile=false"
    ):
        # pretraining compiles its loss without the C++ wrapper, whatever the recipe says: compile=false is the fix
        pretrain(
            config(compile="true", compile_cpp_wrapper="true"),
            SETTINGS,
            tmp_path,
            tmp_path / "c",
            device="cpu",
        )


def test_the_same_seed_gives_the_same_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_data(monkeypatch)
    settings = dataclasses.replace(SETTINGS, batch_size=4)
    runs = [pretrain(config(), settings, tmp_path / str(i), tmp_path / "c", device="cpu") for i in range(2)]
    other = pretrain(
        config(), dataclasses.replace(settings, seed=1), tmp_path / "2", tmp_path / "c", device="cpu"
    )
    assert [e["loss"] for e in runs[0]["epochs"]] == [e["loss"] for e in runs[1]["epochs"]]
    assert [e["loss"] for e in other["epochs"]] != [e["loss"] for e in runs[0]["epochs"]]
    a, b = (read_encoder(tmp_path / str(i))["state"] for i in range(2))
    assert all(torch.equal(a[k], b[k]) for k in a)


# -- checkpoints and --resume -------------------------------------------------------------------------------


class Interrupt:
    """An on_epoch callback that stops the run like Ctrl-C after ``epoch`` epochs."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def __call__(self, record: dict[str, Any]) -> None:
        if record["epoch"] == self.epoch:
            raise KeyboardInterrupt


@pytest.mark.parametrize("objective", ["mlm", "electra"])
def test_resume_after_an_interruption_gives_the_run_that_never_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objective: str
) -> None:
    """Weights, optimizer, schedule, the row, mask (and ELECTRA's sample) generators and dropout's RNG all
    come back: the resumed run's losses and encoder equal, to the bit, those of a run that was never
    stopped."""
    fake_data(monkeypatch)
    settings = dataclasses.replace(SETTINGS, epochs=4, batch_size=4, objective=objective)
    whole = pretrain(config(), settings, tmp_path / "whole", tmp_path / "c", device="cpu", checkpoint_every=1)
    assert whole["resumed_at_epoch"] is None and not (tmp_path / "whole" / CHECKPOINT_FILE).exists()
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(), settings, tmp_path / "cut", tmp_path / "c", device="cpu", checkpoint_every=1,
                 on_epoch=Interrupt(2))  # fmt: skip
    assert (tmp_path / "cut" / CHECKPOINT_FILE).is_file() and not (tmp_path / "cut" / ENCODER_FILE).exists()
    assert [e["loss"] for e in epochs_logged(tmp_path / "cut")] == [e["loss"] for e in whole["epochs"][:2]]
    resumed = pretrain(config(), settings, tmp_path / "cut", tmp_path / "c", device="cpu", checkpoint_every=1,
                       resume=True)  # fmt: skip
    assert resumed["resumed_at_epoch"] == 2 and len(resumed["epochs"]) == 4
    assert [e["loss"] for e in resumed["epochs"]] == [e["loss"] for e in whole["epochs"]]
    assert [e.get("discriminator_loss") for e in resumed["epochs"]] == [
        e.get("discriminator_loss") for e in whole["epochs"]
    ]
    a, b = (read_encoder(tmp_path / name)["state"] for name in ("whole", "cut"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not (tmp_path / "cut" / CHECKPOINT_FILE).exists()  # removed once the encoder is written
    assert epochs_logged(tmp_path / "cut") == resumed["epochs"]


def test_a_resumed_run_logs_from_its_checkpoint_not_from_the_epochs_it_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut at epoch 3 with a checkpoint at 2: epoch 3 was logged, then lost; the resumed run logs it again,
    once."""
    fake_data(monkeypatch)
    settings = dataclasses.replace(SETTINGS, epochs=4, batch_size=4)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(), settings, tmp_path / "cut", tmp_path / "c", device="cpu", checkpoint_every=2,
                 on_epoch=Interrupt(3))  # fmt: skip
    assert [e["epoch"] for e in epochs_logged(tmp_path / "cut")] == [1, 2, 3]
    resumed = pretrain(config(), settings, tmp_path / "cut", tmp_path / "c", device="cpu", checkpoint_every=2,
                       resume=True)  # fmt: skip
    assert [e["epoch"] for e in epochs_logged(tmp_path / "cut")] == [1, 2, 3, 4]
    assert epochs_logged(tmp_path / "cut") == resumed["epochs"]


def test_checkpoints_are_written_every_n_epochs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_data(monkeypatch)
    settings = dataclasses.replace(SETTINGS, epochs=4, batch_size=4)
    with pytest.raises(KeyboardInterrupt):  # epoch 1 of checkpoint_every=2: nothing saved yet
        pretrain(config(), settings, tmp_path / "a", tmp_path / "c", device="cpu", checkpoint_every=2,
                 on_epoch=Interrupt(1))  # fmt: skip
    assert not (tmp_path / "a" / CHECKPOINT_FILE).exists()
    with pytest.raises(KeyboardInterrupt):  # the default writes none at all
        pretrain(config(), settings, tmp_path / "b", tmp_path / "c", device="cpu", on_epoch=Interrupt(3))
    assert not (tmp_path / "b" / CHECKPOINT_FILE).exists()


def test_resume_refuses_what_it_cannot_continue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_data(monkeypatch)
    settings = dataclasses.replace(SETTINGS, epochs=3, batch_size=4)
    with pytest.raises(PretrainInputError, match=r"--resume: no checkpoint\.pt in"):
        pretrain(config(), settings, tmp_path / "none", tmp_path / "c", device="cpu", resume=True)
    with pytest.raises(
        PretrainInputError, match=r"checkpoint_every=-1: use 0 \(none\) or a number of epochs"
    ):
        pretrain(config(), settings, tmp_path / "x", tmp_path / "c", device="cpu", checkpoint_every=-1)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(), settings, tmp_path / "cut", tmp_path / "c", device="cpu", checkpoint_every=1,
                 on_epoch=Interrupt(1))  # fmt: skip
    other = dataclasses.replace(settings, lr=2e-3, epochs=5)  # a different schedule: the state means nothing
    with pytest.raises(
        PretrainInputError, match=r"another run \(epochs: checkpoint 3, now 5, lr: checkpoint 0\.001"
    ):
        pretrain(config(), other, tmp_path / "cut", tmp_path / "c", device="cpu", resume=True)
    with pytest.raises(PretrainInputError, match=r"another run \(dropout: checkpoint 0\.1, now 0\.2\)"):
        pretrain(config(dropout="0.2"), settings, tmp_path / "cut", tmp_path / "c", device="cpu", resume=True)
    (tmp_path / "cut" / CHECKPOINT_FILE).write_bytes(b"not a checkpoint")
    with pytest.raises(PretrainInputError, match=r"cannot read the checkpoint"):
        pretrain(config(), settings, tmp_path / "cut", tmp_path / "c", device="cpu", resume=True)
    torch.save({"schema": "something/1"}, tmp_path / "cut" / CHECKPOINT_FILE)
    with pytest.raises(PretrainInputError, match=r"not a dgxperf pretraining checkpoint"):
        pretrain(config(), settings, tmp_path / "cut", tmp_path / "c", device="cpu", resume=True)


# -- loading a pretrained folder -----------------------------------------------------------------------------


def test_load_pretrained_copies_the_encoder_and_leaves_the_head(pretrained: Pretrained) -> None:
    saved = read_encoder(pretrained.folder)["state"]
    torch.manual_seed(123)
    model = Encoder(model_config_of(pretrained.result))
    head = {k: v.clone() for k, v in model.state_dict().items() if k.startswith(HEAD_PREFIXES)}
    assert not torch.equal(model.tok_emb.weight, saved["tok_emb.weight"])
    info = load_pretrained(model, pretrained.folder)
    identity = {
        "sha256": hashlib.sha256((pretrained.folder / RESULT_FILE).read_bytes()).hexdigest(),
        "settings": pretrained.result["settings"],
        "final_loss": pretrained.result["final_loss"],
    }
    assert info == {"init_from": str(pretrained.folder), "loaded_tensors": len(saved), "positions": "all",
                    "pretrain": identity}  # fmt: skip
    assert len(saved) > 10
    state = model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in saved.items())
    assert len(head) == 4 and all(torch.equal(state[k], v) for k, v in head.items())


def test_pretrain_identity_without_a_readable_result(pretrained: Pretrained, tmp_path: Path) -> None:
    assert pretrain_identity(tmp_path) is None  # no pretrain.json
    (tmp_path / RESULT_FILE).write_text("{not json")
    assert pretrain_identity(tmp_path) is None
    (tmp_path / RESULT_FILE).write_text("[1, 2]")
    assert pretrain_identity(tmp_path) is None
    copy = tmp_path / "copy"
    shutil.copytree(pretrained.folder, copy)
    (copy / RESULT_FILE).unlink()
    model = Encoder(model_config_of(pretrained.result))
    assert load_pretrained(model, copy)["pretrain"] is None  # the weights still load


def test_load_pretrained_into_a_model_without_a_pooler(pretrained: Pretrained) -> None:
    model = Encoder(dataclasses.replace(model_config_of(pretrained.result), pooler=False))
    assert load_pretrained(model, pretrained.folder)["loaded_tensors"] > 0


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            {"hidden": 128, "heads": 2, "ffn": 512},
            ["hidden: pretrained 64, this run 128", "ffn: pretrained 256"],
        ),
        ({"layers": 3}, ["layers: pretrained 2, this run 3"]),
        ({"vocab_size": 100}, ["vocab_size: pretrained", "this run 100"]),
        ({"max_len": 256}, ["max_len: pretrained 128, this run 256"]),
        ({"pre_ln": False}, ["pre_ln: pretrained True, this run False"]),
    ],
)
def test_load_pretrained_refuses_another_architecture(
    pretrained: Pretrained, change: dict[str, Any], named: list[str]
) -> None:
    model = Encoder(dataclasses.replace(model_config_of(pretrained.result), **change))
    with pytest.raises(PretrainError, match="the pretrained encoder does not fit this run's model") as info:
        load_pretrained(model, pretrained.folder)
    message = str(info.value)
    assert all(text in message for text in named), message
    assert "pretrain with the same preset, max_len (or a larger one) and data" in message


def test_a_shorter_run_takes_the_encoders_first_positions(pretrained: Pretrained) -> None:
    """An encoder pretrained at 128 fine-tunes at 64 with its first 64 position embeddings, every other
    weight as saved: one encoder serves a max_len comparison side by side."""
    import torch

    from dgxperf.train.pretrain import read_encoder

    model = Encoder(dataclasses.replace(model_config_of(pretrained.result), max_len=64))
    info = load_pretrained(model, pretrained.folder)
    saved = read_encoder(pretrained.folder)["state"]
    assert info["positions"] == "first 64 of 128"
    assert torch.equal(model.pos_emb.weight, saved["pos_emb.weight"][:64])
    assert torch.equal(model.tok_emb.weight, saved["tok_emb.weight"])
    whole = Encoder(model_config_of(pretrained.result))
    assert load_pretrained(whole, pretrained.folder)["positions"] == "all"


def test_load_pretrained_refuses_a_missing_or_foreign_folder(pretrained: Pretrained, tmp_path: Path) -> None:
    model = Encoder(model_config_of(pretrained.result))
    with pytest.raises(
        PretrainError, match=r"init_from=.*nowhere: no encoder.pt there \(make one with `dgxperf pretrain`\)"
    ):
        load_pretrained(model, tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PretrainError, match=r"no encoder\.pt there"):
        load_pretrained(model, tmp_path / "empty")
    cases = {
        "foreign": {"x": 1},
        "listed": [1, 2, 3],
        "no-state": {"schema": ENCODER_SCHEMA, "model_config": model.config.to_json()},
        "no-config": {"schema": ENCODER_SCHEMA, "state": {}},
    }
    for name, content in cases.items():
        (tmp_path / name).mkdir()
        torch.save(content, tmp_path / name / ENCODER_FILE)
        with pytest.raises(
            PretrainError, match=r"encoder.pt: not a dgxperf pretrained encoder \(schema dgxperf.encoder/1\)"
        ):
            load_pretrained(model, tmp_path / name)
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / ENCODER_FILE).write_bytes(b"\x00not a checkpoint at all" * 10)
    with pytest.raises(PretrainError, match=r"encoder.pt: cannot read the pretrained encoder \(\w+\)"):
        load_pretrained(model, tmp_path / "garbage")
    (tmp_path / "pickled").mkdir()  # not weights: weights_only refuses to unpickle it
    torch.save(
        {"schema": ENCODER_SCHEMA, "obj": dataclasses.replace(model.config)},
        tmp_path / "pickled" / ENCODER_FILE,
    )
    with pytest.raises(PretrainError, match="cannot read the pretrained encoder"):
        load_pretrained(model, tmp_path / "pickled")


def test_load_pretrained_refuses_weights_that_do_not_fit(pretrained: Pretrained, tmp_path: Path) -> None:
    saved = read_encoder(pretrained.folder)
    model = Encoder(model_config_of(pretrained.result))
    broken = {
        "extra": saved["state"] | {"extra.weight": torch.zeros(1)},
        "short": {k: v for k, v in saved["state"].items() if k != "tok_emb.weight"},
        "resized": saved["state"] | {"tok_emb.weight": torch.zeros(5, 64)},  # its config says otherwise
    }
    expected = {
        "extra": r"weights do not match the model \(missing \[\], unexpected \['extra.weight'\]\)",
        "short": r"weights do not match the model \(missing \['tok_emb.weight'\], unexpected \[\]\)",
        "resized": r"weights do not match the model \(size mismatch for tok_emb.weight",
    }
    for name, state in broken.items():
        (tmp_path / name).mkdir()
        torch.save(saved | {"state": state}, tmp_path / name / ENCODER_FILE)
        with pytest.raises(PretrainError, match=expected[name]):
            load_pretrained(model, tmp_path / name)


# -- fine-tuning from it through the training loop -----------------------------------------------------------


def fine_tune_config(folder: Path, **extra: str) -> recipes.TrainConfig:
    fields = {"batch_size": "16", "max_steps": "3", "lr": "1e-6", "log_every": "1", "init_from": str(folder)}
    return config(**{**fields, **extra})


@pytest.fixture
def loaded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every model a run loads pretrained weights into: the one it then trains (the real loader runs)."""
    from dgxperf.train import pretrain as module

    models: list[Any] = []
    real_load = module.load_pretrained

    def spy(model: Any, folder: Path) -> dict[str, Any]:
        models.append(model)
        return real_load(model, folder)

    monkeypatch.setattr(module, "load_pretrained", spy)
    return models


def test_train_from_a_pretrained_folder(
    pretrained: Pretrained, home: Path, tmp_path: Path, loaded: list[Any]
) -> None:
    out = tmp_path / "run"
    result = train(
        fine_tune_config(pretrained.folder), RunOptions(out, home / "cache", device="cpu", checkpoints=False)
    )
    assert result is not None
    saved = read_encoder(pretrained.folder)["state"]
    assert result["init"]["init_from"] == str(pretrained.folder)
    assert result["init"]["loaded_tensors"] == len(saved)
    assert result["init"]["pretrain"]["final_loss"] == pretrained.result["final_loss"]
    assert result["config"]["init_from"] == str(pretrained.folder) and result["steps"] == 3
    assert_valid("train.v1.json", result)
    # the run used the pretrained vocabulary, and trained the model the weights were loaded into
    assert (out / TOKENIZER_FILE).read_bytes() == (pretrained.folder / TOKENIZER_FILE).read_bytes()
    assert result["model"]["vocab_size"] == pretrained.result["model"]["vocab_size"]
    assert len(loaded) == 1
    # 3 steps at lr 1e-6 move no weight by more than ~3e-6
    assert torch.allclose(loaded[0].tok_emb.weight.detach(), saved["tok_emb.weight"], atol=1e-4)
    assert not torch.equal(loaded[0].tok_emb.weight.detach(), saved["tok_emb.weight"])  # and it did train


def test_reinit_layers_gives_the_top_blocks_fresh_weights_and_keeps_the_rest(
    pretrained: Pretrained, home: Path, tmp_path: Path, loaded: list[Any]
) -> None:
    result = train(
        fine_tune_config(pretrained.folder, reinit_layers="1"),
        RunOptions(tmp_path / "run", home / "cache", device="cpu", checkpoints=False),
    )
    assert result is not None and result["init"]["reinit_layers"] == 1
    assert_valid("train.v1.json", result)
    saved = read_encoder(pretrained.folder)["state"]
    trained = {name: tensor.detach() for name, tensor in loaded[0].state_dict().items()}
    # tiny has 2 blocks: block 0 keeps its pretrained weights (3 steps at lr 1e-6), block 1 starts afresh
    assert torch.allclose(trained["blocks.0.mlp.fc1.weight"], saved["blocks.0.mlp.fc1.weight"], atol=1e-4)
    assert (trained["blocks.1.mlp.fc1.weight"] - saved["blocks.1.mlp.fc1.weight"]).abs().max() > 1e-2
    assert torch.allclose(
        trained["blocks.1.ln1.weight"], torch.ones_like(trained["blocks.1.ln1.weight"]), atol=1e-4
    )
    assert torch.allclose(trained["tok_emb.weight"], saved["tok_emb.weight"], atol=1e-4)


def test_reinit_top_blocks_is_seeded_and_leaves_the_global_generator_alone() -> None:
    from dgxperf.train.model import Encoder, preset

    cfg = preset("tiny", vocab_size=50, num_labels=2, max_len=16)
    first, second, other = Encoder(cfg), Encoder(cfg), Encoder(cfg)
    torch.manual_seed(0)
    first.reinit_top_blocks(1, seed=5)
    after_first = torch.rand(2)
    torch.manual_seed(0)
    second.reinit_top_blocks(1, seed=5)
    assert torch.equal(torch.rand(2), after_first)  # dropout and data draws are as without the reinit
    other.reinit_top_blocks(1, seed=6)
    top = "blocks.1.attn.qkv.weight"
    assert torch.equal(first.state_dict()[top], second.state_dict()[top])
    assert not torch.equal(first.state_dict()[top], other.state_dict()[top])
    # the fresh draw has the init's scale: N(0, init_std), the residual projections scaled down for pre-LN
    assert abs(first.state_dict()[top].std().item() - cfg.init_std) < 0.1 * cfg.init_std
    assert first.state_dict()["blocks.1.mlp.fc2.weight"].std() < 0.75 * cfg.init_std


def test_reinit_layers_is_checked(pretrained: Pretrained, home: Path, tmp_path: Path) -> None:
    with pytest.raises(recipes.RecipeError, match="reinit_layers=3: preset tiny has 2 layers"):
        train(
            fine_tune_config(pretrained.folder, reinit_layers="3"),
            RunOptions(tmp_path / "run", home / "cache", device="cpu", checkpoints=False),
        )
    with pytest.raises(recipes.RecipeError, match="set init_from too"):
        recipes.apply_overrides(recipes.OPTIMIZED, {"reinit_layers": "2"})
    with pytest.raises(recipes.RecipeError, match="must be 0 or more"):
        recipes.apply_overrides(recipes.OPTIMIZED, {"reinit_layers": "-1", "init_from": "/x"})


def test_train_without_init_from_records_no_init(home: Path, tmp_path: Path) -> None:
    cfg = config(batch_size="16", max_steps="1", epochs="1")
    result = train(cfg, RunOptions(tmp_path / "run", home / "cache", device="cpu", checkpoints=False))
    assert result is not None and result["init"] is None and result["config"]["init_from"] is None


def test_train_from_a_missing_folder_is_a_data_error(home: Path, tmp_path: Path) -> None:
    cfg = fine_tune_config(tmp_path / "nowhere")
    with pytest.raises(
        DataError, match=r"init_from=.*nowhere: no tokenizer.json there \(make the folder with"
    ):
        train(cfg, RunOptions(tmp_path / "run", home / "cache", device="cpu", checkpoints=False))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"pre_ln": "false"}, r"does not fit this run's model \(pre_ln: pretrained True, this run False\)"),
        ({"preset": "base"}, r"hidden: pretrained 64, this run 768.*layers: pretrained 2, this run 12"),
    ],
)
def test_train_from_a_folder_that_does_not_fit_is_a_recipe_error(
    pretrained: Pretrained, home: Path, tmp_path: Path, overrides: dict[str, str], message: str
) -> None:
    cfg = fine_tune_config(pretrained.folder, **overrides)
    with pytest.raises(recipes.RecipeError, match=message):
        train(cfg, RunOptions(tmp_path / "run", home / "cache", device="cpu", checkpoints=False))


def test_init_from_refuses_synthetic_data() -> None:
    with pytest.raises(recipes.RecipeError, match="init_from needs real text"):
        recipes.build_config("baseline", overrides={"task": "synthetic", "init_from": "/x"})


# -- the command line ----------------------------------------------------------------------------------------


def dgxperf(home: Path, *args: str) -> Any:
    return runner.invoke(app, list(args), env={"DGXPERF_HOME": str(home), "COLUMNS": "400"})


CPU = [
    "pretrain",
    "--device",
    "cpu",
    "--recipe",
    "baseline",
    "--preset",
    "tiny",
    "--set",
    "train_samples=300",
]


def test_cli_pretrains_and_prints_json(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "pre"
    result = dgxperf(home, *CPU, "--batch-size", "16", "--epochs", "1", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "dgxperf.pretrain/1" and data["out_dir"] == str(out)
    assert (
        data["settings"]["epochs"] == 1 and data["settings"]["batch_size"] == 16 and len(data["epochs"]) == 1
    )
    assert data["recipe"] == "baseline" and data["model"]["hidden"] == 64
    assert_valid("pretrain.v1.json", data)
    assert json.loads((out / RESULT_FILE).read_text()) == data
    assert (out / ENCODER_FILE).is_file() and (out / TOKENIZER_FILE).is_file()


def test_cli_for_people_writes_under_the_home_and_says_how_to_fine_tune(home: Path) -> None:
    result = dgxperf(home, *CPU, "--batch-size", "32", "--epochs", "1")
    assert result.exit_code == 0, result.output
    folders = list((home / "pretrain").iterdir())
    assert len(folders) == 1 and folders[0].name.endswith("-tiny")
    assert (folders[0] / ENCODER_FILE).is_file()
    text = " ".join(result.stdout.split())
    assert "pretrained " in text and "for 1 epochs of" in text and "masked-LM loss" in text
    assert "held out (dev texts): masked-LM loss " in text and "lowest" in text and "after epoch 1" in text
    # the recipe's own preset is large: the hint names the one this encoder has
    assert (
        f"fine-tune from it: dgxperf train --recipe baseline --set preset=tiny --set init_from={folders[0]}"
        in text
    )


BAD = [
    (["--device", "tpu"], "--device 'tpu': use cuda or cpu"),
    (["--set", "nonsense=1"], "nonsense"),
    (["--set", "novalue"], "--set 'novalue': use --set field=value"),
    (["--set", "task=synthetic"], "synthetic data has no text to pretrain on"),
    (["--set", "precision=fp16"], "fp16 would need a loss scaler"),
    (["--recipe", "guide"], "fp16 would need a loss scaler"),
    (["--set", "init_from=/somewhere"], "init_from is for fine-tuning"),
    (["--recipe", "fast"], "fast"),
    (["--lr", "2"], "lr=2.0 is not a learning rate"),
    (["--mask-prob", "0"], "mask_prob=0.0 must be in (0, 1)"),
    (["--mask-prob", "1"], "mask_prob=1.0 must be in (0, 1)"),
    (["--mask-span", "0"], "mask_span=0 must be 1 (single tokens) to 32"),
    (["--objective", "bert"], "objective='bert': choose from mlm, electra"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_cli_bad_input_exits_2_with_one_line(
    home: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    result = dgxperf(home, *CPU, "--out", str(out), *args)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # no exception escaped: no traceback
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.output and result.stdout == ""
    assert not out.exists()  # refused before anything ran


def test_cli_too_little_text_for_the_batch_exits_2(home: Path, tmp_path: Path) -> None:
    result = dgxperf(
        home, *CPU, "--batch-size", "100000", "--epochs", "1", "--out", str(tmp_path / "o"), "--json"
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not one batch of 100000 rows of 128; lower --batch-size" in lines[0]
    assert result.stdout == ""


def test_cli_an_out_folder_that_cannot_be_made_exits_2(home: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = dgxperf(home, *CPU, "--out", str(tmp_path / "a-file" / "encoder"))
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert f"cannot create {tmp_path / 'a-file' / 'encoder'}: Not a directory" in result.stderr


def test_cli_epochs_below_one_is_a_usage_error(home: Path) -> None:
    result = dgxperf(home, *CPU, "--epochs", "0")
    assert result.exit_code == 2 and "--epochs" in result.output and "Traceback" not in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cli_without_a_gpu_points_to_the_cpu(home: Path, tmp_path: Path) -> None:
    result = dgxperf(home, "pretrain", "--preset", "tiny", "--out", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert "no CUDA GPU is visible" in result.stderr and "--device cpu pretrains on the CPU" in result.stderr
    assert not (tmp_path / "o").exists()


def test_cli_a_run_that_stops_exits_1(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def stops(*args: Any, **kwargs: Any) -> None:
        raise PretrainError("the masked-LM loss became nan in epoch 3: lower the learning rate (--lr)")

    monkeypatch.setattr("dgxperf.train.pretrain.pretrain", stops)
    result = dgxperf(home, *CPU, "--out", str(tmp_path / "o"), "--json")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "pretraining stopped: the masked-LM loss became nan in epoch 3: lower the learning rate (--lr)"
    ]


def test_cli_train_from_a_folder_that_does_not_fit_exits_2(
    pretrained: Pretrained, home: Path, tmp_path: Path
) -> None:
    result = dgxperf(home, "train", "--device", "cpu", "--recipe", "baseline", "--preset", "base", "--set",
                     "train_samples=300", "--set", f"init_from={pretrained.folder}", "--out", str(tmp_path / "t"),
                     "--json")  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "does not fit this run's model (hidden: pretrained 64, this run 768" in lines[0]
    )


def test_cli_ctrl_c_says_how_to_resume_and_resume_finishes(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dgxperf import cli_pretrain

    out = tmp_path / "o"
    args = [*CPU, "--batch-size", "16", "--epochs", "3", "--checkpoint-every", "1", "--out", str(out)]
    real_update = cli_pretrain._Progress.update

    def interrupted(self: Any, record: dict[str, Any]) -> None:
        real_update(self, record)
        if record["epoch"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli_pretrain._Progress, "update", interrupted)
    result = dgxperf(home, *args)
    assert result.exit_code == 130
    assert f"the same command with --out {out} --resume" in " ".join(result.stderr.split())
    monkeypatch.setattr(cli_pretrain._Progress, "update", real_update)
    result = dgxperf(home, *args, "--resume", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["resumed_at_epoch"] == 2 and [e["epoch"] for e in data["epochs"]] == [1, 2, 3]
    assert_valid("pretrain.v1.json", data)


def test_cli_resume_needs_out_and_a_checkpoint(home: Path, tmp_path: Path) -> None:
    result = dgxperf(home, *CPU, "--resume")
    assert result.exit_code == 2 and "--resume needs --out DIR" in result.stderr
    result = dgxperf(home, *CPU, "--resume", "--out", str(tmp_path / "empty"))
    assert result.exit_code == 2 and "--resume: no checkpoint.pt in" in " ".join(result.stderr.split())
    assert "Traceback" not in result.output


def test_ctrl_c_says_where_the_finished_epochs_are(tmp_path: Path) -> None:
    """A real SIGINT after the first epoch: exit 130, no traceback, and the log of what finished."""
    out = tmp_path / "cut"
    process = subprocess.Popen(
        [sys.executable, "-m", "dgxperf", *CPU, "--batch-size", "8", "--epochs", "200", "--checkpoint-every", "0",
         "--out", str(out), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "DGXPERF_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT / "src"),
             "COLUMNS": "400"},
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not ((out / EPOCHS_LOG).is_file() and (out / EPOCHS_LOG).read_text().strip()):
        assert process.poll() is None and time.monotonic() < deadline, "no epoch finished"
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and "Traceback" not in stderr
    text = " ".join(stderr.split())
    assert "interrupted before the first checkpoint" in text
    assert f"the finished epochs' losses and probes are in {out / EPOCHS_LOG}" in text
    assert [e["epoch"] for e in epochs_logged(out)][:1] == [1] and not (out / ENCODER_FILE).exists()
