"""harness/fio_runner.py's temporary JSON output file (fio's --output=):
removed on every path out of run_fio and run_hosts, also when ^C or a
SIGTERM turned into KeyboardInterrupt (the kernel references) ends the
run while fio is still running; and fio's forked job processes die with
it. fio is a shell script here, and fio itself once."""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness import fio_runner as R
from harness import hosts as H
from harness import kernel_fixtures as K
from process_checks import left_running, running

FAKE_FIO = """#!/bin/sh
# Records its pid and arguments, then runs until killed (a fio that takes long).
printf '%s\\n' "$@" > "{dir}/args"
echo $$ > "{dir}/pid"
exec sleep 60
"""


FORKING_FIO = """#!/bin/sh
# As fio: a job process forked beside the main one, in a session of its own
# (fio's thread_main calls setsid()), both running until killed.
printf '%s\\n' "$@" > "{dir}/args"
setsid sleep 60 &
echo $! > "{dir}/child"
echo $$ > "{dir}/pid"
wait
"""


def _fake_fio(tmp_path, text=FAKE_FIO) -> Path:
    """A 'fio' that writes its arguments to tmp_path/args and its pid to
    tmp_path/pid, then sleeps for a minute (FORKING_FIO: in a forked
    child, whose pid is in tmp_path/child)."""
    fio = tmp_path / "fake-fio"
    fio.write_text(text.format(dir=tmp_path))
    fio.chmod(0o755)
    return fio


def _child_gone(tmp_path, wait_s=5.0) -> bool:
    """The forking fake fio and its job process are gone; what is left is killed."""
    return not left_running([int((tmp_path / n).read_text()) for n in ("child", "pid")], wait_s)


def _job(tmp_path) -> Path:
    job = tmp_path / "j.fio"
    job.write_text("[j]\nfilename=/dev/null\nrw=read\nsize=4k\n")
    return job


def _output_path(tmp_path) -> Path:
    """The --output= file the fake fio was given."""
    args = (tmp_path / "args").read_text().splitlines()
    return Path(next(a for a in args if a.startswith("--output="))[len("--output="):])


def _signal_once_started(tmp_path, signum):
    """Sends signum to this process once the fake fio has written its pid."""
    def send():
        deadline = time.monotonic() + 30
        while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        os.kill(os.getpid(), signum)
    t = threading.Thread(target=send, daemon=True)
    t.start()
    return t


