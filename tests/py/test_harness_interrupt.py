"""Stopping the harness while fio runs (^C, SIGTERM): fio and the job
processes it forked die with the harness, nothing writes into the report
afterwards, the member images the run made are removed, and the harness
says `<command>: interrupted` (exit 130). fio is a shell script on PATH
here, standing in for fio and the engine."""
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.paths import ROOT
from process_checks import left_running

# The engine's part in reproduce passthrough: the member image (1 GiB sparse,
# where passthrough.toml puts it) and a job process in a session of its own
# (as fio's) writing a sidecar until it is killed.
FAKE_FIO = """#!/bin/sh
mkdir -p work stats
truncate -s 1G work/passthrough-m0.img
setsid sh -c 'while :; do date +%s%N > stats/passthrough-verify.json; sleep 0.05; done' &
echo $! > "{dir}/child"
echo $$ > "{dir}/pid"
wait
"""


def _left_running(tmp_path, wait_s=5.0) -> list:
    """The fake fio's processes still running after wait_s (killed now)."""
    return left_running([int((tmp_path / n).read_text()) for n in ("pid", "child")
                         if (tmp_path / n).exists()], wait_s)


def _signal_while_fio_runs(tmp_path, argv, signum):
    """Runs `python3 -m harness ARGV` with the fake fio first on PATH and
    sends it signum once fio runs: (exit status, stderr)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fio = bindir / "fio"
    fio.write_text(FAKE_FIO.format(dir=tmp_path))
    fio.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    p = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "pid").exists() and time.monotonic() < deadline \
                and p.poll() is None:
            time.sleep(0.02)
        time.sleep(0.3)
        p.send_signal(signum)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
        p.wait()
    return p.returncode, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_stopped_reproduce_leaves_no_fio_and_no_image(tmp_path, signum):
    """reproduce stopped while fio runs: exit 130, fio gone, no image, no sidecar written later."""
    report = tmp_path / "report"
    rc, err = _signal_while_fio_runs(
        tmp_path, ["reproduce", "passthrough", "--report-dir", str(report), "--no-history"],
        signum)
    left = _left_running(tmp_path)
    sidecar = report / "passthrough" / "jobs" / "stats" / "passthrough-verify.json"
    before = sidecar.stat().st_mtime_ns if sidecar.exists() else None
    time.sleep(0.3)
    after = sidecar.stat().st_mtime_ns if sidecar.exists() else None
    assert (rc, err.splitlines()[-1:]) == (130, ["reproduce: interrupted"]), err
    assert left == []
    assert before == after
    assert list(report.rglob("*.img")) == []


def test_sigterm_stops_run_and_its_fio(tmp_path):
    """run JOB stopped by SIGTERM: `run: interrupted`, exit 130, fio and its job process gone."""
    job = tmp_path / "j.fio"
    job.write_text("[j]\nfilename=/dev/null\nrw=read\nsize=4k\n")
    rc, err = _signal_while_fio_runs(tmp_path, ["run", str(job)], signal.SIGTERM)
    assert _left_running(tmp_path) == []
    assert (rc, err.strip()) == (130, "run: interrupted")
