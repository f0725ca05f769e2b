"""`reproduce` with stand-in experiment modules (no fio): discovery, "not
built yet", the report (summary.md with tables, figures and PASS/FAIL),
metrics.json, history records, reports/latest; and the real experiment
modules follow the interface."""
import importlib
import inspect
import io
import json
import shutil
import subprocess
import sys
import uuid

import pytest

from harness import reproduce as R
from harness.history import History
from harness.paths import ROOT

RAID5 = '''
from harness import plots
from harness.experiment import ExperimentResult
NAME = "raid5"
TITLE = "stand-in raid5"
SEEDS = ["000_fa5278d1f568ad45.txt"]
ORDER = 10
DURATION = (14.0, 2)
def run(jobs_dir, out_dir, progress):
    assert (jobs_dir / "passthrough-demo.fio").is_file()
    assert not list(jobs_dir.rglob("*.img"))
    (jobs_dir / "work").mkdir(exist_ok=True)         # not in a fresh clone
    (jobs_dir / "work" / "m0.img").write_bytes(b"x")    # a member image, removed afterwards
    progress("legacy dd")
    progress("fixed dd")
    plots.bar_chart(out_dir / "bw.png", {"legacy": 3000, "fixed": 5000}, ylabel="MB/s")
    (out_dir / "raw.json").write_text("{}")
    return ExperimentResult(name=NAME, tables=["TABLE-RAID5"], figures=["bw.png"],
        raw={"fio": "raw.json"},
        metrics={"legacy.md0_MBps": 3000, "fixed.md0_MBps": 5000,
                 "legacy.seek_zero_pct": 45.0, "fixed.seek_zero_pct": 60.0},
        checks=[("own check", True, "fine")])
'''

BFQ = '''
NAME = "bfq"
TITLE = "crashes"
SEEDS = []
ORDER = 30
def run(jobs_dir, out_dir, progress):
    progress("root legacy")
    raise RuntimeError("boom")
'''


@pytest.fixture
def package(tmp_path, monkeypatch):
    name = "fakeexp_" + uuid.uuid4().hex[:8]
    d = tmp_path / "pkgs" / name
    d.mkdir(parents=True)
    (d / "__init__.py").write_text("")
    (d / "raid5.py").write_text(RAID5)
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    yield name, d
    for m in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[m]


def run(package, which, tmp_path, report="report", **kw):
    out, err = io.StringIO(), io.StringIO()
    kw.setdefault("db", tmp_path / "h.sqlite")
    rc = R.reproduce(which, tmp_path / report, package=package, out=out, err=err, tty=False,
                     **kw)
    return rc, out.getvalue(), err.getvalue()


def test_all_runs_the_experiments_found(package, tmp_path):
    name, _ = package
    rc, out, err = run(name, "all", tmp_path)
    assert rc == 0, err
    assert "not built" not in err
    report = tmp_path / "report"
    # printed: the thread's figures beside ours, the experiment's tables, the checks
    assert "the thread's figures beside ours" in out and "TABLE-RAID5" in out
    assert "3276.87" in out and "5271.88" in out
    assert "FAIL  fixed.seek_zero_pct - legacy.seek_zero_pct >= 20" in out
    assert "PASS  fixed.md0_MBps / legacy.md0_MBps >= 1.3" in out
    assert "PASS  own check: fine" in out
    # no recorded run: the experiment's stated DURATION
    assert "[1/1] raid5: legacy dd (step 1/2, 0:00 elapsed, ETA 0:14 (default))" in err
    summary = (report / "summary.md").read_text()
    # jobs/expectations.toml's 40 raid5 checks + the experiment's own; the 38 tolerance
    # checks (issue 16) name figures the fake experiment does not report, so they fail
    assert "| raid5 | ok | 2/41 PASS, **39 FAIL** |" in summary
    assert "![bw](raid5/bw.png)" in summary and (report / "raid5" / "bw.png").is_file()
    assert "**FAIL** `fixed.seek_zero_pct - legacy.seek_zero_pct >= 20" in summary
    assert "- commit: `" in summary and "- machine: " in summary and "kernel" in summary
    assert "TABLE-RAID5" in summary and "[fio: raw.json](raid5/raw.json)" in summary
    assert json.loads((report / "metrics.json").read_text()) == {"raid5": {
        "legacy.md0_MBps": 3000, "fixed.md0_MBps": 5000, "legacy.seek_zero_pct": 45.0,
        "fixed.seek_zero_pct": 60.0}}
    result = json.loads((report / "raid5" / "result.json").read_text())
    assert result["figures"] == ["bw.png"] and len(result["checks"]) == 41
    # the jobs copy stays, the member images do not
    assert (report / "raid5" / "jobs" / "passthrough-demo.fio").is_file()
    assert not list((report / "raid5").rglob("*.img"))
    with History(tmp_path / "h.sqlite") as h:
        runs = h.runs()
        assert len(runs) == 1 and runs[0].experiment == "raid5" and runs[0].steps == 2
        assert runs[0].metrics["fixed.md0_MBps"] == 5000 and runs[0].batch == "report"
    # with --strict a failed check fails the command
    rc, _, _ = run(name, "raid5", tmp_path, report="strict", strict=True)
    assert rc == 1