def test_run_fio_removes_its_output_file_on_sigint(tmp_path):
    """^C while fio runs: KeyboardInterrupt, and no /tmp/tmpXXXX.json left."""
    fio = _fake_fio(tmp_path)
    t = _signal_once_started(tmp_path, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        R.run_fio(_job(tmp_path), fio=str(fio), sidecars=False, timeout=30)
    t.join()
    out = _output_path(tmp_path)
    assert out.parent == Path(R.tempfile.gettempdir()) and out.suffix == ".json"
    assert not out.exists()


def test_run_fio_removes_its_output_file_on_sigterm_in_a_reference(tmp_path):
    """SIGTERM under sigterm_as_interrupt (the references' set-up): no output file left."""
    fio = _fake_fio(tmp_path)
    t = _signal_once_started(tmp_path, signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with K.sigterm_as_interrupt():
            R.run_fio(_job(tmp_path), fio=str(fio), sidecars=False, timeout=30)
    t.join()
    assert not _output_path(tmp_path).exists()


def test_run_fio_removes_its_output_file_when_the_launch_raises(tmp_path, monkeypatch):
    """Any exception out of launching fio (here KeyboardInterrupt) removes the file."""
    seen = {}

    def interrupted(cmd, cwd=None, timeout=None):
        seen["out"] = Path(next(a for a in cmd if a.startswith("--output="))[len("--output="):])
        assert seen["out"].exists()
        raise KeyboardInterrupt

    monkeypatch.setattr(R, "launch_fio", interrupted)
    with pytest.raises(KeyboardInterrupt):
        R.run_fio(_job(tmp_path), sidecars=False)
    assert not seen["out"].exists()


def test_run_fio_removes_its_output_file_when_fio_is_missing(tmp_path, monkeypatch):
    """No fio binary (FileNotFoundError from the launch): no output file left."""
    seen = {}
    real = R.launch_fio

    def launch(cmd, cwd=None, timeout=None):
        seen["out"] = Path(next(a for a in cmd if a.startswith("--output="))[len("--output="):])
        return real(cmd, cwd, timeout)

    monkeypatch.setattr(R, "launch_fio", launch)
    with pytest.raises(FileNotFoundError):
        R.run_fio(_job(tmp_path), fio=str(tmp_path / "no-such-fio"), sidecars=False)
    assert not seen["out"].exists()


def test_run_fio_removes_its_output_file_on_timeout(tmp_path):
    """A timeout is a FioError, and the output file is removed as well."""
    fio = _fake_fio(tmp_path)
    with pytest.raises(R.FioError, match="no result after"):
        R.run_fio(_job(tmp_path), fio=str(fio), sidecars=False, timeout=1)
    assert not _output_path(tmp_path).exists()


def test_run_hosts_removes_its_output_file_on_sigint(tmp_path):
    """The client/server mode's output file is removed on ^C as well."""
    fio = _fake_fio(tmp_path)
    t = _signal_once_started(tmp_path, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        H.run_hosts(_job(tmp_path), ["ip:127.0.0.1,1"], fio=str(fio), timeout=30,
                    results_dir=tmp_path / "hosts")
    t.join()
    assert not _output_path(tmp_path).exists()


def test_run_fio_timeout_kills_forked_job_processes(tmp_path):
    """A timeout kills fio's forked job processes too, not only fio."""
    fio = _fake_fio(tmp_path, FORKING_FIO)
    with pytest.raises(R.FioError, match="no result after"):
        R.run_fio(_job(tmp_path), fio=str(fio), sidecars=False, timeout=1)
    assert _child_gone(tmp_path)


def test_run_fio_sigint_kills_forked_job_processes(tmp_path):
    """^C while fio runs: KeyboardInterrupt, and fio's job processes are gone."""
    fio = _fake_fio(tmp_path, FORKING_FIO)
    t = _signal_once_started(tmp_path, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        R.run_fio(_job(tmp_path), fio=str(fio), sidecars=False, timeout=30)
    t.join()
    assert _child_gone(tmp_path)


def test_run_fio_sigterm_kills_forked_job_processes(tmp_path):
    """SIGTERM to the harness while fio runs: KeyboardInterrupt, fio's job processes are gone."""
    fio = _fake_fio(tmp_path, FORKING_FIO)
    code = ("import sys; from harness import fio_runner as R\n"
            "try:\n"
            f"    R.run_fio({str(_job(tmp_path))!r}, fio={str(fio)!r}, sidecars=False, timeout=30)\n"
            "except KeyboardInterrupt:\n"
            "    sys.exit(42)\n")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=R.Path(R.__file__).parent.parent)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
    finally:
        p.kill()
        p.wait()
    assert _child_gone(tmp_path) and rc == 42


def test_run_hosts_timeout_kills_forked_processes(tmp_path):
    """run --hosts --timeout: the client and what it forked are gone afterwards."""
    fio = _fake_fio(tmp_path, FORKING_FIO)
    with pytest.raises(R.FioError, match="no result after"):
        H.run_hosts(_job(tmp_path), ["ip:127.0.0.1,1"], fio=str(fio), timeout=1,
                    results_dir=tmp_path / "hosts")
    assert _child_gone(tmp_path)


def test_run_fio_timeout_leaves_no_real_fio_job_process(tmp_path):
    """The real fio after a timeout: neither fio nor its two job processes run on."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    job = tmp_path / "long.fio"
    job.write_text("[j]\nioengine=null\nrw=read\nsize=1g\ntime_based=1\nruntime=60\n"
                   "numjobs=2\n")
    with pytest.raises(R.FioError, match="no result after"):
        R.run_fio(job, sidecars=False, timeout=2)
    time.sleep(0.2)
    left = []
    for d in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{d}/cmdline").read_bytes()
        except OSError:
            continue
        if d.isdigit() and str(job).encode() in cmdline and running(int(d)):
            left.append(int(d))
            os.kill(int(d), signal.SIGKILL)
    assert left == []


def test_interrupt_while_fio_starts_still_kills_it(tmp_path, monkeypatch):
    """^C between fio's start and Popen's return: fio and its job process are killed too."""
    fio = _fake_fio(tmp_path, FORKING_FIO)
    real = subprocess.Popen

    def popen_then_interrupt(*args, **kw):
        real(*args, **kw)
        deadline = time.monotonic() + 30
        while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        raise KeyboardInterrupt
    monkeypatch.setattr(R.subprocess, "Popen", popen_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        R.run_fio(_job(tmp_path), fio=str(fio), sidecars=False, timeout=30)
    monkeypatch.undo()
    assert _child_gone(tmp_path)
