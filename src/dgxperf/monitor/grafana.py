"""`dgxperf grafana`: a Grafana dashboard, a Prometheus scrape config and alerting rules for the exporter.

The dashboard carries the guides' panels: GPU utilisation and framebuffer-used ratio (guide A §6.2), SM
activity, tensor activity and DRAM bandwidth (guide B §4.1, with the "dgx-monitor" thresholds drawn in:
SM activity below 60% while DRAM is above 80% means memory-bound), PCIe and NVLink throughput, NVLink
errors, power / temperature / throttle reasons, XID and ECC, host I/O wait and disk throughput (storage
I/O wait), and training samples/s and MFU from `dgxperf train`.

Why plain dicts and not a builder library: grafanalib's last release is 0.7.1 (January 2024) and its
tracker reports it broken against Grafana 11.2 (weaveworks/grafanalib#692); grafana-foundation-sdk's PyPI
releases are each generated for one Grafana minor (``1712659053!10.2.0`` is "for Grafana v10.2.x"), are
labelled experimental / public preview, and change their API between versions. The classic dashboard JSON model
is stable and small, so we write it directly and validate it instead (:func:`validate_dashboard`):
unique panel ids, grid positions inside the 24-column grid that do not overlap, every query on the
``${datasource}`` variable, and every PromQL expression naming only metrics the exporter really exposes
(:func:`dgxperf.monitor.exporter.exporter_metrics`). The tests also have promtool parse every query.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from dgxperf.monitor.exporter import exporter_metrics

# The classic dashboard model's current (and last) schema version: Grafana 12 writes 42, and newer
# Grafana still imports it (apps/dashboard/pkg/migration/schemaversion in grafana/grafana).
SCHEMA_VERSION = 42
DASHBOARD_UID = "dgxperf-gpu"
DEFAULT_JOB = "dgxperf"
DS = {"type": "prometheus", "uid": "${datasource}"}

# Selectors every panel applies, so the dashboard's Hostname and gpu variables filter it.
GPU_SEL = '{Hostname=~"$Hostname", gpu=~"$gpu"}'
HOST_SEL = '{Hostname=~"$Hostname"}'
GPU_LEGEND = "{{Hostname}} GPU {{gpu}}"

# DCGM's NVLink error counters. The exporter exposes none of them today: the sampler reads no NVLink
# CRC/replay/recovery counters (NVML's nvmlDeviceGetNvLinkErrorCounter is per link and not in the
# recording schema yet), so the dashboard shows why instead of an empty graph.
NVLINK_ERROR_METRICS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)

# Throttle reasons that mean the hardware (not the configured power cap) is slowing the GPU down.
HW_SLOWDOWN_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


@dataclasses.dataclass(frozen=True)
class Query:
    expr: str
    legend: str = GPU_LEGEND


@dataclasses.dataclass(frozen=True)
class PanelSpec:
    """One panel: title, queries, unit and the "why" shown as its description."""

    title: str
    queries: tuple[Query, ...]
    unit: str
    description: str
    kind: str = "timeseries"
    min: float | None = 0
    max: float | None = None
    thresholds: tuple[tuple[float, str], ...] = ()  # (value, colour) drawn as lines
    width: int = 12
    text: str = ""  # for kind="text"


def _exported() -> set[str]:
    return {m.name for m in exporter_metrics()}


def _nvlink_errors_panel(exported: set[str]) -> PanelSpec:
    present = [name for name in NVLINK_ERROR_METRICS if name in exported]
    if present:
        return PanelSpec(
            "NVLink errors (per second)",
            tuple(
                Query(f"rate({name}{GPU_SEL}[$__rate_interval])", f"{GPU_LEGEND} {name[12:]}")
                for name in present
            ),
            "short",
            "NVLink CRC, replay and recovery errors. Any sustained rate means a bad link or NVSwitch port: "
            "check `nvidia-smi nvlink -e` and the fabric manager log.",
        )
    return PanelSpec(
        "NVLink errors",
        (),
        "short",
        "Why there is no NVLink error-rate graph.",
        kind="text",
        text=(
            "**NVLink error counters are not exported yet.** dgxperf's sampler reads NVLink bandwidth "
            "(DCGM_FI_PROF_NVLINK_TX/RX_BYTES) but not the per-link CRC / replay / recovery counters "
            "(DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL in dcgm-exporter), so this panel would stay empty. "
            "Until then: `nvidia-smi nvlink -e` on the node, or `dgxperf doctor --area topology` for "
            "inactive links. PCIe link errors are on the *PCIe replays* panel."
        ),
    )


def panel_specs() -> list[tuple[str, list[PanelSpec]]]:
    """The dashboard's rows and panels, in order."""
    exported = _exported()
    gpu = GPU_SEL
    host = HOST_SEL
    return [
        (
            "GPU utilisation (guide A §6.2)",
            [
                PanelSpec(
                    "GPU utilisation",
                    (Query(f"DCGM_FI_DEV_GPU_UTIL{gpu}"),),
                    "percent",
                    "Share of time a kernel ran (nvidia-smi's GPU-Util). Swinging between 30% and 90% during "
                    "training points at the input pipeline (guide A §6.1): more DataLoader workers, "
                    "pin_memory, non_blocking copies.",
                    max=100,
                ),
                PanelSpec(
                    "Framebuffer memory used",
                    (
                        Query(
                            f"DCGM_FI_DEV_FB_USED{gpu} / (DCGM_FI_DEV_FB_USED{gpu} + DCGM_FI_DEV_FB_FREE{gpu})"
                        ),
                    ),
                    "percentunit",
                    "Used / (used + free) framebuffer memory. Near 1: gradient accumulation, activation "
                    "checkpointing or a smaller batch before the next out-of-memory.",
                    max=1,
                    thresholds=((0.9, "orange"),),
                ),
            ],
        ),
        (
            "GPU activity (guide B §4.1)",
            [
                PanelSpec(
                    "SM activity and occupancy",
                    (
                        Query(f"DCGM_FI_PROF_SM_ACTIVE{gpu}", f"{GPU_LEGEND} SM active"),
                        Query(f"DCGM_FI_PROF_SM_OCCUPANCY{gpu}", f"{GPU_LEGEND} occupancy"),
                    ),
                    "percentunit",
                    "Share of cycles an SM had work, and of warp slots in use. Guide B's rule: SM activity "
                    "below 60% while DRAM bandwidth is above 80% means the kernels are memory-bound.",
                    max=1,
                    thresholds=((0.6, "orange"),),
                ),
                PanelSpec(
                    "Tensor-core activity",
                    (
                        Query(f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu}", f"{GPU_LEGEND} any tensor"),
                        Query(f"DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE{gpu}", f"{GPU_LEGEND} HMMA (fp16/bf16)"),
                    ),
                    "percentunit",
                    "Share of cycles the tensor pipes were busy. Near zero during training: AMP / TF32 is "
                    "not in effect (dgxperf train --recipe optimized uses bf16).",
                    max=1,
                ),
                PanelSpec(
                    "DRAM bandwidth utilisation",
                    (Query(f"DCGM_FI_PROF_DRAM_ACTIVE{gpu}"),),
                    "percentunit",
                    "Share of cycles the HBM interface moved data. Above 80% with SM activity below 60%: "
                    "memory-bound (fuse elementwise ops, larger batch, torch.compile).",
                    max=1,
                    thresholds=((0.8, "orange"),),
                ),
                PanelSpec(
                    "FP64 / FP32 / FP16 pipe activity",
                    (
                        Query(f"DCGM_FI_PROF_PIPE_FP64_ACTIVE{gpu}", f"{GPU_LEGEND} fp64"),
                        Query(f"DCGM_FI_PROF_PIPE_FP32_ACTIVE{gpu}", f"{GPU_LEGEND} fp32"),
                        Query(f"DCGM_FI_PROF_PIPE_FP16_ACTIVE{gpu}", f"{GPU_LEGEND} fp16"),
                    ),
                    "percentunit",
                    "Non-tensor arithmetic pipes. Busy FP32 pipes with idle tensor pipes: matmuls are "
                    "running in full fp32.",
                    max=1,
                ),
            ],
        ),
        (
            "Interconnect",
            [
                PanelSpec(
                    "PCIe throughput",
                    (
                        Query(f"DCGM_FI_PROF_PCIE_RX_BYTES{gpu}", f"{GPU_LEGEND} host->GPU (rx)"),
                        Query(f"DCGM_FI_PROF_PCIE_TX_BYTES{gpu}", f"{GPU_LEGEND} GPU->host (tx)"),
                    ),
                    "Bps",
                    "Bytes per second over PCIe, protocol headers included. RX near the link's peak (about "
                    "63 GB/s on Gen5 x16) during training: pinned memory, GPUDirect Storage/RDMA (guide B).",
                ),
                PanelSpec(
                    "NVLink bandwidth",
                    (
                        Query(f"DCGM_FI_PROF_NVLINK_RX_BYTES{gpu}", f"{GPU_LEGEND} rx"),
                        Query(f"DCGM_FI_PROF_NVLINK_TX_BYTES{gpu}", f"{GPU_LEGEND} tx"),
                    ),
                    "Bps",
                    "Bytes per second over all NVLinks of a GPU: gradient all-reduce traffic. Absent on "
                    "GPUs without NVLink.",
                ),
                _nvlink_errors_panel(exported),
                PanelSpec(
                    "PCIe replays (per second)",
                    (Query(f"rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu}[$__rate_interval])"),),
                    "short",
                    "PCIe link-level retries. A steady rate means a marginal link (riser, slot, "
                    "retimer): check `dgxperf doctor --area gpu` for link down-training.",
                ),
            ],
        ),
        (
            "Power, temperature and throttling",
            [
                PanelSpec(
                    "Power draw",
                    (
                        Query(f"DCGM_FI_DEV_POWER_USAGE{gpu}", f"{GPU_LEGEND} draw"),
                        Query(f"DCGM_FI_DEV_ENFORCED_POWER_LIMIT{gpu}", f"{GPU_LEGEND} limit"),
                    ),
                    "watt",
                    "Board power and the enforced limit. Draw pinned at the limit under load is the "
                    "sw_power_cap throttle reason: normal for long GEMM-heavy runs.",
                ),
                PanelSpec(
                    "Temperature",
                    (
                        Query(f"DCGM_FI_DEV_GPU_TEMP{gpu}", f"{GPU_LEGEND} GPU"),
                        Query(f"DCGM_FI_DEV_MEMORY_TEMP{gpu}", f"{GPU_LEGEND} HBM"),
                    ),
                    "celsius",
                    "GPU and HBM temperature.",
                    min=None,
                ),
                PanelSpec(
                    "SM clock",
                    (Query(f"DCGM_FI_DEV_SM_CLOCK{gpu}"),),
                    "suffix: MHz",
                    "SM clock. A drop under load with a hardware throttle reason set is a cooling or power "
                    "delivery problem.",
                ),
                PanelSpec(
                    "Throttle reasons (GPUs held by each)",
                    (Query(f"sum by (reason) (dgxperf_throttle_reason{gpu})", "{{reason}}"),),
                    "short",
                    "How many selected GPUs each clocks-event reason holds down. sw_power_cap under full "
                    "load is expected; hw_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown and "
                    "sw_thermal_slowdown are not (see the alert rules).",
                ),
            ],
        ),
        (
            "Errors: XID and ECC",
            [
                PanelSpec(
                    "Last XID per GPU",
                    (Query(f"DCGM_FI_DEV_XID_ERRORS{gpu}"),),
                    "none",
                    "The last XID the driver reported for each GPU since the exporter started (0: none). "
                    "XIDs 48, 63, 64, 74, 79, 92, 94, 95 are hardware; 13, 31, 43 usually the application.",
                    kind="stat",
                    thresholds=((1, "red"),),
                ),
                PanelSpec(
                    "XID errors",
                    (
                        Query(
                            f"sum by (Hostname, gpu, xid) (increase(dgxperf_xid_errors_total{gpu}"
                            "[$__rate_interval]))",
                            f"{GPU_LEGEND} XID {{{{xid}}}}",
                        ),
                    ),
                    "short",
                    "XID events per interval, by code.",
                ),
                PanelSpec(
                    "ECC errors and row remapping",
                    (
                        Query(
                            f"increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu}[$__rate_interval])",
                            f"{GPU_LEGEND} uncorrected",
                        ),
                        Query(
                            f"increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{gpu}[$__rate_interval])",
                            f"{GPU_LEGEND} corrected",
                        ),
                        Query(f"DCGM_FI_DEV_ROW_REMAP_PENDING{gpu}", f"{GPU_LEGEND} remap pending"),
                    ),
                    "short",
                    "New ECC errors per interval and pending row remaps. Any uncorrected error or a pending "
                    "remap: drain the node and reset the GPU.",
                    width=24,
                ),
            ],
        ),
        (
            "Host and storage I/O wait",
            [
                PanelSpec(
                    "CPU busy and I/O wait",
                    (
                        Query(f"dgxperf_host_cpu_utilization_ratio{host}", "{{Hostname}} CPU busy"),
                        Query(f"dgxperf_host_iowait_ratio{host}", "{{Hostname}} I/O wait"),
                        Query(f"dgxperf_host_cpu_steal_ratio{host}", "{{Hostname}} steal"),
                    ),
                    "percentunit",
                    "Host CPU time busy and waiting for I/O. High I/O wait with idle GPUs: storage is the "
                    "bottleneck (NVMe scheduler none, local cache, more readers). Steal (VMs): time the "
                    "hypervisor gave this VM's vCPUs to others; a launch-bound job slows with it.",
                    max=1,
                ),
                PanelSpec(
                    "Disk throughput",
                    (
                        Query(f"dgxperf_host_disk_read_bytes_per_second{host}", "{{Hostname}} {{disk}} read"),
                        Query(
                            f"dgxperf_host_disk_write_bytes_per_second{host}", "{{Hostname}} {{disk}} write"
                        ),
                    ),
                    "Bps",
                    "Bytes per second per block device.",
                ),
                PanelSpec(
                    "Disk busy",
                    (Query(f"dgxperf_host_disk_busy_ratio{host}", "{{Hostname}} {{disk}}"),),
                    "percentunit",
                    "Share of time each device had I/O in flight (iostat %util).",
                    max=1,
                ),
                PanelSpec(
                    "Network throughput",
                    (
                        Query(
                            f"dgxperf_host_network_receive_bytes_per_second{host}",
                            "{{Hostname}} {{interface}} rx",
                        ),
                        Query(
                            f"dgxperf_host_network_transmit_bytes_per_second{host}",
                            "{{Hostname}} {{interface}} tx",
                        ),
                    ),
                    "Bps",
                    "Bytes per second per network interface.",
                ),
                PanelSpec(
                    "Host memory used",
                    (
                        Query(
                            f"dgxperf_host_memory_used_bytes{host} / dgxperf_host_memory_total_bytes{host}",
                            "{{Hostname}}",
                        ),
                    ),
                    "percentunit",
                    "Host memory in use. Near 1 with many DataLoader workers: fewer workers or smaller "
                    "prefetch.",
                    max=1,
                    width=24,
                ),
            ],
        ),
        (
            "Training (dgxperf train --train-metrics)",
            [
                PanelSpec(
                    "Training throughput",
                    (Query(f"dgxperf_train_samples_per_second{host}", "{{Hostname}} samples/s"),),
                    "short",
                    "Samples per second of the last logged window, all ranks (OUT/metrics.jsonl).",
                    width=8,
                ),
                PanelSpec(
                    "Real tokens per second",
                    (Query(f"dgxperf_train_real_tokens_per_second{host}", "{{Hostname}} tokens/s"),),
                    "short",
                    "Non-padding tokens per second: what the model really learns from.",
                    width=8,
                ),
                PanelSpec(
                    "MFU",
                    (Query(f"dgxperf_train_mfu_ratio{host}", "{{Hostname}} MFU"),),
                    "percentunit",
                    "Model FLOP utilisation against the GPUs' dense bf16 peak.",
                    max=1,
                    width=8,
                ),
                PanelSpec(
                    "Loss and dev accuracy",
                    (
                        Query(f"dgxperf_train_loss{host}", "{{Hostname}} loss"),
                        Query(f"dgxperf_train_dev_accuracy{host}", "{{Hostname}} dev accuracy"),
                    ),
                    "short",
                    "Training loss of the last window and dev accuracy after the last epoch.",
                    width=24,
                ),
            ],
        ),
        (
            "Exporter",
            [
                PanelSpec(
                    "Sample age",
                    (Query(f"dgxperf_exporter_sample_age_seconds{host}", "{{Hostname}}"),),
                    "s",
                    "Seconds since the exporter's sampler published the sample a scrape shows; it grows "
                    "when sampling is stuck.",
                ),
                PanelSpec(
                    "Sampling CPU",
                    (
                        Query(
                            f"rate(dgxperf_exporter_sampling_cpu_seconds_total{host}[$__rate_interval])",
                            "{{Hostname}}",
                        ),
                    ),
                    "percentunit",
                    "Share of one CPU core the sampler uses (target: at most 1% per GPU at 1 Hz).",
                ),
            ],
        ),
    ]


