"""`python3 -m harness run`: what it refuses (one line on stderr naming the
option or file and what is allowed, exit 2), how fio's failures come out
(one line), and which options it honours without --hosts."""
import json
import os
import shutil

import pytest

from harness_cli import harness


# --- the job file (as simulate reads it: jobfile.read_input_text) -------------------

def test_run_refuses_a_job_file_that_is_not_utf8(tmp_path):
    """A job file with bytes that are not UTF-8: one line naming it, exit 2."""
    job = tmp_path / "bin.fio"
    job.write_bytes(b"[j]\nfilename=\xff\xfe\n")
    rc, out, err = harness("run", job)
    assert (rc, err.splitlines()) == (2, [f"run: job file {job}: byte 13 is not UTF-8; "
                                          "allowed: a UTF-8 text file"])


def test_run_refuses_a_device_as_job_file():
    """run /dev/zero: one line at once (it hung reading fio's job file forever)."""
    rc, out, err = harness("run", "/dev/zero", timeout=20)
    assert (rc, err.splitlines()) == (2, ["run: job file /dev/zero is not a regular file; "
                                          "allowed: a text file"])


def test_run_refuses_a_fifo_as_job_file(tmp_path):
    """run FIFO: one line at once (it blocked opening it)."""
    fifo = tmp_path / "job.fifo"
    os.mkfifo(fifo)
    rc, out, err = harness("run", fifo, timeout=20)
    assert (rc, err.splitlines()) == (2, [f"run: job file {fifo} is not a regular file; "
                                          "allowed: a text file"])


# --- fio's failures: one line --------------------------------------------------------

def test_run_fio_failure_is_one_line(tmp_path):
    """fio refusing an option: one line `run: fio J exited N: <fio's line>` (it was 3 lines)."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    job = tmp_path / "j.fio"
    job.write_text("[j]\nioengine=null\nrw=read\nsize=1m\n")
    rc, out, err = harness("run", job, "--", "--bogus")
    assert (rc, err.splitlines()) == (1, ["run: fio j.fio exited 1: fio: unrecognized option "
                                          "'--bogus'"])


def test_run_without_arguments_names_only_the_job_as_required():
    """run alone: argparse's error names `job`, not the optional fio_args."""
    rc, out, err = harness("run")
    assert rc == 2 and err.splitlines()[-1].endswith("the following arguments are required: job")


def test_run_missing_job_file_is_one_line(tmp_path):
    """A job file that does not exist: one line, exit 2 (fio's message came twice)."""
    rc, out, err = harness("run", tmp_path / "missing.fio")
    assert (rc, err.splitlines()) == (2, [f"run: cannot read job file {tmp_path / 'missing.fio'}: "
                                          "No such file or directory"])


# --- options without --hosts ---------------------------------------------------------

TWO_JOBS = "[global]\nioengine=null\nrw=read\nsize=1m\n[a]\n[b]\n"


def test_run_section_runs_only_that_job(tmp_path):
    """run JOB --section a (real fio): only job a runs (every job ran, writers too)."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    rc, out, err = harness("run", job, "--section", "a")
    assert rc == 0, err
    assert [j["name"] for j in json.loads(out)["jobs"]] == ["a"]


def test_run_timeout_applies_to_a_local_run(tmp_path):
    """run JOB --timeout 1: fio is given up on after 1 s (the option was ignored without --hosts)."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    job = tmp_path / "long.fio"
    job.write_text("[j]\nioengine=null\nrw=read\nsize=1m\ntime_based=1\nruntime=30\n")
    rc, out, err = harness("run", job, "--timeout", "1", timeout=20)
    assert (rc, err.splitlines()) == (1, ["run: fio long.fio: no result after 1 s"])


def test_run_refuses_results_dir_without_hosts(tmp_path):
    """--results-dir without --hosts: one line naming it, exit 2 (it was ignored)."""
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    rc, out, err = harness("run", job, "--results-dir", tmp_path / "res")
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith("run: --results-dir without --hosts: allowed: ")
    assert not (tmp_path / "res").exists()


