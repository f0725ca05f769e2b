"""`compare A B`: report directories, run ids, batches and the thread's
figures side by side. No fio."""
import json

import pytest

from harness import compare as CMP
from harness.__main__ import main as cli
from harness.history import History

MACHINE = {"hostname": "h", "cpu_model": "c", "kernel": "k", "cpus": 1}


def report(tmp_path, name, metrics_by_exp):
    d = tmp_path / name
    d.mkdir()
    (d / "metrics.json").write_text(json.dumps(metrics_by_exp))
    return d


def test_rows_and_ratio():
    rows = CMP.compare({"x:a": 2.0, "x:b": 0, "x:c": 1}, {"x:a": 3.0, "x:b": 5, "x:d": 4})
    assert rows == [("x:a", 2.0, 3.0, 1.5), ("x:b", 0, 5, None), ("x:c", 1, None, None),
                    ("x:d", None, 4, None)]


def test_report_dirs(tmp_path, capsys):
    a = report(tmp_path, "a", {"raid5": {"legacy.md0_MBps": 3000, "fixed.md0_MBps": 5000}})
    b = report(tmp_path, "b", {"raid5": {"legacy.md0_MBps": 3300, "fixed.md0_MBps": 4000}})
    assert cli(["compare", str(a), str(b), "--db", str(tmp_path / "none.sqlite")]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("raid5:fixed.md0_MBps"))
    assert line.split()[1:] == ["5000", "4000", "0.800"]
    line = next(l for l in out.splitlines() if l.startswith("raid5:legacy.md0_MBps"))
    assert line.split()[-1] == "1.100"


def test_experiment_dir_and_parent_dir(tmp_path):
    d = tmp_path / "r" / "bfq"
    d.mkdir(parents=True)
    (d / "result.json").write_text(json.dumps({"name": "bfq", "metrics": {"root.after_MiBps": 540}}))
    assert CMP.load_side(str(d))[1] == {"bfq:root.after_MiBps": 540}
    assert CMP.load_side(str(tmp_path / "r"))[1] == {"bfq:root.after_MiBps": 540}
    with pytest.raises(CMP.CompareError, match="not a report directory"):
        CMP.load_side(str(tmp_path))


def test_run_ids_batches_thread_and_latest(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        r1 = h.record("bfq", {"nonroot.before_MiBps": 340, "nonroot.after_MiBps": 545},
                      batch="20250101-000000", machine=MACHINE, commit="x")
        h.record("raid5", {"fixed.md0_MBps": 5100}, batch="20250101-000000", machine=MACHINE,
                 commit="x")
        r3 = h.record("bfq", {"nonroot.before_MiBps": 350, "nonroot.after_MiBps": 550},
                      machine=MACHINE, commit="y", source="kernel")
        label, side = CMP.load_side(str(r1), h)
        assert label == f"run {r1}" and side == {"bfq:nonroot.before_MiBps": 340,
                                                 "bfq:nonroot.after_MiBps": 545}
        label, side = CMP.load_side("20250101-000000", h)
        assert label.startswith("batch") and len(side) == 3
        label, side = CMP.load_side("thread:bfq", h)
        assert side["bfq:nonroot.before_MiBps"] == 349
        label, side = CMP.load_side("latest:bfq", h)
        assert side["bfq:nonroot.after_MiBps"] == 550 and str(r3) in label
        with pytest.raises(CMP.CompareError):
            CMP.load_side("no-such-thing", h)
        with pytest.raises(CMP.CompareError):
            CMP.load_side("thread:nope", h)
    # the emulator's run against the kernel reference run, by run ids
    assert cli(["compare", str(r1), str(r3), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("bfq:nonroot.before_MiBps"))
    assert line.split()[1:] == ["340", "350", f"{350 / 340:.3f}"]
    assert cli(["compare", "thread", "20250101-000000", "--db", str(db), "--common"]) == 0
    out = capsys.readouterr().out
    assert "raid5:fixed.md0_MBps" in out and "legacy.md0_MBps" not in out
    assert cli(["compare", "bogus", "thread", "--db", str(db)]) == 2


@pytest.mark.parametrize("content, says", [
    (b"[1, 2]", "is [1, 2], not an object {experiment: {metric: number}}"),
    (b'{"a": 5}', "experiment 'a' is 5, not an object {metric: number}"),
    (b'{"raid5": {"fixed.md0_MBps": "fast"}}', 'metric raid5:fixed.md0_MBps is "fast", not a number'),
    (b'{"raid5": {"fixed.md0_MBps": null}}', "metric raid5:fixed.md0_MBps is null, not a number"),
    (b'{"raid5": {', "not valid JSON"),
    (b'\xff\xfe{}', "not UTF-8 text"),
], ids=["list", "not-nested", "string-value", "null-value", "bad-json", "not-utf8"])
def test_malformed_metrics_json_is_one_line_naming_it(tmp_path, capsys, content, says):
    """A report's metrics.json of the wrong shape: one line naming the file and the fault, exit 2."""
    d = tmp_path / "r"
    d.mkdir()
    (d / "metrics.json").write_bytes(content)
    assert cli(["compare", str(d), "thread:raid5", "--db", str(tmp_path / "none")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"compare: {d / 'metrics.json'}: ")
    assert says in lines[0]


@pytest.mark.parametrize("doc, says", [
    ({"metrics": {"a_MBps": 1}}, 'no experiment "name"'),
    ({"name": "bfq", "metrics": [1]}, '"metrics" is [1], not an object {metric: number}'),
    ({"name": "bfq", "metrics": {"a_MBps": [3]}}, "metric bfq:a_MBps is [3], not a number"),
    ([1], "not an experiment's result object"),
], ids=["no-name", "metrics-list", "list-value", "list"])
def test_malformed_result_json_is_one_line_naming_it(tmp_path, capsys, doc, says):
    """An experiment's result.json of the wrong shape (also inside a report): one line naming it."""
    d = tmp_path / "r" / "bfq"
    d.mkdir(parents=True)
    (d / "result.json").write_text(json.dumps(doc))
    assert cli(["compare", str(tmp_path / "r"), "thread:bfq", "--db", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"{d / 'result.json'}: " in err and says in err


def test_infinite_value_is_shown(tmp_path, capsys):
    """A metric of Infinity in a report is printed as inf, not an OverflowError."""
    d = report(tmp_path, "a", {"raid5": {"fixed.md0_MBps": float("inf")}})
    assert cli(["compare", str(d), "thread:raid5", "--db", str(tmp_path / "none")]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines()
                if l.startswith("raid5:fixed.md0_MBps"))
    assert line.split()[1:3] == ["inf", "5271.88"]


def test_nothing_in_common_says_so(tmp_path, capsys):
    """Two result sets with no metric in common: one line saying so, exit 1."""
    a = report(tmp_path, "a", {"raid5": {"fixed.md0_MBps": 5000}})
    b = report(tmp_path, "b", {"bfq": {"root.after_MiBps": 540}})
    assert cli(["compare", str(a), str(b), "--db", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [f"compare: nothing to compare: A ({a}) and B ({b}) have no "
                                "metric in common"]


def test_common_filter_leaving_nothing_prints_no_empty_table(tmp_path, capsys):
    """--common with nothing in common prints no empty table, only the one line, exit 1."""
    a = report(tmp_path, "a", {"raid5": {"fixed.md0_MBps": 5000}})
    assert cli(["compare", str(a), "thread:bfq", "--common", "--db", str(tmp_path / "n")]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "nothing to compare" in captured.err
