"""harness/bands.py and `harness sweep`: a setting changes only the keys it
names, a band's verdict follows its median and width, and the sweep runs on
the virtual clock and prints every thread figure as a band."""
import subprocess
import sys

import pytest

from harness import bands
from harness.paths import ROOT


def test_set_keys_replaces_only_the_named_keys():
    """A table key, a [models.x] key and an inline table's member are replaced, nothing else."""
    text = (ROOT / "jobs" / "raid5-fixed.toml").read_text()
    new = bands.set_keys(text, {"cpu.dispatch": '"3us"', "bio.contiguity.seed": "7",
                                "models.sas-ssd-seed000.random_penalty": '"80us"'})
    changed = [(a, b) for a, b in zip(text.splitlines(), new.splitlines()) if a != b]
    assert [b for _, b in changed] == ['dispatch = "3us"',
                                       "contiguity = { runs = [[1, 0.6], [2, 0.4], [512, 0.002]], seed = 7 }",
                                       'random_penalty = "80us"']


def test_set_keys_refuses_a_key_the_file_lacks():
    """A misspelt key is an error naming it, never a silent no-op."""
    with pytest.raises(KeyError, match="cpu.dispatchh"):
        bands.set_keys("[cpu]\ndispatch = \"1us\"\n", {"cpu.dispatchh": '"2us"'})


def test_verdict_uses_the_median_and_the_width():
    """Inside tolerance of the median: PASS; outside: MISS; wider than +-25 %: not determined
    when the thread's figure is in the band, a miss when the whole band is off it."""
    assert bands.verdict((100, 95, 105), 108, tolerance=0.1) == "PASS"
    assert bands.verdict((100, 95, 105), 120, tolerance=0.1) == "MISS"
    assert bands.verdict((100, 60, 105), 100, tolerance=0.1) == "not determined by the evidence"
    assert bands.verdict((40, 38, 41), 31.4, abs_tolerance=3) == "MISS"
    assert bands.verdict((8.85, 6.30, 9.37), 1.2, tolerance=0.15) == "MISS (the whole band)"


def test_band_is_median_and_10_90_quantiles():
    """Linear quantiles as numpy's default."""
    assert bands.band(list(range(11))) == (5.0, 1.0, 9.0)


def test_sweep_prints_each_thread_figure_as_a_band(tmp_path):
    """`harness sweep raid5 --draws 2`: the parameters with sources, a band row per figure."""
    r = subprocess.run([sys.executable, "-m", "harness", "sweep", "raid5", "--draws", "2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "random_penalty: 60..140 us" in r.stdout
    assert "legacy.md0_MBps" in r.stdout and "fixed.member_rareq_sz_kb" in r.stdout
    rows = [l for l in r.stdout.splitlines() if l.startswith("legacy.md0_MBps")]
    assert rows and rows[0].split()[-1] in ("PASS", "MISS", "evidence", "band)")


def test_sweep_refuses_a_bad_draw_count():
    """--draws 0 is one line naming the option, exit 2."""
    r = subprocess.run([sys.executable, "-m", "harness", "sweep", "raid5", "--draws", "0"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == "sweep: --draws 0: allowed: an integer >= 1"


def test_set_fio_options_replaces_one_option_of_one_section():
    """global.thinktime is replaced in [global] only; a missing option is an error naming it."""
    text = "[global]\nthinktime=64\nbs=4k\n\n[a]\nthinktime=1\n"
    assert bands.set_fio_options(text, {"global.thinktime": "96"}) == \
        "[global]\nthinktime=96\nbs=4k\n\n[a]\nthinktime=1\n"
    with pytest.raises(KeyError, match=r"\[global\] iodepth="):
        bands.set_fio_options(text, {"global.iodepth": "2"})


def test_sensitivity_is_the_slope_over_the_range():
    """A figure linear in one parameter moves by slope x range; the other parameter 0."""
    from harness.sweep import Param, sensitivity_table
    params = [Param("a", 0, 10, "", "", None), Param("b", 0, 1, "", "", None)]
    values = [[0, 0.5], [5, 0.2], [10, 0.9], [2, 0.5]]
    runs = [{"m": 100 + 2 * a} for a, _ in values]
    row = sensitivity_table(params, values, runs, ["m"]).splitlines()[1].split()
    # slope 2 x range 10 = 20 on a median of 107: 18.7 %
    assert row[0] == "m" and float(row[1]) == pytest.approx(100 * 20 / 107, abs=0.1)


def test_sweep_buffered_simulates_the_job_file_per_draw():
    """`harness sweep buffered --draws 2`: each draw simulates uring-buffered-ra.fio with its
    costs as [cpu.buffered]; a band row per thread figure."""
    r = subprocess.run([sys.executable, "-m", "harness", "sweep", "buffered", "--draws", "2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert "readahead_ns: 0..200 ns" in r.stdout
    rows = [l for l in r.stdout.splitlines() if l.startswith("c8d317aa.rasync_off.qd128_kIOPS")]
    assert rows and rows[0].split()[-1] in ("PASS", "MISS", "evidence")
