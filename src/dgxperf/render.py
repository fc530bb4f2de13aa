"""Rich views of results for people. JSON views need none of this: they print ``to_json()``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from dgxperf.doctor import AREAS, DoctorReport
from dgxperf.pace import pace_line
from dgxperf.results import Finding, Status, to_jsonable
from dgxperf.store import MISSING, Comparison, RunRecord

STATUS_STYLE = {
    Status.PASS: ("PASS", "green"),
    Status.WARN: ("WARN", "yellow"),
    Status.FAIL: ("FAIL", "bold red"),
    Status.UNKNOWN: ("????", "magenta"),
    Status.NOT_APPLICABLE: ("n/a", "dim"),
}
SKIP_EVIDENCE = {"guide", "build_settings", "arch_list", "why"}


def short(value: Any, width: int = 60) -> str:
    value = to_jsonable(value)
    if isinstance(value, dict) and set(value) == {"na"}:
        text = f"n/a ({value['na']})"
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def evidence_line(finding: Finding, width: int = 70) -> str:
    parts = []
    for key, value in finding.evidence.items():
        if key in SKIP_EVIDENCE or value in (None, [], {}):
            continue
        parts.append(f"{key}={short(value, 40)}")
    return short("; ".join(parts), width)


def render_doctor(console: Console, report: DoctorReport, *, problems_only: bool = False) -> None:
    snap = report.snapshot
    gpus = ", ".join(sorted({str(g.get("name")) for g in snap.gpus})) or "no GPU visible to NVML"
    console.print(
        f"[bold]dgxperf doctor[/] — {snap.hostname} — {len(snap.gpus)} GPU(s): {gpus}", highlight=False
    )
    shown = [
        f
        for f in report.findings
        if not problems_only or f.status in (Status.FAIL, Status.WARN, Status.UNKNOWN)
    ]
    for area in (*AREAS, "internal"):
        in_area = [f for f in shown if f.area == area]
        if not in_area:
            continue
        table = Table(
            box=None,
            show_header=False,
            pad_edge=False,
            expand=True,
            title=area,
            title_justify="left",
            title_style="bold cyan",
        )
        table.add_column("status", width=4, no_wrap=True)
        table.add_column("check", ratio=2, no_wrap=True, overflow="ellipsis")
        table.add_column("evidence", ratio=3, no_wrap=True, overflow="ellipsis", style="dim")
        for finding in in_area:
            label, style = STATUS_STYLE[finding.status]
            table.add_row(Text(label, style=style), finding.title, evidence_line(finding, 200))
        console.print(table)

    problems = [f for f in report.findings if f.status.needs_action and f.fix is not None]
    if problems:
        console.print(
            "\n[bold]What to change[/] (doctor changes nothing; `--fix-script FILE` writes a script):"
        )
        for finding in problems:
            label, style = STATUS_STYLE[finding.status]
            console.print(Text.assemble((f"{label} ", style), (finding.id, "bold"), f" — {finding.title}"))
            guide = f" (guide {finding.guide})" if finding.guide else ""
            console.print(Padding(Text(finding.why + guide), (0, 0, 0, 5)))
            fix = finding.fix
            assert fix is not None
            console.print(Padding(Text(f"fix: {fix.summary}", style="bold"), (0, 0, 0, 5)))
            for command in fix.shown_commands:
                text = Text(command, style="dim") if command.startswith("#") else Text(f"$ {command}")
                console.print(Padding(text, (0, 0, 0, 7)))
    console.print(
        f"\n{report.summary_line()}, {report.counts['not_applicable']} not applicable "
        f"— {report.collect_seconds:.1f} s ({report.source})"
    )


def render_validate(console: Console, result: Mapping[str, Any], md: Path, page: Path) -> None:
    from dgxperf.report.document import host_bound_notes, pace_notes, phase_table, tables_for_terminal

    def show(title: str, table: tuple[list[str], list[list[str]]]) -> None:
        headers, rows = table
        view = Table(title=title, title_justify="left")
        for header in headers:
            view.add_column(header)
        for row in rows:
            view.add_row(*row)
        console.print(view)

    show("phases", phase_table(result))
    for title, table in tables_for_terminal(result):
        if table[1]:
            show(title, table)
    for note in pace_notes(result) + host_bound_notes(result):
        console.print(note, style="yellow", highlight=False)
    if not result.get("complete"):
        console.print("[bold yellow]the report is incomplete[/]: see the phase table", highlight=False)
    console.print(f"report: {page}  (Markdown: {md})", highlight=False)
    if result.get("run_id") is not None:
        console.print(f"saved as run {result['run_id']} (dgxperf runs show {result['run_id']})", style="dim")


def render_runs(console: Console, records: Sequence[RunRecord], path: Path) -> None:
    if not records:
        console.print(f"no runs saved yet in {path}")
        return
    table = Table(title=f"runs in {path}", title_justify="left")
    for column in ("id", "when (UTC)", "command", "host", "GPUs", "status", "summary"):
        table.add_column(column)
    for record in records:
        gpus = record.fingerprint.get("gpus") or []
        names = sorted({str(g.get("name")) for g in gpus})
        gpu_text = f"{len(gpus)}x {names[0]}" if len(names) == 1 else (", ".join(names) or "-")
        table.add_row(
            str(record.id),
            record.created_at.replace("T", " ")[:19],
            record.command,
            record.hostname,
            gpu_text,
            record.status,
            record.summary,
        )
    console.print(table)


def render_run(console: Console, record: RunRecord) -> None:
    console.print(
        f"[bold]run {record.id}[/] — {record.command} — {record.created_at} — {record.status} — {record.summary}",
        highlight=False,
    )
    console.print(f"argv: dgxperf {' '.join(record.argv)}", highlight=False)
    console.print("[bold]fingerprint[/]")
    for key, value in record.fingerprint.items():
        console.print(f"  {key}: {short(value, 100)}", highlight=False)
    findings = record.result.get("findings")
    if isinstance(findings, list):
        table = Table()
        for column in ("status", "id", "evidence"):
            table.add_column(column)
        for f in findings:
            table.add_row(f.get("status", ""), f.get("id", ""), short(f.get("evidence", {}), 80))
        console.print(table)
    else:
        console.print_json(json.dumps(record.result, ensure_ascii=False))


def render_comparison(console: Console, a: RunRecord, b: RunRecord, comparison: Comparison) -> None:
    console.print(
        f"[bold]run {a.id}[/] ({a.command}, {a.hostname}) vs [bold]run {b.id}[/] ({b.command}, {b.hostname})"
    )
    if not comparison.same_command:
        console.print("[yellow]note:[/] the two runs are of different commands")

    def cell(value: Any) -> str:
        return "—" if value is MISSING else short(value, 50)

    if comparison.fingerprint_diff:
        table = Table(title="node and software", title_justify="left")
        for column in ("key", f"run {a.id}", f"run {b.id}"):
            table.add_column(column)
        for key, va, vb in comparison.fingerprint_diff:
            table.add_row(key, cell(va), cell(vb))
        console.print(table)
    else:
        console.print("same node and software")
    if comparison.result_diff:
        table = Table(title="results", title_justify="left")
        for column in ("key", f"run {a.id}", f"run {b.id}", "change"):
            table.add_column(column)
        for key, va, vb, rel in comparison.result_diff:
            table.add_row(key, cell(va), cell(vb), "" if rel is None else f"{rel:+.1%}")
        console.print(table)
    else:
        console.print("same results")


def render_paired(console: Console, a: int, b: int, paired: Mapping[str, Any]) -> None:
    """Two train runs' test accuracies compared on the same reviews (``dgxperf.train.paired``)."""
    if "error" in paired:
        console.print(f"[yellow]no paired test comparison:[/] {paired['error']}", highlight=False)
        return
    low, high = paired["difference_ci95"]
    console.print(
        f"test accuracy, paired over the same {paired['samples']:,} examples: run {a} "
        f"{paired['accuracy_a']:.2%} vs run {b} {paired['accuracy_b']:.2%}, difference "
        f"{100 * paired['difference']:+.2f} points (95% interval {100 * low:+.2f} to {100 * high:+.2f}); "
        f"right only in run {a}: {paired['a_only']:,}, only in run {b}: {paired['b_only']:,}; "
        f"McNemar p = {paired['p_value']:.3g}",
        highlight=False,
    )