def test_asking_for_an_experiment_not_found_fails(package, tmp_path):
    name, _ = package
    rc, _, err = run(name, "buffered", tmp_path)
    assert rc == 2 and "unknown experiment 'buffered'; known: raid5, all" in err


def test_a_crashing_experiment_does_not_stop_the_others(package, tmp_path):
    name, d = package
    (d / "bfq.py").write_text(BFQ)
    rc, out, err = run(name, "all", tmp_path)
    assert rc == 1
    assert "reproduce bfq: RuntimeError: boom" in err
    assert "TABLE-RAID5" in out                    # raid5 still ran and printed
    assert "[2/2] bfq: FAILED in" in err
    report = tmp_path / "report"
    assert "Traceback" in (report / "bfq" / "error.txt").read_text()
    assert "| bfq | **failed**: RuntimeError: boom |" in (report / "summary.md").read_text()
    with History(tmp_path / "h.sqlite") as h:
        assert [r.experiment for r in h.runs()] == ["raid5"]      # failures are not recorded


def test_broken_module_is_reported(package, tmp_path):
    name, d = package
    (d / "bfq.py").write_text("def broken(:\n")
    rc, out, err = run(name, "all", tmp_path)
    assert rc == 1 and "bfq: cannot load its module: SyntaxError" in err
    assert "TABLE-RAID5" in out


def test_no_history_and_repeat(package, tmp_path):
    name, _ = package
    rc, out, err = run(name, "raid5", tmp_path, record=False)
    assert rc == 0 and not (tmp_path / "h.sqlite").exists()
    out_, err_ = io.StringIO(), io.StringIO()
    rc = R.reproduce("raid5", tmp_path / "many", package=name, out=out_, err=err_, tty=False,
                     db=tmp_path / "h2.sqlite", repeat=3, quiet=True)
    assert rc == 0 and out_.getvalue() == ""
    assert "[3/3] raid5 #3: done" in err_.getvalue()
    assert len([p for p in (tmp_path / "many").iterdir() if (p / "summary.md").is_file()]) == 3
    with History(tmp_path / "h2.sqlite") as h:
        assert len(h.runs("raid5")) == 3
        assert len({r.batch for r in h.runs()}) == 3


def test_eta_from_history(package, tmp_path):
    name, _ = package
    with History(tmp_path / "h.sqlite") as h:
        h.record("raid5", {"x": 1}, duration_s=125, steps=2)
    rc, _, err = run(name, "raid5", tmp_path)
    assert rc == 0
    assert "[1/1] raid5: legacy dd (step 1/2, 0:00 elapsed, ETA 2:05)" in err


def test_latest_symlink(tmp_path):
    a = tmp_path / "20250101-000000"
    b = tmp_path / "20250102-000000"
    a.mkdir()
    b.mkdir()
    (tmp_path / "latest").mkdir()                      # an old real directory is moved aside
    R.point_latest(a)
    assert (tmp_path / "latest").resolve() == a.resolve()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("latest-old-")]
    R.point_latest(b)
    assert (tmp_path / "latest").is_symlink() and (tmp_path / "latest").resolve() == b.resolve()
    assert R.new_report_dir(tmp_path).parent == tmp_path


