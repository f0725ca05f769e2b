"""fio's fadvise_hint reaches the engine's page cache as posix_fadvise()
reaches the kernel's (generic_fadvise()): by default a random job's file is
FMODE_RANDOM, so each miss reads just the page asked for, and a sequential
job's window doubles. fio's own posix_fadvise() goes to a descriptor the
virtual device does not have, so before this the advice was lost and a
buffered randread read ~1.8 pages a miss (context readahead). Engine and
`harness simulate` alike."""
import json
import subprocess

import pytest

from conftest import stack_job
from harness.simulate import simulate_job

STACK = ('[[members]]\npath = "m0.img"\nsize = "16m"\n'
         '[page_cache]\nra_kb = 128\n')


def readahead(tmp_path, engine, run, rw, hint):
    jobfile = stack_job(tmp_path, engine, STACK,
                        f"direct=0\nrw={rw}\nbs=4k\nsize=4m\n"
                        + (f"fadvise_hint={hint}\n" if hint is not None else "")
                        + "[j]\nmdsplit_stats=s.json\n")
    if run == "fio":
        r = subprocess.run(["fio", "--output=/dev/null", str(jobfile)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    else:
        simulate_job(jobfile)
    return json.loads((tmp_path / "s.json").read_text())["page_cache"]["readahead"]


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_random_job_reads_each_miss_as_asked_by_default(tmp_path, engine, run):
    """randread, fadvise_hint unset: FMODE_RANDOM, one forced one-page window per miss."""
    ra = readahead(tmp_path, engine, run, "randread", None)
    assert ra["windows"] == ra["forced"]["windows"] == ra["pages"]
    assert ra["window_sizes"] == {"1": ra["windows"]}


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_random_job_without_advice_uses_ondemand_readahead(tmp_path, engine, run):
    """randread, fadvise_hint=0: no advice, the ondemand heuristics read more than asked."""
    ra = readahead(tmp_path, engine, run, "randread", "0")
    assert ra["forced"]["windows"] == 0
    assert ra["pages"] > ra["random"]["windows"]


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_sequential_job_ramps_to_twice_the_window_by_default(tmp_path, engine, run):
    """read, fadvise_hint unset: POSIX_FADV_SEQUENTIAL, windows up to 2 x 128 KiB."""
    sizes = readahead(tmp_path, engine, run, "read", None)["window_sizes"]
    assert max(int(n) for n in sizes) == 64


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_sequential_job_without_advice_keeps_the_devices_window(tmp_path, engine, run):
    """read, fadvise_hint=0: windows up to the device's 128 KiB."""
    sizes = readahead(tmp_path, engine, run, "read", "0")["window_sizes"]
    assert max(int(n) for n in sizes) == 32
