"""`dgxperf bench launch`: what issuing one small kernel costs the host. On this CPU-only machine the eager test
times PyTorch's real dispatcher on a CPU tensor; the graph test needs a GPU and says so."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from dgxperf.bench import launch
from dgxperf.bench.base import BenchError, Measurement, Timing
from dgxperf.bench.device import open_device
from dgxperf.bench.suite import BenchReport
from dgxperf.render import render_bench
from tests.test_cli import dgxperf, no_traceback
from tests.test_schemas import assert_invalid, assert_valid, schema


def test_issue_times_separate_issuing_from_finishing() -> None:
    """The host clock stops twice a batch: after the ops are issued and after the sync has waited for them,
    so an op that returns at once while its work runs on (a kernel) shows in the second time only."""
    issued_ops: list[float] = []

    def op() -> None:
        issued_ops.append(time.perf_counter())

    def sync() -> None:
        time.sleep(0.02)  # the device finishing the batch

    issued, done = launch.issue_times(op, sync, batches=3, inner=10)
    assert len(issued) == len(done) == 3 and len(issued_ops) == 40  # a warm-up batch, then three timed
    assert all(i < 1e-4 for i in issued)  # ten cheap calls
    assert all(d >= 0.02 / 10 for d in done)  # the sleep, shared over the ten ops of the batch
    with pytest.raises(BenchError, match="at least 1"):
        launch.issue_times(op, sync, batches=0, inner=10)


def test_eager_dispatch_on_the_cpu_is_a_real_measurement() -> None:
    device = open_device("cpu")
    (measured,) = launch.run(device, batches=5)
    assert measured.bench == "launch" and measured.params["kind"] == "eager" and measured.unit == "ops/s"
    assert measured.timing.batches == 5 and measured.timing.inner == launch.EAGER_INNER
    per_op_us = measured.extra["us_per_op"]
    # PyTorch's dispatcher takes about a microsecond or more an op on any CPU, and far less than a millisecond
    assert 0.1 < per_op_us < 1000
    assert measured.value == pytest.approx(1e6 / per_op_us, rel=1e-3)
    # nothing runs asynchronously on a CPU: issued is finished
    assert measured.extra["wall_us_per_op"] == pytest.approx(per_op_us, rel=0.25)
    summary = launch.summarise([measured])
    assert set(summary) == {"eager"} and summary["eager"]["us_per_op"] == per_op_us


def test_the_graph_test_needs_a_gpu() -> None:
    with pytest.raises(BenchError, match="needs a GPU"):
        launch.measure_graph(open_device("cpu"), batches=3)


def _graph_measurement() -> Measurement:
    timing = Timing(2e-6, 1.9e-6, 2.2e-6, 1.8e-6, 2.5e-6, batches=10, inner=2000)
    return Measurement(
        "launch",
        "CUDA graph of 100 kernels",
        {"kind": "graph", "op": "add_ on 1 element", "kernels_per_graph": 100, "replays_per_batch": 20},
        5e5,
        "ops/s",
        timing,
        extra={"us_per_op": 2.0, "host_us_per_replay": 6.5},
    )


def test_the_report_prints_microseconds_and_what_each_test_means() -> None:
    device = open_device("cpu")
    eager = launch.measure_eager(device, batches=3)
    report = BenchReport("launch", device, [eager, _graph_measurement()], {"batches": 3})
    console = Console(record=True, width=160)
    render_bench(console, report)
    text = console.export_text()
    assert "µs per op" in text and "a replay costs the host 6.50 µs" in text and "issued and finished" in text
    assert f"eager launch {eager.extra['us_per_op']:.1f} µs" in report.summary_line()
    document = report.to_json() | {"run_id": None}
    assert_valid("bench", document)
    assert document["summary"]["launch"]["graph"] == {"us_per_op": 2.0, "host_us_per_replay": 6.5}
    broken = json.loads(json.dumps(document))
    broken["summary"]["launch"]["cached"] = {"us_per_op": 1.0}
    assert_invalid("bench", broken)


def test_bench_launch_through_the_cli(tmp_path: Path) -> None:
    result = dgxperf("bench", "launch", "--device", "cpu", "--batches", "3", "--json", home=tmp_path)
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert_valid("bench", data)
    assert data["suite"] == "launch" and [m["name"] for m in data["measurements"]] == ["eager dispatch (CPU)"]
    assert data["summary"]["launch"]["eager"]["us_per_op"] > 0
    assert any("graph skipped" in note for note in data["notes"])
    human = dgxperf("bench", "launch", "--device", "cpu", "--batches", "3", home=tmp_path)
    assert human.returncode == 0 and "µs per op" in human.stdout and "graph skipped" in human.stdout
    assert "bench launch" in dgxperf("runs", "list", home=tmp_path).stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "launch"], "no CUDA GPU"),
        (["bench", "launch", "--device", "tpu"], "unknown device"),
        (["bench", "launch", "--device", "cpu", "--batches", "1"], "--batches"),
    ],
)
def test_bench_launch_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = dgxperf(*args, home=tmp_path)
    no_traceback(result)
    assert result.returncode == 2 and message in result.stdout + result.stderr


def test_bench_all_keeps_its_ceilings_when_the_launch_test_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from dgxperf.bench import suite

    device = open_device("cpu")
    notes: list[str] = []
    assert [m.params["kind"] for m in suite.launch_or_note(device, 3, None, notes)] == ["eager"] and not notes

    def capture_fails(*_: object, **__: object) -> list[Measurement]:
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore detail")

    monkeypatch.setattr(launch, "run", capture_fails)
    assert suite.launch_or_note(device, 3, None, notes) == []
    assert notes == ["launch skipped: CUDA error: operation not permitted when stream is capturing"]


def test_the_first_gpu_figures_fit_the_schema_and_show_what_a_graph_saves() -> None:
    """`bench launch` on a lent H100 host, once in each of three calls (the lines `host_header.sh` wrote,
    docs/benchmarks/2026-12-06-h100-speed-launch/log-host.txt): the summary as the schema has it, and what
    CUDA graphs are for, a replayed kernel several times cheaper than one issued eagerly."""
    log = Path(__file__).resolve().parents[2] / "docs/benchmarks/2026-12-06-h100-speed-launch/log-host.txt"
    prefix = "== bench launch: "
    summaries = [
        json.loads(line[len(prefix) :]) for line in log.read_text().splitlines() if line.startswith(prefix)
    ]
    assert len(summaries) == 3
    launch_schema = schema("bench")["$defs"]["summary"]["properties"]["launch"]
    for summary in summaries:
        jsonschema.validate(summary, launch_schema)
        eager, graph = summary["eager"], summary["graph"]
        # issued under the launch queue: the host's clock, not the kernel's
        assert 4 < eager["us_per_op"] < 10
        assert eager["wall_us_per_op"] >= eager["us_per_op"]
        assert graph["us_per_op"] * 3 < eager["us_per_op"]
        # one replay of 100 kernels costs the host less than issuing one kernel eagerly
        assert graph["host_us_per_replay"] < eager["us_per_op"]
