"""The run history: a SQLite database with one row per metric of every run.

Default file: reports/history.sqlite in the repository; MDSPLIT_HISTORY or
--db chooses another. Tables:

    runs(run_id INTEGER, batch, time, git_commit, hostname, cpu_model, kernel,
         cpus, experiment, source, duration_s, steps, report_dir, baseline)
    metrics(run_id, metric, value)

and the view ``results`` with one row per (run id, time, git commit, machine
(hostname, cpu model, kernel), experiment, metric, value). A run is one
experiment run once; a batch is one `reproduce` invocation, named after its
report directory and unique in the database: the table
``batches(name, report_dir, time)`` reserves each name (new_batch), and a
name already used (by another report directory of that name, or by runs of
an older history, which has no such table) gets -2, -3 ... (a name of digits
only too, as it would read as a run id). Every write is one transaction: a
run is recorded with all its metrics or not at all.

`reproduce` and `reference` open it with mode "create" (made when missing);
`history --mark-baseline` with "rw"; `history`, `check` and `compare` with
"ro" (SQLite URI mode=ro: never created, written or migrated). A file that is
not a history database is a HistoryError of one line in every mode.
"""
from __future__ import annotations

import math
import os
import platform
import socket
import sqlite3
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.paths import ROOT

DEFAULT_DB = ROOT / "reports" / "history.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    batch       TEXT,
    time        TEXT NOT NULL,
    git_commit  TEXT NOT NULL,
    hostname    TEXT NOT NULL,
    cpu_model   TEXT NOT NULL,
    kernel      TEXT NOT NULL,
    cpus        INTEGER,
    experiment  TEXT NOT NULL,
    source      TEXT NOT NULL DEFAULT 'mdsplit',
    duration_s  REAL,
    steps       INTEGER,
    report_dir  TEXT,
    baseline    INTEGER NOT NULL DEFAULT 0,
    seed        INTEGER,
    engine_version TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_experiment ON runs (experiment, run_id);
CREATE INDEX IF NOT EXISTS runs_by_batch ON runs (batch);
CREATE TABLE IF NOT EXISTS metrics (
    run_id  INTEGER NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    metric  TEXT NOT NULL,
    value   REAL NOT NULL,
    PRIMARY KEY (run_id, metric)
);
CREATE TABLE IF NOT EXISTS batches (
    name        TEXT PRIMARY KEY,
    report_dir  TEXT,
    time        TEXT NOT NULL
);
CREATE VIEW IF NOT EXISTS results AS
    SELECT r.run_id, r.time, r.git_commit, r.hostname, r.cpu_model, r.kernel,
           r.experiment, m.metric, m.value
    FROM runs r JOIN metrics m ON m.run_id = r.run_id;
"""


def db_path(explicit=None) -> Path:
    """--db, else $MDSPLIT_HISTORY, else reports/history.sqlite."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("MDSPLIT_HISTORY")
    return Path(env) if env else DEFAULT_DB


def machine_info() -> dict:
    """hostname, cpu model, kernel release and CPU count of this machine."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model", "Hardware"):
                    cpu = value.strip()
                    break
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "cpu_model": cpu or platform.processor() or "unknown",
            "kernel": platform.release(), "cpus": os.cpu_count() or 0}


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def git_commit(root: Path = ROOT) -> str:
    """The checked-out commit, read from .git without running git (so it
    never takes the index lock); $MDSPLIT_COMMIT wins. 'unknown' outside a
    work tree."""
    env = os.environ.get("MDSPLIT_COMMIT")
    if env:
        return env
    gitdir = Path(root) / ".git"
    if gitdir.is_file():                      # worktree / submodule: "gitdir: PATH"
        text = _read(gitdir)
        if not text.startswith("gitdir:"):
            return "unknown"
        gitdir = (Path(root) / text.split(":", 1)[1].strip()).resolve()
    head = _read(gitdir / "HEAD")
    if not head:
        return "unknown"
    if not head.startswith("ref:"):
        return head
    ref = head.split(":", 1)[1].strip()
    common = gitdir
    if (gitdir / "commondir").exists():
        common = (gitdir / _read(gitdir / "commondir")).resolve()
    for base in (gitdir, common):
        value = _read(base / ref)
        if value:
            return value
    for line in _read(common / "packed-refs").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == ref:
            return parts[0]
    return "unknown"


@dataclass
class Run:
    run_id: int
    batch: str | None
    time: str
    git_commit: str
    hostname: str
    cpu_model: str
    kernel: str
    cpus: int | None
    experiment: str
    source: str
    duration_s: float | None
    steps: int | None
    report_dir: str | None
    baseline: bool
    metrics: dict = field(default_factory=dict)
    # The virtual-clock run's seed and the engine's version (`harness
    # simulate`), for runs whose checked figures come from it.
    seed: int | None = None
    engine_version: str | None = None

    @property
    def machine(self) -> tuple:
        return (self.hostname, self.cpu_model, self.kernel)


_RUN_COLUMNS = ("run_id, batch, time, git_commit, hostname, cpu_model, kernel, cpus, "
                "experiment, source, duration_s, steps, report_dir, baseline, seed, engine_version")


class HistoryError(RuntimeError):
    pass


def _reason(e: sqlite3.Error) -> str:
    """sqlite's message, with what it means for a file that is no database."""
    text = str(e)
    if "file is not a database" in text:
        return "not a history database (file is not a database)"
    if "readonly database" in text:
        return f"{text} (the file or its directory is not writable)"
    return text


