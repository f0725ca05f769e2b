"""Ctrl-C during a long run called from Python: the run drains what it queued,
the caller gets KeyboardInterrupt within moments (not when the run would have
ended, here never), and the object runs the next call normally.

Each case runs in a child process that gets SIGINT mid-run, so that
the signal never reaches pytest; a run that ignores it is caught by the
child's timeout."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STACK = ('[[members]]\nbackend = "ram"\nsize = "8m"\nmodel = "nvme"\n')
ENDLESS = 1 << 50  # bytes: years of virtual I/O, far beyond the child's timeout


def interrupted(long_call: str, next_call: str) -> str:
    """Runs `long_call` in a child that gets SIGINT 0.3 s in, then `next_call`;
    returns the child's last line: "KeyboardInterrupt <next_call's value>",
    "finished" or "timeout"."""
    script = textwrap.dedent(f"""\
        import os, subprocess, sys
        sys.path.insert(0, {str(ROOT)!r})
        from harness import paths
        m = paths.import_mdsplit()
        stack = {STACK!r}
        # From another process, as a terminal's Ctrl-C: the runs that hold the
        # GIL let no Python thread of this one run.
        subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -INT {{os.getpid()}}"])
        try:
            {long_call}
            print("finished")
        except KeyboardInterrupt:
            print("KeyboardInterrupt", {next_call})
        """)
    try:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=60, env=os.environ.copy())
    except subprocess.TimeoutExpired:
        return "timeout"
    lines = r.stdout.strip().splitlines()
    return lines[-1] if lines else r.stderr.strip()[-500:]


def test_ctrl_c_ends_run_fio_jobs_and_a_delayed_job_never_starts(tmp_path):
    """run_fio_jobs: KeyboardInterrupt, a job whose startdelay has not come never waited for."""
    (tmp_path / "stack.toml").write_text(STACK)
    jobs = [dict(random=True, read_pct=0, iodepth=16, io_size=ENDLESS),
            dict(random=True, start_delay_ns=1 << 59, pid=2, size=65536)]
    r = interrupted(f"m.run_fio_jobs([dict(config={str(tmp_path / 'stack.toml')!r})], {jobs!r})",
                    "'done'")
    assert r == "KeyboardInterrupt done"


def test_ctrl_c_ends_buffered_run_fio_jobs(tmp_path):
    """run_fio_jobs with a buffered job (runs without the GIL): KeyboardInterrupt, then a
    buffered job on the same stack file runs whole."""
    (tmp_path / "stack.toml").write_text(STACK)
    stacks = [dict(config=str(tmp_path / "stack.toml"))]
    endless = dict(random=True, iodepth=32, io_size=ENDLESS, direct=False)
    whole = dict(random=True, iodepth=8, io_size=64 * 4096, direct=False)
    r = interrupted(f"m.run_fio_jobs({stacks!r}, [{endless!r}])",
                    f"m.run_fio_jobs({stacks!r}, [{whole!r}])['jobs'][0]['read']['ios']")
    assert r == "KeyboardInterrupt 64"


def test_ctrl_c_ends_run_fio_jobs(tmp_path):
    """run_fio_jobs: KeyboardInterrupt once the time-based job has drained."""
    (tmp_path / "stack.toml").write_text(STACK)
    job = dict(random=True, read_pct=0, iodepth=16, time_based=True, runtime_ns=1 << 59)
    r = interrupted(f"m.run_fio_jobs([dict(config={str(tmp_path / 'stack.toml')!r})], [{job!r}])",
                    "'done'")
    assert r == "KeyboardInterrupt done"
