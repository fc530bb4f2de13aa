"""Run every advisor rule over a recording: the whole requested range, and sliding windows within it.

Why both: a rule judged over an hour averages a five-minute problem away (a memory-bound phase, a
thermal episode), and a rule judged only over short windows reports the same steady problem sixty
times. So :func:`run_advise` evaluates each rule once over the range (``from_t``..``to_t``, the whole
recording by default) and again over windows of ``window_s`` seconds stepped by half a window. What fires
over the range is reported with the range as evidence; what fires only in some windows is reported once,
with its worst window (most severe, then highest rule score) as evidence and the count of windows it
fired in.

Deduplication: one suggestion per (rule, kind of finding); and a rule whose ``suppressed_by`` rule fired
on an overlapping GPU set and time range is dropped (dgxperf's memory-bound rule beside guide B's).
Order: most severe first, then in :data:`ALL_RULES` order (guide rules before ours within a family).

A rule that cannot judge the range (its metrics are absent, no samples) is listed under ``not_evaluated``
with the reason ("needs sm_active_pct"), never raised.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dgxperf.advise.base import SEVERITY_RANK, AdviseError, Rule, Suggestion, Window, needs_hint
from dgxperf.advise.rules import bandwidth, compute, health, input_pipeline, launch, memory
from dgxperf.samples import Header, Sample

ADVICE_SCHEMA = "dgxperf.advice/1"
DEFAULT_WINDOW_S = 60.0

ALL_RULES: tuple[type[Rule[Any]], ...] = (
    *bandwidth.RULES,
    *input_pipeline.RULES,
    *launch.RULES,
    *compute.RULES,
    *memory.RULES,
    *health.RULES,
)


@dataclasses.dataclass(frozen=True)
class RuleStatus:
    """How one rule went: evaluated or not (and why), its effective thresholds, how many suggestions."""

    id: str
    title: str
    origin: str
    guide: str | None
    evaluated: bool
    reason: str | None
    thresholds: Mapping[str, float]
    suggestions: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "origin": self.origin,
            "guide": self.guide,
            "evaluated": self.evaluated,
            "reason": self.reason,
            "thresholds": dict(self.thresholds),
            "suggestions": self.suggestions,
        }


@dataclasses.dataclass(frozen=True)
class AdviceReport:
    """What ``dgxperf advise`` prints: the suggestions, most severe first, and every rule's status."""

    hostname: str
    start_t: float | None
    end_t: float | None
    samples: int
    gpus: tuple[int, ...]
    window_s: float
    windows: int
    suggestions: tuple[Suggestion, ...]
    rules: tuple[RuleStatus, ...]

    @property
    def not_evaluated(self) -> tuple[RuleStatus, ...]:
        return tuple(r for r in self.rules if not r.evaluated)

    def to_json(self) -> dict[str, Any]:
        duration = (
            round(self.end_t - self.start_t, 3)
            if self.start_t is not None and self.end_t is not None
            else None
        )
        return {
            "schema": ADVICE_SCHEMA,
            "hostname": self.hostname,
            "range": {
                "start_t": self.start_t,
                "end_t": self.end_t,
                "duration_s": duration,
                "samples": self.samples,
            },
            "gpus": list(self.gpus),
            "window_s": self.window_s,
            "windows": self.windows,
            "suggestions": [s.to_json() for s in self.suggestions],
            "not_evaluated": [{"rule": r.id, "reason": r.reason} for r in self.not_evaluated],
            "rules": [r.to_json() for r in self.rules],
        }


# ------------------------------------------------------------------------------------------ thresholds


def build_rules(
    thresholds: Mapping[str, Mapping[str, object]] | None = None,
    rule_types: Sequence[type[Rule[Any]]] = ALL_RULES,
) -> list[Rule[Any]]:
    """One instance of each rule, with ``{rule_id: {threshold_name: value}}`` applied.

    Unknown rule ids, unknown threshold names and values that are not sensible numbers raise
    :class:`AdviseError` naming what is known, so a typo in a thresholds file is caught, not ignored.
    """
    rules: list[Rule[Any]] = [cls() for cls in rule_types]
    by_id = {rule.id: rule for rule in rules}
    if len(by_id) != len(rules):
        raise AdviseError("two rules share an id")  # a programming error, but say it plainly
    for rule_id, overrides in (thresholds or {}).items():
        if rule_id not in by_id:
            raise AdviseError(f"unknown rule id {rule_id!r} in thresholds; known rules: {', '.join(by_id)}")
        if not isinstance(overrides, Mapping):
            raise AdviseError(
                f"thresholds for {rule_id!r} must be a mapping of threshold names to numbers, "
                f"not {type(overrides).__name__}"
            )
        by_id[rule_id] = by_id[rule_id].with_overrides(overrides)
    return [by_id[rule.id] for rule in rules]