def render_seeds(console: Console, data: Mapping[str, Any]) -> None:
    """Two groups of seeds: each run, each group's mean and spread, and what the difference amounts to."""
    from dgxperf.train.seeds import encoders

    every_run = [*data["runs_a"], *data["runs_b"]]
    named = encoders(every_run)
    columns = ["group", "run", "recipe", "seed", *(["encoder"] if named else []), "test acc"]
    table = Table(title="test accuracy over seeds", title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column, justify="right" if column in ("run", "seed", "test acc") else "left")
    for label, runs, group in (("A", data["runs_a"], data["a"]), ("B", data["runs_b"], data["b"])):
        for run in runs:
            encoder = [run.get("encoder") or "—"] if named else []
            table.add_row(label, str(run["run_id"]), str(run["recipe"]), str(run["seed"]), *encoder,
                          f"{100 * run['test_accuracy']:.2f}%")  # fmt: skip
        spacer = [""] if named else []
        table.add_row(
            label, "", "mean ± sd", "", *spacer, f"{group['mean']:.2f} ± {group['sd']:.2f}", style="bold"
        )
    console.print(table)
    if len(named) > 1:
        console.print(
            f"the runs were fine-tuned from {len(named)} different encoders: the encoder moves test accuracy "
            "as much as a recipe can, so the difference may be the encoders'",
            highlight=False,
        )
    low, high = data["difference_ci95"]
    p = data["p_value"]
    permutation = (
        f"exact permutation p = {p:.3g} over {data['splits']:,} splits (the smallest any result could reach: "
        f"{data['smallest_possible_p']:.3g})"
        if p is not None
        else f"{data['splits']:,} splits: too many to enumerate, Welch's interval only"
    )
    console.print(
        f"A − B: {data['difference']:+.2f} points (Welch 95% interval {low:+.2f} to {high:+.2f}); {permutation}",
        highlight=False,
    )
    widest_sd = max(data["a"]["sd"], data["b"]["sd"])
    console.print(f"{seeds_verdict(data)} (seed-to-seed sd up to {widest_sd:.2f} points)", highlight=False)


