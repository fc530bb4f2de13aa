"""What an advisor rule is: one class under :class:`Rule`, judging a :class:`Window` of telemetry samples
and returning :class:`Suggestion` objects.

The pieces, and why they look the way they do:

- :class:`Window` is the samples of one time range with the helpers every rule needs (a GPU's series of
  a metric, the share of ticks where a metric is present, mean/percentiles, which ticks were busy). Rules
  never walk raw samples themselves, so "absent", "busy" and "p90" mean the same thing in every rule.
- A metric a GPU cannot give is absent from its sample (no GPM on an A100 without DCGM, no host
  readings from a bare recorder). A rule whose metrics are absent returns ``[]``; the engine asks
  :meth:`Rule.missing` and reports the rule as "not evaluated: needs sm_active_pct". Never an error.
- Every rule owns a small frozen :class:`Thresholds` dataclass. Each field carries its unit and a
  sentence of documentation (``threshold(...)``), so ``dgxperf advise`` can print them and a user can
  override any of them by name (:meth:`Rule.with_overrides`), with a clear error for a wrong name.
- A :class:`Suggestion` carries the evidence (the numbers and the time range and GPUs they cover), the
  exact fix (``dgxperf train --set ...`` where the recipe has a field for it, else the env var or code
  line), the expected effect, the guide section, and whether the rule is the guide's or dgxperf's own.

Like optuna's samplers, every rule is run through one shared test suite (``tests/advise/test_rules.py``).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Literal, TypeVar

from dgxperf.hw.specs import GpuSpec, match_spec
from dgxperf.samples import GpuInfo, GpuSample, Header, Sample

Severity = Literal["info", "warn", "critical"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warn", "info")  # most urgent first
SEVERITY_RANK: Mapping[str, int] = {name: rank for rank, name in enumerate(SEVERITIES)}

# "guide": the rule is a guide's own (quoted, with its thresholds); "dgxperf": ours, with the guide
# section it relates to, if any. Reports keep the two apart so nobody mistakes our thresholds for the guide's.
Origin = Literal["guide", "dgxperf"]
Scope = Literal["range", "window"]

# A metric counts as present for a GPU when it is in at least this share of the window's ticks. Below it,
# a rule would judge a handful of ticks as if they were the window (GPM can drop a reading now and then).
MIN_COVERAGE = 0.5

# A tick counts as "busy" when NVML's utilization.gpu (% of the sample period in which any kernel ran) is
# at least this. Without gpu_util_pct, GPM's SM activity stands in (it is never above utilization.gpu,
# so the fallback errs towards "not busy").
BUSY_UTIL_PCT = 50.0

GiB = 1024**3
GPM_METRICS = frozenset(
    {
        "sm_active_pct",
        "sm_occupancy_pct",
        "tensor_active_pct",
        "hmma_active_pct",
        "dram_active_pct",
        "fp32_active_pct",
        "fp16_active_pct",
        "fp64_active_pct",
    }
)


class AdviseError(ValueError):
    """Something the user got wrong: an unknown rule id or threshold name, a bad value, a bad range."""


# ----------------------------------------------------------------------------------------------- stats


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of already sorted values, linear between ranks (numpy's default)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclasses.dataclass(frozen=True)
class MetricStats:
    """Summary of one metric's values (over one GPU, or pooled over several) within a window."""

    n: int
    mean: float
    p10: float
    p50: float
    p90: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> MetricStats | None:
        ordered = sorted(values)
        if not ordered:
            return None
        return cls(
            n=len(ordered),
            mean=math.fsum(ordered) / len(ordered),
            p10=percentile(ordered, 10),
            p50=percentile(ordered, 50),
            p90=percentile(ordered, 90),
            min=ordered[0],
            max=ordered[-1],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mean": _round(self.mean),
            "p10": _round(self.p10),
            "p50": _round(self.p50),
            "p90": _round(self.p90),
            "min": _round(self.min),
            "max": _round(self.max),
        }


def _round(value: float) -> float:
    # Three decimals keep percentages readable; byte rates (1e10) keep full integer precision anyway.
    return round(value, 3)


# ---------------------------------------------------------------------------------------------- window


