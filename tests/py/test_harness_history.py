"""The history database: round trip, transactions, baselines, commit and
machine capture, the `history` command. No fio needed."""
import json
import math
import sqlite3

import pytest

from harness import history as H
from harness.__main__ import main as cli

MACHINE = {"hostname": "host-a", "cpu_model": "Test CPU 3000", "kernel": "6.1.0-test", "cpus": 2}


def record(h, exp="raid5", metrics=None, **kw):
    kw.setdefault("machine", MACHINE)
    kw.setdefault("commit", "0123456789abcdef")
    return h.record(exp, metrics if metrics is not None else {"fixed.md0_MBps": 5000.5}, **kw)


def test_round_trip(tmp_path):
    db = tmp_path / "h.sqlite"
    with H.History(db) as h:
        r1 = record(h, metrics={"legacy.md0_MBps": 3276.87, "fixed.md0_MBps": 5271.88},
                    batch="20250101-000000", duration_s=12.5, steps=4, report_dir=tmp_path / "r")
        r2 = record(h, "bfq", {"root.before_MiBps": 550}, batch="20250101-000000")
    with H.History(db) as h:             # reopened: nothing lost
        run = h.run(r1)
        assert run.metrics == {"legacy.md0_MBps": 3276.87, "fixed.md0_MBps": 5271.88}
        assert (run.experiment, run.hostname, run.cpu_model, run.kernel) == \
            ("raid5", "host-a", "Test CPU 3000", "6.1.0-test")
        assert run.git_commit == "0123456789abcdef"
        assert run.duration_s == 12.5 and run.steps == 4 and run.batch == "20250101-000000"
        assert run.time.endswith("Z")
        assert [r.run_id for r in h.runs()] == [r2, r1]               # newest first
        assert [r.run_id for r in h.runs("raid5")] == [r1]
        assert [r.run_id for r in h.batch("20250101-000000")] == [r2, r1]
        assert h.experiments() == ["raid5", "bfq"]
        # the view: one row per (run id, time, commit, machine, experiment, metric, value)
        rows = h.results("raid5")
        assert len(rows) == 2
        assert rows[0][0] == r1 and rows[0][2] == "0123456789abcdef"
        assert rows[0][3:7] == ("host-a", "Test CPU 3000", "6.1.0-test", "raid5")
        assert {(r[7], r[8]) for r in rows} == {("legacy.md0_MBps", 3276.87),
                                                ("fixed.md0_MBps", 5271.88)}
        assert h.durations("raid5") == [(12.5, 4)]
        assert H.expected_duration(h, "raid5", "host-a") == (12.5, 4)
        assert H.expected_duration(h, "nothing") == (None, None)
    # plain sqlite3 sees the same
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 3


def test_bad_metric_writes_nothing(tmp_path):
    with H.History(tmp_path / "h.sqlite") as h:
        with pytest.raises(ValueError, match="not a number"):
            record(h, metrics={"a_MBps": 1.0, "b": "fast"})
        assert h.runs() == []
        assert h.conn.execute("SELECT COUNT(*) FROM metrics").fetchone()[0] == 0
        rid = record(h, metrics={"a": 1.0, "b": math.nan, "c": math.inf})
        assert h.run(rid).metrics == {"a": 1.0}


def test_failed_insert_rolls_back(tmp_path):
    """A failure after the run row was inserted takes the run row back out."""
    class FailingMetrics:
        def __init__(self, conn):
            self.conn = conn

        def __getattr__(self, name):
            return getattr(self.conn, name)

        def __enter__(self):
            return self.conn.__enter__()

        def __exit__(self, *exc):
            return self.conn.__exit__(*exc)

        def executemany(self, *args):
            raise sqlite3.OperationalError("disk I/O error")

    with H.History(tmp_path / "h.sqlite") as h:
        real = h.conn
        h.conn = FailingMetrics(real)
        with pytest.raises(H.HistoryError, match="disk I/O error"):
            record(h, metrics={"x": 1.0})
        h.conn = real
        assert real.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_mark_baseline(tmp_path):
    with H.History(tmp_path / "h.sqlite") as h:
        a = record(h, batch="b1")
        b = record(h, "bfq", {"x": 1}, batch="b1")
        c = record(h, batch="b2")
        assert h.mark_baseline([str(c)]) == 1
        assert [r.run_id for r in h.runs(baseline=True)] == [c]
        assert h.mark_baseline(["b1"]) == 2                    # a batch name marks its runs
        assert {r.run_id for r in h.runs(baseline=True)} == {a, b, c}
        with pytest.raises(H.HistoryError, match="no run or batch"):
            h.mark_baseline([str(a), "nope"])
        h.mark_baseline([str(a)], on=False)
        assert {r.run_id for r in h.runs(baseline=True)} == {b, c}