def seeds_verdict(data: Mapping[str, Any]) -> str:
    """One sentence: do the groups differ by more than their seeds do? Welch's interval alone leans on
    normal spreads, which two or three seeds cannot show, so the permutation test must agree."""
    low, high = data["difference_ci95"]
    p = data["p_value"]
    if not (low > 0 or high < 0):
        return "the interval includes zero: with these seeds the groups are not told apart"
    if p is None or p <= 0.05:
        return "the groups differ by more than their seeds do"
    return (
        f"Welch's interval excludes zero, but the permutation test cannot confirm it with so few seeds "
        f"(p = {p:.3g}; the least these group sizes allow is {data['smallest_possible_p']:.3g}): run more seeds"
    )


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def render_bench(console: Console, report: Any) -> None:
    """One table per benchmark family in the report, then the notes."""
    device = report.device
    spec = f" ({device.spec.key})" if device.spec else " (not in the datasheet table: no % of peak)"
    console.print(f"[bold]dgxperf bench {report.suite}[/] — {device.name}{spec}", highlight=False)
    by_bench: dict[str, list[Any]] = {}
    for m in report.measurements:
        by_bench.setdefault(m.bench, []).append(m)
    for bench, items in by_bench.items():
        if bench == "nccl":
            _render_nccl(console, items, report.extra.get("nccl", {}))
            continue
        if bench == "p2p":
            _render_p2p(console, report.summary().get("p2p_gbs", []))
            continue
        if bench == "launch":
            _render_launch(console, items)
            continue
        table = Table(title=bench, title_justify="left", title_style="bold cyan")
        for column, justify in (
            ("test", "left"),
            ("value", "right"),
            ("unit", "left"),
            ("% of peak", "right"),
            ("peak", "right"),
            ("median", "right"),
            ("spread p10-p90", "right"),
        ):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for m in items:
            median_ms = m.timing.median_s * 1e3
            table.add_row(
                m.name,
                _fmt(m.value, 1),
                m.unit,
                _fmt(m.pct_of_peak, 1),
                _fmt(m.peak, 0),
                f"{median_ms:.3f} ms",
                f"{100 * m.timing.spread:.1f}%",
            )
        console.print(table)
    summary = report.summary()
    if "gemm" in summary:
        _render_gemm_best(console, summary["gemm"])
    for note in report.notes:
        console.print(f"note: {note}", style="dim")


