"""``dgxperf plan memory``: the memory planner's command (registered in dgxperf.cli as plan_app's "memory").

The shared CLI helpers come from dgxperf.cli_common (cli.py imports this module to register the command).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dgxperf.cli_common import JsonFlag, console, print_json, usage_error
from dgxperf.plan import memory as planner

_SHOWN = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer_states": "optimizer states",
    "ddp_buckets": "DDP gradient buckets",
    "gathered_params": "gathered (unsharded) parameters",
    "activations": "saved activations",
    "autocast_weight_copies": "autocast weight copies",
    "transient": "temporaries at that moment",
    "workspace": "cuBLAS workspace",
}


def _gib(value: float) -> str:
    return f"{value / planner.GIB:.2f}"


def _shape(
    preset: str | None,
    params: float | None,
    layers: int | None,
    hidden: int | None,
    heads: int | None,
    ffn: int | None,
    vocab: int,
    labels: int,
    seq_len: int,
) -> planner.ModelShape:
    explicit = {"--layers": layers, "--hidden": hidden, "--heads": heads, "--ffn": ffn}
    given = [name for name, value in explicit.items() if value is not None]
    if sum(bool(x) for x in (preset is not None, params is not None, bool(given))) > 1:
        raise planner.PlanError(
            "give one of --preset, --params, or a shape (--layers --hidden ...), not several"
        )
    if params is not None:
        if params < 1 or not float(params).is_integer():
            raise planner.PlanError(f"--params must be a positive whole number, got {params:g}")
        return planner.shape_from_params(int(params), vocab_size=vocab, max_len=seq_len, num_labels=labels)
    if given:
        missing = [name for name in ("--layers", "--hidden") if explicit[name] is None]
        if missing:
            raise planner.PlanError(f"an explicit shape needs {' and '.join(missing)} too")
        assert layers is not None and hidden is not None
        if hidden < 1:
            raise planner.PlanError(f"hidden must be a positive integer, got {hidden}")
        heads_ = heads if heads is not None else max(1, hidden // 64)
        return planner.ModelShape(
            layers, hidden, heads_, ffn if ffn is not None else 4 * hidden, vocab, seq_len, labels
        )
    return planner.shape_from_preset(preset or "large", vocab_size=vocab, max_len=seq_len, num_labels=labels)


def memory(
    preset: Annotated[
        str | None, typer.Option("--preset", "-p", help="Model preset: tiny, base or large (default large).")
    ] = None,
    params: Annotated[
        float | None,
        typer.Option("--params", help="Only a parameter count (e.g. 350e6): rough, with a guessed shape."),
    ] = None,
    layers: Annotated[
        int | None, typer.Option("--layers", help="Explicit shape: Transformer blocks.")
    ] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", help="Explicit shape: hidden size.")] = None,
    heads: Annotated[
        int | None, typer.Option("--heads", help="Explicit shape: attention heads (default hidden/64).")
    ] = None,
    ffn: Annotated[
        int | None, typer.Option("--ffn", help="Explicit shape: MLP width (default 4 x hidden).")
    ] = None,
    vocab: Annotated[
        int,
        typer.Option(
            "--vocab",
            help="Vocabulary: 3635 is the char tokenizer on the default task; task=synthetic uses 21128.",
        ),
    ] = planner.DEFAULT_VOCAB,
    labels: Annotated[int, typer.Option("--labels", help="Classifier outputs.")] = 2,
    seq_len: Annotated[
        int, typer.Option("--seq-len", "-s", help="Tokens per sequence (padded length).")
    ] = 128,
    batch: Annotated[int, typer.Option("--batch", "-b", help="Micro-batch per GPU.")] = 32,
    precision: Annotated[
        str,
        typer.Option(
            "--precision",
            help="fp32, tf32, amp-fp16 / amp-bf16 (autocast, fp32 master weights) or bf16 (pure bf16).",
        ),
    ] = "amp-bf16",
    optimizer: Annotated[
        str, typer.Option("--optimizer", help="adamw, sgd (momentum), lamb or adafactor.")
    ] = ("adamw"),
    fused: Annotated[
        bool, typer.Option("--fused/--foreach", help="Fused AdamW (in place) or foreach (one temporary).")
    ] = False,
    sharding: Annotated[
        str, typer.Option("--sharding", help="ddp, zero1, zero2, zero3 or fsdp (= zero3) over --gpus.")
    ] = "ddp",
    gpus: Annotated[int, typer.Option("--gpus", "-g", help="Data-parallel GPUs that shard the states.")] = 1,
    checkpointing: Annotated[
        bool, typer.Option("--checkpointing/--no-checkpointing", help="Activation checkpointing per block.")
    ] = False,
    offload: Annotated[
        bool, typer.Option("--offload/--no-offload", help="Optimizer states in CPU memory (ZeRO-Offload).")
    ] = False,
    dropout: Annotated[
        float, typer.Option("--dropout", help="Residual/embedding dropout (0 keeps no masks).")
    ] = 0.1,
    attn_dropout: Annotated[
        float, typer.Option("--attn-dropout", help="Attention-probability dropout.")
    ] = 0.1,
    padding_mask: Annotated[
        bool,
        typer.Option("--padding-mask", help="Batches carry a padding mask (memory-efficient SDPA kernel)."),
    ] = False,
    attention: Annotated[
        str, typer.Option("--attention", help="SDPA kernel: auto, flash, efficient or math (keeps s x s).")
    ] = "auto",
    grad_accum: Annotated[int, typer.Option("--grad-accum", help="Micro-batches per optimizer step.")] = 1,
    eval_batch: Annotated[
        int | None, typer.Option("--eval-batch", help="Also count an evaluation pass of this batch size.")
    ] = None,
    margin: Annotated[
        float, typer.Option("--margin", help="Room for allocator fragmentation, as a share of the peak.")
    ] = planner.DEFAULT_MARGIN,
    tensors: Annotated[
        bool, typer.Option("--tensors", help="Also list what one block keeps for backward.")
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Predict peak GPU memory (torch.cuda.max_memory_allocated) of training the encoder, per GPU."""

    try:
        if not 0 <= margin < 10:
            raise planner.PlanError(f"--margin must be in [0, 10), got {margin}")
        shape = _shape(preset, params, layers, hidden, heads, ffn, vocab, labels, seq_len)
        inputs = planner.MemoryInputs(
            shape=shape,
            seq_len=seq_len,
            micro_batch=batch,
            precision=precision,
            optimizer=optimizer,
            fused_optimizer=fused,
            sharding=sharding,
            gpus=gpus,
            activation_checkpointing=checkpointing,
            cpu_offload=offload,
            dropout=dropout,
            attn_dropout=attn_dropout,
            attention=attention,
            padding_mask=padding_mask,
            grad_accum=grad_accum,
            eval_batch=eval_batch,
        )
        result = planner.estimate(inputs)
        fits = planner.gpu_fit_table(inputs, margin=margin)
    except planner.PlanError as exc:
        usage_error(str(exc))
    if json_out:
        print_json(result.to_json() | {"margin": margin, "gpus": [fit.to_json() for fit in fits]})
        return
    _render(console, result, fits, margin, tensors)