class Window:
    """The samples of one time range, with the helpers rules share.

    ``samples`` must be in time order (the engine sorts them). ``start_t``/``end_t`` default to the first
    and last sample's time; pass them for an empty window so the report can still say which range it was.
    GPUs are those the header lists plus any that appear in the samples.
    """

    def __init__(
        self,
        samples: Sequence[Sample],
        header: Header | None = None,
        *,
        start_t: float | None = None,
        end_t: float | None = None,
    ) -> None:
        self.samples: tuple[Sample, ...] = tuple(samples)
        self.header = header
        first = self.samples[0].t if self.samples else 0.0
        last = self.samples[-1].t if self.samples else first
        self.start_t: float = start_t if start_t is not None and not self.samples else first
        self.end_t: float = end_t if end_t is not None and not self.samples else last
        # Per tick, GPU index -> sample: rules ask for one GPU's metric thousands of times per window.
        self._by_gpu: list[dict[int, GpuSample]] = [{g.index: g for g in s.gpus} for s in self.samples]
        indices = {g.index for g in header.gpus} if header else set()
        for tick in self._by_gpu:
            indices.update(tick)
        self.gpu_indices: tuple[int, ...] = tuple(sorted(indices))
        self._cache: dict[tuple[Any, ...], Any] = {}
        # A slice of a parent window reads its per-tick columns from the parent (see :meth:`slice`).
        self._parent: Window | None = None
        self._span = (0, len(self.samples))

    def slice(self, lo: int, hi: int) -> Window:
        """Ticks ``lo:hi`` as a window that shares this one's per-tick columns: the engine cuts a long
        recording into many overlapping sliding windows, and re-reading every sample for each of them
        would cost most of its time."""
        child = Window.__new__(Window)
        child.samples = self.samples[lo:hi]
        child.header = self.header
        child.start_t = child.samples[0].t if child.samples else self.start_t
        child.end_t = child.samples[-1].t if child.samples else self.end_t
        child._by_gpu = self._by_gpu[lo:hi]
        child.gpu_indices = self.gpu_indices
        child._cache = {}
        child._parent = self
        child._span = (lo, hi)
        return child

    def _column(self, key: tuple[Any, ...], build: Callable[[], list[Any]]) -> list[Any]:
        """A per-tick list, built once per window (or cut from the parent window's)."""
        if key not in self._cache:
            if self._parent is not None:
                lo, hi = self._span
                self._cache[key] = self._parent._column(key, build)[lo:hi]
            else:
                self._cache[key] = build()
        column: list[Any] = self._cache[key]
        return column

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def empty(self) -> bool:
        return not self.samples

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_t - self.start_t)

    @property
    def times(self) -> list[float]:
        return [s.t for s in self.samples]

    def gpu_info(self, index: int) -> GpuInfo | None:
        if self.header is None:
            return None
        return next((g for g in self.header.gpus if g.index == index), None)

    def memory_total_bytes(self, gpu: int) -> float | None:
        """The GPU's framebuffer size: the largest ``fb_used + fb_free (+ fb_reserved)`` of any tick.

        NVML's v2 memory info splits total into used, free and reserved; with v1 (no reserved), used
        already counts the reserved part, so the sum is the total either way.
        """
        key = ("fb_total", gpu)
        if key not in self._cache:
            used, free = self.raw("fb_used_bytes", gpu), self.raw("fb_free_bytes", gpu)
            reserved = self.raw("fb_reserved_bytes", gpu)
            totals = [
                u + f + (r or 0.0)
                for u, f, r in zip(used, free, reserved, strict=True)
                if u is not None and f is not None
            ]
            self._cache[key] = max(totals) if totals else None
        total: float | None = self._cache[key]
        return total

    def spec(self, gpu: int) -> GpuSpec | None:
        """The datasheet entry (hw/specs) of the GPU the header names; ``None`` when unknown for sure."""
        info = self.gpu_info(gpu)
        if info is None or not info.name:
            return None
        total = self.memory_total_bytes(gpu)
        return match_spec(info.name, int(total) if total else None)

    # -- GPU metrics

    def raw(self, metric: str, gpu: int) -> list[float | None]:
        """One value per tick (``None`` where absent): aligned with :attr:`samples` for tick-wise logic."""

        def build() -> list[Any]:
            root = self._root()
            return [
                g.metrics.get(metric) if (g := tick.get(gpu)) is not None else None for tick in root._by_gpu
            ]

        return self._column(("raw", metric, gpu), build)

    def _root(self) -> Window:
        window = self
        while window._parent is not None:
            window = window._parent
        return window

    def values(self, metric: str, gpu: int, where: Sequence[bool] | None = None) -> list[float]:
        """The GPU's present values of ``metric``, optionally only at ticks where ``where`` is true."""
        raw = self.raw(metric, gpu)
        if where is None:
            return [v for v in raw if v is not None]
        return [v for v, keep in zip(raw, where, strict=True) if v is not None and keep]

    def series(self, metric: str, gpu: int) -> list[tuple[float, float]]:
        """``[(t, value)]`` of one GPU metric, skipping ticks where it is absent."""
        return [(s.t, v) for s, v in zip(self.samples, self.raw(metric, gpu), strict=True) if v is not None]

    def coverage(self, metric: str, gpu: int | None = None) -> float:
        """Share of ticks (of one GPU, or of all GPU-ticks) where ``metric`` is present; 0 when empty."""
        gpus = self.gpu_indices if gpu is None else (gpu,)
        if not self.samples or not gpus:
            return 0.0
        present = 0
        for i in gpus:
            key = ("present", metric, i)
            if key not in self._cache:
                self._cache[key] = sum(v is not None for v in self.raw(metric, i))
            present += self._cache[key]
        return present / (len(self.samples) * len(gpus))

    def has(self, metric: str, gpu: int) -> bool:
        return self.coverage(metric, gpu) >= MIN_COVERAGE

    def gpus_with(self, *metrics: str) -> tuple[int, ...]:
        """GPUs on which every one of ``metrics`` is present in at least :data:`MIN_COVERAGE` of the ticks."""
        return tuple(i for i in self.gpu_indices if all(self.has(m, i) for m in metrics))

    def stats(self, metric: str, gpu: int, where: Sequence[bool] | None = None) -> MetricStats | None:
        return MetricStats.of(self.values(metric, gpu, where))

    def pooled_stats(
        self, metric: str, gpus: Iterable[int], where: Mapping[int, Sequence[bool]] | None = None
    ) -> MetricStats | None:
        """Stats of ``metric`` over every tick of every GPU in ``gpus`` (each GPU's mask if given)."""
        values: list[float] = []
        for i in gpus:
            values.extend(self.values(metric, i, where.get(i) if where else None))
        return MetricStats.of(values)

    def mean(self, metric: str, gpu: int, where: Sequence[bool] | None = None) -> float | None:
        values = self.values(metric, gpu, where)
        return math.fsum(values) / len(values) if values else None

    def busy(self, gpu: int, util_pct: float = BUSY_UTIL_PCT) -> list[bool]:
        """Per tick: did the GPU run kernels for at least ``util_pct`` % of the sample period?

        From ``gpu_util_pct``, else ``sm_active_pct`` (see :data:`BUSY_UTIL_PCT`); a tick with neither
        counts as not busy, since nothing says it was.
        """

        def build() -> list[Any]:
            root = self._root()
            util, sm = root.raw("gpu_util_pct", gpu), root.raw("sm_active_pct", gpu)
            return [
                (u if u is not None else (s if s is not None else -1.0)) >= util_pct
                for u, s in zip(util, sm, strict=True)
            ]

        return self._column(("busy", gpu, util_pct), build)

    def busy_share(self, gpu: int, util_pct: float = BUSY_UTIL_PCT) -> float:
        mask = self.busy(gpu, util_pct)
        return sum(mask) / len(mask) if mask else 0.0

    def throttle(self, gpu: int) -> list[tuple[str, ...] | None]:
        """Per tick, the GPU's clock-event (throttle) reason names; ``None`` where the GPU is absent."""

        def build() -> list[Any]:
            return [g.throttle if (g := tick.get(gpu)) is not None else None for tick in self._root()._by_gpu]

        return self._column(("throttle", gpu), build)

    def throttled(self, gpu: int, reasons: Sequence[str]) -> list[bool]:
        """Per tick: was any of ``reasons`` among the GPU's clock-event reasons?"""
        wanted = frozenset(reasons)

        def build() -> list[Any]:
            return [r is not None and not wanted.isdisjoint(r) for r in self._root().throttle(gpu)]

        return self._column(("throttled", gpu, wanted), build)

    def processes(self, gpu: int) -> list[tuple[Mapping[str, Any], ...]]:
        return [tick[gpu].processes if gpu in tick else () for tick in self._by_gpu]

    # -- host metrics

    def host_raw(self, metric: str) -> list[float | None]:
        def build() -> list[Any]:
            return [
                float(v)
                if isinstance(v := s.host.get(metric), (int, float)) and not isinstance(v, bool)
                else None
                for s in self._root().samples
            ]

        return self._column(("host", metric), build)

    def host_values(self, metric: str, where: Sequence[bool] | None = None) -> list[float]:
        raw = self.host_raw(metric)
        if where is None:
            return [v for v in raw if v is not None]
        return [v for v, keep in zip(raw, where, strict=True) if v is not None and keep]

    def host_coverage(self, metric: str) -> float:
        if not self.samples:
            return 0.0
        return sum(v is not None for v in self.host_raw(metric)) / len(self.samples)

    def host_has(self, metric: str) -> bool:
        return self.host_coverage(metric) >= MIN_COVERAGE

    def host_stats(self, metric: str, where: Sequence[bool] | None = None) -> MetricStats | None:
        return MetricStats.of(self.host_values(metric, where))

    # -- events

    def events(self, kind: str) -> list[tuple[float, Mapping[str, Any]]]:
        """``[(t, event)]`` for events of one kind (``"xid"``); the recorder writes ``{"type": kind, ...}``."""
        out = []
        for s in self.samples:
            for e in s.events:
                if str(e.get("type", e.get("kind", ""))).lower() == kind:
                    out.append((s.t, e))
        return out

    # -- slicing

    def only(self, gpus: Iterable[int]) -> Window:
        """The same ticks with only ``gpus`` (host readings and events kept)."""
        keep = set(gpus)
        samples = [
            dataclasses.replace(s, gpus=tuple(g for g in s.gpus if g.index in keep)) for s in self.samples
        ]
        header = (
            dataclasses.replace(self.header, gpus=tuple(g for g in self.header.gpus if g.index in keep))
            if self.header is not None
            else None
        )
        return Window(samples, header, start_t=self.start_t, end_t=self.end_t)

    def between(self, start_t: float, end_t: float) -> Window:
        """The sub-window of samples with ``start_t <= t <= end_t``."""
        inside = [s for s in self.samples if start_t <= s.t <= end_t]
        return Window(inside, self.header, start_t=start_t, end_t=end_t)