def test_prepare_jobs_is_fresh(tmp_path):
    jobs = R.prepare_jobs(tmp_path)
    assert (jobs / "passthrough-demo.fio").is_file() and (jobs / "expectations.toml").is_file()
    assert not list(jobs.rglob("*.img")) and not list(jobs.rglob("*.state"))
    for d in ("stats", "traces"):
        if (ROOT / "jobs" / d).is_dir():
            assert not [p for p in (jobs / d).rglob("*") if p.is_file()]


def test_thread_table():
    t = R.thread_table("raid5", {"fixed.md0_MBps": 5271.88 / 2})
    lines = t.splitlines()
    assert lines[0].split() == ["metric", "unit", "thread", "mdsplit", "mdsplit/thread"]
    row = next(l for l in lines if l.startswith("fixed.md0_MBps"))
    assert row.split() == ["fixed.md0_MBps", "MB/s", "5271.88", "2635.94", "0.500"]
    row = next(l for l in lines if l.startswith("legacy.md0_MBps"))
    assert row.split()[-2:] == ["-", "-"]
    assert R.thread_table("passthrough", {}) == ""


def test_cli_choices_and_missing_fio(monkeypatch, capsys):
    from harness import __main__ as M
    monkeypatch.setattr(M.shutil, "which", lambda name: None)
    assert M.main(["reproduce", "passthrough"]) == 1
    assert "fio is not installed" in capsys.readouterr().err


def experiment_modules():
    pkg = importlib.import_module(R.PACKAGE)
    import pkgutil
    return [i.name for i in pkgutil.iter_modules(pkg.__path__) if not i.name.startswith("_")]


@pytest.mark.parametrize("modname", experiment_modules())
def test_experiment_modules_follow_the_interface(modname):
    """Every module in harness/experiments/: NAME is its CLI name, TITLE a
    line, SEEDS existing seed files, ORDER, a stated DURATION (no "ETA
    unknown"), an expectations section, its JOB file in jobs/,
    run(jobs_dir, out_dir, progress)."""
    from harness import expectations as E
    mod = importlib.import_module(f"{R.PACKAGE}.{modname}")
    assert mod.NAME == modname.replace("_", "-")
    assert isinstance(mod.TITLE, str) and mod.TITLE and "\n" not in mod.TITLE
    assert isinstance(mod.SEEDS, list)
    assert isinstance(mod.ORDER, int)
    seconds, steps = mod.DURATION
    assert seconds > 0 and steps >= 1
    assert R.expectations_section(mod, mod.NAME) in E.load()
    assert (ROOT / "jobs" / mod.JOB).is_file()
    seeds = ROOT.parent / "shared" / "seeds"
    for s in mod.SEEDS:
        if seeds.is_dir():
            assert (seeds / s).is_file(), s
    assert list(inspect.signature(mod.run).parameters)[:3] == ["jobs_dir", "out_dir", "progress"]
    assert R.load_experiment(mod.NAME) is mod


def test_passthrough_expectations_name_real_clock_figures_machine():
    """passthrough has no virtual-clock run: every metric of it in expectations.toml but the error counts is machine.*."""
    from harness import expectations as E
    names = set(E.load()["passthrough"].metrics)
    assert names - {"verify.errors", "randread.errors"}
    assert all(n.startswith("machine.") for n in names - {"verify.errors", "randread.errors"})


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_passthrough_real_clock_figures_are_machine_metrics(tmp_path, engine):
    """passthrough's fio throughput and latency are reported as machine.*; only its error counts are not."""
    from harness.experiments import passthrough
    jobs = R.prepare_jobs(tmp_path)
    result = passthrough.run(jobs, tmp_path, lambda *a: None)
    unprefixed = {n for n in result.metrics if not n.startswith("machine.")}
    assert unprefixed == {"verify.errors", "randread.errors"}
    assert "machine.randread.read_iops" in result.metrics


ALLOWED = "allowed: a new directory or an empty one (omit --report-dir for a new reports/<time>)"