def _render_gemm_best(console: Console, best: dict[str, Any]) -> None:
    table = Table(title="best GEMM per dtype", title_justify="left", title_style="bold cyan")
    columns = ("dtype", "shape", "sustained TFLOP/s", "%peak", "SM MHz", "burst TFLOP/s", "%peak ", "SM MHz ")
    for column in columns:
        table.add_column(column, justify="left" if column in ("dtype", "shape") else "right")
    for dtype, b in best.items():
        table.add_row(
            dtype,
            b["shape"],
            _fmt(b["tflops"], 1),
            _fmt(b["pct_of_peak"], 1),
            str(b.get("sm_mhz") or "—"),
            _fmt(b.get("burst_tflops"), 1),
            _fmt(b.get("burst_pct_of_peak"), 1),
            str(b.get("burst_sm_mhz") or "—"),
        )
    console.print(table)
    console.print(
        "sustained: after a pre-load, at the clocks a long training step sees; "
        "burst: a 25 ms window after an idle pause (boost clocks)",
        style="dim",
    )


def _render_launch(console: Console, items: list[Any]) -> None:
    """Microseconds, not the generic table's milliseconds: a launch costs a few µs."""
    table = Table(title="launch", title_justify="left", title_style="bold cyan")
    for column in ("test", "µs per op", "ops/s", "spread p10-p90", "beside it"):
        table.add_column(column, justify="left" if column in ("test", "beside it") else "right")
    for m in items:
        if "wall_us_per_op" in m.extra:
            beside = f"issued and finished: {m.extra['wall_us_per_op']:.2f} µs an op"
        else:
            beside = f"a replay costs the host {m.extra['host_us_per_replay']:.2f} µs"
        table.add_row(
            m.name, f"{m.extra['us_per_op']:.2f}", _fmt(m.value, 0), f"{100 * m.timing.spread:.1f}%", beside
        )
    console.print(table)
    console.print(
        "eager: what issuing one small kernel costs the host (dispatcher and driver), the floor under an eager "
        "step's time a launch; graph: a kernel replayed from a CUDA graph, the host out of the way",
        style="dim",
    )


def _render_p2p(console: Console, matrix: list[list[float | None]]) -> None:
    table = Table(title="p2p copy GB/s (row -> column)", title_justify="left", title_style="bold cyan")
    table.add_column("")
    for j in range(len(matrix)):
        table.add_column(f"gpu{j}", justify="right")
    for i, row in enumerate(matrix):
        table.add_row(f"gpu{i}", *["X" if v is None else f"{v:.1f}" for v in row])
    console.print(table)