# -------------------------------------------------------------------------------------------- evidence


@dataclasses.dataclass(frozen=True)
class Evidence:
    """The numbers behind a suggestion and the range they cover.

    ``metrics``: stats pooled over ``gpus`` (over the ticks named by ``basis``). ``per_gpu``: each GPU's
    mean of the same metrics, so a single straggler among eight shows. ``values``: any other number the
    rule compared (a link peak and where it came from, counts, the thresholds it used).
    """

    start_t: float
    end_t: float
    gpus: tuple[int, ...]
    metrics: Mapping[str, MetricStats] = dataclasses.field(default_factory=dict)
    per_gpu: Mapping[int, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    basis: str = "all ticks"

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_t - self.start_t)

    def to_json(self) -> dict[str, Any]:
        return {
            "start_t": round(self.start_t, 3),
            "end_t": round(self.end_t, 3),
            "duration_s": round(self.duration_s, 3),
            "gpus": list(self.gpus),
            "basis": self.basis,
            "metrics": {name: s.to_json() for name, s in self.metrics.items()},
            "per_gpu": {
                str(i): {k: _round(v) for k, v in means.items()} for i, means in self.per_gpu.items()
            },
            "values": {k: _round(v) if isinstance(v, float) else v for k, v in self.values.items()},
        }

    def text(self) -> str:
        """One line for the human view: ``sm_active_pct mean 99.4 (p10 99.1, p90 99.6); ...``."""
        parts = [
            f"{name} mean {s.mean:.4g} (p10 {s.p10:.4g}, p90 {s.p90:.4g})" for name, s in self.metrics.items()
        ]
        parts += [f"{k}={_round(v) if isinstance(v, float) else v}" for k, v in self.values.items()]
        return "; ".join(parts)


