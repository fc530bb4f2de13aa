"""The validate report as Markdown and as one self-contained HTML file, from ``validate.json``.

Both are rendered from the same tables (built once here), so they cannot disagree; the figures come from
:mod:`dgxperf.report.plots`. The HTML embeds its figures as data URIs and its style inline, and loads no
script or font from anywhere: it opens offline, from a mail attachment or a CI artifact.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dgxperf.atomic import atomic_write
from dgxperf.pace import pace_line, step_pace_change
from dgxperf.report.rates import RECIPES, rate_basis, recipe_rates, reference_spread, within_noise

Table = tuple[list[str], list[list[str]]]

NOTE_EPOCH = (
    "Epoch time and samples/s (epoch) are those of the last epoch as a whole, data loading counted and "
    "evaluation excluded; warm-up is the one-time pass over every batch shape before the first epoch "
    "(the recipes with warm_shapes: compilation happens there rather than inside an epoch); samples/s "
    "(steady) is the samples of its logged windows after the first over their time, the rate a long run "
    "settles at. Test accuracy is followed by its 95% interval (Wilson, over the test split's size): "
    "differences inside it are not shown by one run"
)


def rates_note(result: Mapping[str, Any]) -> str:
    basis = rate_basis(result)
    why = (
        "with one epoch per recipe, compilation and warm-up fall inside it"
        if basis == "steady"
        else "the last epoch is free of compilation and warm-up"
    )
    return (
        f"{NOTE_EPOCH}. tokens/s (real, non-pad tokens), MFU and the speed-ups use the {basis} rate ({why}); "
        "the run column is the run-store id"
    )


def pace_notes(result: Mapping[str, Any]) -> list[str]:
    """One line per recipe whose logged samples/s fell part-way (from the steps validate keeps of each run, so
    results written before train reported it have it too): its epoch rate, and the speed-ups against it, mix
    two paces."""
    notes = []
    for name, run in (result.get("recipes") or {}).items():
        pace = step_pace_change(run.get("steps") or [])
        if pace:
            notes.append(f"{name}: {pace_line(pace)}; its speed-ups in the table mix the two")
    return notes


def host_bound_notes(result: Mapping[str, Any]) -> list[str]:
    """One line per recipe that advise found host bound: its samples/s, and the speed-ups it enters, follow this
    host's CPU core as much as the GPU. Over eleven lent H100 hosts (2026-12-06/07) advise found guide host bound
    on every one where it ran at 513 samples/s or less and on none at 518 or more: the optimized/guide ratio is
    partly the host's."""
    notes = []
    for name, advice in (result.get("advice") or {}).items():
        for suggestion in advice.get("suggestions") or []:
            if suggestion.get("rule") != "launch.host_bound":
                continue
            evidence = suggestion.get("evidence") or {}
            values = evidence.get("values") or {}
            busy = ((evidence.get("metrics") or {}).get("gpu_util_pct") or {}).get("mean")
            share, cpu = values.get("share_of_judged_ticks"), values.get("process_cpu_pct_median")
            detail = (
                f": in {share:.0%} of its working seconds the GPU ran kernels {busy:.0f}% of the time while its "
                f"process kept {cpu:.0f}% of a core busy"
                if None not in (share, busy, cpu)
                else ""
            )
            notes.append(
                f"{name}: host bound on this node (advise: launch.host_bound){detail}; its samples/s, and every "
                "speed-up against it, measure this host's CPU as much as the GPU"
            )
    return notes


FIGURE_TITLES = {
    "throughput": "Training throughput per recipe",
    "loss": "Training loss",
    "accuracy": "Dev accuracy per epoch",
    "ablation": "Ablation: each optimisation on its own",
    "bench": "Measured ceilings, % of datasheet peak",
}


def _num(value: Any, fmt: str = "{:,.0f}") -> str:
    return "—" if value is None else fmt.format(value)


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}x" if a and b else "—"