def load_thresholds(path: Path) -> dict[str, dict[str, object]]:
    """Read ``{rule_id: {threshold_name: value}}`` from a YAML or JSON file (JSON is YAML).

    Only the file's shape is checked here; :func:`run_advise` (through :func:`build_rules`) checks the
    rule ids, names and values, so both paths give the same errors.
    """
    import yaml

    try:
        text = path.read_text()
    except OSError as exc:
        raise AdviseError(f"cannot read thresholds file {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AdviseError(f"{path} is not valid YAML or JSON: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AdviseError(f"{path}: expected a mapping of rule ids to thresholds, got {type(data).__name__}")
    out: dict[str, dict[str, object]] = {}
    for rule_id, overrides in data.items():
        if not isinstance(overrides, dict):
            raise AdviseError(
                f"{path}: thresholds for {rule_id!r} must be a mapping of names to numbers, "
                f"not {type(overrides).__name__}"
            )
        out[str(rule_id)] = {str(k): v for k, v in overrides.items()}
    return out


def rule_catalog(thresholds: Mapping[str, Mapping[str, object]] | None = None) -> list[dict[str, Any]]:
    """Every rule with its origin, guide section, needed metrics and documented thresholds."""
    return [rule.describe() for rule in build_rules(thresholds)]


# ------------------------------------------------------------------------------------------ evaluation


def sliding_windows(window: Window, window_s: float) -> list[Window]:
    """Windows of ``window_s`` seconds stepped by half a window over ``window``, each holding the ticks with
    ``start <= t < start + window_s``; the last one ends at the range's end (``end - window_s < t <= end``)
    so the newest ticks are judged as a full window. None when the whole range is not longer than one
    window: the range evaluation covers it."""
    if window.empty or window.duration_s <= window_s:
        return []
    times = window.times
    spans: list[tuple[int, int]] = []
    start = window.start_t
    while start + window_s < window.end_t:
        spans.append((bisect.bisect_left(times, start), bisect.bisect_left(times, start + window_s)))
        start += window_s / 2
    spans.append((bisect.bisect_right(times, window.end_t - window_s), len(times)))
    return [window.slice(lo, hi) for lo, hi in spans if hi > lo]


def _worse(a: Suggestion, b: Suggestion) -> bool:
    """Is ``a`` worse than ``b``: more severe, or as severe with a higher rule score."""
    ra, rb = SEVERITY_RANK[a.severity], SEVERITY_RANK[b.severity]
    return ra < rb or (ra == rb and a.score > b.score)


@dataclasses.dataclass(frozen=True)
class _Found:
    """A suggestion and the window it was judged on (kept so suppression can re-judge fewer GPUs)."""

    suggestion: Suggestion
    window: Window


def _evaluate_rule(
    rule: Rule[Any], whole: Window, windows: Sequence[Window]
) -> tuple[list[_Found], str | None]:
    """The rule's suggestions over ``whole`` and its windows, deduplicated; or the reason it could not judge."""
    if whole.empty:
        return [], "no samples in the range"
    gaps = rule.missing(whole)
    if gaps:
        hint = needs_hint(gaps)
        return [], "needs " + ", ".join(gaps) + (f" ({hint})" if hint else "")
    over_range = rule.evaluate(whole)
    judged = 0
    fired: dict[str, int] = {}  # kind of finding (title) -> windows it fired in
    worst: dict[str, _Found] = {}
    for w in windows:
        if rule.missing(w):
            continue
        judged += 1
        for s in rule.evaluate(w):
            fired[s.title] = fired.get(s.title, 0) + 1
            if s.title not in worst or _worse(s, worst[s.title].suggestion):
                worst[s.title] = _Found(s, w)

    def counts(title: str) -> tuple[int, int] | None:
        return (fired.get(title, 0), judged) if windows else None

    out = [_Found(dataclasses.replace(s, scope="range", windows=counts(s.title)), whole) for s in over_range]
    seen = {s.title for s in over_range}
    out += [
        _Found(dataclasses.replace(f.suggestion, scope="window", windows=counts(title)), f.window)
        for title, f in worst.items()
        if title not in seen
    ]
    return out, None


def _overlap_in_time(a: Suggestion, b: Suggestion) -> bool:
    return a.evidence.start_t <= b.evidence.end_t and b.evidence.start_t <= a.evidence.end_t


def _suppress(found: list[_Found], rules: Mapping[str, Rule[Any]]) -> list[Suggestion]:
    """Drop what a ``suppressed_by`` rule already says for the same GPUs and time. When the suppressing
    suggestion covers only some of the GPUs, the rule is judged again on the others, so their evidence
    is theirs alone."""
    kept: list[Suggestion] = []
    for f in found:
        s = f.suggestion
        rule = rules[s.rule]
        covering = [
            o.suggestion
            for o in found
            if o.suggestion.rule in rule.suppressed_by and _overlap_in_time(s, o.suggestion)
        ]
        if not covering:
            kept.append(s)
            continue
        if any(not o.evidence.gpus for o in covering) or not s.evidence.gpus:
            continue  # a node-wide suggestion covers every GPU
        taken = {i for o in covering for i in o.evidence.gpus}
        rest = [i for i in s.evidence.gpus if i not in taken]
        if not rest:
            continue
        kept.extend(
            dataclasses.replace(again, scope=s.scope, windows=s.windows)
            for again in rule.evaluate(f.window.only(rest))
            if again.title == s.title
        )
    return kept


def run_advise(
    samples: Iterable[Sample],
    header: Header | None,
    *,
    window_s: float = DEFAULT_WINDOW_S,
    thresholds: Mapping[str, Mapping[str, object]] | None = None,
    from_t: float | None = None,
    to_t: float | None = None,
    rules: Sequence[type[Rule[Any]]] = ALL_RULES,
) -> AdviceReport:
    """Evaluate every rule over ``from_t``..``to_t`` (Unix seconds, inclusive; the whole recording by
    default) and over sliding windows of ``window_s`` seconds; see the module docstring.

    ``thresholds``: ``{rule_id: {threshold_name: value}}`` (e.g. from :func:`load_thresholds`).
    Raises :class:`AdviseError` for a bad window, an inverted range or a bad threshold.
    """
    if not (isinstance(window_s, (int, float)) and math.isfinite(window_s) and window_s > 0):
        raise AdviseError(f"window_s must be a positive number of seconds, not {window_s!r}")
    if from_t is not None and to_t is not None and from_t > to_t:
        raise AdviseError(f"the range starts ({from_t}) after it ends ({to_t})")
    active = build_rules(thresholds, rules)
    ordered = sorted(samples, key=lambda s: s.t)
    inside = [s for s in ordered if (from_t is None or s.t >= from_t) and (to_t is None or s.t <= to_t)]
    whole = Window(inside, header, start_t=from_t, end_t=to_t)
    windows = sliding_windows(whole, window_s)

    statuses: list[RuleStatus] = []
    found: list[_Found] = []
    for rule in active:
        got, reason = _evaluate_rule(rule, whole, windows)
        found.extend(got)
        statuses.append(
            RuleStatus(
                id=rule.id,
                title=rule.title,
                origin=rule.origin,
                guide=rule.guide,
                evaluated=reason is None,
                reason=reason,
                thresholds=rule.thresholds.values(),
            )
        )
    kept = _suppress(found, {rule.id: rule for rule in active})
    order = {rule.id: n for n, rule in enumerate(active)}
    kept.sort(key=lambda s: (SEVERITY_RANK[s.severity], order[s.rule]))
    per_rule = {rule.id: sum(1 for s in kept if s.rule == rule.id) for rule in active}
    statuses = [dataclasses.replace(st, suggestions=per_rule[st.id]) for st in statuses]
    return AdviceReport(
        hostname=header.hostname if header else "",
        start_t=whole.start_t if (inside or from_t is not None) else None,
        end_t=whole.end_t if (inside or to_t is not None) else None,
        samples=len(inside),
        gpus=whole.gpu_indices,
        window_s=float(window_s),
        windows=len(windows),
        suggestions=tuple(kept),
        rules=tuple(statuses),
    )
