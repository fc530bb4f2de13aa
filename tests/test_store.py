"""The run store against real SQLite files: round trips, refusals, comparison and concurrent writers."""

from __future__ import annotations

import multiprocessing
import os
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dgxperf.store import (
    MISSING,
    STORE_SCHEMA_VERSION,
    RunRecord,
    RunStore,
    StoreError,
    compare,
    default_store_path,
    flatten,
)

FINGERPRINT: dict[str, Any] = {
    "hostname": "dgx-01",
    "nvml": {"driver_version": "550.54.15", "gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}]},
    "software": {"torch": "2.4.0"},
}


def save_run(store: RunStore, command: str = "doctor", hostname: str = "dgx-01", **overrides: Any) -> int:
    fields: dict[str, Any] = {
        "command": command,
        "schema": "dgxperf.doctor/1",
        "status": "ok",
        "fingerprint": {**FINGERPRINT, "hostname": hostname},
        "result": {"findings": []},
        "argv": ["dgxperf", *command.split()],
        "tool_version": "0.1.0",
    }
    fields.update(overrides)
    return store.save(**fields)


def record(command: str, result: dict[str, Any], fingerprint: dict[str, Any] | None = None) -> RunRecord:
    return RunRecord(
        id=1,
        created_at="2024-06-01T12:00:00.000Z",
        command=command,
        schema="dgxperf.doctor/1",
        status="ok",
        hostname="dgx-01",
        fingerprint=fingerprint if fingerprint is not None else dict(FINGERPRINT),
        result=result,
        argv=[],
        tool_version="0.1.0",
        summary="",
    )


# -- where the store lives -----------------------------------------------------------------------------


def test_default_path_prefers_dgxperf_home() -> None:
    env = {"DGXPERF_HOME": "/data/dgx", "XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}
    assert default_store_path(env) == Path("/data/dgx/runs.sqlite")


def test_default_path_uses_xdg_data_home() -> None:
    env = {"XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}
    assert default_store_path(env) == Path("/xdg/dgxperf/runs.sqlite")


def test_default_path_falls_back_to_local_share() -> None:
    assert default_store_path({"HOME": "/home/u"}) == Path("/home/u/.local/share/dgxperf/runs.sqlite")
    # Empty values count as unset (XDG spec); without HOME the user's home directory is used.
    assert default_store_path({"DGXPERF_HOME": "", "XDG_DATA_HOME": ""}) == (
        Path.home() / ".local/share/dgxperf/runs.sqlite"
    )


# -- round trips ------------------------------------------------------------------------------------------


def test_creates_parent_directories_schema_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "runs.sqlite"
    with RunStore(path):
        pass
    assert path.is_file()
    conn = sqlite3.connect(path)
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    finally:
        conn.close()
    assert meta == {"app": "dgxperf", "schema_version": str(STORE_SCHEMA_VERSION)}
    assert mode == "wal"
    assert "runs_hostname" in indexes


def test_save_get_round_trip(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    result = {"findings": [{"id": "gpu.persistence", "status": "fail", "evidence": {"mode": "Disabled"}}]}
    fingerprint = {"hostname": "nœud-ü", "nvml": {"gpus": [{"name": "NVIDIA H200", "memory_mib": 143771}]}}
    run_id = store.save(
        command="doctor",
        schema="dgxperf.doctor/1",
        status="failed",
        fingerprint=fingerprint,
        result=result,
        argv=["dgxperf", "doctor", "--json"],
        tool_version="0.1.0",
        summary="3 fail,\n 2 warn",
    )
    got = store.get(run_id)
    assert got.id == run_id
    assert (got.command, got.schema, got.status) == ("doctor", "dgxperf.doctor/1", "failed")
    assert got.hostname == "nœud-ü"
    assert got.fingerprint == fingerprint
    assert got.result == result
    assert got.argv == ["dgxperf", "doctor", "--json"]
    assert got.tool_version == "0.1.0"
    assert got.summary == "3 fail, 2 warn"  # one line for listings
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", got.created_at)
    assert got.to_json()["result"] == result
    # JSON is stored readable (sorted keys, UTF-8 kept) for the sqlite3 shell and json_extract.
    conn = sqlite3.connect(tmp_path / "runs.sqlite")
    try:
        (text,) = conn.execute("SELECT fingerprint FROM runs WHERE id = ?", (run_id,)).fetchone()
    finally:
        conn.close()
    assert text.index('"hostname"') < text.index('"nvml"')
    assert "nœud-ü" in text


def test_list_newest_first_with_filters_and_limit(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    ids = [
        save_run(store, "doctor", "dgx-01"),
        save_run(store, "bench gemm", "dgx-01"),
        save_run(store, "doctor", "dgx-02"),
        save_run(store, "bench gemm", "dgx-02"),
        save_run(store, "doctor", "dgx-01"),
    ]
    assert len(set(ids)) == 5
    assert [r.id for r in store.list()] == ids[::-1]
    assert [r.id for r in store.list(limit=2)] == [ids[4], ids[3]]
    assert [r.id for r in store.list(command="doctor")] == [ids[4], ids[2], ids[0]]
    assert [r.id for r in store.list(hostname="dgx-02")] == [ids[3], ids[2]]
    assert [r.id for r in store.list(command="bench gemm", hostname="dgx-01")] == [ids[1]]
    assert store.list(command="train") == []
    assert len(store.list(limit=None)) == 5
    with pytest.raises(ValueError):
        store.list(limit=0)


def test_latest(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    assert store.latest("doctor") is None
    first = save_run(store, "doctor")
    save_run(store, "bench gemm")
    latest = store.latest("doctor")
    assert latest is not None and latest.id == first
    second = save_run(store, "doctor")
    latest = store.latest("doctor")
    assert latest is not None and latest.id == second


def test_reopened_store_keeps_runs(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as store:
        run_id = save_run(store)
    with RunStore(path) as again:
        assert again.get(run_id).id == run_id
        assert save_run(again) > run_id


def test_rejects_bad_status_and_unserialisable_result(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    with pytest.raises(ValueError, match="status"):
        save_run(store, status="passed")
    with pytest.raises(ValueError, match="to_jsonable"):
        save_run(store, result={"when": object()})
    assert store.list() == []


# -- refusals ---------------------------------------------------------------------------------------------


def test_unknown_id(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    save_run(store)
    with pytest.raises(StoreError, match=r"no run with id 999 .*dgxperf runs list"):
        store.get(999)


def test_non_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.write_text("these are my notes, not a database\n" * 20)
    with pytest.raises(StoreError, match=r"not a dgxperf run store.*DGXPERF_HOME") as info:
        RunStore(path)
    assert not isinstance(info.value, sqlite3.Error)
    assert path.read_text().startswith("these are my notes")  # left untouched


def test_foreign_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE songs (title TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a dgxperf run store"):
        RunStore(path)
    conn = sqlite3.connect(path)
    try:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    finally:
        conn.close()
    assert mode == "delete"  # a foreign database is not converted to WAL


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as store:
        save_run(store)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(STORE_SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"newer dgxperf.*upgrade dgxperf"):
        RunStore(path)


def test_directory_that_cannot_be_created(tmp_path: Path) -> None:
    # A regular file where a directory should be fails for root as well as for a user.
    (tmp_path / "afile").write_text("")
    with pytest.raises(StoreError, match=r"cannot create the directory.*DGXPERF_HOME"):
        RunStore(tmp_path / "afile" / "runs.sqlite")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_directory(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="writable"):
            RunStore(locked / "runs.sqlite")
    finally:
        locked.chmod(0o700)


def test_closed_store_refuses_use(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite") as store:
        save_run(store)
    with pytest.raises(StoreError, match="closed"):
        store.list()


# -- comparison -------------------------------------------------------------------------------------------


def test_flatten_keys_lists_by_id_name_or_position() -> None:
    flat = flatten(
        {
            "findings": [{"id": "gpu.ecc", "status": "pass"}, {"id": "os.swap", "status": "warn"}],
            "gpus": [{"name": "GPU-a", "temp": 40}, {"name": "GPU-b", "temp": 41}],
            "same_name": [{"name": "H200", "temp": 40}, {"name": "H200", "temp": 41}],
            "plain": [1, 2],
            "empty": {},
            "none": [],
        }
    )
    assert flat == {
        "findings[gpu.ecc].id": "gpu.ecc",
        "findings[gpu.ecc].status": "pass",
        "findings[os.swap].id": "os.swap",
        "findings[os.swap].status": "warn",
        "gpus[GPU-a].name": "GPU-a",
        "gpus[GPU-a].temp": 40,
        "gpus[GPU-b].name": "GPU-b",
        "gpus[GPU-b].temp": 41,
        "same_name[0].name": "H200",
        "same_name[0].temp": 40,
        "same_name[1].name": "H200",
        "same_name[1].temp": 41,
        "plain[0]": 1,
        "plain[1]": 2,
        "empty": {},
        "none": [],
    }


def test_compare_doctor_results() -> None:
    a = record(
        "doctor",
        {
            "findings": [
                {"id": "gpu.persistence", "status": "fail"},
                {"id": "os.swap", "status": "warn"},
                {"id": "stack.nccl", "status": "pass"},
            ]
        },
    )
    # Reordered, one fixed, one gone, one new: items are matched by id, not by position.
    b = record(
        "doctor",
        {
            "findings": [
                {"id": "stack.nccl", "status": "pass"},
                {"id": "gpu.persistence", "status": "pass"},
                {"id": "topo.numa", "status": "warn"},
            ]
        },
        fingerprint={**FINGERPRINT, "nvml": {**FINGERPRINT["nvml"], "driver_version": "560.28.03"}},
    )
    diff = compare(a, b)
    assert diff.same_command and diff.same_schema
    assert diff.fingerprint_diff == [("nvml.driver_version", "550.54.15", "560.28.03")]
    assert diff.result_diff == [
        ("findings[gpu.persistence].status", "fail", "pass", None),
        ("findings[os.swap].id", "os.swap", MISSING, None),
        ("findings[os.swap].status", "warn", MISSING, None),
        ("findings[topo.numa].id", MISSING, "topo.numa", None),
        ("findings[topo.numa].status", MISSING, "warn", None),
    ]
    as_json = diff.to_json()
    assert as_json["result_diff"][1] == {
        "key": "findings[os.swap].id",
        "a": "os.swap",
        "relative_change": None,
    }


def test_compare_numeric_results() -> None:
    a = record(
        "bench gemm",
        {
            "tflops": 400.0,
            "peak_fraction": 0.5,
            "iters": 100,
            "zero": 0,
            "label": "x",
            "flag": True,
            "gpus": [{"name": "g0", "tflops": 200}],
        },
    )
    b = record(
        "bench gemm",
        {
            "tflops": 500.0,
            "peak_fraction": 0.5,
            "iters": 100.0,
            "zero": 3,
            "label": "y",
            "flag": 1,
            "gpus": [{"name": "g0", "tflops": 150}],
        },
    )
    diff = compare(a, b)
    assert diff.fingerprint_diff == []
    by_key = {key: (x, y, rel) for key, x, y, rel in diff.result_diff}
    # Unchanged values (100 and 100.0 are the same reading) are not listed.
    assert set(by_key) == {"tflops", "zero", "label", "flag", "gpus[g0].tflops"}
    assert by_key["tflops"][2] == pytest.approx(0.25)
    assert by_key["gpus[g0].tflops"][2] == pytest.approx(-0.25)
    assert by_key["zero"] == (0, 3, None)  # no relative change from zero
    assert by_key["label"] == ("x", "y", None)
    assert by_key["flag"] == (True, 1, None)  # a flag that became a number is a change, not a ratio


def test_compare_different_commands() -> None:
    diff = compare(record("doctor", {"x": 1}), record("bench gemm", {"x": 1}))
    assert not diff.same_command
    assert diff.result_diff == []


# -- concurrency ------------------------------------------------------------------------------------------

WORKERS = 6
RUNS_PER_WORKER = 40


def _concurrent_writer(path: str, worker: int, start: Any) -> None:
    # Each process opens its own RunStore, as each torchrun rank would.
    store = RunStore(Path(path))
    start.wait()
    for i in range(RUNS_PER_WORKER):
        store.save(
            command="bench gemm",
            schema="dgxperf.bench/1",
            status="ok",
            fingerprint={"hostname": f"rank-{worker}"},
            result={"worker": worker, "i": i, "tflops": 400.0 + i},
            argv=["dgxperf", "bench", "gemm"],
            tool_version="0.1.0",
        )


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    # The processes also race to create the store: none of them finds it existing.
    procs = [ctx.Process(target=_concurrent_writer, args=(str(path), w, start)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    time.sleep(0.5)  # let the interpreters come up, so that the writes overlap
    t0 = time.monotonic()
    start.set()
    for p in procs:
        p.join(timeout=60)
    elapsed = time.monotonic() - t0
    assert [p.exitcode for p in procs] == [0] * WORKERS

    conn = sqlite3.connect(path)
    try:
        (check,) = conn.execute("PRAGMA integrity_check").fetchone()
        rows = conn.execute("SELECT id, result FROM runs").fetchall()
    finally:
        conn.close()
    assert check == "ok"
    assert len(rows) == WORKERS * RUNS_PER_WORKER
    assert len({r[0] for r in rows}) == len(rows)
    runs = RunStore(path).list(limit=None)
    assert sorted((r.result["worker"], r.result["i"]) for r in runs) == [
        (w, i) for w in range(WORKERS) for i in range(RUNS_PER_WORKER)
    ]
    assert {r.hostname for r in runs} == {f"rank-{w}" for w in range(WORKERS)}
    print(f"{len(rows)} rows from {WORKERS} processes in {elapsed:.2f} s")


def test_threads_can_share_one_store(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for _ in range(25):
                save_run(store)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.list(limit=None)) == 100