def _render_nccl(console: Console, items: list[Any], info: dict[str, Any]) -> None:
    ranks = items[0].params.get("ranks") if items else "?"
    console.print(
        f"[bold cyan]nccl[/] — {ranks} rank(s), backend {info.get('backend', '?')}, "
        f"NCCL {info.get('nccl_version') or '—'}",
        highlight=False,
    )
    ops: dict[str, list[Any]] = {}
    for m in items:
        ops.setdefault(m.params["op"], []).append(m)
    for op, measured in ops.items():
        table = Table(title=op, title_justify="left")
        for column in (
            "size",
            "count",
            "type",
            "placement",
            "time (us)",
            "algbw GB/s",
            "busbw GB/s",
            "#wrong",
        ):
            table.add_column(column, justify="right")
        for m in measured:
            table.add_row(
                str(m.params["size_bytes"]),
                str(m.params.get("count", "")),
                str(m.params.get("dtype", "")),
                "in" if m.params.get("inplace") else "out",
                _fmt(m.extra.get("time_us"), 1),
                _fmt(m.extra.get("algbw_gbs"), 2),
                _fmt(m.extra.get("busbw_gbs"), 2),
                "N/A" if m.extra.get("wrong") is None else str(m.extra["wrong"]),
            )
        console.print(table)
    avg = info.get("avg_busbw", {})
    if avg:
        console.print("avg bus bandwidth: " + ", ".join(f"{op} {bw:.2f} GB/s" for op, bw in avg.items()))


def render_recipe_diff(console: Console, a: str, b: str, rows: list[tuple[str, Any, Any]]) -> None:
    table = Table(title=f"recipe {a} vs {b}", title_justify="left")
    for column in ("field", a, b):
        table.add_column(column)
    for field, va, vb in rows:
        table.add_row(field, str(va), str(vb))
    console.print(table)


def render_train(console: Console, result: dict[str, Any]) -> None:
    world = result["world"]
    model = result["model"]
    console.print(
        f"[bold]dgxperf train[/] — recipe {result['recipe']} — preset {result['config']['preset']} "
        f"({model['params'] / 1e6:.1f}M params) — {world['world_size']} x {world.get('gpu') or world['device']} "
        f"— global batch {result['global_batch']}, lr {result['lr']:.3g}" + rdrop_note(result["config"]),
        highlight=False,
    )
    table = Table(title_justify="left")
    for column in (
        "epoch",
        "time s",
        "samples/s",
        "real tokens/s",
        "padding",
        "MFU",
        "peak mem GB",
        "dev acc",
        "dev F1",
    ):
        table.add_column(column, justify="right")
    for e in result["epochs"]:
        table.add_row(
            str(e["epoch"]) + (" (resumed)" if e.get("resumed_mid_epoch") else ""),
            _fmt(e["epoch_seconds"], 1),
            _fmt(e["samples_per_s"], 0),
            _fmt(e["real_tokens_per_s"], 0),
            f"{100 * (e['padding_share'] or 0):.0f}%",
            "—" if e.get("mfu") is None else f"{100 * e['mfu']:.1f}%",
            "—" if not e.get("peak_memory_bytes") else f"{e['peak_memory_bytes'] / 1e9:.1f}",
            f"{e['dev_accuracy']:.4f}",
            f"{e['dev_macro_f1']:.4f}",
        )
    console.print(table)
    test = result["test"]
    ci = (result.get("summary") or {}).get("test_accuracy_ci95")
    interval = f" (95% interval {ci[0]:.4f}-{ci[1]:.4f})" if ci else ""
    console.print(
        f"test: accuracy {test['accuracy']:.4f}{interval}, macro-F1 {test['macro_f1']:.4f} "
        f"({test['samples']} samples)"
    )
    fusion = result.get("ngram_fusion")
    if fusion:
        console.print(fusion_line(fusion), highlight=False)
    profile = result.get("profile")
    if profile:
        console.print(profile_line(profile), highlight=False)
    pace = result.get("pace_change")  # absent from results written before the field existed
    if pace:
        console.print(pace_line(pace), style="yellow", highlight=False)
    console.print(f"run folder: {result['out_dir']}", style="dim")


def rdrop_note(config: Mapping[str, Any]) -> str:
    """Why samples/s may be half what a reader expects: R-Drop sends each row through the model twice."""
    alpha = config.get("rdrop_alpha") or 0  # absent from results written before the field existed
    return f" — R-Drop, alpha {alpha:g} (each row twice a step)" if alpha > 0 else ""