def gather(
    window: Window,
    gpus: Sequence[int],
    metrics: Sequence[str],
    *,
    where: Mapping[int, Sequence[bool]] | None = None,
    values: Mapping[str, Any] | None = None,
    basis: str = "all ticks",
    host: Sequence[str] = (),
    host_where: Sequence[bool] | None = None,
) -> Evidence:
    """Evidence over ``gpus``: pooled stats and per-GPU means of each metric present on them, plus stats
    of the ``host`` metrics (keyed ``host.<name>``)."""
    pooled: dict[str, MetricStats] = {}
    per_gpu: dict[int, dict[str, float]] = {i: {} for i in gpus}
    for metric in metrics:
        stats = window.pooled_stats(metric, gpus, where)
        if stats is None:
            continue
        pooled[metric] = stats
        for i in gpus:
            mean = window.mean(metric, i, where.get(i) if where else None)
            if mean is not None:
                per_gpu[i][metric] = mean
    for metric in host:
        host_stats = window.host_stats(metric, host_where)
        if host_stats is not None:
            pooled[f"host.{metric}"] = host_stats
    return Evidence(
        start_t=window.start_t,
        end_t=window.end_t,
        gpus=tuple(gpus),
        metrics=pooled,
        per_gpu={i: m for i, m in per_gpu.items() if m} if len(gpus) > 1 else {},
        values=dict(values or {}),
        basis=basis,
    )


