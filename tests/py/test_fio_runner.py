"""harness/fio_runner.py's temporary JSON output file (fio's --output=):
removed on every path out of run_fio and run_hosts, also when ^C or a
SIGTERM turned into KeyboardInterrupt (the kernel references) ends the
run while fio is still running. fio is a shell script here."""
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from harness import fio_runner as R
from harness import hosts as H
from harness import kernel_fixtures as K

FAKE_FIO = """#!/bin/sh
# Records its pid and arguments, then runs until killed (a fio that takes long).
printf '%s\\n' "$@" > "{dir}/args"
echo $$ > "{dir}/pid"
exec sleep 60
"""


def _fake_fio(tmp_path) -> Path:
    """A 'fio' that writes its arguments to tmp_path/args and its pid to
    tmp_path/pid, then sleeps for a minute."""
    fio = tmp_path / "fake-fio"
    fio.write_text(FAKE_FIO.format(dir=tmp_path))
    fio.chmod(0o755)
    return fio


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