def _panel_json(spec: PanelSpec, panel_id: int, x: int, y: int, height: int) -> dict[str, Any]:
    panel: dict[str, Any] = {
        "id": panel_id,
        "type": spec.kind,
        "title": spec.title,
        "description": spec.description,
        "gridPos": {"h": height, "w": spec.width, "x": x, "y": y},
    }
    if spec.kind == "text":
        panel["options"] = {"mode": "markdown", "content": spec.text}
        return panel
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    steps += [{"color": colour, "value": value} for value, colour in spec.thresholds]
    defaults: dict[str, Any] = {"unit": spec.unit, "thresholds": {"mode": "absolute", "steps": steps}}
    if spec.min is not None:
        defaults["min"] = spec.min
    if spec.max is not None:
        defaults["max"] = spec.max
    if spec.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10,
            "showPoints": "never",
            "spanNulls": False,
            "thresholdsStyle": {"mode": "line" if spec.thresholds else "off"},
        }
        panel["options"] = {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    elif spec.kind == "stat":
        panel["options"] = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "none",
            "textMode": "value_and_name",
        }
    panel["datasource"] = DS
    panel["fieldConfig"] = {"defaults": defaults, "overrides": []}
    panel["targets"] = [
        {
            "datasource": DS,
            "expr": q.expr,
            "legendFormat": q.legend,
            "range": True,
            "refId": chr(ord("A") + i),
        }
        for i, q in enumerate(spec.queries)
    ]
    return panel