class History:
    """The database. Use as a context manager or call close().

    mode "create" (recording: `reproduce`, `reference`): the file and its
    tables are made when missing; an existing file must be a history
    database (an empty one is made one). mode "rw" (`history
    --mark-baseline`): an existing history database, written but never
    altered in shape. mode "ro" (`history`, `check`, `compare`): opened
    read-only (SQLite URI mode=ro), never created or written. A file that
    is not a history database, a directory or a path the system refuses
    raises HistoryError (one line naming the file) in every mode."""

    # Seconds a statement waits for another process's lock before failing
    # ("database is locked").
    LOCK_TIMEOUT = 30.0

    _RUNS_REQUIRED = ("run_id", "batch", "time", "git_commit", "hostname", "cpu_model", "kernel",
                      "cpus", "experiment", "source", "duration_s", "steps", "report_dir",
                      "baseline")
    _METRICS_REQUIRED = ("run_id", "metric", "value")

    def __init__(self, path=None, *, mode="create", timeout=None):
        if mode not in ("create", "rw", "ro"):
            raise ValueError(f"mode {mode!r}; allowed: create, rw, ro")
        self.path = db_path(path)
        self.mode = mode
        self.conn = None
        timeout = self.LOCK_TIMEOUT if timeout is None else timeout
        try:
            if self.path.is_dir():
                raise HistoryError(f"{self.path}: is a directory, not a history database")
            if mode != "create" and not self.path.exists():
                raise HistoryError(f"{self.path}: no such file (no history database there)")
            if mode == "create":
                self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise HistoryError(f"{self.path}: {e.strerror or e}") from None
        try:
            if mode == "create":
                self.conn = sqlite3.connect(str(self.path), timeout=timeout)
            else:
                uri = f"file:{urllib.parse.quote(str(self.path.absolute()))}?mode={mode}"
                self.conn = sqlite3.connect(uri, uri=True, timeout=timeout)
            self.conn.execute("PRAGMA foreign_keys = ON")
            objects = {name: kind for name, kind in
                       self.conn.execute("SELECT name, type FROM sqlite_master")}
            if objects or mode != "create":
                self._check_shape(objects)
            if mode == "create":
                self._create()
            self._has_batches = bool(self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'batches'").fetchall())
            have = {r[1] for r in self.conn.execute("PRAGMA table_info(runs)")}
            # A database made before these columns: read as NULL (ro, rw);
            # "create" adds them.
            self._run_columns = ", ".join(c if c in have else f"NULL AS {c}"
                                          for c in _RUN_COLUMNS.split(", "))
        except sqlite3.DatabaseError as e:
            self.close()
            raise HistoryError(f"{self.path}: {_reason(e)}") from None
        except HistoryError:
            self.close()
            raise

    def _check_shape(self, objects: dict) -> None:
        """HistoryError unless the file holds the runs and metrics tables."""
        for table, required in (("runs", self._RUNS_REQUIRED), ("metrics", self._METRICS_REQUIRED)):
            if objects.get(table) != "table":
                raise HistoryError(f"{self.path}: not a history database (no {table} table)")
            have = {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}
            missing = [c for c in required if c not in have]
            if missing:
                raise HistoryError(f"{self.path}: not a history database ({table} has no "
                                   f"column {', '.join(missing)})")

    def _create(self) -> None:
        with self.conn:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self.conn.execute(stmt)
            have = {r[1] for r in self.conn.execute("PRAGMA table_info(runs)")}
            for col, kind in (("seed", "INTEGER"), ("engine_version", "TEXT")):
                if col not in have:          # a database made before these columns
                    self.conn.execute(f"ALTER TABLE runs ADD COLUMN {col} {kind}")
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                              (str(SCHEMA_VERSION),))

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- writing -----------------------------------------------------------

    def record(self, experiment: str, metrics: dict, *, batch=None, duration_s=None,
               steps=None, report_dir=None, source="mdsplit", time=None, commit=None,
               machine=None, seed=None, engine_version=None) -> int:
        """Records one run with all its metrics in one transaction and
        returns its run id (seed, engine_version: of the virtual-clock run
        the checked figures come from). Non-numeric values raise ValueError before
        anything is written; NaN and infinities are left out."""
        clean = {}
        for k, v in metrics.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"metric {k!r} of {experiment}: {v!r} is not a number")
            if math.isfinite(v):
                clean[str(k)] = float(v)
        machine = machine or machine_info()
        when = time or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            with self.conn:
                cur = self.conn.execute(
                    "INSERT INTO runs (batch, time, git_commit, hostname, cpu_model, kernel, "
                    "cpus, experiment, source, duration_s, steps, report_dir, seed, "
                    "engine_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (batch, when, commit or git_commit(), machine["hostname"],
                     machine["cpu_model"], machine["kernel"], machine.get("cpus"), experiment,
                     source, duration_s, steps, str(report_dir) if report_dir else None,
                     seed, engine_version))
                run_id = cur.lastrowid
                self.conn.executemany("INSERT INTO metrics (run_id, metric, value) VALUES (?, ?, ?)",
                                      [(run_id, k, v) for k, v in clean.items()])
        except sqlite3.DatabaseError as e:
            raise HistoryError(f"{self.path}: {_reason(e)}") from None
        return run_id

    def new_batch(self, name: str, report_dir=None) -> str:
        """Reserves and returns a batch name unique in this database: name,
        else name-2, name-3 ... (taken: a reserved batch or any run's batch;
        a name of digits only is never used, as it would read as a run id).
        One IMMEDIATE transaction, so two reproduces at once never get the
        same name."""
        when = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                i = 1
                while True:
                    cand = name if i == 1 else f"{name}-{i}"
                    taken = cand.isdigit() or self.conn.execute(
                        "SELECT 1 FROM runs WHERE batch = ? UNION ALL "
                        "SELECT 1 FROM batches WHERE name = ? LIMIT 1", (cand, cand)).fetchone()
                    if not taken:
                        break
                    i += 1
                self.conn.execute("INSERT INTO batches (name, report_dir, time) VALUES (?, ?, ?)",
                                  (cand, str(report_dir) if report_dir else None, when))
                self.conn.commit()
            except BaseException:
                self.conn.rollback()
                raise
        except sqlite3.DatabaseError as e:
            raise HistoryError(f"{self.path}: {_reason(e)}") from None
        return cand

    def mark_baseline(self, run_ids, on=True) -> int:
        """Marks (or unmarks) runs as the baseline of their experiment. Run
        ids may also be batch names (every run of the batch). Raises
        HistoryError naming an id that matches nothing; nothing changes then."""
        ids = []
        for r in run_ids:
            found = self._resolve(r)
            if not found:
                raise HistoryError(f"no run or batch {r!r} in {self.path}")
            ids.extend(found)
        try:
            with self.conn:
                self.conn.executemany("UPDATE runs SET baseline = ? WHERE run_id = ?",
                                      [(1 if on else 0, i) for i in ids])
        except sqlite3.DatabaseError as e:
            raise HistoryError(f"{self.path}: {_reason(e)}") from None
        return len(ids)

    def _query(self, sql, params=()) -> list:
        """All rows of a query; a database error (a damaged file, another
        process's lock held past the timeout) is a HistoryError naming the file."""
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as e:
            raise HistoryError(f"{self.path}: {_reason(e)}") from None

    def _resolve(self, ref) -> list:
        ref = str(ref)
        if ref.isdigit():
            rows = self._query("SELECT run_id FROM runs WHERE run_id = ?", (int(ref),))
            if rows:
                return [rows[0][0]]
        ids = [r[0] for r in self._query(
            "SELECT run_id FROM runs WHERE batch = ? ORDER BY run_id", (ref,))]
        if not ids and self._has_batches:       # a report directory: its batch
            try:
                dirs = list(dict.fromkeys([str(Path(ref).absolute()), str(Path(ref).resolve())]))
            except (OSError, RuntimeError):
                dirs = []
            for d in dirs:
                ids = [r[0] for r in self._query(
                    "SELECT run_id FROM runs WHERE batch IN "
                    "(SELECT name FROM batches WHERE report_dir = ?) ORDER BY run_id", (d,))]
                if ids:
                    break
        return ids

    # --- reading -----------------------------------------------------------

    def _runs(self, where="", params=(), limit=None, with_metrics=True) -> list:
        sql = f"SELECT {self._run_columns} FROM runs {where} ORDER BY run_id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        runs = [Run(*row[:13], baseline=bool(row[13]), seed=row[14], engine_version=row[15])
                for row in self._query(sql, params)]
        if with_metrics and runs:
            by_id = {r.run_id: r for r in runs}
            ids = list(by_id)
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                q = ",".join("?" * len(chunk))
                for run_id, metric, value in self._query(
                        f"SELECT run_id, metric, value FROM metrics WHERE run_id IN ({q}) "
                        "ORDER BY rowid", chunk):
                    by_id[run_id].metrics[metric] = value
        return runs

    def runs(self, experiment=None, *, source=None, hostname=None, baseline=None,
             before=None, limit=None, with_metrics=True) -> list:
        """Runs, newest first, filtered by experiment, source, hostname,
        baseline flag, and run_id < before."""
        conds, params = [], []
        for col, val in (("experiment", experiment), ("source", source), ("hostname", hostname)):
            if val is not None:
                conds.append(f"{col} = ?")
                params.append(val)
        if baseline is not None:
            conds.append("baseline = ?")
            params.append(1 if baseline else 0)
        if before is not None:
            conds.append("run_id < ?")
            params.append(int(before))
        where = ("WHERE " + " AND ".join(conds)) if conds else ""
        return self._runs(where, params, limit, with_metrics)

    def run(self, run_id) -> Run | None:
        rows = self._runs("WHERE run_id = ?", (int(run_id),))
        return rows[0] if rows else None

    def batch(self, name: str) -> list:
        return self._runs("WHERE batch = ?", (name,))

    def resolve(self, ref) -> list:
        """Runs named by a run id or a batch name."""
        ids = self._resolve(ref)
        return [self.run(i) for i in ids]

    def experiments(self) -> list:
        return [r[0] for r in self._query(
            "SELECT experiment FROM runs GROUP BY experiment ORDER BY MIN(run_id)")]

    def durations(self, experiment: str, hostname=None, limit=5) -> list:
        """[(duration_s, steps)] of the latest runs of an experiment, newest
        first (for progress estimates)."""
        sql = "SELECT duration_s, steps FROM runs WHERE experiment = ? AND duration_s IS NOT NULL"
        params = [experiment]
        if hostname:
            sql += " AND hostname = ?"
            params.append(hostname)
        sql += f" ORDER BY run_id DESC LIMIT {int(limit)}"
        return [(d, s) for d, s in self._query(sql, params)]

    def results(self, experiment=None, metric=None) -> list:
        """Rows of the results view, as tuples, oldest first."""
        sql = "SELECT * FROM results"
        conds, params = [], []
        if experiment:
            conds.append("experiment = ?")
            params.append(experiment)
        if metric:
            conds.append("metric GLOB ?")
            params.append(metric)
        if conds:
            sql += " WHERE " + " AND ".join(conds)
        return self._query(sql + " ORDER BY run_id, metric", params)


