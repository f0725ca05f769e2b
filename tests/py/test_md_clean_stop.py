"""md's clean stop counts only the jobs that started (issue 41, item 3).

With thread=1 every job of a RAID5 is set up in fio's main process before
any runs, and each one set up became a user of the shared array. A job that
fio then never starts (rejected in fio's own setup, or left waiting when a
signal or exitall_on_error ended the run) never reaches the engine's cleanup:
the array stayed active (the next run resynced it, a degraded one was refused
as killed) and no mdsplit_stats was written. fio's run_threads() never starts
a job it reaped in setup_files() or one marked terminate before its turn
("never got a chance to start"): the last job that did start stops the array.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import write_job

XATTR = "user.mdsplit.md"
STACK = ('[device]\nkind = "raid5"\nchunk = "64k"\n' +
         "".join(f'[[members]]\npath = "m{i}.img"\nsize = "16m"\n' for i in range(4)))


@pytest.fixture
def array(workdir, xattrs):
    (workdir / "r5.toml").write_text(STACK)
    return workdir


def states(workdir, missing=None):
    """Each member's superblock state; `missing` for one not written yet (else it raises)."""
    out = []
    for i in range(4):
        try:
            out.append(os.getxattr(workdir / f"m{i}.img", XATTR).decode()
                       .split(" state=")[1].split()[0])
        except OSError:
            if missing is None:
                raise
            out.append(missing)
    return out


def jobfile(engine, workdir, jobs):
    return write_job(workdir, "run.fio", (
        f"[global]\nioengine=external:{engine}\nmdsplit_config=r5.toml\nfilename=md0\n"
        f"direct=1\nthread=1\nbs=64k\nmdsplit_stats=stats.json\n{jobs}"))


def fio(job, **kw):
    return subprocess.run(["fio", "--output=/dev/null", str(job)], cwd=job.parent,
                          capture_output=True, text=True, timeout=60, **kw)


def assert_stopped_cleanly(workdir, stderr):
    assert states(workdir) == ["clean"] * 4, stderr
    stats = json.loads((workdir / "stats.json").read_text())
    assert stats["md_assembly"]["superblocks"] is True, stats


@pytest.mark.parametrize("bad", ["rw=write\noffset=1g\n", "rw=write\nzonemode=zbd\n"],
                         ids=["offset-past-end", "zbd-without-zone-size"])
def test_a_job_fio_rejects_in_its_setup_leaves_the_array_clean(engine, array, bad):
    """A job fio reaps in setup_files beside a good one: members end clean, the sidecar is written."""
    r = fio(jobfile(engine, array, f"[good]\nrw=write\nsize=1m\n[bad]\n{bad}"))
    assert r.returncode != 0  # fio's own refusal of [bad]
    assert_stopped_cleanly(array, r.stderr)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_a_stonewalled_job_waits_leaves_the_array_clean(engine, array, sig):
    """fio stopped by SIGINT/SIGTERM during [a]; [b] after its stonewall never starts: clean stop."""
    job = jobfile(engine, array, "[a]\nrw=write\nsize=32m\nrate=4m\n[b]\nstonewall\nrw=read\n"
                                 "size=1m\n")
    p = subprocess.Popen(["fio", "--output=/dev/null", str(job)], cwd=array,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while "active" not in states(array, missing=""):
        assert time.monotonic() < deadline and p.poll() is None, "the array never went active"
        time.sleep(0.05)
    time.sleep(0.5)
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert_stopped_cleanly(array, err)


def test_exitall_on_error_while_a_job_waits_on_startdelay_leaves_the_array_clean(engine, array):
    """[x] fails with exitall_on_error=1 while [late] waits on startdelay: clean stop, sidecar written."""
    # [x] verifies what was never written: fio's verify fails it (EILSEQ).
    r = fio(jobfile(engine, array, "[x]\nrw=read\nsize=1m\nverify=md5\nexitall_on_error=1\n"
                                   "[late]\nrw=write\nsize=1m\nstartdelay=30\n"))
    assert r.returncode != 0
    assert_stopped_cleanly(array, r.stderr)


def test_a_signal_after_the_last_running_job_ended_while_another_waits_leaves_the_array_clean(
        engine, array):
    """[a] ends, [b] still waits on startdelay, then SIGINT: [b] never starts; the array is stopped at fio's exit."""
    job = jobfile(engine, array, "[a]\nrw=write\nsize=1m\n[b]\nrw=read\nsize=1m\nstartdelay=20\n")
    p = subprocess.Popen(["fio", "--output=/dev/null", str(job)], cwd=array,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(3)  # [a] (1 MiB) is done; [b] waits until 20 s
    assert p.poll() is None
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert_stopped_cleanly(array, err)
