"""A real Prometheus scrapes the exporter fed by the H200 recording; the series read back through its HTTP
query API carry the recording's values and dcgm-exporter's labels.

Needs Debian's `prometheus` (CI installs it; see .ci/run). Both processes are stopped in every case.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from dgxperf.monitor import grafana
from dgxperf.monitor.exporter import DCGM_FIELDS, Exporter

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "monitor" / "h200-derived-gemm.jsonl"
PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
)

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus is not installed (CI installs Debian's prometheus package)"
)
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api(base: str, path: str, **params: Any) -> Any:
    url = f"{base}{path}?{urllib.parse.urlencode(params)}" if params else f"{base}{path}"
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]


def wait_for(probe: Callable[[], T | None], timeout_s: float, what: str, log: Path | None = None) -> T:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            result = probe()
        except OSError as exc:  # Prometheus not listening yet
            result, last = None, exc
        if result:
            return result
        time.sleep(0.2)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {last})\n{tail}")


@pytest.fixture
def recording() -> tuple[Any, list[Any]]:
    from dgxperf.monitor.sources import read_recording

    header, samples, _warnings = read_recording(FIXTURE)
    assert samples
    return header, samples


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    from dgxperf.monitor.sources import RecordedSource

    # The recording in loop mode, sampled 4 times a second: Prometheus sees it change between scrapes.
    exp = Exporter(RecordedSource(FIXTURE, speed=0.0, loop=True), "127.0.0.1:0", 0.25).start()
    try:
        yield exp
    finally:
        exp.close()


@pytest.fixture
def prometheus(tmp_path: Path, exporter: Exporter) -> Iterator[str]:
    assert PROMETHEUS is not None
    host, port = exporter.address
    config = grafana.prometheus_config(targets=[f"{host}:{port}"], scrape_interval_s=1)
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(grafana.alert_rules(), sort_keys=False))
    web = free_port()
    log = tmp_path / "prometheus.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{web}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    base = f"http://127.0.0.1:{web}"
    try:
        wait_for(lambda: proc.poll() is None and api(base, "/api/v1/status/buildinfo"), 20, "Prometheus", log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def close_to_one_of(value: float, candidates: set[float]) -> bool:
    return any(math.isclose(value, c, rel_tol=1e-9, abs_tol=1e-12) for c in candidates)


def test_prometheus_reads_back_the_recording(
    prometheus: str, exporter: Exporter, recording: tuple[Any, list[Any]], tmp_path: Path
) -> None:
    header, samples = recording
    log = tmp_path / "prometheus.log"
    started = time.time()

    def target_up() -> Any:
        targets = api(prometheus, "/api/v1/targets")["activeTargets"]
        return targets and targets[0]["health"] == "up" and targets[0]

    target = wait_for(target_up, 20, "the exporter target to be up", log)
    assert target["labels"]["job"] == grafana.DEFAULT_JOB

    def util_series() -> Any:
        return api(prometheus, "/api/v1/query", query="DCGM_FI_DEV_GPU_UTIL")["result"]

    result = wait_for(util_series, 15, "DCGM_FI_DEV_GPU_UTIL in Prometheus", log)
    info = header.gpus[0]
    host, port = exporter.address
    assert len(result) == len(header.gpus) == 1
    assert result[0]["metric"] == {
        "__name__": "DCGM_FI_DEV_GPU_UTIL",
        "gpu": str(info.index),
        "UUID": info.uuid,
        "pci_bus_id": info.pci_bus_id,
        "device": f"nvidia{info.index}",
        "modelName": info.name,
        "Hostname": header.hostname,
        "instance": f"{host}:{port}",
        "job": grafana.DEFAULT_JOB,
    }

    # Every DCGM field the recording holds reaches Prometheus in DCGM's unit, with recorded values only.
    # The fixture's phases (idle, GEMM, copy) carry different metrics, and a metric absent from a sample
    # is absent from that scrape (Prometheus marks it stale), so points are read over the whole run.
    end = time.time()
    checked = 0
    for field in DCGM_FIELDS:
        recorded = {
            g.metrics[field.key] * field.scale for s in samples for g in s.gpus if field.key in g.metrics
        }
        points = api(
            prometheus, "/api/v1/query_range", query=field.name, start=started - 60, end=end + 1, step=0.25
        )["result"]
        if not recorded:
            assert points == [], f"{field.name} should be absent: the recording never has {field.key}"
            continue
        in_every_sample = all(field.key in g.metrics for s in samples for g in s.gpus)
        if not points:
            assert not in_every_sample, f"{field.name} is in every sample but never reached Prometheus"
            continue
        assert len(points) == 1 and points[0]["metric"]["UUID"] == info.uuid, field.name
        for _, value in points[0]["values"]:
            assert close_to_one_of(float(value), recorded), (
                f"{field.name}={value}: not a recorded {field.key}"
            )
        checked += 1
    assert checked >= 10  # the H200 recording has plain NVML and GPM metrics

    # The counters keep dcgm-exporter's names and Prometheus files them as counters.
    meta = api(prometheus, "/api/v1/metadata", metric="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    if meta:
        assert meta["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][0]["type"] == "counter"
        assert "mJ" in meta["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][0]["help"]
    meta = api(prometheus, "/api/v1/metadata", metric="DCGM_FI_PROF_SM_ACTIVE")
    assert not meta or meta["DCGM_FI_PROF_SM_ACTIVE"][0]["type"] == "gauge"

    # Over several scrapes the looping replay moves on, and every point is a recorded value.
    recorded_util = {
        g.metrics["gpu_util_pct"] for s in samples for g in s.gpus if "gpu_util_pct" in g.metrics
    }

    def several_points() -> Any:
        now = time.time()
        data = api(
            prometheus, "/api/v1/query_range", query="DCGM_FI_DEV_GPU_UTIL", start=now - 30, end=now, step=0.5
        )["result"]
        return data and len({ts for ts, _ in data[0]["values"]}) >= 3 and data[0]["values"]

    points = wait_for(several_points, 15, "three scrapes of DCGM_FI_DEV_GPU_UTIL", log)
    assert all(close_to_one_of(float(v), recorded_util) for _, v in points)

    # dgxperf's extras and self-metrics arrive too, labelled with the recording's host.
    age = api(prometheus, "/api/v1/query", query="dgxperf_exporter_samples_total")["result"]
    assert age and age[0]["metric"]["Hostname"] == header.hostname and float(age[0]["value"][1]) >= 1
    reasons = api(prometheus, "/api/v1/query", query="dgxperf_throttle_reason")["result"]
    assert {r["metric"]["reason"] for r in reasons} >= {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown"}

    # Prometheus loaded the alert rules `dgxperf grafana` writes.
    groups = api(prometheus, "/api/v1/rules")["groups"]
    assert sum(len(g["rules"]) for g in groups) == 9
