"""The dgxperf run store: every command's result, kept in SQLite with the fingerprint of the node it ran on.

``dgxperf runs list|show|compare`` read it back; ``report`` and ``advise`` use it to put today's numbers next
to last week's. The store is one SQLite file (stdlib :mod:`sqlite3` only)::

    meta(key TEXT PRIMARY KEY, value TEXT)       -- ("app", "dgxperf"), ("schema_version", "1")
    runs(id, created_at, command, schema, status, hostname, fingerprint, result, argv, tool_version, summary)

``fingerprint``, ``result`` and ``argv`` are JSON text (sorted keys, UTF-8 kept as is), so that a row can be
read with the ``sqlite3`` shell and ``json_extract`` as well as with this module.

Where the file lives is decided by :func:`default_store_path` from an environment the caller passes in: the
library never reads ``os.environ`` itself. Put the store on a local disk: SQLite's WAL mode, which the store
uses for concurrent writers, needs shared memory that network file systems (NFS, Lustre) do not provide.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import datetime as dt
import json
import math
import random
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

__all__ = [
    "STORE_SCHEMA_VERSION",
    "Comparison",
    "RunRecord",
    "RunStore",
    "StoreError",
    "compare",
    "default_store_path",
    "flatten",
]

T = TypeVar("T")

#: Version of the table layout. Bump it (and add a migration in ``RunStore._check_or_create``) when the
#: layout changes; a store written by a newer dgxperf is refused rather than misread.
STORE_SCHEMA_VERSION = 1

STORE_FILENAME = "runs.sqlite"
RUN_STATUSES = ("ok", "failed", "incomplete", "error")

_APP_ID = "dgxperf"
_DEFAULT_TIMEOUT_S = 30.0

_SCHEMA_SQL = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # AUTOINCREMENT so that an id, once shown to a person ("dgxperf runs show 12"), never names another run,
    # even after rows were deleted by hand.
    """CREATE TABLE IF NOT EXISTS runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        command TEXT NOT NULL,
        schema TEXT NOT NULL,
        status TEXT NOT NULL,
        hostname TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        result TEXT NOT NULL,
        argv TEXT NOT NULL,
        tool_version TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT ''
    )""",
    # Listings filter on one of these and sort newest first, so the id is part of each index.
    "CREATE INDEX IF NOT EXISTS runs_hostname ON runs (hostname, id)",
    "CREATE INDEX IF NOT EXISTS runs_command ON runs (command, id)",
)

_COLUMNS = (
    "id, created_at, command, schema, status, hostname, fingerprint, result, argv, tool_version, summary"
)


class StoreError(Exception):
    """A run store that cannot be opened, read or written; the message says what to do about it."""


def default_store_path(env: Mapping[str, str]) -> Path:
    """Where the run store lives: ``$DGXPERF_HOME/runs.sqlite``, else the XDG data directory.

    ``env`` is the process environment, passed in by the CLI. Empty values count as unset, as the XDG base
    directory specification asks.
    """
    home = env.get("DGXPERF_HOME")
    if home:
        return Path(home).expanduser() / STORE_FILENAME
    xdg = env.get("XDG_DATA_HOME")
    if xdg:
        return Path(xdg).expanduser() / "dgxperf" / STORE_FILENAME
    # Path.home() falls back to the password database when HOME is unset, so HOME from env wins when given.
    user_home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return user_home / ".local" / "share" / "dgxperf" / STORE_FILENAME


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One saved run, as read back from the store."""

    id: int
    created_at: str
    command: str
    schema: str
    status: str
    hostname: str
    fingerprint: dict[str, Any]
    result: dict[str, Any]
    argv: list[str]
    tool_version: str
    summary: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class RunStore:
    """The SQLite file holding every saved run.

    Concurrency: each operation opens its own short-lived connection instead of keeping one per store.
    A connection must never cross a ``fork()`` (SQLite's locks are per process and a forked copy corrupts
    the file), training launchers fork freely, and a long-lived connection would also pin an old WAL
    snapshot; opening a connection costs well under a millisecond, nothing next to what is being recorded.
    The same choice makes a ``RunStore`` safe to share between threads without a lock of our own.

    Writers use WAL so that readers (``runs list`` while 8 ranks save) never block them, ``BEGIN IMMEDIATE``
    so that a writer takes the write lock before reading and cannot dead-lock on a lock upgrade, SQLite's
    busy timeout to wait for a lock, and our own retry with jittered backoff for the ``SQLITE_BUSY`` cases
    where SQLite returns at once without calling its busy handler. Both are bounded by ``timeout_s``.
    """

    def __init__(self, path: Path, *, timeout_s: float = _DEFAULT_TIMEOUT_S) -> None:
        self._path = Path(path)
        self._timeout_s = timeout_s
        self._closed = False
        if self._path.is_dir():
            raise StoreError(
                f"{self._path} is a directory, not a run store file; point DGXPERF_HOME at the directory "
                f"and dgxperf uses {STORE_FILENAME} inside it"
            )
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the directory for the run store {self._path}: {exc.strerror or exc}; "
                "choose a writable location with DGXPERF_HOME"
            ) from exc
        self._check_or_create()

    @property
    def path(self) -> Path:
        return self._path

    # -- lifecycle ---------------------------------------------------------------------------------------

    def close(self) -> None:
        # Connections are per operation, so there is nothing to release; closing only stops further use.
        self._closed = True

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- public API --------------------------------------------------------------------------------------

    def save(
        self,
        *,
        command: str,
        schema: str,
        status: str,
        fingerprint: Mapping[str, Any],
        result: Mapping[str, Any],
        argv: builtins.list[str],
        tool_version: str,
        summary: str = "",
    ) -> int:
        """Save one run and return its id. ``fingerprint`` and ``result`` must be JSON-serialisable."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, not {status!r}")
        hostname = _hostname_of(fingerprint)
        row = (
            _utc_now(),
            command,
            schema,
            status,
            hostname,
            _dumps(fingerprint, "fingerprint"),
            _dumps(result, "result"),
            _dumps([str(a) for a in argv], "argv"),
            tool_version,
            # A listing shows one line per run; a multi-line summary would break the table.
            " ".join(summary.split()),
        )

        def insert(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "INSERT INTO runs (created_at, command, schema, status, hostname, fingerprint, result, argv,"
                " tool_version, summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            run_id = cur.lastrowid
            assert run_id is not None  # an INSERT into a rowid table always sets it
            return run_id

        return self._run(insert, write=True)

    def get(self, run_id: int) -> RunRecord:
        """The run with this id; :class:`StoreError` if there is none."""
        rows = self._run(
            lambda conn: conn.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (int(run_id),)).fetchall(),
            write=False,
        )
        if not rows:
            raise StoreError(
                f"no run with id {run_id} in {self._path}; `dgxperf runs list` shows the saved runs and ids"
            )
        return self._record(rows[0])

    def list(
        self,
        *,
        limit: int | None = 50,
        command: str | None = None,
        hostname: str | None = None,
    ) -> builtins.list[RunRecord]:
        """Saved runs, newest first, optionally only one command's or one host's; ``limit=None`` for all."""
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be a positive number of runs or None, not {limit!r}")
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        if command is not None:
            where.append("command = ?")
            params.append(command)
        if hostname is not None:
            where.append("hostname = ?")
            params.append(hostname)
        sql = f"SELECT {_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        # Newest is the highest id, not the latest created_at: ids are handed out under the write lock, so
        # they follow commit order even when clocks of concurrent writers disagree or step.
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        rows = self._run(lambda conn: conn.execute(sql, params).fetchall(), write=False)
        return [self._record(r) for r in rows]

    def latest(self, command: str) -> RunRecord | None:
        """The most recent run of ``command``, or None if it was never saved."""
        runs = self.list(limit=1, command=command)
        return runs[0] if runs else None

    # -- internals ---------------------------------------------------------------------------------------

    def _check_or_create(self) -> None:
        # Most opens find an existing store: look without the write lock first, so that 8 ranks starting
        # at once do not queue behind each other, and so that a foreign database is never written to.
        state = self._run(self._inspect, write=False)
        if state == "missing":

            def create(conn: sqlite3.Connection) -> None:
                # Another process may have created it between our look and our lock: look again.
                if self._inspect(conn) == "missing":
                    for statement in _SCHEMA_SQL:
                        conn.execute(statement)
                    conn.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)",
                        [("app", _APP_ID), ("schema_version", str(STORE_SCHEMA_VERSION))],
                    )

            self._run(create, write=True)
        self._run(_enable_wal, write=False, in_transaction=False)

    def _inspect(self, conn: sqlite3.Connection) -> str:
        """Whether the schema is still to be created ("missing") or in place ("ok"); refuse anything else."""
        tables = {
            name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        }
        if not tables:
            return "missing"
        meta: dict[str, str] = {}
        if "meta" in tables:
            meta = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta").fetchall()}
        if meta.get("app") != _APP_ID or "runs" not in tables:
            raise StoreError(
                f"{self._path} is an SQLite database but not a dgxperf run store; move it away, or choose "
                "another location with DGXPERF_HOME"
            )
        try:
            version = int(meta.get("schema_version", ""))
        except ValueError:
            version = -1
        if version > STORE_SCHEMA_VERSION:
            raise StoreError(
                f"the run store {self._path} was written by a newer dgxperf (store schema version {version}; "
                f"this dgxperf reads version {STORE_SCHEMA_VERSION}); upgrade dgxperf, or choose another "
                "location with DGXPERF_HOME"
            )
        if version != STORE_SCHEMA_VERSION:
            # No older layout exists yet; when version 2 arrives, its migration from 1 goes here.
            raise StoreError(
                f"the run store {self._path} has an unknown schema version {meta.get('schema_version')!r}; "
                "move it away, or choose another location with DGXPERF_HOME"
            )
        return "ok"

    def _record(self, row: tuple[Any, ...]) -> RunRecord:
        run_id = int(row[0])
        try:
            fingerprint, result, argv = (json.loads(text) for text in row[6:9])
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"run {run_id} in {self._path} is damaged (its JSON does not parse: {exc}); "
                "it may have been edited by hand"
            ) from exc
        return RunRecord(
            id=run_id,
            created_at=str(row[1]),
            command=str(row[2]),
            schema=str(row[3]),
            status=str(row[4]),
            hostname=str(row[5]),
            fingerprint=fingerprint if isinstance(fingerprint, dict) else {"value": fingerprint},
            result=result if isinstance(result, dict) else {"value": result},
            argv=[str(a) for a in argv] if isinstance(argv, builtins.list) else [str(argv)],
            tool_version=str(row[9]),
            summary=str(row[10]),
        )

    def _run(
        self,
        op: Callable[[sqlite3.Connection], T],
        *,
        write: bool,
        in_transaction: bool = True,
    ) -> T:
        """Run ``op`` on a fresh connection, retrying while the database is locked, up to the timeout."""
        if self._closed:
            raise StoreError(f"the run store {self._path} is closed; open a new RunStore to use it again")
        deadline = time.monotonic() + self._timeout_s
        delay = 0.002
        while True:
            try:
                return self._run_once(op, write=write, in_transaction=in_transaction, deadline=deadline)
            except sqlite3.OperationalError as exc:
                remaining = deadline - time.monotonic()
                if _is_busy(exc) and remaining > 0:
                    # Jitter so that writers that collided do not collide again in lock-step.
                    time.sleep(min(remaining, delay * random.uniform(0.5, 1.5)))
                    delay = min(delay * 2, 0.25)
                    continue
                raise _store_error(self._path, exc, self._timeout_s) from exc
            except sqlite3.Error as exc:
                raise _store_error(self._path, exc, self._timeout_s) from exc

    def _run_once(
        self,
        op: Callable[[sqlite3.Connection], T],
        *,
        write: bool,
        in_transaction: bool,
        deadline: float,
    ) -> T:
        # isolation_level=None: the sqlite3 module must not open transactions behind our back; we issue
        # BEGIN IMMEDIATE / BEGIN ourselves so that the lock is taken where we decide.
        conn = sqlite3.connect(
            str(self._path), timeout=max(0.0, deadline - time.monotonic()), isolation_level=None
        )
        try:
            if not in_transaction:
                return op(conn)
            # A read also runs in a transaction so that it sees one consistent snapshot.
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                value = op(conn)
                conn.execute("COMMIT")
            except BaseException:
                # A failed COMMIT leaves the transaction open; roll back so nothing half-done is kept.
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
            return value
        finally:
            # Once COMMIT returned the row is durable; a failure to close must not make us retry (and
            # save the run twice), so it is ignored.
            with contextlib.suppress(sqlite3.Error):
                conn.close()


def _enable_wal(conn: sqlite3.Connection) -> None:
    # journal_mode is persistent in the file, so this writes only once per store. If the file system cannot
    # do WAL, SQLite keeps the rollback journal, which is slower for concurrent readers but just as safe.
    (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    if str(mode).lower() != "wal":
        conn.execute("PRAGMA journal_mode=WAL").fetchone()


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def _store_error(path: Path, exc: sqlite3.Error, timeout_s: float) -> StoreError:
    message = str(exc)
    lowered = message.lower()
    if "not a database" in lowered or "malformed" in lowered or "encrypted" in lowered:
        return StoreError(
            f"{path} is not a dgxperf run store (not a readable SQLite database: {message}); move it away, "
            "or choose another location with DGXPERF_HOME"
        )
    if "unable to open" in lowered or "readonly" in lowered or "read-only" in lowered:
        return StoreError(
            f"cannot write the run store {path} ({message}); check that the file and its directory are "
            "writable by you, or choose another location with DGXPERF_HOME"
        )
    if "disk is full" in lowered or "disk i/o" in lowered:
        return StoreError(f"cannot write the run store {path} ({message}); free disk space or move the store")
    if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
        return StoreError(
            f"the run store {path} stayed locked for {timeout_s:g} s ({message}); another dgxperf process "
            "may be stuck holding it, or the store is on a network file system: put it on a local disk "
            "with DGXPERF_HOME"
        )
    return StoreError(f"the run store {path} failed: {message}")


def _utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"the run's {what} is not JSON-serialisable ({exc}); convert it with dgxperf.results.to_jsonable"
        ) from exc


def _hostname_of(fingerprint: Mapping[str, Any]) -> str:
    # The snapshot layout (dgxperf.hw.snapshot) keeps the host name at the top level; older or partial
    # fingerprints may nest it under "host".
    for candidate in (fingerprint.get("hostname"), _get(fingerprint, "host", "hostname")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return ""


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


# -- comparing runs ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What differs between two runs. A key present on one side only has :data:`MISSING` on the other."""

    fingerprint_diff: list[tuple[str, Any, Any]]
    result_diff: list[tuple[str, Any, Any, float | None]]
    same_command: bool
    same_schema: bool

    def to_json(self) -> dict[str, Any]:
        """Plain JSON; a side where the key is missing is left out of its entry."""

        def entry(key: str, a: Any, b: Any) -> dict[str, Any]:
            out: dict[str, Any] = {"key": key}
            if a is not MISSING:
                out["a"] = a
            if b is not MISSING:
                out["b"] = b
            return out

        return {
            "same_command": self.same_command,
            "same_schema": self.same_schema,
            "fingerprint_diff": [entry(k, a, b) for k, a, b in self.fingerprint_diff],
            "result_diff": [entry(k, a, b) | {"relative_change": rel} for k, a, b, rel in self.result_diff],
        }


