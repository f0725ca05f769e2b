"""MDSPLIT_ENGINE in the reproductions (harness/experiment.py:
engine_under_test, use_engine_under_test): every experiment's real-clock fio
run loads the engine it names, not the installed one the shipped job files
name, and one that cannot be loaded fails the experiment at once."""
import os
import re
import shutil

import pytest

from harness import reproduce
from harness.experiment import engine_under_test
from harness.experiments import bfq, passthrough
from harness.fio_runner import FioError
from harness_cli import harness


class Started(Exception):
    """Raised by the stand-in for run_fio: the job file is what counts."""


@pytest.fixture
def fake_engine(tmp_path, monkeypatch):
    """MDSPLIT_ENGINE pointing at a file with an ELF shared object's header."""
    so = tmp_path / "libmdsplit-under-test.so"
    so.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00" + bytes(46))
    monkeypatch.setenv("MDSPLIT_ENGINE", str(so))
    return so


def _engines_loaded(monkeypatch, module) -> list:
    """Makes module.run_fio record the ioengine= values of the job file it
    is given, then raise Started."""
    seen = []

    def run_fio(job, *args, **kw):
        seen.extend(re.findall(r"(?m)^\s*ioengine\s*=\s*(\S+)", open(job).read()))
        raise Started
    monkeypatch.setattr(module, "run_fio", run_fio)
    return seen


def test_passthrough_loads_the_engine_under_test(tmp_path, fake_engine, monkeypatch):
    """reproduce passthrough's fio run loads MDSPLIT_ENGINE (it loaded /usr/local/lib/...)."""
    seen = _engines_loaded(monkeypatch, passthrough)
    jobs = reproduce.prepare_jobs(tmp_path / "out")
    with pytest.raises(Started):
        passthrough.run(jobs, tmp_path / "out", lambda step: None)
    assert seen == [f"external:{fake_engine}"]


def test_bfq_runs_load_the_engine_under_test(tmp_path, fake_engine, monkeypatch):
    """bfq's real-clock runs (and reference bfq's emulator run) load MDSPLIT_ENGINE."""
    seen = _engines_loaded(monkeypatch, bfq)
    jobs = reproduce.prepare_jobs(tmp_path / "out")
    with pytest.raises(Started):
        bfq.run_place(jobs, "root", "fixed")
    assert seen and set(seen) == {f"external:{fake_engine}"}


def test_without_mdsplit_engine_the_clones_build_is_loaded(tmp_path, monkeypatch):
    """MDSPLIT_ENGINE unset: reproduce passthrough loads this clone's build, not /usr/local/lib's."""
    from harness import paths
    build = tmp_path / "clone-build"
    build.mkdir()
    so = build / "libmdsplit.so"
    so.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00" + bytes(46))
    monkeypatch.delenv("MDSPLIT_ENGINE", raising=False)
    monkeypatch.setattr(paths, "BUILD", build)
    seen = _engines_loaded(monkeypatch, passthrough)
    jobs = reproduce.prepare_jobs(tmp_path / "out")
    with pytest.raises(Started):
        passthrough.run(jobs, tmp_path / "out", lambda step: None)
    assert seen == [f"external:{so}"]


@pytest.mark.parametrize("what", ["missing", "directory", "text"])
def test_an_engine_that_cannot_be_loaded_is_one_line(tmp_path, monkeypatch, what):
    """MDSPLIT_ENGINE naming no file, a directory or a non-ELF file: FioError, one line."""
    path = {"missing": tmp_path / "none.so", "directory": tmp_path, "text": tmp_path / "t.so"}[what]
    if what == "text":
        path.write_text("not an engine\n")
    monkeypatch.setenv("MDSPLIT_ENGINE", str(path))
    with pytest.raises(FioError) as e:
        engine_under_test()
    assert str(e.value).startswith(f"engine {path} (MDSPLIT_ENGINE) not loadable: ")
    assert "\n" not in str(e.value)


def test_reproduce_passthrough_fails_on_an_engine_that_is_not_there(tmp_path):
    """MDSPLIT_ENGINE=/nonexistent: reproduce passthrough fails at once with the engine's line."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    env = dict(os.environ, MDSPLIT_ENGINE="/nonexistent/libmdsplit.so")
    rc, out, err = harness("reproduce", "passthrough", "--report-dir", tmp_path / "report",
                           "--no-history", env=env, timeout=120)
    assert rc == 1, err
    assert ("reproduce passthrough: engine /nonexistent/libmdsplit.so (MDSPLIT_ENGINE) not "
            "loadable: no such file; allowed: ") in err