def _variables(datasource: str) -> list[dict[str, Any]]:
    def query_var(name: str, label: str, query: str) -> dict[str, Any]:
        return {
            "type": "query",
            "name": name,
            "label": label,
            "datasource": DS,
            "definition": query,
            "query": {"query": query, "refId": f"{name}-values"},
            "refresh": 2,  # on time-range change: hosts and GPUs come and go
            "regex": "",
            "sort": 3,  # numerically ascending, so GPU 10 follows GPU 9
            "multi": True,
            "includeAll": True,
            "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "options": [],
            "hide": 0,
        }

    return [
        {
            "type": "datasource",
            "name": "datasource",
            "label": "Data source",
            "query": "prometheus",
            "current": {"selected": True, "text": datasource, "value": datasource},
            "options": [],
            "regex": "",
            "refresh": 1,
            "hide": 0,
        },
        # Hostname is dcgm-exporter's label too, so the same variable works over both exporters.
        query_var("Hostname", "Host", "label_values(Hostname)"),
        query_var("gpu", "GPU", 'label_values(DCGM_FI_DEV_GPU_UTIL{Hostname=~"$Hostname"}, gpu)'),
    ]


def dashboard(datasource: str = "Prometheus") -> dict[str, Any]:
    """The dashboard as Grafana's classic JSON model (import it, or provision it from a file)."""
    panels: list[dict[str, Any]] = []
    next_id = 1
    y = 0
    height = 8
    for row_title, specs in panel_specs():
        panels.append(
            {
                "id": next_id,
                "type": "row",
                "title": row_title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id += 1
        y += 1
        x = 0
        for spec in specs:
            if x + spec.width > 24:
                x, y = 0, y + height
            panels.append(_panel_json(spec, next_id, x, y, height))
            next_id += 1
            x += spec.width
        y += height
    return {
        "uid": DASHBOARD_UID,
        "title": "dgxperf — GPU training node",
        "description": "dgxperf exporter (dcgm-exporter compatible) with the DGX guides' panels.",
        "tags": ["dgxperf", "gpu", "dcgm"],
        "editable": True,
        "graphTooltip": 1,  # shared crosshair: line up GPU, host and training panels in time
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "10s",
        "timezone": "browser",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "links": [],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": {"list": _variables(datasource)},
        "panels": panels,
    }


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------

_PROMQL_KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "inf", "nan", "atan2",
}  # fmt: skip
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana variables and label matchers ignored)."""
    text = re.sub(r"\$\{[^}]*\}|\$\w+", "", expr)
    text = _STRING.sub('""', text)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = _GROUPING.sub("", text)
    names = set()
    for match in _IDENT.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in _PROMQL_KEYWORDS:
            continue
        names.add(name)
    return names


def _all_panels(panels: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for panel in panels:
        yield panel
        yield from _all_panels(panel.get("panels", ()))


def variable_expressions(dash: Mapping[str, Any]) -> list[str]:
    """The series selectors of the dashboard's ``label_values(SELECTOR, label)`` variable queries."""
    exprs = []
    for var in dash.get("templating", {}).get("list", ()):
        if var.get("type") != "query":
            continue
        query = var.get("query")
        text = query.get("query", "") if isinstance(query, Mapping) else str(query or "")
        match = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", text)
        if match:
            exprs.append(match.group(1))
    return exprs