def recipe_table(result: Mapping[str, Any]) -> Table:
    """Guide A §7's table for this node: one row per recipe."""
    basis = rate_basis(result)
    headers = ["recipe", "epoch time (s)", "warm-up (s)", "samples/s (epoch)", "samples/s (steady)", "tokens/s",
               "MFU", "peak memory (GB)", "dev acc", "test acc", "test acc + n-grams", f"vs baseline ({basis})",
               f"vs guide ({basis})", "run"]  # fmt: skip
    runs = result.get("recipes") or {}
    cut = {n: u for n, u in (result.get("unfinished") or {}).items() if "summary" not in runs.get(n, {})}
    rate = {n: recipe_rates(r["summary"], basis)[0] for n, r in runs.items() if "summary" in r}
    rate |= {n: u["last_epoch"].get("samples_per_s") for n, u in cut.items() if basis == "epoch"}
    rows = []
    for name in [n for n in RECIPES if n in runs or n in cut] + [n for n in runs if n not in RECIPES]:
        run = runs.get(name, {})
        if name in cut:
            rows.append(_unfinished_row(name, cut[name], rate))
            continue
        if "summary" not in run:
            rows.append([name, *(["failed"] + ["—"] * (len(headers) - 3)), "—"])
            continue
        s = run["summary"]
        _, tokens, mfu = recipe_rates(s, basis)
        memory = s.get("peak_memory_bytes")
        rows.append([
            name,
            _num(s.get("epoch_seconds"), "{:,.1f}"),
            _num((run.get("shape_warmup") or {}).get("seconds"), "{:,.1f}"),
            _num(s.get("samples_per_s")),
            _num(s.get("steady_samples_per_s")),
            _num(tokens),
            _num(mfu, "{:.1%}"),
            _num(memory / 1e9 if memory else None, "{:.1f}"),
            _num(s.get("dev_accuracy"), "{:.2%}"),
            _num(s.get("test_accuracy"), "{:.2%}") + _interval(s.get("test_accuracy_ci95")),
            _num((run.get("ngram_fusion") or {}).get("test_accuracy"), "{:.2%}"),
            _ratio(rate.get(name), rate.get("baseline")),
            _ratio(rate.get(name), rate.get("guide")),
            f"#{run['run_id']}" if run.get("run_id") is not None else "—",
        ])  # fmt: skip
    return headers, rows


def _unfinished_row(name: str, unfinished: Mapping[str, Any], rate: Mapping[str, Any]) -> list[str]:
    """A recipe cut or failed after whole epochs: its last epoch's figures, and in place of a test
    accuracy, how far it got (it never reached the test)."""
    e = unfinished["last_epoch"]
    memory = e.get("peak_memory_bytes")
    how = "cut" if unfinished["how"] == "interrupted" else "failed"
    return [
        name,
        _num(e.get("epoch_seconds"), "{:,.1f}"),
        "—",
        _num(e.get("samples_per_s")),
        "—",
        _num(e.get("real_tokens_per_s")),
        _num(e.get("mfu"), "{:.1%}"),
        _num(memory / 1e9 if memory else None, "{:.1f}"),
        _num(e.get("dev_accuracy"), "{:.2%}"),
        f"{how} after epoch {unfinished['epochs_done']} of {unfinished['epochs_planned']}",
        "—",
        _ratio(rate.get(name), rate.get("baseline")),
        _ratio(rate.get(name), rate.get("guide")),
        "—",
    ]


def _interval(ci: Any) -> str:
    """' (84.4–87.6)': how far one run's test accuracy can be trusted (Wilson 95%)."""
    return f" ({100 * ci[0]:.1f}–{100 * ci[1]:.1f})" if ci else ""


PAIRED_NOTE = (
    "Each recipe's test answers paired with guide's on the same reviews: only the reviews exactly one of the "
    "two gets right carry a difference, so a gap far smaller than either accuracy's own interval can be told "
    "from noise here. The interval is that of the paired difference (95%); p is McNemar's exact test, the "
    "chance of a split of those reviews at least this uneven if the two trained models were equally accurate. "
    "It covers the test reviews, not retraining: on the H200 two seeds of one recipe from one encoder differed "
    "by 1.8 points (p = 0.004), so only several seeds per recipe tell two recipes apart (`dgxperf runs seeds`)"
)