def test_report_dir_with_user_files_is_refused(package, tmp_path):
    """--report-dir naming a directory with someone's files in it: one line, exit 2, nothing deleted or written."""
    name, _ = package
    d = tmp_path / "report"
    (d / "raid5").mkdir(parents=True)
    (d / "raid5" / "thesis.txt").write_text("four years of work\n")
    (d / "summary.md").write_text("my notes\n")
    rc, out, err = run(name, "raid5", tmp_path)
    assert rc == 2 and err == (f"reproduce: --report-dir {d}: exists and is not empty (nothing "
                               f"in it is replaced or deleted); {ALLOWED}\n")
    assert (d / "raid5" / "thesis.txt").read_text() == "four years of work\n"
    assert (d / "summary.md").read_text() == "my notes\n"
    assert sorted(p.name for p in d.rglob("*")) == ["raid5", "summary.md", "thesis.txt"]
    assert not (tmp_path / "h.sqlite").exists()


def test_second_run_into_a_report_is_refused(package, tmp_path):
    """A second reproduce into an earlier report is refused; the report and its history runs stay as they were."""
    name, _ = package
    assert run(name, "raid5", tmp_path)[0] == 0
    d = tmp_path / "report"
    before = {p: p.read_bytes() for p in d.rglob("*") if p.is_file()}
    rc, _, err = run(name, "raid5", tmp_path)
    assert rc == 2 and "holds an earlier report (summary.md, metrics.json)" in err
    assert len(err.splitlines()) == 1
    assert {p: p.read_bytes() for p in d.rglob("*") if p.is_file()} == before
    with History(tmp_path / "h.sqlite") as h:
        assert len(h.runs()) == 1


def test_empty_existing_report_dir_is_used(package, tmp_path):
    """An existing empty directory takes the report."""
    name, _ = package
    (tmp_path / "report").mkdir()
    assert run(name, "raid5", tmp_path)[0] == 0
    assert (tmp_path / "report" / "summary.md").is_file()


def test_report_dir_that_is_a_file_is_one_line(package, tmp_path):
    """--report-dir naming a regular file: one line, exit 2, the file unchanged."""
    name, _ = package
    (tmp_path / "report").write_text("data\n")
    rc, _, err = run(name, "raid5", tmp_path)
    assert rc == 2 and err.splitlines() == [
        f"reproduce: --report-dir {tmp_path / 'report'}: exists and is not a directory; {ALLOWED}"]
    assert (tmp_path / "report").read_text() == "data\n"


def test_report_dir_name_too_long_is_one_line(package, tmp_path):
    """--report-dir with a name over 255 characters: one line, exit 2, no directory left behind."""
    name, _ = package
    rc, _, err = run(name, "raid5", tmp_path, report="new/sub/" + "y" * 300)
    assert rc == 2 and len(err.splitlines()) == 1
    assert "cannot make or use it (File name too long)" in err
    assert not (tmp_path / "new").exists()