def dashboard_expressions(dash: Mapping[str, Any]) -> list[str]:
    """Every PromQL expression of the dashboard: panel targets, then variable queries."""
    panels = _all_panels(dash.get("panels", ()))
    return [t["expr"] for p in panels for t in p.get("targets", ()) if "expr" in t] + variable_expressions(
        dash
    )


def validate_dashboard(dash: Mapping[str, Any], known_metrics: Iterable[str] | None = None) -> list[str]:
    """Problems that would make a panel wrong or empty; [] when the dashboard is sound."""
    known = set(known_metrics) if known_metrics is not None else _exported()
    problems: list[str] = []
    panels = list(_all_panels(dash.get("panels", ())))
    seen: dict[int, str] = {}
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        title = str(panel.get("title", "?"))
        pid = panel.get("id")
        if not isinstance(pid, int):
            problems.append(f"panel {title!r} has no integer id")
        elif pid in seen:
            problems.append(f"panel id {pid} used by {seen[pid]!r} and {title!r}")
        else:
            seen[pid] = title
        grid = panel.get("gridPos")
        if not isinstance(grid, Mapping) or not all(isinstance(grid.get(k), int) for k in "hwxy"):
            problems.append(f"panel {title!r} has no gridPos with integer h, w, x, y")
            continue
        if grid["x"] < 0 or grid["w"] < 1 or grid["x"] + grid["w"] > 24 or grid["h"] < 1 or grid["y"] < 0:
            problems.append(f"panel {title!r} lies outside the 24-column grid: {dict(grid)}")
        for dx in range(grid["w"]):
            for dy in range(grid["h"]):
                cell = (grid["x"] + dx, grid["y"] + dy)
                if cell in cells:
                    problems.append(f"panels {cells[cell]!r} and {title!r} overlap at {cell}")
                    break
                cells[cell] = title
            else:
                continue
            break
        if panel.get("type") not in ("row", "text") and not panel.get("targets"):
            problems.append(f"panel {title!r} has no query")
        for target in panel.get("targets", ()):
            expr = target.get("expr", "")
            if target.get("datasource", {}).get("uid") != "${datasource}":
                problems.append(f"panel {title!r}: a query does not use the ${{datasource}} variable")
            unknown = metric_names(expr) - known
            if unknown:
                problems.append(f"panel {title!r}: {sorted(unknown)} not exposed by the exporter ({expr})")
    for expr in variable_expressions(dash):
        unknown = metric_names(expr) - known
        if unknown:
            problems.append(f"variable query {expr!r} uses {sorted(unknown)}, not exposed by the exporter")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", ())}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("no ${datasource} variable of type prometheus")
    for name in ("Hostname", "gpu"):
        if name not in variables:
            problems.append(f"no ${name} variable")
    if dash.get("schemaVersion") != SCHEMA_VERSION:
        problems.append(f"schemaVersion is {dash.get('schemaVersion')}, expected {SCHEMA_VERSION}")
    return problems