PAIRED_TERMINAL_TITLE = (
    "test accuracy paired with guide's, review by review (test-split noise, not retraining: another seed of "
    "one recipe can differ as much)"
)


def paired_table(result: Mapping[str, Any]) -> Table:
    """Test accuracy against guide's, review by review: is a gap real or one split's noise?"""
    headers = ["recipe", "vs", "test acc difference (points)", "95% interval", "right only here",
               "right only in the other", "McNemar p"]  # fmt: skip
    rows = []
    for name, pair in (result.get("paired") or {}).items():
        if "error" in pair:
            rows.append([name, pair["against"], "—", "—", "—", "—", pair["error"]])
            continue
        low, high = pair["difference_ci95"]
        rows.append([
            name,
            pair["against"],
            f"{100 * pair['difference']:+.2f}",
            f"{100 * low:+.2f} to {100 * high:+.2f}",
            f"{pair['a_only']:,}",
            f"{pair['b_only']:,}",
            f"{pair['p_value']:.3g}",
        ])  # fmt: skip
    return headers, rows


def ablation_table(result: Mapping[str, Any]) -> Table:
    headers = ["variant", "what changes", "samples/s", "vs reference", "MFU", "peak memory (GB)", "run"]
    rows = []
    spread = reference_spread(result.get("ablation") or [])
    for row in result.get("ablation") or []:
        memory = row.get("peak_memory_bytes")
        effect = row.get("vs_reference")
        within = within_noise(row, spread)
        rows.append([
            row["name"],
            row["what"],
            "failed" if row.get("error") else _num(row.get("samples_per_s")),
            (f"{100 * (effect - 1):+.1f}%" + (" (within noise)" if within else "")) if effect else "—",
            _num(row.get("mfu"), "{:.1%}"),
            _num(memory / 1e9 if memory else None, "{:.1f}"),
            f"#{row['run_id']}" if row.get("run_id") is not None else "—",
        ])  # fmt: skip
    return headers, rows


def phase_table(result: Mapping[str, Any]) -> Table:
    rows = [
        [p["phase"] if "phase" in p else p["name"], p["state"], _num(p.get("seconds"), "{:.0f}"),
         p.get("error") or p.get("note") or ""]
        for p in result.get("phases", [])
    ]  # fmt: skip
    return ["phase", "state", "seconds", "note"], rows


def findings_table(result: Mapping[str, Any]) -> Table:
    findings = (result.get("doctor") or {}).get("findings") or []
    rows = [[f["status"], f["id"], f["title"], _fix_text(f.get("fix"))] for f in findings]
    return ["status", "check", "finding", "fix"], rows


def _fix_text(fix: Any) -> str:
    """doctor's fix is a structured object (summary, commands, sysctl lines ...): the report shows its summary
    and the commands, never the object's repr."""
    if not fix:
        return ""
    if isinstance(fix, Mapping):
        commands = [str(c) for c in fix.get("commands") or []]
        return "; ".join([str(fix.get("summary") or ""), *commands]).strip("; ")
    return str(fix)


def ablation_note(result: Mapping[str, Any]) -> str:
    """What the ablation's figures can and cannot say: steps per run and the references' spread."""
    rows = result.get("ablation") or []
    if not rows:
        return ""
    steps = (result.get("plan") or {}).get("ablation_steps")
    spread = reference_spread(rows)
    parts = [f"{recipe} {100 * value:.0f}%" for recipe, value in sorted(spread.items())]
    text = (
        f"Each run: {steps} optimizer steps, samples/s the samples of its logged windows after the first (which "
        "holds the first compilation) over their time; each variant against the faster run of its reference "
        "recipe, measured in this same validate run."
    )
    if parts:
        text += (
            " The references ran first and last in their groups and came out apart by "
            + ", ".join(parts)
            + ": an effect smaller than that is within the noise of so short a run (marked)."
        )
    return text