def fusion_line(fusion: dict[str, Any]) -> str:
    """One line on the encoder averaged with the token n-gram model (train/ngram.py)."""
    pair = fusion["paired"]
    return (
        f"with a token 1-3-gram model averaged in (the encoder's share {fusion['weight']:.2f}, chosen on dev): "
        f"test accuracy {fusion['test']['accuracy']:.4f}, {100 * pair['difference']:+.2f} points over the "
        f"encoder alone (McNemar p = {pair['p_value']:.3g}); the n-gram model alone "
        f"{fusion['ngram']['test_accuracy']:.4f}"
    )


# a share of kernel time in fp32 CUDA-core GEMMs worth a line: `baseline` ran 83%, the bf16/fp16 recipes 0%
FP32_GEMM_NOTED = 0.2
# what a wait that fills half the step or more means, by what bounds the steps (`baseline`'s unpinned batch
# copy waits ~79 of its 109 ms for the step before, on a GPU 98% busy)
SYNC_WORDS = {
    "gpu": "the host waits for the GPU, which costs nothing while the GPU is the limit",
    "host": "each wait empties the GPU's queue before the next launch: find the read or copy that waits",
}
KERNEL_CLASS_WORDS = {
    "gemm": "GEMMs",
    "attention": "attention",
    "elementwise": "elementwise and norms",
    "copy": "copies and casts",
    "optimizer": "optimizer",
    "communication": "communication",
}
ELEMENTWISE_GROUP_WORDS = {
    "activation": "activations (GELU...)",
    "dropout_residual_norm": "dropout, residual adds, norms",
    "concatenation": "concatenations",
    "other": "other",
}
BOUND_WORDS = {
    "host": "host bound (the GPU waits for each launch: fewer or cheaper launches a step help)",
    "gpu": "GPU bound (the host runs ahead: the kernels themselves are the limit)",
    "mixed": "partly host bound, partly GPU bound (see each step's busy share)",
}


def profile_line(profile: dict[str, Any]) -> str:
    """One line on where the profiled steps' time went (train/trace.py), or why there is no profile."""
    if profile.get("error"):
        return f"profile: {profile['error']}"
    steps, asked = profile["steps"], profile.get("requested_steps", profile["steps"])
    counted = f"{steps} step{'s' if steps != 1 else ''}" + (
        f" of the {asked} asked (the run ended first)" if steps < asked else ""
    )
    parts = [f"{counted}, {profile['step_ms']:.1f} ms a step"]
    if profile.get("bound"):
        parts[0] += f", {BOUND_WORDS[profile['bound']]}"
    if profile.get("gpu_busy_share") is not None:
        parts.append(f"GPU busy {100 * profile['gpu_busy_share']:.0f}% of it")
    if profile.get("gpu_lag_ms") is not None:
        parts.append(f"GPU {profile['gpu_lag_ms']:.1f} ms behind the host")
    if profile.get("launches_per_step") is not None:
        graphs = profile.get("graph_launches_per_step")
        replayed = f" ({graphs:,.0f} of them CUDA-graph replays)" if graphs else ""
        parts.append(f"{profile['launches_per_step']:,.0f} kernel launches a step{replayed}")
    floor = profile.get("launch_floor")
    if floor:
        parts.append(
            f"the launches alone {floor['ms_per_step']:.1f} ms a step at {floor['launch_us']:g} µs each "
            f"({100 * floor['share_of_step']:.0f}% of the step)"
        )
    if profile.get("median_kernel_us") is not None:
        parts.append(f"median kernel {profile['median_kernel_us']:.0f} µs")
    if profile.get("sync_ms_per_step"):
        sync = f"{profile['sync_ms_per_step']:.1f} ms a step waiting in cuda*Synchronize"
        if profile["sync_ms_per_step"] >= 0.5 * profile["step_ms"] and profile.get("bound") in SYNC_WORDS:
            sync += f" ({SYNC_WORDS[profile['bound']]})"
        parts.append(sync)
    fp32 = profile.get("fp32_gemm_share")
    if fp32 is not None and fp32 >= FP32_GEMM_NOTED:
        parts.append(
            f"{100 * fp32:.0f}% of kernel time in fp32 GEMMs on the CUDA cores (TF32 off: "
            "torch.backends.cuda.matmul.allow_tf32 = True, or bf16 autocast, puts them on the tensor cores)"
        )
    classes = profile.get("kernel_classes") or []
    if classes:
        shares = ", ".join(f"{KERNEL_CLASS_WORDS[c['class']]} {100 * c['share']:.0f}%" for c in classes[:4])
        parts.append(f"kernel time: {shares}")
    groups = [g for g in profile.get("elementwise_groups") or [] if g["group"] != "other"]
    if groups:
        fused = ", ".join(f"{ELEMENTWISE_GROUP_WORDS[g['group']]} {100 * g['share']:.0f}%" for g in groups)
        parts.append(f"of the elementwise time: {fused}")
    ops = profile.get("top_cpu_ops") or []
    if ops:
        parts.append(f"busiest host op {ops[0]['name']} ({ops[0]['self_ms_per_step']:.1f} ms a step)")
    return f"profile: {'; '.join(parts)}. Trace: {profile['trace']} (open it in ui.perfetto.dev)"


