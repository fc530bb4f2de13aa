from __future__ import annotations

import pytest

from dgxperf.bench import memory, pcie
from dgxperf.bench.base import BenchError
from dgxperf.bench.device import open_device
from dgxperf.bench.suite import summarise


def test_link_peak_per_direction() -> None:
    assert pcie.link_peak_gbs(5, 16) == pytest.approx(63.0, rel=1e-3)
    assert pcie.link_peak_gbs(4, 16) == pytest.approx(31.5, rel=1e-3)
    assert pcie.link_peak_gbs(3, 16) == pytest.approx(15.75, rel=1e-3)
    assert pcie.link_peak_gbs(None, 16) is None and pcie.link_peak_gbs(5, None) is None


def test_memory_on_cpu_counts_read_plus_write_for_copy() -> None:
    cpu = open_device("cpu")
    results = memory.run(cpu, 8 << 20, batches=3)
    kinds = {m.params["kind"]: m for m in results}
    assert set(kinds) == {"copy", "read", "write"}
    assert kinds["copy"].params["bytes_moved"] == 2 * (8 << 20)
    assert kinds["read"].params["bytes_moved"] == 8 << 20
    copy = kinds["copy"]
    assert copy.value == pytest.approx(copy.params["bytes_moved"] / copy.timing.median_s / 1e9)
    summary = summarise(results)["memory"]
    assert summary["copy"]["gbs"] == round(copy.value, 1)
    with pytest.raises(BenchError):
        memory.measure("triad", 1 << 20, cpu, batches=3)
