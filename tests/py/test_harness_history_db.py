"""The history database as `history`, `check` and `compare` open it: read-only,
never created or altered, and a file that is no history database (or a path
the system refuses) is one line on stderr with exit 2. No fio."""
import shutil
import sqlite3
import subprocess

import pytest

from harness import history as H
from harness.__main__ import main as cli

MACHINE = {"hostname": "host-a", "cpu_model": "Test CPU", "kernel": "6.1", "cpus": 2}

READERS = [["history"], ["check"], ["compare", "1", "1"]]


def good_db(path):
    with H.History(path) as h:
        h.record("raid5", {"fixed.md0_MBps": 5000}, machine=MACHINE, commit="x")
        h.record("raid5", {"fixed.md0_MBps": 5010}, machine=MACHINE, commit="y")
    return path


def one_line_error(capsys, rc, cmd):
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{cmd}: ") and "Traceback" not in err, err
    return lines[0]


def bad_files(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_text("this is no database at all\n")
    truncated = tmp_path / "truncated.sqlite"
    good_db(tmp_path / "full.sqlite")
    truncated.write_bytes((tmp_path / "full.sqlite").read_bytes()[:3000])
    foreign = tmp_path / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE notes (x)")
    con.commit()
    con.close()
    directory = tmp_path / "dir.sqlite"
    directory.mkdir()
    return {"garbage": garbage, "truncated": truncated, "foreign": foreign,
            "directory": directory}


@pytest.mark.parametrize("argv", READERS, ids=lambda a: a[0])
def test_reader_leaves_an_empty_file_empty(tmp_path, capsys, argv):
    """An empty file given as --db is refused in one line and stays empty (no tables made)."""
    db = tmp_path / "empty.sqlite"
    db.write_bytes(b"")
    line = one_line_error(capsys, cli(argv + ["--db", str(db)]), argv[0])
    assert "not a history database" in line and str(db) in line
    assert db.stat().st_size == 0


@pytest.mark.parametrize("argv", READERS + [["history", "--mark-baseline", "1"]],
                         ids=lambda a: "-".join(a[:2]))
def test_foreign_sqlite_db_gains_no_tables(tmp_path, capsys, argv):
    """A SQLite file of someone else's is refused in one line and left as it was."""
    db = bad_files(tmp_path)["foreign"]
    before = db.read_bytes()
    line = one_line_error(capsys, cli(argv + ["--db", str(db)]), argv[0])
    assert "not a history database (no runs table)" in line
    assert db.read_bytes() == before


@pytest.mark.parametrize("kind", ["garbage", "truncated", "directory"])
@pytest.mark.parametrize("argv", READERS, ids=lambda a: a[0])
def test_not_a_history_db_is_one_line(tmp_path, capsys, argv, kind):
    """Garbage, a truncated database or a directory as --db: one line naming it, exit 2."""
    db = bad_files(tmp_path)[kind]
    line = one_line_error(capsys, cli(argv + ["--db", str(db)]), argv[0])
    assert str(db) in line


def test_compare_of_the_thread_does_not_read_the_db(tmp_path, capsys):
    """`compare thread thread` needs no history: a garbage --db does not stop it."""
    db = bad_files(tmp_path)["garbage"]
    assert cli(["compare", "thread:raid5", "thread:raid5", "--db", str(db)]) == 0
    assert "raid5:fixed.md0_MBps" in capsys.readouterr().out


@pytest.mark.parametrize("argv", READERS, ids=lambda a: a[0])
def test_db_name_too_long_is_one_line(tmp_path, capsys, argv):
    """A --db name over 255 characters: one line with the system's reason, exit 2."""
    db = tmp_path / ("x" * 300 + ".sqlite")
    line = one_line_error(capsys, cli(argv + ["--db", str(db)]), argv[0])
    assert "File name too long" in line


def test_read_only_open_cannot_write(tmp_path):
    """History(mode='ro') is a read-only connection: the file cannot change through it."""
    db = good_db(tmp_path / "h.sqlite")
    before = db.read_bytes()
    with H.History(db, mode="ro") as h:
        assert len(h.runs()) == 2
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            h.conn.execute("DELETE FROM runs")
    assert db.read_bytes() == before


def test_old_database_is_read_without_being_altered(tmp_path, capsys):
    """A history made before the seed/engine_version columns is listed, not migrated."""
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.executescript(H._SCHEMA.replace("    seed        INTEGER,\n    engine_version TEXT\n",
                                        "    seed_unused INTEGER\n"))
    con.execute("INSERT INTO runs (time, git_commit, hostname, cpu_model, kernel, experiment) "
                "VALUES ('t', 'c', 'h', 'cpu', 'k', 'raid5')")
    con.commit()
    con.close()
    before = db.read_bytes()
    assert cli(["history", "--db", str(db), "--json"]) == 0
    assert '"seed": null' in capsys.readouterr().out
    assert db.read_bytes() == before


@pytest.fixture
def immutable_db(tmp_path):
    db = good_db(tmp_path / "ro.sqlite")
    chattr = shutil.which("chattr")
    if not chattr or subprocess.run([chattr, "+i", str(db)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here (needs root and a file system with it)")
    yield db
    subprocess.run([chattr, "-i", str(db)], check=True)


@pytest.mark.parametrize("argv", [["history"], ["check"], ["compare", "1", "2"]],
                         ids=lambda a: a[0])
def test_readers_work_on_an_immutable_db(immutable_db, capsys, argv):
    """history, check and compare read a database that cannot be written."""
    assert cli(argv + ["--db", str(immutable_db)]) == 0, capsys.readouterr().err


def test_marking_an_immutable_db_is_one_line(immutable_db, capsys):
    """--mark-baseline on a database that cannot be written: one line naming it, exit 2."""
    line = one_line_error(capsys, cli(["history", "--db", str(immutable_db),
                                       "--mark-baseline", "1"]), "history")
    assert str(immutable_db) in line and "readonly" in line


def test_recording_refuses_a_foreign_sqlite_db(tmp_path):
    """mode 'create' (reproduce, reference) makes no tables in another program's SQLite file."""
    db = bad_files(tmp_path)["foreign"]
    before = db.read_bytes()
    with pytest.raises(H.HistoryError, match="not a history database"):
        H.History(db)
    assert db.read_bytes() == before


@pytest.mark.parametrize("kind", ["garbage", "foreign"])
def test_reproduce_refuses_a_db_that_is_no_history_with_exit_2(tmp_path, capsys, kind):
    """reproduce --db on a file that is no history: one line, exit 2 (it was 1),
    before any experiment runs, the file unchanged."""
    db = bad_files(tmp_path)[kind]
    before = db.read_bytes()
    line = one_line_error(capsys, cli(["reproduce", "passthrough", "--report-dir",
                                       str(tmp_path / "r"), "--db", str(db)]), "reproduce")
    assert "history database" in line and "not a history database" in line
    assert db.read_bytes() == before and not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv, message", [
    (["check", "--k", "abc"], "argument --k: invalid float value: 'abc'"),
    (["check", "--last", "1.5"], "argument --last: invalid int value: '1.5'"),
    (["history", "--limit", "x"], "argument --limit: invalid int value: 'x'"),
])
def test_a_value_argparse_cannot_read_is_one_line(capsys, argv, message):
    """A value of the wrong type: one line naming the option, exit 2 (argparse's
    usage block made it six)."""
    with pytest.raises(SystemExit) as e:
        cli(argv)
    err = capsys.readouterr().err
    assert (e.value.code, err) == (2, f"python3 -m harness {argv[0]}: {message}\n")
