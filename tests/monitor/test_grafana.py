"""`dgxperf grafana`: the dashboard only queries what the exporter exposes; promtool accepts the rest."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from dgxperf.monitor import grafana
from dgxperf.monitor.exporter import exporter_metrics

PROMTOOL = shutil.which("promtool") or ("/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None)
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (CI installs Debian's prometheus package)"
)
EXPORTED = {m.name for m in exporter_metrics()}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("grafana")
    paths = grafana.write_grafana(out, datasource="Mimir-prod")
    return {p.name: p for p in paths}


def test_writes_three_files(written: dict[str, Path]) -> None:
    assert sorted(written) == ["alerts.yml", "dashboard.json", "prometheus.yml"]
    assert all(p.stat().st_size > 0 for p in written.values())


def test_dashboard_loads_and_is_sound(written: dict[str, Path]) -> None:
    dash = json.loads(written["dashboard.json"].read_text())
    assert grafana.validate_dashboard(dash) == []
    assert dash["schemaVersion"] == grafana.SCHEMA_VERSION
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["datasource"]["current"]["value"] == "Mimir-prod"
    assert {"Hostname", "gpu"} <= set(variables)
    panels = dash["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        for target in panel.get("targets", ()):
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_every_query_uses_only_metrics_the_exporter_exposes(written: dict[str, Path]) -> None:
    """Checked independently of validate_dashboard: each PromQL expression, each metric name in it."""
    dash = json.loads(written["dashboard.json"].read_text())
    exprs = grafana.dashboard_expressions(dash)
    assert len(exprs) > 30
    used: set[str] = set()
    for expr in exprs:
        names = grafana.metric_names(expr)
        assert names, f"no metric found in {expr!r}"
        assert names <= EXPORTED, f"{expr!r} uses {names - EXPORTED}"
        used |= names
    # The guides' panels are there (guide A §6.2, guide B §4.1), by the metrics they need.
    for needed in (
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "dgxperf_throttle_reason", "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "dgxperf_host_iowait_ratio", "dgxperf_host_disk_read_bytes_per_second",
        "dgxperf_train_samples_per_second", "dgxperf_train_mfu_ratio",
    ):  # fmt: skip
        assert needed in used, needed


def test_nvlink_error_panel_explains_why_it_is_absent() -> None:
    assert not set(grafana.NVLINK_ERROR_METRICS) & EXPORTED  # if this fails, the panel becomes a graph
    dash = grafana.dashboard()
    (panel,) = [p for p in dash["panels"] if "NVLink errors" in p["title"]]
    assert panel["type"] == "text" and "not exported" in panel["options"]["content"]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('DCGM_FI_DEV_GPU_UTIL{Hostname=~"$Hostname", gpu=~"$gpu"}', {"DCGM_FI_DEV_GPU_UTIL"}),
        ('sum by (Hostname, gpu) (rate(foo_total{a="b or c"}[$__rate_interval]))', {"foo_total"}),
        ("a / on (Hostname) group_left(gpu) b", {"a", "b"}),
        ("avg_over_time(x[5m:1m]) > 0.5 and changes(y[10m]) > 0 unless z offset 5m", {"x", "y", "z"}),
        ('absent(up{job="dgxperf"})', {"up"}),
        ('label_replace(m, "dst", "$1", "src", "(.*)")', {"m"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert grafana.metric_names(expr) == names


def _broken(dash: dict[str, Any], change: str) -> dict[str, Any]:
    dash = copy.deepcopy(dash)
    target_panel = next(p for p in dash["panels"] if p.get("targets"))
    if change == "unknown metric":
        target_panel["targets"][0]["expr"] = "DCGM_FI_DEV_NOT_A_FIELD"
    elif change == "duplicate id":
        dash["panels"][-1]["id"] = target_panel["id"]
    elif change == "overlap":
        dash["panels"][-1]["gridPos"] = dict(target_panel["gridPos"])
    elif change == "outside grid":
        target_panel["gridPos"]["x"] = 20
    elif change == "fixed datasource":
        target_panel["targets"][0]["datasource"] = {"type": "prometheus", "uid": "abc"}
    elif change == "no gridPos":
        del target_panel["gridPos"]
    return dash


@pytest.mark.parametrize(
    "change", ["unknown metric", "duplicate id", "overlap", "outside grid", "fixed datasource", "no gridPos"]
)
def test_validation_catches_broken_dashboards(change: str) -> None:
    problems = grafana.validate_dashboard(_broken(grafana.dashboard(), change))
    assert problems, change


def test_write_grafana_refuses_an_inconsistent_dashboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = grafana.panel_specs

    def with_a_typo() -> Any:
        rows = real()
        spec = rows[0][1][0]
        rows[0][1][0] = grafana.PanelSpec(
            spec.title, (grafana.Query("DCGM_FI_DEV_GPU_UTILS"),), "percent", ""
        )
        return rows

    monkeypatch.setattr(grafana, "panel_specs", with_a_typo)
    with pytest.raises(ValueError, match="DCGM_FI_DEV_GPU_UTILS"):
        grafana.write_grafana(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_alert_rules_cover_the_issue(written: dict[str, Path]) -> None:
    rules = yaml.safe_load(written["alerts.yml"].read_text())
    by_name = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    for name in (
        "DgxperfExporterDown", "GpuXidError", "GpuUncorrectableEccError", "GpuRowRemapPending",
        "GpuHardwareSlowdown", "GpuThermalThrottling", "GpuIdleWhileTraining",
    ):  # fmt: skip
        assert name in by_name, name
        assert by_name[name]["labels"]["severity"] in ("warning", "critical")
        assert by_name[name]["annotations"]["summary"]
    for expr in grafana.alert_expressions(rules):
        assert grafana.metric_names(expr) <= EXPORTED | {"up"}, expr
    # sw_power_cap under load is normal on H200 (README): it must not page anyone.
    assert "sw_power_cap" not in json.dumps(rules)
    assert "hw_power_brake_slowdown" in by_name["GpuHardwareSlowdown"]["expr"]
    config = yaml.safe_load(written["prometheus.yml"].read_text())
    assert config["rule_files"] == ["alerts.yml"]
    assert config["scrape_configs"][0]["static_configs"][0]["targets"] == ["localhost:9400"]


@needs_promtool
def test_promtool_accepts_config_and_rules(written: dict[str, Path]) -> None:
    assert PROMTOOL is not None
    folder = written["prometheus.yml"].parent
    config = subprocess.run(
        [PROMTOOL, "check", "config", "prometheus.yml"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert config.returncode == 0, config.stdout + config.stderr
    assert "1 rule files found" in config.stdout + config.stderr  # it followed rule_files to alerts.yml
    rules = subprocess.run(
        [PROMTOOL, "check", "rules", "alerts.yml"], cwd=folder, capture_output=True, text=True, timeout=60
    )
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "9 rules found" in rules.stdout + rules.stderr


@needs_promtool
def test_promtool_parses_every_dashboard_query(written: dict[str, Path], tmp_path: Path) -> None:
    """Grafana's variables replaced by values, each panel query becomes a recording rule promtool parses."""
    assert PROMTOOL is not None
    dash = json.loads(written["dashboard.json"].read_text())
    substitutions = {"$__rate_interval": "1m", "$__interval": "15s", "$Hostname": ".*", "$gpu": ".*"}
    exprs = []
    for expr in grafana.dashboard_expressions(dash):
        for var, value in substitutions.items():
            expr = expr.replace(var, value)
        assert "$" not in re.sub(r'"[^"]*"', "", expr), expr
        exprs.append(expr)
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dgxperf:dashboard_query_{i}", "expr": e} for i, e in enumerate(exprs)
    ]}]}  # fmt: skip
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(exprs)} rules found" in result.stdout + result.stderr


@needs_promtool
def test_promtool_catches_a_broken_rule(tmp_path: Path) -> None:
    """The promtool tests above can fail: a syntax error is reported."""
    assert PROMTOOL is not None
    path = tmp_path / "bad.yml"
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"alert": "A", "expr": "rate(x[5m]"}]}]})
    )
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
