"""`python3 -m harness reference`'s arguments: checked before anything runs
(one line naming the option and what is allowed, exit 2), and what they
become in the kernel's job files. Needs no loop device, tracefs or fio."""
import json

import pytest

from harness.experiments import bio_size as D
from harness.experiments import buffered as B
from harness_cli import harness

BAD = [
    (["buffered", "--depths", "0"], "--depths 0: allowed: iodepths >= 1"),
    (["buffered", "--depths", "1", "4", "1"], "--depths 1 4 1: allowed: each iodepth once"),
    (["bfq", "--rounds", "0"], "--rounds 0: allowed: a whole number >= 1"),
    (["buffered", "--runtime", "-1"], "--runtime -1: allowed: a number of seconds >= 0.001"),
    (["bfq", "--runtime", "0"], "--runtime 0: allowed: a number of seconds >= 0.001"),
    (["buffered", "--runtime", "inf"], "--runtime inf: allowed: a number of seconds >= 0.001"),
    (["buffered", "--size", "0"], "--size 0: allowed: a multiple of 4k, at least 4k"),
    (["buffered", "--size", "6k"], "--size 6k: allowed: a multiple of 4k, at least 4k"),
    (["buffered", "--size", "lots"], "--size lots: allowed: a multiple of 4k, at least 4k"),
    (["bfq", "--delay-scale", "-0.5"], "--delay-scale -0.5: allowed: a number >= 0"),
    # An option of another experiment would do nothing: refused by name.
    (["bfq", "--depths", "1", "2"], "--depths applies to buffered only; allowed for bfq: "
                                    "--delay-scale, --no-warmup, --rounds, --runtime"),
    (["bio-size", "--size", "1g"], "--size applies to buffered only; allowed for bio-size: "
                                   "--no-hugepages"),
    (["buffered", "--rounds", "2"], "--rounds applies to bfq only"),
    (["buffered", "--no-warmup"], "--no-warmup applies to bfq only"),
    (["bfq", "--no-hugepages"], "--no-hugepages applies to bio-size only"),
    (["bio-size", "--runtime", "1"], "--runtime applies to bfq and buffered only"),
    (["bio-size", "--target", "file"], "--target applies to buffered only"),
    (["buffered", "--delay-scale", "1"], "--delay-scale applies to bfq only"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_reference_argument_is_one_line_exit_2(argv, message):
    """A bad value: `reference NAME: --opt V: allowed: ...`, exit 2, before any run."""
    rc, out, err = harness("reference", *argv, "--no-history", "--quiet", timeout=30)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"reference {argv[0]}: {message}")
    assert out == ""


@pytest.mark.parametrize("what", ["bio-size", "bfq", "buffered"])
def test_emulator_report_that_does_not_exist_is_one_line_exit_2(what, tmp_path):
    """--emulator MISSING: one line naming it, exit 2, for each reference (bio-size ran on)."""
    missing = tmp_path / "missing"
    rc, out, err = harness("reference", what, "--emulator", missing, "--no-history", "--quiet",
                           timeout=30)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"reference {what}: --emulator {missing}: no {what} report there")
    assert "allowed: a report directory" in err


def test_bio_size_emulator_none_gives_no_distributions():
    """bio-size --emulator none: no emulator figures, and no virtual-clock run instead."""
    assert D.emulator_sizes("none") == (None, "not asked for (--emulator none)")


def test_bio_size_emulator_report_without_sizes_is_not_replaced_by_a_run(tmp_path):
    """A named report without distributions says so; it is not silently replaced by a run."""
    (tmp_path / "result.json").write_text(json.dumps({"metrics": {}, "raw": {}}))
    sizes, why = D.emulator_sizes(str(tmp_path))
    assert sizes is None
    assert why == f"{tmp_path / 'result.json'} has no bio-size distributions (raw.sizes)"


def test_buffered_fractional_runtime_reaches_fio_in_milliseconds():
    """--runtime 0.1: fio gets runtime=100ms (it read "0.1" as 0 s)."""
    text = B._buffered_job("/dev/loop9", [1], 0.1, 1 << 20, fadvise=False)
    assert "runtime=100ms" in text.splitlines()
    assert "runtime=3000ms" in B._buffered_job("f", [1], 3, 1 << 20, fadvise=True).splitlines()


def test_keep_dir_that_is_not_empty_is_refused_before_the_run(tmp_path):
    """--keep DIR holding a file: one line naming --keep, exit 2, nothing run or replaced."""
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "bio-read-psync-malloc.json").write_text("precious")
    rc, out, err = harness("reference", "bio-size", "--keep", keep, "--emulator", "none",
                           "--no-hugepages", "--no-history", "--quiet", timeout=120)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"reference bio-size: --keep {keep}: exists and is not empty")
    assert "allowed: a new directory or an empty one" in err
    assert out == ""
    assert [p.name for p in keep.iterdir()] == ["bio-read-psync-malloc.json"]
    assert (keep / "bio-read-psync-malloc.json").read_text() == "precious"