def test_db_path_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("MDSPLIT_HISTORY", raising=False)
    assert H.db_path() == H.DEFAULT_DB
    monkeypatch.setenv("MDSPLIT_HISTORY", str(tmp_path / "env.sqlite"))
    assert H.db_path() == tmp_path / "env.sqlite"
    assert H.db_path(tmp_path / "x.sqlite") == tmp_path / "x.sqlite"


def test_git_commit_without_git(tmp_path, monkeypatch):
    monkeypatch.delenv("MDSPLIT_COMMIT", raising=False)
    g = tmp_path / ".git"
    (g / "refs" / "heads").mkdir(parents=True)
    (g / "HEAD").write_text("ref: refs/heads/main\n")
    (g / "refs" / "heads" / "main").write_text("a" * 40 + "\n")
    assert H.git_commit(tmp_path) == "a" * 40
    (g / "refs" / "heads" / "main").unlink()
    (g / "packed-refs").write_text("# pack-refs with: peeled\n" + "b" * 40 + " refs/heads/main\n")
    assert H.git_commit(tmp_path) == "b" * 40
    (g / "HEAD").write_text("c" * 40 + "\n")                    # detached
    assert H.git_commit(tmp_path) == "c" * 40
    assert H.git_commit(tmp_path / "nowhere") == "unknown"
    monkeypatch.setenv("MDSPLIT_COMMIT", "from-ci")
    assert H.git_commit(tmp_path) == "from-ci"


def test_machine_info():
    m = H.machine_info()
    assert m["hostname"] and m["kernel"] and m["cpu_model"] and m["cpus"] >= 1


def test_history_command(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    with H.History(db) as h:
        a = record(h, metrics={"fixed.md0_MBps": 5000, "legacy.md0_MBps": 3000}, batch="b1")
        record(h, "bfq", {"root.before_MiBps": 550}, batch="b1")
    assert cli(["history", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "raid5" in out and "bfq" in out and "host-a" in out and "0123456789" in out
    assert cli(["history", "raid5", "--metric", "fixed.*", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "fixed.md0_MBps" in out and "legacy.md0_MBps" not in out and "bfq" not in out
    assert cli(["history", "--db", str(db), "--mark-baseline", str(a)]) == 0
    capsys.readouterr()
    assert cli(["history", "--db", str(db), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [r["baseline"] for r in runs] == [False, True]
    assert cli(["history", "--db", str(db), "--mark-baseline", "999"]) == 2
    assert "no run or batch" in capsys.readouterr().err
    assert cli(["history", "--db", str(tmp_path / "missing.sqlite")]) == 2


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_limit_below_one_is_refused(tmp_path, capsys, limit):
    """history --limit 0 or -1 is one line naming --limit and what it allows, exit 2."""
    db = tmp_path / "h.sqlite"
    with H.History(db) as h:
        record(h)
    assert cli(["history", "--db", str(db), "--limit", limit]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"history: --limit {limit}: allowed: an integer >= 1\n"
    assert captured.out == ""


def test_mark_and_unmark_together_are_refused(tmp_path, capsys):
    """--mark-baseline with --unmark-baseline is refused in one line and changes nothing."""
    db = tmp_path / "h.sqlite"
    with H.History(db) as h:
        a, b = record(h), record(h)
        h.mark_baseline([str(b)])
    assert cli(["history", "--db", str(db), "--mark-baseline", str(a),
                "--unmark-baseline", str(b)]) == 2
    assert capsys.readouterr().err == ("history: --mark-baseline and --unmark-baseline together: "
                                       "allowed: one of them per command\n")
    with H.History(db) as h:
        assert [r.run_id for r in h.runs(baseline=True)] == [b]


def test_new_batch_names_are_unique(tmp_path):
    """new_batch gives a name used before (also by an old history's runs) the next -N suffix."""
    with H.History(tmp_path / "h.sqlite") as h:
        record(h, batch="same")                      # as an older history recorded it
        assert h.new_batch("same", tmp_path / "b" / "same") == "same-2"
        assert h.new_batch("same", tmp_path / "c" / "same") == "same-3"
        assert h.new_batch("other", tmp_path / "other") == "other"


def test_new_batch_never_takes_a_run_id(tmp_path):
    """A report directory named with digits only gets a batch name that cannot read as a run id."""
    with H.History(tmp_path / "h.sqlite") as h:
        assert h.new_batch("7", tmp_path / "7") == "7-2"


def test_mark_baseline_by_report_directory(tmp_path, capsys):
    """--mark-baseline with a report directory marks that report's batch only, not another of its name."""
    db = tmp_path / "h.sqlite"
    with H.History(db) as h:
        first = h.new_batch("same", tmp_path / "a" / "same")
        a = record(h, batch=first)
        second = h.new_batch("same", tmp_path / "b" / "same")
        b = record(h, batch=second)
    assert cli(["history", "--db", str(db), "--mark-baseline", str(tmp_path / "b" / "same")]) == 0
    with H.History(db) as h:
        assert [r.run_id for r in h.runs(baseline=True)] == [b] and a != b