# ------------------------------------------------------------------------------------------ suggestion


@dataclasses.dataclass(frozen=True)
class Suggestion:
    """One piece of advice.

    ``fix`` says what to change in words; ``actions`` are the exact lines (a ``dgxperf train --set``
    flag, an env var, a code line, a command a person runs). ``score`` is rule-specific ("how bad"; higher
    is worse) and only used to pick the worst of several sliding windows. ``scope`` and ``windows`` are
    set by the engine: whether the evidence is the whole requested range or its worst window, and in how
    many of the sliding windows the rule fired.
    """

    rule: str
    severity: Severity
    title: str
    why: str
    evidence: Evidence
    fix: str
    actions: tuple[str, ...]
    expected_effect: str
    guide: str | None
    origin: Origin
    score: float = 0.0
    scope: Scope = "range"
    windows: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"severity {self.severity!r}: choose from {', '.join(SEVERITIES)}")

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "title": self.title,
            "why": self.why,
            "evidence": self.evidence.to_json(),
            "fix": self.fix,
            "actions": list(self.actions),
            "expected_effect": self.expected_effect,
            "guide": self.guide,
            "origin": self.origin,
            "score": _round(self.score),
            "scope": self.scope,
            "windows": (
                {"fired": self.windows[0], "evaluated": self.windows[1]} if self.windows is not None else None
            ),
        }


# ------------------------------------------------------------------------------------------ thresholds


_N = TypeVar("_N", int, float)