SEVERITY_STYLE = {"critical": "bold red", "warn": "yellow", "info": "cyan"}


def render_advice(console: Console, report: Any) -> None:
    data = report.to_json()
    span = data["range"]
    console.print(
        f"[bold]dgxperf advise[/] — {report.hostname} — {span['samples']} samples over "
        f"{span['duration_s'] or 0:.0f} s, GPUs {', '.join(str(g) for g in report.gpus) or 'none'}",
        highlight=False,
    )
    if not report.suggestions:
        console.print("No rule fired: nothing in this window explains a slowdown.", style="green")
    for s in report.suggestions:
        where = "whole range" if s.scope == "range" else "worst window"
        if s.windows:
            where += f", fired in {s.windows[0]} of {s.windows[1]} windows"
        guide = f" (guide {s.guide})" if s.guide else ""
        console.print(
            Text.assemble((f"{s.severity.upper():<8}", SEVERITY_STYLE.get(s.severity, "")), (s.title, "bold"))
        )
        console.print(Padding(Text(f"{s.why}{guide} [{s.rule}, {where}]"), (0, 0, 0, 9)))
        console.print(Padding(Text(f"evidence: {s.evidence.text()}", style="dim"), (0, 0, 0, 9)))
        console.print(Padding(Text(f"fix: {s.fix}"), (0, 0, 0, 9)))
        for action in s.actions:
            console.print(Padding(Text(f"$ {action}"), (0, 0, 0, 11)))
        console.print(Padding(Text(f"expected: {s.expected_effect}", style="dim"), (0, 0, 0, 9)))
    skipped = report.not_evaluated
    if skipped:
        console.print(
            "not evaluated: " + "; ".join(f"{r.id} ({r.reason})" for r in skipped),
            style="dim",
            highlight=False,
        )


def render_rule_catalog(console: Console, catalog: list[dict[str, Any]]) -> None:
    table = Table(title="advise rules", title_justify="left")
    for column in ("rule", "origin", "guide", "needs", "thresholds"):
        table.add_column(column, overflow="fold")
    for rule in catalog:
        thresholds = rule.get("thresholds", {})
        text = ", ".join(f"{k}={v['value'] if isinstance(v, dict) else v}" for k, v in thresholds.items())
        table.add_row(
            rule.get("id", ""),
            str(rule.get("origin", "")),
            str(rule.get("guide") or ""),
            ", ".join(rule.get("needs", []) if isinstance(rule.get("needs"), list) else []),
            text,
        )
    console.print(table)