# --------------------------------------------------------------------------------------------------
# Prometheus: scrape config and alert rules
# --------------------------------------------------------------------------------------------------


def prometheus_config(
    targets: Sequence[str] = ("localhost:9400",),
    job: str = DEFAULT_JOB,
    scrape_interval_s: int = 5,
    rule_files: Sequence[str] = ("alerts.yml",),
) -> dict[str, Any]:
    """A prometheus.yml (or the part to merge into yours) scraping the exporter, with the alert rules."""
    return {
        "global": {"scrape_interval": "15s", "evaluation_interval": "15s"},
        "rule_files": list(rule_files),
        "scrape_configs": [
            {
                "job_name": job,
                # The exporter samples every second; 5 s keeps the guides' second-scale swings visible
                # at a fraction of a scrape's cost (p99 under 20 ms for 8 GPUs).
                "scrape_interval": f"{scrape_interval_s}s",
                "scrape_timeout": f"{max(1, scrape_interval_s - 1)}s",
                "metrics_path": "/metrics",
                "static_configs": [{"targets": list(targets)}],
            }
        ],
    }


def _rule(alert: str, expr: str, for_: str, severity: str, summary: str, description: str) -> dict[str, Any]:
    return {
        "alert": alert,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description},
    }


def alert_rules(job: str = DEFAULT_JOB) -> dict[str, Any]:
    """Alerting rules: exporter down or stuck, XID, uncorrected ECC / row remap pending, hardware or
    thermal throttling, and GPUs idle while a `dgxperf train` job logs steps."""
    gpu_by = "Hostname, gpu, UUID"
    hw = "|".join(HW_SLOWDOWN_REASONS)
    return {
        "groups": [
            {
                "name": "dgxperf-exporter",
                "rules": [
                    _rule(
                        "DgxperfExporterDown",
                        f'up{{job="{job}"}} == 0',
                        "2m",
                        "critical",
                        "dgxperf exporter {{ $labels.instance }} is down",
                        "Prometheus cannot scrape {{ $labels.instance }}: no GPU telemetry from that node. "
                        "Check that `dgxperf exporter` still runs there and that its port is reachable.",
                    ),
                    _rule(
                        "DgxperfExporterMissing",
                        f'absent(up{{job="{job}"}})',
                        "10m",
                        "warning",
                        f"no {job} target is scraped",
                        f"Prometheus has no target for job {job}: the scrape config lost it.",
                    ),
                    _rule(
                        "DgxperfSamplerStuck",
                        "dgxperf_exporter_sample_age_seconds > 10 * dgxperf_exporter_interval_seconds + 10",
                        "2m",
                        "warning",
                        "dgxperf sampler on {{ $labels.Hostname }} is stuck",
                        "The exporter answers but its sample is {{ $value | humanizeDuration }} old: "
                        "NVML calls hang (a GPU falling off the bus?) or the recording ended.",
                    ),
                ],
            },
            {
                "name": "dgxperf-gpu-health",
                "rules": [
                    _rule(
                        "GpuXidError",
                        f"max by ({gpu_by}) (changes(DCGM_FI_DEV_XID_ERRORS[10m])) > 0"
                        f" or max by ({gpu_by}) (increase(dgxperf_xid_errors_total[10m])) > 0",
                        "0m",
                        "critical",
                        "XID error on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
                        "The driver reported an XID on GPU {{ $labels.gpu }} ({{ $labels.UUID }}) in the "
                        "last 10 minutes; DCGM_FI_DEV_XID_ERRORS holds its code. Hardware XIDs (48, 63, 64, "
                        "74, 79, 92, 94, 95) need the node drained and the GPU reset or replaced; "
                        "`dgxperf doctor --area gpu` explains the code.",
                    ),
                    _rule(
                        "GpuUncorrectableEccError",
                        f"max by ({gpu_by}) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL) > 0",
                        "0m",
                        "critical",
                        "uncorrected ECC errors on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
                        "{{ $value }} uncorrected (double-bit) ECC errors since boot: results computed on "
                        "this GPU may be wrong. Drain the node, reset the GPU, and check row remapping.",
                    ),
                    _rule(
                        "GpuRowRemapPending",
                        f"max by ({gpu_by}) (DCGM_FI_DEV_ROW_REMAP_PENDING) > 0",
                        "0m",
                        "warning",
                        "row remap pending on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
                        "A memory row remap waits for a GPU reset; until then the faulty row stays in use. "
                        "Reset the GPU when the node is idle.",
                    ),
                    _rule(
                        "GpuHardwareSlowdown",
                        f'max by ({gpu_by}, reason) (dgxperf_throttle_reason{{reason=~"{hw}"}}) == 1',
                        "1m",
                        "critical",
                        "{{ $labels.reason }} on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
                        "The hardware is holding the clocks down ({{ $labels.reason }}: over-temperature, "
                        "power-supply brake or an external slowdown signal). Check cooling, PSUs and "
                        "`nvidia-smi -q -d PERFORMANCE`.",
                    ),
                    _rule(
                        "GpuThermalThrottling",
                        f'max by ({gpu_by}) (dgxperf_throttle_reason{{reason="sw_thermal_slowdown"}}) == 1',
                        "5m",
                        "warning",
                        "thermal throttling on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
                        "The driver lowers clocks to keep the GPU under its temperature target; training "
                        "slows. Check airflow and DCGM_FI_DEV_GPU_TEMP / DCGM_FI_DEV_MEMORY_TEMP.",
                    ),
                ],
            },
            {
                "name": "dgxperf-training",
                "rules": [
                    _rule(
                        "GpuIdleWhileTraining",
                        "avg by (Hostname) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m])) < 30"
                        " and on (Hostname) changes(dgxperf_train_step[10m]) > 0",
                        "5m",
                        "warning",
                        "GPUs on {{ $labels.Hostname }} mostly idle while training runs",
                        "A `dgxperf train` job logs steps but its GPUs averaged {{ $value | humanize }}% "
                        "utilisation over 5 minutes: the input pipeline or storage starves them (guide A "
                        "§6.1). Try more DataLoader workers, pin_memory, and look at host I/O wait.",
                    ),
                ],
            },
        ]
    }


