"""`python3 -m harness run`: what it refuses (one line on stderr naming the
option or file and what is allowed, exit 2), how fio's failures come out
(one line), and which options it honours without --hosts."""
import os
import signal
import subprocess
import sys

import pytest

from harness.paths import ROOT


def harness(*argv, cwd=None, env=None, timeout=60):
    """(exit status, stdout, stderr) of `python3 -m harness ARGV`; exit
    status None when it did not end within timeout (it is then sent
    SIGTERM, on which it kills its fio, then its session is killed)."""
    p = subprocess.Popen([sys.executable, "-m", "harness", *map(str, argv)], cwd=cwd or ROOT,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err


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