def test_unwritable_report_dir_is_one_line(package, tmp_path):
    """--report-dir naming an empty directory that cannot be written (chattr +i): one line, exit 2."""
    name, _ = package
    d = tmp_path / "report"
    d.mkdir()
    chattr = shutil.which("chattr")
    if not chattr or subprocess.run([chattr, "+i", str(d)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here (needs root and a file system with it)")
    try:
        rc, _, err = run(name, "raid5", tmp_path)
    finally:
        subprocess.run([chattr, "-i", str(d)], check=True)
    assert rc == 2 and err.splitlines() == [f"reproduce: --report-dir {d}: is not writable; {ALLOWED}"]


def test_run_one_never_replaces_an_experiment_directory(package, tmp_path):
    """run_one into a report whose experiment directory exists fails without deleting what is in it."""
    name, _ = package
    (tmp_path / "raid5").mkdir()
    (tmp_path / "raid5" / "keep.txt").write_text("mine")
    progress = R.Progress(["raid5"], stream=io.StringIO(), tty=False)
    with pytest.raises(FileExistsError):
        R.run_one("raid5", R.load_experiment("raid5", name), tmp_path, progress)
    assert (tmp_path / "raid5" / "keep.txt").read_text() == "mine"


def test_report_write_failure_is_one_line(package, tmp_path, monkeypatch):
    """A report file that cannot be written (e.g. a full disk) is one line naming it, exit 1, no traceback."""
    name, _ = package

    def full(report, *a, **kw):
        raise OSError(28, "No space left on device", str(report / "summary.md"))
    monkeypatch.setattr(R, "write_summary", full)
    rc, _, err = run(name, "raid5", tmp_path)
    d = tmp_path / "report"
    assert rc == 1 and err.splitlines()[-1] == (f"reproduce: report {d}: cannot write "
                                                f"{d / 'summary.md'} (No space left on device)")


def test_two_report_dirs_of_one_name_are_two_batches(package, tmp_path):
    """Reports /a/same and /b/same recorded in one history are two batches: same and same-2."""
    name, _ = package
    assert run(name, "raid5", tmp_path, report="a/same")[0] == 0
    rc, _, err = run(name, "raid5", tmp_path, report="b/same")
    assert rc == 0 and "(history batch same-2)" in err
    with History(tmp_path / "h.sqlite") as h:
        assert [r.batch for r in h.runs()] == ["same-2", "same"]
        assert len(h.resolve("same")) == 1
    assert "batch `same-2`" in (tmp_path / "b" / "same" / "summary.md").read_text()


LOCKER = '''
import os
import sqlite3
from harness.experiment import ExperimentResult
NAME = "bio-size"
TITLE = "holds the history locked, as another process's BEGIN EXCLUSIVE would"
SEEDS = []
ORDER = 20
HOLD = []
def run(jobs_dir, out_dir, progress):
    con = sqlite3.connect(os.environ["FAKE_HISTORY"], isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    HOLD.append(con)
    return ExperimentResult(name=NAME, metrics={"read.max_sectors_MBps": 3500.0})
'''

LATER = '''
from harness.experiment import ExperimentResult
NAME = "bfq"
TITLE = "runs after the lock"
SEEDS = []
ORDER = 30
def run(jobs_dir, out_dir, progress):
    return ExperimentResult(name=NAME, metrics={"root.after_MiBps": 540.0})
'''


def test_history_write_failure_keeps_the_report(package, tmp_path, monkeypatch):
    """A history locked past the timeout mid-reproduce: one line naming the db and the reason, the rest runs, the report is written, exit 1."""
    name, d = package
    (d / "bio_size.py").write_text(LOCKER)
    (d / "bfq.py").write_text(LATER)
    db = tmp_path / "h.sqlite"
    monkeypatch.setenv("FAKE_HISTORY", str(db))
    monkeypatch.setattr(History, "LOCK_TIMEOUT", 0.2)
    try:
        rc, _, err = run(name, "all", tmp_path, db=db)
    finally:
        for con in sys.modules[f"{name}.bio_size"].HOLD:
            con.close()
    assert rc == 1 and "Traceback" not in err
    lines = [l for l in err.splitlines() if "history database" in l]
    assert lines == [f"reproduce: history database: {db}: database is locked; bio-size and the "
                     "runs after it not recorded (the report has them)"]
    report = tmp_path / "report"
    assert set(json.loads((report / "metrics.json").read_text())) == {"raid5", "bio-size", "bfq"}
    assert ("- **not recorded** in the history: bio-size, bfq "
            f"({db}: database is locked)") in (report / "summary.md").read_text()
    with History(db) as h:
        assert [r.experiment for r in h.runs()] == ["raid5"]


def test_summary_and_terminal_lead_with_the_predictions(package, tmp_path):
    """summary.md opens with per-thread predictions inside tolerance, then fits; the terminal too."""
    from harness import expectations as E
    name, _ = package
    rc, out, err = run(name, "raid5", tmp_path)
    assert rc == 0, err
    checks = E.load()["raid5"].checks
    n_pred = sum(c.basis == "prediction" for c in checks)
    n_fit = sum(c.basis == "fit" for c in checks)
    # the stand-in passes one prediction (md0 fixed/legacy >= 1.3) and no fit
    assert f"predictions inside tolerance 1/{n_pred}; fits 0/{n_fit}" in out.splitlines()[1]
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert summary.index("## What is evidence") < summary.index("| experiment | status |")
    assert f"| raid5 | 1/{n_pred} | 0/{n_fit} |" in summary
    fitted = E.load()["raid5"].fitted[0]
    assert "### Fitted parameters" in summary and fitted.figure in summary