class _Missing:
    """The value on the side of a comparison where a key does not exist (distinct from a JSON null)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


def flatten(obj: Any) -> dict[str, Any]:
    """Flatten nested JSON into ``{path: leaf}``, with paths like ``gpus[0].memory.total`` or
    ``findings[gpu.persistence].status``.

    A list whose items are all dicts carrying a unique "id" (else "name") is indexed by that value, so that
    an item keeps its path when items are added, removed or reordered between two runs; any other list is
    indexed by position. Empty dicts and lists are leaves, so that "empty" differs from "absent".
    """
    out: dict[str, Any] = {}
    _flatten_into(out, "", obj)
    return out


def _flatten_into(out: dict[str, Any], prefix: str, obj: Any) -> None:
    if isinstance(obj, Mapping) and obj:
        for key, value in obj.items():
            _flatten_into(out, f"{prefix}.{key}" if prefix else str(key), value)
    elif isinstance(obj, (builtins.list, tuple)) and obj:
        labels = _stable_labels(obj)
        for label, value in zip(labels, obj, strict=True):
            _flatten_into(out, f"{prefix}[{label}]", value)
    else:
        out[prefix] = obj


def _stable_labels(items: builtins.list[Any] | tuple[Any, ...]) -> builtins.list[str]:
    if all(isinstance(item, Mapping) for item in items):
        for field in ("id", "name"):
            values = [item.get(field) for item in items]
            # bool is an int but never a meaningful id; floats print unstably.
            if all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in values):
                labels = [str(v) for v in values]
                if len(set(labels)) == len(labels):
                    return labels
    return [str(i) for i in range(len(items))]


def compare(a: RunRecord, b: RunRecord) -> Comparison:
    """What changed from run ``a`` to run ``b``: fingerprint keys and result leaves that differ.

    ``result_diff`` entries end with the relative change ``b / a - 1`` when both values are finite numbers
    and ``a`` is not zero, else None. Entries keep the order of ``a``'s result, then keys new in ``b``.
    """
    return Comparison(
        fingerprint_diff=[(k, x, y) for k, x, y in _diff(flatten(a.fingerprint), flatten(b.fingerprint))],
        result_diff=[
            (k, x, y, _relative_change(x, y)) for k, x, y in _diff(flatten(a.result), flatten(b.result))
        ],
        same_command=a.command == b.command,
        same_schema=a.schema == b.schema,
    )


def _diff(fa: dict[str, Any], fb: dict[str, Any]) -> builtins.list[tuple[str, Any, Any]]:
    keys = builtins.list(fa) + [k for k in fb if k not in fa]
    diffs = []
    for key in keys:
        x, y = fa.get(key, MISSING), fb.get(key, MISSING)
        if not _same(x, y):
            diffs.append((key, x, y))
    return diffs


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(x: Any, y: Any) -> bool:
    if _is_number(x) and _is_number(y):
        # 2 and 2.0 are the same reading; NaN is "no number" on both sides, not a change.
        return bool(x == y or (math.isnan(x) and math.isnan(y)))
    # True == 1 in Python, but a flag that became a count is a change.
    return type(x) is type(y) and bool(x == y)


def _relative_change(x: Any, y: Any) -> float | None:
    if not (_is_number(x) and _is_number(y)) or x == 0 or not (math.isfinite(x) and math.isfinite(y)):
        return None
    return float(y / x - 1.0)
