"""`dgxperf advise`: why is this training job slow, and what should change first?

Rules (one class each under :class:`~dgxperf.advise.base.Rule`, grouped by family in
:mod:`dgxperf.advise.rules`) judge windows of telemetry samples (:mod:`dgxperf.samples`) and
return :class:`~dgxperf.advise.base.Suggestion` objects; :func:`~dgxperf.advise.engine.run_advise` runs
them all over a recording and returns an :class:`~dgxperf.advise.engine.AdviceReport`
(schema ``dgxperf.advice/1``). Guide B §4.1's "dgx-monitor" rules and guide A §6.1's utilisation swing
are implemented as the guides state them; dgxperf's own rules are labelled ``origin="dgxperf"``.
"""

from dgxperf.advise.base import AdviseError, Evidence, MetricStats, Rule, Suggestion, Thresholds, Window
from dgxperf.advise.engine import (
    ADVICE_SCHEMA,
    ALL_RULES,
    AdviceReport,
    RuleStatus,
    build_rules,
    load_thresholds,
    rule_catalog,
    run_advise,
)

__all__ = [
    "ADVICE_SCHEMA",
    "ALL_RULES",
    "AdviceReport",
    "AdviseError",
    "Evidence",
    "MetricStats",
    "Rule",
    "RuleStatus",
    "Suggestion",
    "Thresholds",
    "Window",
    "build_rules",
    "load_thresholds",
    "rule_catalog",
    "run_advise",
]