def expected_duration(history: History | None, experiment: str, hostname=None):
    """(seconds, steps) expected for an experiment from its recent runs on
    this machine (median), or (None, None) without history."""
    if history is None:
        return None, None
    rows = history.durations(experiment, hostname=hostname) or history.durations(experiment)
    if not rows:
        return None, None
    ds = sorted(d for d, _ in rows)
    steps = [s for _, s in rows if s]
    return ds[len(ds) // 2], (sorted(steps)[len(steps) // 2] if steps else None)


def format_runs(runs, metric_glob=None) -> str:
    """The `history` listing: one line per run (and its metrics matching
    metric_glob, when given)."""
    import fnmatch
    lines = [f"{'run':>5}  {'time (UTC)':<20} {'commit':<10} {'host':<16} {'experiment':<12} "
             f"{'dur s':>7} {'metrics':>7}  batch"]
    for r in runs:
        lines.append(f"{r.run_id:>5}{'*' if r.baseline else ' '} {r.time:<20} {r.git_commit[:10]:<10} "
                     f"{r.hostname[:16]:<16} {r.experiment + ('' if r.source == 'mdsplit' else f' ({r.source})'):<12} "
                     f"{(r.duration_s or 0):>7.1f} {len(r.metrics):>7}  {r.batch or ''}")
        if metric_glob:
            for m, v in r.metrics.items():
                if fnmatch.fnmatchcase(m, metric_glob):
                    lines.append(f"{'':>7}{m:<44} {v:>14.6g}")
    if len(lines) > 1:
        lines.append("(* = marked baseline)")
    return "\n".join(lines)