def advice_table(result: Mapping[str, Any]) -> Table:
    rows = []
    for recipe, advice in (result.get("advice") or {}).items():
        for s in advice.get("suggestions") or []:
            rows.append([recipe, str(s.get("severity", "")), str(s.get("title", s.get("rule", ""))),
                         _evidence_text(s.get("evidence") or {}), str(s.get("fix", ""))])  # fmt: skip
    return ["recipe", "severity", "suggestion", "evidence", "fix"], rows


def _evidence_text(evidence: Mapping[str, Any]) -> str:
    metrics = evidence.get("metrics") or {}
    parts = [
        f"{name} median {stats.get('p50')}" for name, stats in metrics.items() if isinstance(stats, Mapping)
    ]
    duration = evidence.get("duration_s")
    lead = (
        f"{evidence.get('basis', '')} over {duration:.0f} s"
        if duration is not None
        else str(evidence.get("basis", ""))
    )
    return "; ".join(p for p in [lead.strip(), *parts] if p)


def fingerprint_table(result: Mapping[str, Any]) -> Table:
    fp = result.get("fingerprint") or {}
    rows = []
    for key, value in fp.items():
        if key == "gpus":
            names = sorted({str(g.get("name")) for g in value or []})
            value = f"{len(value or [])} x {', '.join(names)}" if value else "none"
        rows.append([key, str(value)])
    return ["", ""], rows


def _banner(result: Mapping[str, Any]) -> list[str]:
    plan = result.get("plan") or {}
    lines = []
    if not result.get("complete"):
        why = "interrupted (Ctrl-C)" if result.get("interrupted") else "a phase failed or has not run"
        lines.append(f"INCOMPLETE REPORT: {why}. The phase table says which.")
    if plan.get("mode") == "quick":
        lines.append(
            f"Quick mode: {plan.get('reason')} The figures below prove the pipeline, not this node's speed."
        )
    return lines


def _timing(result: Mapping[str, Any]) -> str:
    """When it started and how long it took, over every call when the run was resumed."""
    calls = result.get("calls") or []
    if len(calls) > 1:
        parts = " + ".join(f"{c.get('wall_seconds')}" for c in calls)
        return (
            f"started {calls[0].get('started_at')}, {result.get('total_seconds')} s in {len(calls)} calls "
            f"({parts} s; the later ones with --resume)"
        )
    return f"started {result.get('started_at')}, {result.get('wall_seconds')} s"


def _choices(result: Mapping[str, Any]) -> str:
    plan = result.get("plan") or {}
    samples = plan.get("train_samples")
    shared = plan.get("shared") or {}
    return (
        f"Mode {plan.get('mode')} on {plan.get('device')} x {plan.get('gpus')}: preset {plan.get('preset')}, "
        f"{plan.get('epochs')} epoch(s) per recipe on "
        + (f"{samples} training samples" if samples else "the whole training split")
        + (
            ", no ablation (skipped)"
            if "ablation" in (plan.get("skip") or [])
            else f", ablation over {plan.get('ablation_steps')} steps per variant"
        )
        + (f"; set on every run: {', '.join(f'{k}={v}' for k, v in shared.items())}" if shared else "")
        + ". "
        + _start(result)
    )


def _start(result: Mapping[str, Any]) -> str:
    """Where the recipes' weights started: accuracy means different things from scratch and fine-tuned."""
    plan = result.get("plan") or {}
    starts = {
        name: (run.get("config") or {}).get("init_from")
        for name, run in (result.get("recipes") or {}).items()
        if run.get("config")
    }
    if len(set(starts.values())) > 1:  # e.g. a run resumed after its encoder changed: say so, never average
        parts = [
            f"{name} from {start}" if start else f"{name} from scratch" for name, start in starts.items()
        ]
        return "The recipes did NOT start from the same weights: " + "; ".join(parts) + "."
    pretrained = result.get("pretrain")
    if pretrained:
        return (
            f"Every recipe was fine-tuned from one encoder pretrained here as a masked language model on the "
            f"training texts: {pretrained.get('epochs')} epochs, loss {_num(pretrained.get('loss_first'), '{:.2f}')}"
            f" -> {_num(pretrained.get('loss_last'), '{:.2f}')}, {_num(pretrained.get('total_seconds'))} s "
            "(the pretrain phase; not counted in the recipes' epoch times)."
            + _probe_sentence(pretrained.get("probe_dev_accuracy"))
        )
    if plan.get("init_from"):
        return (
            f"Every recipe was fine-tuned from the pretrained encoder in {plan['init_from']} (--init-from)."
        )
    if plan.get("pretrain_epochs"):
        return "Pretraining was asked for but gave no encoder (see the phase table): every recipe started from scratch."
    return "Every recipe started from scratch (--pretrain-epochs N pretrains one encoder for all first)."