def threshold(default: _N, *, unit: str, doc: str) -> _N:
    """A documented threshold field: ``unit`` ("%", "GB/s", "share", "count", ...) and one sentence."""
    return dataclasses.field(default=default, metadata={"unit": unit, "doc": doc})


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """Base of every rule's thresholds: a frozen dataclass whose fields are made with :func:`threshold`."""

    def describe(self) -> dict[str, dict[str, Any]]:
        """``{name: {"value", "unit", "doc"}}`` for every threshold (for ``--list-rules`` and reports)."""
        return {
            f.name: {
                "value": getattr(self, f.name),
                "unit": f.metadata.get("unit", ""),
                "doc": f.metadata.get("doc", ""),
            }
            for f in dataclasses.fields(self)
        }

    def values(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


T = TypeVar("T", bound=Thresholds)


def _coerce(rule_id: str, name: str, field: dataclasses.Field[Any], value: object) -> float | int:
    where = f"rule {rule_id!r}, threshold {name!r}"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise AdviseError(f"{where}: expected a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise AdviseError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise AdviseError(f"{where}: must be a finite number >= 0, got {value!r}")
    if field.metadata.get("unit") == "%" and number > 100:
        raise AdviseError(f"{where}: a percentage must be in [0, 100], got {value!r}")
    if field.metadata.get("unit") == "share" and number > 1:
        raise AdviseError(f"{where}: a share must be in [0, 1], got {value!r}")
    if isinstance(field.default, int):
        if not number.is_integer():
            raise AdviseError(f"{where}: expected a whole number, got {value!r}")
        return int(number)
    return number


# ------------------------------------------------------------------------------------------------ rule


class Rule(abc.ABC, Generic[T]):
    """One advisor rule. Subclasses set the class attributes and implement :meth:`default_thresholds` and
    :meth:`evaluate`.

    - ``id``: stable, dotted (``bandwidth.memory_bound``); threshold files and reports key on it.
    - ``origin``/``guide``: whose rule it is, and the guide section it implements or relates to.
    - ``needs``/``needs_host``: the GPU and host metrics without which it cannot judge; the engine turns
      a gap into "not evaluated: needs ..." (see :meth:`missing`).
    - ``suppressed_by``: rules whose suggestion, on an overlapping GPU set and time range, makes this
      one's redundant (same diagnosis, same fix); the engine drops it then.
    """

    id: ClassVar[str]
    title: ClassVar[str]
    guide: ClassVar[str | None] = None
    origin: ClassVar[Origin] = "dgxperf"
    needs: ClassVar[tuple[str, ...]] = ()
    needs_host: ClassVar[tuple[str, ...]] = ()
    suppressed_by: ClassVar[tuple[str, ...]] = ()

    def __init__(self, thresholds: T | None = None) -> None:
        self.thresholds: T = thresholds if thresholds is not None else self.default_thresholds()

    @classmethod
    @abc.abstractmethod
    def default_thresholds(cls) -> T:
        """The documented defaults (a :class:`Thresholds` subclass instance)."""

    @abc.abstractmethod
    def evaluate(self, window: Window) -> list[Suggestion]:
        """Suggestions for ``window``; ``[]`` when nothing is wrong or the needed metrics are absent."""

    def with_overrides(self, overrides: Mapping[str, object]) -> Rule[T]:
        """A copy of this rule with some thresholds replaced; unknown names and bad values raise AdviseError."""
        fields = {f.name: f for f in dataclasses.fields(self.thresholds)}
        changes: dict[str, Any] = {}
        for name, value in overrides.items():
            if name not in fields:
                known = ", ".join(fields) or "none"
                raise AdviseError(f"rule {self.id!r} has no threshold {name!r}; its thresholds: {known}")
            changes[name] = _coerce(self.id, name, fields[name], value)
        return type(self)(dataclasses.replace(self.thresholds, **changes))

    def missing(self, window: Window) -> tuple[str, ...]:
        """What keeps this rule from judging ``window``: metric names no GPU (or the host) has at
        :data:`MIN_COVERAGE`, or other needs a subclass adds. Empty when the rule can judge."""
        if window.empty:
            return ()
        gaps = [m for m in self.needs if not any(window.has(m, i) for i in window.gpu_indices)]
        gaps += [f"host {m}" for m in self.needs_host if not window.host_has(m)]
        return tuple(gaps)

    def gpus(self, window: Window) -> tuple[int, ...]:
        """The GPUs this rule can judge: those with every metric in ``needs``."""
        return window.gpus_with(*self.needs)

    def suggest(
        self,
        *,
        severity: Severity,
        why: str,
        evidence: Evidence,
        fix: str,
        actions: Sequence[str],
        expected_effect: str,
        score: float = 0.0,
        title: str | None = None,
    ) -> Suggestion:
        """A :class:`Suggestion` stamped with this rule's id, guide reference and origin."""
        return Suggestion(
            rule=self.id,
            severity=severity,
            title=title or self.title,
            why=why,
            evidence=evidence,
            fix=fix,
            actions=tuple(actions),
            expected_effect=expected_effect,
            guide=self.guide,
            origin=self.origin,
            score=score,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "origin": self.origin,
            "guide": self.guide,
            "needs": list(self.needs) + [f"host {m}" for m in self.needs_host],
            "thresholds": self.thresholds.describe(),
        }


def fmt_gpus(gpus: Sequence[int]) -> str:
    return "GPU " + ", ".join(str(i) for i in gpus) if len(gpus) <= 8 else f"{len(gpus)} GPUs"


def needs_hint(missing: Sequence[str]) -> str:
    """Why metrics are absent, for the "not evaluated" line (GPM needs Hopper+ or DCGM, host readings)."""
    hints = []
    if any(m in GPM_METRICS for m in missing):
        hints.append("GPM profiling metrics need a Hopper-or-newer GPU (NVML GPM) or DCGM")
    if any(m.startswith("host ") for m in missing):
        hints.append("the recording has no host readings")
    return "; ".join(hints)