def test_run_refuses_fio_arguments_with_simulate(tmp_path):
    """--simulate with fio arguments: one line, exit 2 (they were dropped silently)."""
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    rc, out, err = harness("run", job, "--simulate", "--", "--runtime=1")
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith("run: fio arguments with --simulate (--runtime=1): allowed: none")


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_run_refuses_a_timeout_that_is_no_positive_number(tmp_path, value):
    """--timeout 0, -1 or nan: one line naming it and what is allowed, exit 2."""
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    rc, out, err = harness("run", job, "--timeout", value)
    assert (rc, err.splitlines()) == (2, [f"run: --timeout {float(value):g}: allowed: a number "
                                          "of seconds > 0"])


def test_run_hosts_unwritable_results_dir_is_one_line(tmp_path):
    """run --hosts H --results-dir X where X cannot be made: one line, exit 2 (a traceback)."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    (tmp_path / "file").write_text("")
    results = tmp_path / "file" / "results"          # below a regular file
    rc, out, err = harness("run", job, "--hosts", "ip:127.0.0.1,1", "--results-dir", results)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"run: --results-dir {results}: cannot write ")
    assert "allowed: a writable directory" in err


def test_run_fio_arguments_after_options_reach_fio(tmp_path):
    """run JOB --section a -- --bogus: the fio argument reaches fio (argparse refused it)."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    rc, out, err = harness("run", job, "--section", "a", "--", "--bogus")
    assert (rc, err.splitlines()) == (1, ["run: fio two.fio exited 1: fio: unrecognized option "
                                          "'--bogus'"])


# --- the build --------------------------------------------------------------------------

def test_run_without_a_build_says_to_build_and_never_builds(tmp_path):
    """No build in MDSPLIT_BUILD_DIR: one line saying to run ./mdsplit build, exit 2; no apt-get or cmake."""
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "called.log"
    for tool in ("apt-get", "cmake", "dpkg-query"):      # what a build would start
        (fake / tool).write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {log}\nexit 1\n")
        (fake / tool).chmod(0o755)
    job = tmp_path / "j.fio"
    job.write_text("[j]\nioengine=null\nrw=read\nsize=1m\n")
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}",
               MDSPLIT_BUILD_DIR=str(tmp_path / "nobuild"))
    rc, out, err = harness("run", job, "--simulate", env=env, timeout=120)
    assert not log.exists(), log.read_text()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"run: no build in {tmp_path / 'nobuild'} ")
    assert "mdsplit build first" in err
    assert out == ""


# --- --simulate ---------------------------------------------------------------------------

def test_run_simulate_job_ending_in_error_exits_1(tmp_path, engine, mdsplit_module):
    """run JOB --simulate where the 10th read fails: one line naming the job and its error, exit 1 (as fio)."""
    (tmp_path / "null.toml").write_text(
        '[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\nsize = "16m"\n'
        'backend = "ram"\nmodel = "nvme"\n[members.faults]\nfail_nth = [10]\n')
    job = tmp_path / "e.fio"
    job.write_text(f"[global]\nioengine=external:{engine}\nmdsplit_config=null.toml\n"
                   "filename=md0\ndirect=1\nrw=read\nbs=4k\nsize=256k\n[j]\n")
    rc, out, err = harness("run", job, "--simulate")
    assert (rc, err.splitlines()) == (1, ["run: simulate e.fio: job j: error=5 "
                                          "(Input/output error)"])
    assert out == ""


# --- sidecars ---------------------------------------------------------------------------

def test_run_reports_only_the_sidecars_this_run_wrote(tmp_path, engine):
    """A second run with numjobs=1: only stats/s.json, not the first run's s.json.1 or a s.json.bak.json beside it."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    (tmp_path / "ram.toml").write_text('[device]\nkind = "passthrough"\n[[members]]\n'
                                       'path = "m0.img"\nsize = "16m"\nbackend = "ram"\n')
    job = tmp_path / "j.fio"
    text = (f"[global]\nioengine=external:{engine}\nmdsplit_config=ram.toml\nfilename=md0\n"
            "direct=1\nrw=read\nbs=4k\nsize=256k\n[j]\nnumjobs={n}\nmdsplit_stats=stats/s.json\n")
    job.write_text(text.format(n=2))
    rc, out, err = harness("run", job)
    assert rc == 0, err
    assert sorted(json.loads(out)["sidecars"]) == ["stats/s.json", "stats/s.json.1"]
    shutil.copy(tmp_path / "stats/s.json", tmp_path / "stats/s.json.bak.json")
    job.write_text(text.format(n=1))
    rc, out, err = harness("run", job)
    assert rc == 0, err
    assert list(json.loads(out)["sidecars"]) == ["stats/s.json"]
