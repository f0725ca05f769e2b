"""`check`: the noise-aware regression rule flags an injected regression and
passes a noise-only change. Synthetic histories; no fio."""
import random

import pytest

from harness import check as C
from harness.__main__ import main as cli
from harness.history import History

MACHINE = {"hostname": "host-a", "cpu_model": "Test CPU", "kernel": "6.1", "cpus": 2}


def fill(h, values_by_metric, exp="raid5", machine=MACHINE, batch=None):
    """One run per index of the value lists."""
    n = len(next(iter(values_by_metric.values())))
    ids = []
    for i in range(n):
        ids.append(h.record(exp, {m: v[i] for m, v in values_by_metric.items()},
                            machine=machine, commit=f"c{i}", batch=batch))
    return ids


def noisy(center, rel, n, seed):
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-rel, rel)) for _ in range(n)]


def test_median_and_spread():
    assert C.median([3, 1, 2]) == 2
    assert C.median([1, 2, 3, 10]) == 2.5
    assert C.spread([5]) == 0
    assert C.spread([10, 10, 10, 10]) == 0
    assert C.spread([9, 10, 11]) == pytest.approx(1.4826)
    # one wild value does not widen the spread much
    assert C.spread([10, 10.1, 9.9, 10, 1000]) < 0.2


def test_judge_directions():
    base = [100, 101, 99, 100, 100]
    assert C.judge([80], base, "higher")[0] == "REGRESSION"
    assert C.judge([97], base, "higher")[0] == "OK"
    assert C.judge([130], base, "higher")[0] == "better"
    assert C.judge([130], base, "lower")[0] == "REGRESSION"
    assert C.judge([80], base, "lower")[0] == "better"
    # the median of repeated candidate runs is judged, not the worst one
    assert C.judge([70, 99, 100], base, "higher")[0] == "OK"
    # a wide baseline spread widens the limit beyond the 5% floor
    wide = [100, 130, 80, 120, 90]
    status, value, m, s, limit, basis = C.judge([75], wide, "higher")
    assert status == "OK" and basis == "spread" and limit > 5
    # zero baseline with zero spread: any error is a regression
    assert C.judge([1], [0, 0, 0], "lower")[0] == "REGRESSION"
    assert C.judge([0], [0, 0, 0], "lower")[0] == "OK"


@pytest.mark.parametrize("seed", range(5))
def test_noise_passes_injected_regression_fails(tmp_path, seed):
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        fill(h, {"fixed.md0_MBps": noisy(5000, 0.02, 6, seed),
                 "fixed.seek_zero_pct": noisy(75, 0.01, 6, seed + 100)})
        # newest: within the noise
        h.record("raid5", {"fixed.md0_MBps": 5000 * 0.985, "fixed.seek_zero_pct": 75.4},
                 machine=MACHINE, commit="noise")
        _, verdicts, _ = C.check_experiment(h, "raid5")
        assert {v.metric: v.status for v in verdicts} == {"fixed.md0_MBps": "OK",
                                                          "fixed.seek_zero_pct": "OK"}
        assert C.run_check(h, ["raid5"], out=open(tmp_path / "o1", "w")) == 0
        # newest: throughput 20% down
        h.record("raid5", {"fixed.md0_MBps": 4000, "fixed.seek_zero_pct": 75},
                 machine=MACHINE, commit="bad")
        _, verdicts, _ = C.check_experiment(h, "raid5")
        status = {v.metric: v.status for v in verdicts}
        assert status["fixed.md0_MBps"] == "REGRESSION"
        assert status["fixed.seek_zero_pct"] == "OK"
        assert C.run_check(h, ["raid5"], out=open(tmp_path / "o2", "w")) == 1