def _probe_sentence(accuracy: float | None) -> str:
    if accuracy is None:
        return ""
    return (
        f" A linear probe of the frozen encoder (a logistic regression on its mean features) scored "
        f"{accuracy:.1%} on dev."
    )


# -- Markdown -------------------------------------------------------------------------------------------------


def _md_table(table: Table) -> str:
    headers, rows = table
    if not rows:
        return "_none_\n"

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def render_markdown(result: Mapping[str, Any], figure_files: Mapping[str, str]) -> str:
    out = ["# dgxperf validate report", ""]
    out += [f"> **{line}**" for line in _banner(result)]
    out += ["", f"Run {_run_ref(result)}, {_timing(result)}. " + _choices(result), ""]
    out += ["## Guide A §7's table for this node", "", _md_table(recipe_table(result))]
    out += [f"{rates_note(result)} (`dgxperf runs show ID`).", ""]
    out += [f"**{note}.**\n" for note in pace_notes(result) + host_bound_notes(result)]
    if result.get("paired"):
        out += ["### Test accuracy paired with guide's", "", _md_table(paired_table(result))]
        out += [f"{PAIRED_NOTE}.", ""]
    for name in ("throughput", "accuracy", "loss"):
        if name in figure_files:
            out += [f"![{FIGURE_TITLES[name]}]({figure_files[name]})", ""]
    out += ["## Ablation", "", _md_table(ablation_table(result))]
    out += [ablation_note(result), ""] if ablation_note(result) else []
    if "ablation" in figure_files:
        out += [f"![{FIGURE_TITLES['ablation']}]({figure_files['ablation']})", ""]
    out += ["## Telemetry and advice", "", _md_table(advice_table(result))]
    for name, path in figure_files.items():
        if name.startswith("timeline-"):
            out += [f"![telemetry, {name[9:]}]({path})", ""]
    out += ["## Ceilings", ""]
    out += [f"![{FIGURE_TITLES['bench']}]({figure_files['bench']})", ""] if "bench" in figure_files else [
        "_no benchmark in this run_", ""]  # fmt: skip
    out += ["## Node audit (failed and warned checks)", "", _md_table(findings_table(result))]
    out += ["## Phases", "", _md_table(phase_table(result))]
    out += ["## Node", "", _md_table(fingerprint_table(result))]
    return "\n".join(out)


def _run_ref(result: Mapping[str, Any]) -> str:
    return f"#{result['run_id']}" if result.get("run_id") is not None else "(not stored)"