def alert_expressions(rules: Mapping[str, Any]) -> list[str]:
    return [str(r["expr"]) for g in rules.get("groups", ()) for r in g.get("rules", ())]


def _yaml(data: Any, header: str) -> str:
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return header + body


def write_grafana(
    out_dir: Path,
    datasource: str = "Prometheus",
    targets: Sequence[str] = ("localhost:9400",),
    job: str = DEFAULT_JOB,
    scrape_interval_s: int = 5,
) -> list[Path]:
    """Write dashboard.json, prometheus.yml and alerts.yml into ``out_dir``; return their paths.

    The dashboard is validated first (:func:`validate_dashboard`); a problem raises ValueError and
    nothing is written, so a broken dashboard never reaches a Grafana.
    """
    dash = dashboard(datasource)
    problems = validate_dashboard(dash)
    rules = alert_rules(job)
    known = _exported() | {"up"}
    for expr in alert_expressions(rules):
        unknown = metric_names(expr) - known
        if unknown:
            problems.append(f"alert rule {expr!r} uses {sorted(unknown)}, not exposed by the exporter")
    if problems:
        raise ValueError("generated Grafana/Prometheus files are inconsistent: " + "; ".join(problems))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "dashboard.json", out_dir / "prometheus.yml", out_dir / "alerts.yml"]
    paths[0].write_text(json.dumps(dash, indent=2, ensure_ascii=False) + "\n")
    paths[1].write_text(
        _yaml(
            prometheus_config(targets, job, scrape_interval_s, ("alerts.yml",)),
            "# Written by `dgxperf grafana`: merge the scrape job into your prometheus.yml, or run\n"
            "# `prometheus --config.file=prometheus.yml` from this folder. Check: promtool check config.\n",
        )
    )
    paths[2].write_text(
        _yaml(
            rules,
            "# Written by `dgxperf grafana`: alerting rules over dgxperf exporter (dcgm-exporter\n"
            "# compatible) metrics. Check: promtool check rules alerts.yml\n",
        )
    )
    return paths