def test_cli_exit_codes_and_lines(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        fill(h, {"read.max_sectors_MBps": [3500, 3520, 3510, 3490, 3505],
                 "randread.clat_mean_us": [100, 101, 99, 100, 102]}, exp="bio-size")
        h.record("bio-size", {"read.max_sectors_MBps": 3495, "randread.clat_mean_us": 101},
                 machine=MACHINE, commit="ok")
    assert cli(["check", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    lines = [l for l in out.splitlines() if l.startswith("  ")]
    assert len(lines) == 2                                   # one line per metric
    assert all(l.split()[0] == "OK" for l in lines)
    with History(db) as h:                                   # latency up 30%: lower is better
        h.record("bio-size", {"read.max_sectors_MBps": 3495, "randread.clat_mean_us": 130},
                 machine=MACHINE, commit="slow")
    assert cli(["check", "bio-size", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION bio-size:randread.clat_mean_us" in out
    assert "1 regression(s)" in out
    # a looser floor accepts it
    assert cli(["check", "--db", str(db), "--floor", "0.5"]) == 0
    capsys.readouterr()
    assert cli(["check", "nothing", "--db", str(db)]) == 2
    assert cli(["check", "--db", str(tmp_path / "none.sqlite")]) == 2
    assert cli(["check", "--explain"]) == 0
    assert "median" in capsys.readouterr().out


def test_marked_baseline_wins_over_window(tmp_path):
    with History(tmp_path / "h.sqlite") as h:
        ids = fill(h, {"fixed.md0_MBps": [5000, 5010, 4990]})
        h.mark_baseline([str(i) for i in ids])
        fill(h, {"fixed.md0_MBps": [4000, 4010, 3990]})      # a slow period, not marked
        h.record("raid5", {"fixed.md0_MBps": 4005}, machine=MACHINE, commit="new")
        cands, base, desc = C.select_runs(h, "raid5")
        assert [r.run_id for r in base] == sorted(ids, reverse=True)
        assert "marked baseline" in desc
        _, verdicts, _ = C.check_experiment(h, "raid5")
        assert verdicts[0].status == "REGRESSION"
        h.mark_baseline([str(i) for i in ids], on=False)
        _, verdicts, _ = C.check_experiment(h, "raid5")     # previous 5: 4000s and 5000s
        assert verdicts[0].status == "OK"


def test_other_machines_and_candidates(tmp_path):
    other = dict(MACHINE, hostname="host-b")
    with History(tmp_path / "h.sqlite") as h:
        fill(h, {"fixed.md0_MBps": [5000, 5010, 4990]})
        fill(h, {"fixed.md0_MBps": [9000, 9100, 9050]}, machine=other)   # a faster machine
        h.record("raid5", {"fixed.md0_MBps": 5005}, machine=MACHINE, commit="new")
        _, v, _ = C.check_experiment(h, "raid5")
        assert v[0].status == "OK" and v[0].n == 3
        _, v, _ = C.check_experiment(h, "raid5", same_machine=False, window=3)
        assert v[0].status == "REGRESSION"
        # three candidate runs: their median is judged
        fill(h, {"fixed.md0_MBps": [3000, 5000, 5008]})
        _, v, _ = C.check_experiment(h, "raid5", candidates=3)
        assert v[0].status == "OK" and v[0].value == 5000


def test_missing_and_undirected_metrics_do_not_fail(tmp_path, capsys):
    with History(tmp_path / "h.sqlite") as h:
        fill(h, {"fixed.md0_MBps": [5000, 5000], "mystery": [1, 1]})
        h.record("raid5", {"mystery": 50, "new_MBps": 3}, machine=MACHINE, commit="x")
        _, v, _ = C.check_experiment(h, "raid5")
        status = {x.metric: x.status for x in v}
        assert status == {"mystery": "no-direction", "new_MBps": "no-baseline",
                          "fixed.md0_MBps": "missing"}
        assert C.run_check(h, out=open(tmp_path / "o", "w")) == 0


def test_first_run_has_no_baseline(tmp_path):
    with History(tmp_path / "h.sqlite") as h:
        h.record("raid5", {"fixed.md0_MBps": 5000}, machine=MACHINE, commit="x")
        _, v, _ = C.check_experiment(h, "raid5")
        assert v[0].status == "no-baseline"


def test_expectations_flag(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        for _ in range(3):
            h.record("raid5", {"legacy.md0_MBps": 3000, "fixed.md0_MBps": 3100,
                               "legacy.seek_zero_pct": 45, "fixed.seek_zero_pct": 75},
                     machine=MACHINE, commit="x")
    assert cli(["check", "--db", str(db)]) == 0
    assert cli(["check", "--db", str(db), "--expectations"]) == 1   # 3100/3000 < 1.3
    out = capsys.readouterr().out
    assert "FAIL" in out and "fixed.md0_MBps / legacy.md0_MBps >= 1.3" in out


@pytest.mark.parametrize("argv, says", [
    (["--k", "nan"], "check: --k nan: allowed: a finite number >= 0"),
    (["--k", "inf"], "check: --k inf: allowed: a finite number >= 0"),
    (["--k", "-1"], "check: --k -1.0: allowed: a finite number >= 0"),
    (["--floor", "nan"], "check: --floor nan: allowed: a finite number >= 0"),
    (["--window", "0"], "check: --window 0: allowed: an integer >= 1"),
    (["--window", "-2"], "check: --window -2: allowed: an integer >= 1"),
    (["--last", "0"], "check: --last 0: allowed: an integer >= 1"),
    (["--last", "-1"], "check: --last -1: allowed: an integer >= 1"),
], ids=lambda x: " ".join(x) if isinstance(x, list) else "-")
def test_bad_option_values_are_refused(tmp_path, capsys, argv, says):
    """An option value check cannot use is one line naming the option and what it allows, exit 2."""
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        fill(h, {"fixed.md0_MBps": [5000, 5000, 5000, 2450]})     # the newest 51% worse
    assert cli(["check", "--db", str(db)] + argv) == 2
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 1 and captured.err.startswith(says)
    assert captured.out == ""


def test_k_zero_is_the_floor_alone(tmp_path, capsys):
    """--k 0 is accepted: the limit is the floor alone."""
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        fill(h, {"fixed.md0_MBps": [4000, 5000, 6000, 4500]})    # wide spread, 10% down
    assert cli(["check", "--db", str(db), "--k", "0"]) == 1
    assert "REGRESSION" in capsys.readouterr().out


def test_machine_metrics_are_never_judged(tmp_path, capsys):
    """Real-clock machine.* metrics halved in the newest run: no REGRESSION, exit 0, counted as not judged."""
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        fill(h, {"fixed.md0_MBps": [5000, 5000, 5000, 5000],
                 "machine.fixed.md0_MBps": [3000, 3000, 3000, 1500],
                 "machine.agreement.dd.read_ratio": [1.0, 1.0, 1.0, 0.5]})
    assert cli(["check", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "REGRESSION" not in out and "machine." not in out.split("\n", 1)[1]
    assert "2 machine.* metric(s) not judged (real clock, this machine)" in out.splitlines()[0]


def test_machine_metrics_missing_from_the_newest_run_are_not_listed(tmp_path):
    """A machine.* metric the baseline has and the newest run lacks is not a MISSING verdict."""
    with History(tmp_path / "h.sqlite") as h:
        fill(h, {"fixed.md0_MBps": [5000, 5000], "machine.fixed.md0_MBps": [3000, 3000]})
        h.record("raid5", {"fixed.md0_MBps": 5000}, machine=MACHINE, commit="x")
        _, verdicts, _ = C.check_experiment(h, "raid5")
    assert [(v.metric, v.status) for v in verdicts] == [("fixed.md0_MBps", "OK")]