# -- HTML -----------------------------------------------------------------------------------------------------

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em;margin:.6em 0}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.banner{background:#fff3cd;border:1px solid #e0c060;padding:.6em 1em;margin:.4em 0}
figure{margin:1em 0}figcaption{font-size:.85em;color:#555}img{max-width:100%}
.small{font-size:.85em;color:#555}
"""


def _html_table(table: Table, css_id: str) -> str:
    headers, rows = table
    if not rows:
        return f'<p id="{css_id}" class="small">none</p>'
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{css_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _html_figure(name: str, png: bytes, title: str) -> str:
    data = base64.b64encode(png).decode()
    return (
        f'<figure><img id="fig-{name}" alt="{html.escape(title)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(title)}</figcaption></figure>"
    )


def render_html(result: Mapping[str, Any], figures: Mapping[str, bytes]) -> str:
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
             "<title>dgxperf validate report</title>", f"<style>{_STYLE}</style></head><body>",
             "<h1>dgxperf validate report</h1>"]  # fmt: skip
    parts += [f'<div class="banner">{html.escape(line)}</div>' for line in _banner(result)]
    parts.append(
        f'<p class="small">Run {html.escape(_run_ref(result))}, {html.escape(_timing(result))}. '
        f"{html.escape(_choices(result))}</p>"
    )
    parts += ["<h2>Guide A §7's table for this node</h2>", _html_table(recipe_table(result), "recipes")]
    parts.append(
        f'<p class="small">{html.escape(rates_note(result))} (<code>dgxperf runs show ID</code>).</p>'
    )
    parts += [
        f'<p class="banner">{html.escape(note)}.</p>'
        for note in pace_notes(result) + host_bound_notes(result)
    ]
    if result.get("paired"):
        parts += ["<h3>Test accuracy paired with guide's</h3>", _html_table(paired_table(result), "paired")]
        parts.append(f'<p class="small">{html.escape(PAIRED_NOTE)}.</p>')
    for name in ("throughput", "accuracy", "loss"):
        if name in figures:
            parts.append(_html_figure(name, figures[name], FIGURE_TITLES[name]))
    parts += ["<h2>Ablation</h2>", _html_table(ablation_table(result), "ablation")]
    if ablation_note(result):
        parts.append(f'<p class="small">{html.escape(ablation_note(result))}</p>')
    if "ablation" in figures:
        parts.append(_html_figure("ablation", figures["ablation"], FIGURE_TITLES["ablation"]))
    parts += ["<h2>Telemetry and advice</h2>", _html_table(advice_table(result), "advice")]
    for name, png in figures.items():
        if name.startswith("timeline-"):
            parts.append(_html_figure(name, png, f"telemetry during {name[9:]}"))
    parts.append("<h2>Ceilings</h2>")
    parts.append(
        _html_figure("bench", figures["bench"], FIGURE_TITLES["bench"])
        if "bench" in figures
        else '<p class="small">no benchmark in this run</p>'
    )
    parts += [
        "<h2>Node audit (failed and warned checks)</h2>",
        _html_table(findings_table(result), "findings"),
    ]
    parts += ["<h2>Phases</h2>", _html_table(phase_table(result), "phases")]
    parts += ["<h2>Node</h2>", _html_table(fingerprint_table(result), "node"), "</body></html>"]
    return "\n".join(parts)


def write_report(result: Mapping[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """``report.md`` (with its figures as PNG files in ``figures/``) and ``report.html`` (self-contained)."""
    from dgxperf.report.plots import all_figures

    figures = all_figures(result)
    figure_dir = out_dir / "figures"
    figure_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, png in figures.items():
        with atomic_write(figure_dir / f"{name}.png") as handle:
            handle.write(png)
        files[name] = f"figures/{name}.png"
    md, page = out_dir / "report.md", out_dir / "report.html"
    with atomic_write(md) as handle:
        handle.write(render_markdown(result, files).encode())
    with atomic_write(page) as handle:
        handle.write(render_html(result, figures).encode())
    return md, page


def _columns(table: Table, keep: Sequence[str]) -> Table:
    headers, rows = table
    index = [headers.index(k) for k in keep]
    return [headers[i] for i in index], [[row[i] for i in index] for row in rows]


def tables_for_terminal(result: Mapping[str, Any]) -> Sequence[tuple[str, Table]]:
    """The report's two main tables with the columns that fit a terminal; the report has them all."""
    basis = rate_basis(result)
    keep = ["recipe", "epoch time (s)", f"samples/s ({basis})", "MFU", "peak memory (GB)", "test acc",
            f"vs guide ({basis})", "run"]  # fmt: skip
    recipes = _columns(recipe_table(result), keep)
    ablation = _columns(ablation_table(result), ["variant", "samples/s", "vs reference", "run"])
    tables: list[tuple[str, Table]] = [("guide A §7's table for this node", recipes)]
    if result.get("paired"):
        tables.append((PAIRED_TERMINAL_TITLE, paired_table(result)))
    return (*tables, ("ablation", ablation))
