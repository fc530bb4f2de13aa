"""`dgxperf pretrain`: masked-LM self-pretraining on the training split's texts; the work is
:mod:`dgxperf.train.pretrain`. Fine-tune from its folder with ``dgxperf train --set init_from=FOLDER``.

Registered in :mod:`dgxperf.cli` as ``app.command("pretrain")(pretrain)``. Exit codes as everywhere:
0 done, 1 the run stopped (non-finite loss, out of memory), 2 bad input.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from dgxperf.cli_common import (
    EXIT_FAILURE,
    DataDirOpt,
    DeviceOpt,
    JsonFlag,
    PresetOpt,
    RecipeFileOpt,
    console,
    err_console,
    make_out_dir,
    note_emulated_bf16,
    parse_sets,
    print_json,
    run_progress,
    usage_error,
)


def pretrain(
    recipe: Annotated[
        str,
        typer.Option("--recipe", "-r", help="Recipe whose data, model and precision fields to use."),
    ] = "optimized",
    config_file: RecipeFileOpt = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a recipe field: --set preset=base (repeatable)."),
    ] = None,
    preset: PresetOpt = None,
    data_dir: DataDirOpt = None,
    train_file: Annotated[
        Path | None,
        typer.Option("--train-file", help="Your data (its texts only are read): CLUE JSONL, JSONL, CSV."),
    ] = None,
    epochs: Annotated[
        int, typer.Option("--epochs", min=1, help="Masked-LM epochs over the training texts.")
    ] = 80,
    lr: Annotated[float, typer.Option("--lr", help="Peak learning rate.")] = 2e-4,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Rows of max_len tokens per step.")
    ] = 128,
    mask_prob: Annotated[float, typer.Option("--mask-prob", help="Share of tokens to predict.")] = 0.15,
    mask_span: Annotated[
        int,
        typer.Option(
            "--mask-span",
            help="Longest masked span: 1 masks single tokens (BERT); 10 masks SpanBERT's spans (mean 3.8).",
        ),
    ] = 1,
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="mlm (BERT's masked LM) or electra (a small generator fills the masks, the encoder spots "
            "replaced tokens; on the default task its fine-tunes scored 2-2.5 points below mlm's, README).",
        ),
    ] = "mlm",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the weights, masks and row order.")] = 0,
    extra_text: Annotated[
        Path | None,
        typer.Option(
            "--extra-text",
            help="Unlabeled UTF-8 text to pretrain on as well, one passage per line (never dev or test texts).",
        ),
    ] = None,
    device: DeviceOpt = "cuda",
    out: Annotated[
        Path | None, typer.Option("--out", help="Folder for encoder.pt, tokenizer.json and pretrain.json.")
    ] = None,
    checkpoint_every: Annotated[
        int,
        typer.Option(
            "--checkpoint-every",
            min=0,
            help="Save the whole state every N epochs (0: never) for --resume (preset large: 3.7 GB a save).",
        ),
    ] = 20,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Pretrain the encoder as a masked language model on the training split's own texts (no labels,
    nothing from dev or test), and --extra-text's if given, so that `train --set init_from=OUT` starts
    from it."""
    from dgxperf.store import default_store_path
    from dgxperf.train import recipes
    from dgxperf.train.data import DataError
    from dgxperf.train.pretrain import PretrainError, PretrainInputError, PretrainSettings, check_config
    from dgxperf.train.pretrain import pretrain as run_pretrain

    overrides = parse_sets(set_)
    if preset is not None:
        overrides["preset"] = preset
    if data_dir is not None:
        overrides["data_dir"] = str(data_dir)
    if train_file is not None:
        overrides.update(task="files", train_file=str(train_file))
    if device not in ("cuda", "cpu"):
        usage_error(f"--device {device!r}: use cuda or cpu")
    if resume and out is None:
        usage_error("--resume needs --out DIR, the folder of the run to continue (same options as its start)")
    if extra_text is not None and not extra_text.is_file():
        usage_error(
            f"--extra-text {extra_text}: "
            + ("a folder, not a file" if extra_text.is_dir() else "no such file")
        )
    try:
        config = recipes.build_config(recipe, yaml_file=config_file, overrides=overrides)
        settings = PretrainSettings(
            epochs=epochs, lr=lr, batch_size=batch_size, mask_prob=mask_prob, mask_span=mask_span, seed=seed,
            extra_text=str(extra_text) if extra_text is not None else None, objective=objective,
        )  # fmt: skip
        settings.validate()
        check_config(config)
    except (recipes.RecipeError, PretrainError) as exc:
        usage_error(str(exc))
    if device == "cuda":
        from dgxperf.bench.device import gpu_count

        if gpu_count() == 0:
            usage_error("no CUDA GPU is visible (see `dgxperf doctor`); --device cpu pretrains on the CPU")
    note_emulated_bf16(device, config.precision)
    home = default_store_path(os.environ).parent
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out_dir = make_out_dir(out or home / "pretrain" / f"{stamp}-{config.preset}")
    progress = _Progress(json_out, epochs)
    try:
        with progress:
            result = run_pretrain(
                config, settings, out_dir, home / "cache", device=device, on_epoch=progress.update,
                checkpoint_every=checkpoint_every, resume=resume,
            )  # fmt: skip
    except (recipes.RecipeError, DataError, PretrainInputError) as exc:
        usage_error(str(exc))
    except PretrainError as exc:
        err_console.print(f"[bold red]pretraining stopped:[/] {exc}", highlight=False)
        raise typer.Exit(EXIT_FAILURE) from None
    except KeyboardInterrupt:
        from dgxperf.train.artifacts import CHECKPOINT_FILE
        from dgxperf.train.pretrain import EPOCHS_LOG

        if (out_dir / CHECKPOINT_FILE).is_file():
            err_console.print(
                f"interrupted; continue from the last checkpoint: the same command with --out {out_dir} --resume"
            )
        else:
            err_console.print("interrupted before the first checkpoint (--checkpoint-every): start it again")
        log = out_dir / EPOCHS_LOG
        if log.is_file() and log.stat().st_size:
            err_console.print(f"the finished epochs' losses and probes are in {log}", highlight=False)
        raise typer.Exit(130) from None
    if json_out:
        print_json(result)
        return
    first, last = result["epochs"][0], result["epochs"][-1]
    console.print(
        f"pretrained {result['model']['params']:,} parameters for {len(result['epochs'])} epochs of "
        f"{result['tokens_per_epoch']:,} tokens: masked-LM loss {first['loss']:.3f} -> {last['loss']:.3f}, "
        f"{result['tokens_per_s_steady']:,.0f} tokens/s, {result['total_seconds']:.0f} s in all",
        highlight=False,
    )
    dev = [e.get("dev_loss") for e in result["epochs"]]
    if dev[-1] is not None:
        best = min(range(len(dev)), key=lambda i: dev[i] if dev[i] is not None else math.inf)
        console.print(
            f"held out (dev texts): masked-LM loss {dev[-1]:.3f} after the last epoch, lowest {dev[best]:.3f} "
            f"after epoch {best + 1}",
            highlight=False,
        )
    extra = result.get("extra_text")
    if extra:
        console.print(
            f"with {extra['tokens']:,} tokens of {extra['path']} besides the training texts' "
            f"{extra['train_tokens']:,} ({extra['unk_share']:.1%} of them [UNK] to this tokenizer)",
            highlight=False,
        )
    # the encoder's shape must be the fine-tune's: name the recipe fields that set it (the preset, and those
    # of load_pretrained's SHAPE_FIELDS a recipe has) where they differ from the recipe's own (a base encoder
    # fine-tuned at the recipe's large preset is refused)
    from dgxperf.train.pretrain import SHAPE_FIELDS

    default = recipes.build_config(recipe)
    fields = ("preset", *(f for f in SHAPE_FIELDS if hasattr(default, f)))
    shape = [f"--set {k}={getattr(config, k)}" for k in fields if getattr(config, k) != getattr(default, k)]
    console.print(
        f"fine-tune from it: dgxperf train --recipe {recipe} {' '.join([*shape, f'--set init_from={out_dir}'])}",
        highlight=False,
    )


class _Progress:
    """A Rich progress bar of epochs for people (on stderr); nothing for --json."""

    def __init__(self, quiet: bool, epochs: int) -> None:
        self.quiet, self.epochs = quiet, epochs
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> _Progress:
        if not self.quiet:
            self.bar = run_progress("pretrain")
            self.bar.__enter__()
            self.task = self.bar.add_task("preparing data, compiling", total=self.epochs)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def update(self, record: dict[str, Any]) -> None:
        if self.bar is not None:
            held_out = f"  dev {record['dev_loss']:.3f}" if record.get("dev_loss") is not None else ""
            text = f"loss {record['loss']:.3f}{held_out}  {record['tokens_per_s']:,.0f} tokens/s"
            self.bar.update(self.task, completed=record["epoch"], description=text)