def _render(
    console: Any, result: planner.MemoryEstimate, fits: list[planner.GpuFit], margin: float, tensors: bool
) -> None:
    from rich.table import Table

    inputs, shape = result.inputs, result.inputs.shape
    label = next(
        (
            name
            for name, p in planner.PRESETS.items()
            if not shape.inferred
            and (p["layers"], p["hidden"], p["heads"], p["ffn"])
            == (shape.layers, shape.hidden, shape.heads, shape.ffn)
        ),
        f"{shape.layers} layers x {shape.hidden} ({shape.heads} heads, ffn {shape.ffn})",
    )
    optimizer = inputs.optimizer + (" (fused)" if inputs.fused_optimizer else "")
    sharding = f"{inputs.sharding} x {inputs.gpus} GPU{'s' if inputs.gpus > 1 else ''}"
    extras = [
        x
        for x, on in (("checkpointing", inputs.activation_checkpointing), ("offload", inputs.cpu_offload))
        if on
    ]
    console.print(
        f"[bold]dgxperf plan memory[/] — {label}, {shape.params / 1e6:.1f}M params (vocab {shape.vocab_size:,}); "
        f"seq {inputs.seq_len} x micro-batch {inputs.micro_batch}; {inputs.precision}, {optimizer}, {sharding}"
        + (f", {', '.join(extras)}" if extras else ""),
        highlight=False,
    )
    console.print(
        f"peak [bold]{_gib(result.peak_bytes)} GiB[/] ({result.peak_bytes / 1e9:.2f} GB) at {result.peak_phase} "
        "— the prediction of torch.cuda.max_memory_allocated per GPU",
        highlight=False,
    )
    table = Table(
        box=None, pad_edge=False, title="at the peak", title_justify="left", title_style="bold cyan"
    )
    table.add_column("component")
    table.add_column("GiB", justify="right")
    for key, value in result.components.items():
        table.add_row(_SHOWN.get(key, key), _gib(value))
    table.add_row("[bold]total[/]", f"[bold]{_gib(result.peak_bytes)}[/]")
    console.print(table)
    per_layer = result.activation_bytes_per_layer
    console.print(
        f"activations per layer {_gib(per_layer)} GiB; published formula (Korthikanti et al., fp16 "
        f"{'full recompute 2sbh' if inputs.activation_checkpointing else 'sbh(34 + 5as/h)'}) "
        f"{_gib(result.published_bytes_per_layer)} GiB",
        highlight=False,
    )
    moments = ", ".join(f"{name} {_gib(sum(parts.values()))}" for name, parts in result.phases.items())
    console.print(f"moments (GiB): {moments}", highlight=False)
    if result.host_bytes:
        console.print(f"host memory for offloaded state: {_gib(result.host_bytes)} GiB", highlight=False)
    for note in result.notes:
        console.print(f"note: {note}", style="yellow", highlight=False)
    if tensors:
        saved = Table(
            box=None,
            pad_edge=False,
            title="kept for backward, per block and token",
            title_justify="left",
            title_style="bold cyan",
        )
        for column in ("tensor", "dtype", "bytes/token", "why"):
            saved.add_column(column)
        for row in result.saved_per_block:
            saved.add_row(row.name, row.dtype, f"{row.bytes_per_token:g}", row.why)
        console.print(saved)
    title = f"GPUs (needs = peak + {margin:.0%}; usable = total - driver - CUDA context)"
    gpu_table = Table(box=None, pad_edge=False, title=title, title_justify="left", title_style="bold cyan")
    for column in ("GPU", "usable GiB", "needs GiB", "fits", "largest micro-batch"):
        gpu_table.add_column(column, justify="left" if column in ("GPU", "fits") else "right")
    for fit in fits:
        if fit.max_micro_batch < 0:
            gpu_table.add_row(
                fit.gpu.name, _gib(fit.gpu.usable_bytes), _gib(fit.needed_bytes), "[dim]n/a[/]", fit.reason
            )
            continue
        verdict = "[green]yes[/]" if fit.fits else "[red]no[/]"
        gpu_table.add_row(
            fit.gpu.name,
            _gib(fit.gpu.usable_bytes),
            _gib(fit.needed_bytes),
            verdict,
            str(fit.max_micro_batch),
        )
    console.print(gpu_table)
