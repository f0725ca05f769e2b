"""The ./mdsplit wrapper's harness commands (reproduce, simulate, harness)
run in the caller's directory, so that the relative paths given to them
(--report-dir, --db, job files) mean what they mean there. The wrapper is
copied beside a ci/build.sh that builds nothing."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.paths import ROOT

# A stand-in harness package: says where it runs, from where it was imported
# and with which arguments.
FAKE_MAIN = """import os, sys
import harness
print(os.getcwd())
print(os.path.dirname(harness.__file__))
print(" ".join(sys.argv[1:]))
"""


def _wrapper(tmp_path, harness_pkg="fake") -> Path:
    """tmp_path/repo: a copy of ./mdsplit, a ci/build.sh that does
    nothing, and a harness package (the fake one, or a link to the real)."""
    repo = tmp_path / "repo"
    (repo / "ci").mkdir(parents=True)
    shutil.copy(ROOT / "mdsplit", repo / "mdsplit")
    build = repo / "ci" / "build.sh"
    build.write_text("#!/bin/sh\nexit 0\n")
    build.chmod(0o755)
    if harness_pkg == "fake":
        (repo / "harness").mkdir()
        (repo / "harness" / "__init__.py").write_text("")
        (repo / "harness" / "__main__.py").write_text(FAKE_MAIN)
    else:
        (repo / "harness").symlink_to(ROOT / "harness")
    return repo


def _run(repo, cwd, *argv):
    return subprocess.run([str(repo / "mdsplit"), *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("cmd", [["reproduce", "passthrough", "--report-dir", "myrep"],
                                 ["harness", "history", "--db", "my.sqlite"],
                                 ["simulate", "job.fio"]],
                         ids=["reproduce", "harness", "simulate"])
def test_wrapper_runs_the_harness_in_the_callers_directory(tmp_path, cmd):
    """./mdsplit reproduce/harness/simulate: the harness's cwd is the caller's (it was the repo)."""
    repo = _wrapper(tmp_path)
    user = tmp_path / "user"
    user.mkdir()
    r = _run(repo, user, *cmd)
    assert r.returncode == 0, r.stderr
    argv = cmd[1:] if cmd[0] == "harness" else cmd
    assert r.stdout.splitlines() == [str(user), str(repo / "harness"), " ".join(argv)]


def test_wrapper_ignores_a_harness_directory_in_the_callers_directory(tmp_path):
    """./mdsplit simulate: a harness/ where the caller stands is not imported instead of the repo's."""
    repo = _wrapper(tmp_path)
    user = tmp_path / "user"
    (user / "harness").mkdir(parents=True)
    (user / "harness" / "__init__.py").write_text("")
    (user / "harness" / "__main__.py").write_text("print('the caller\\'s harness')\n")
    r = _run(repo, user, "simulate", "job.fio")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == str(repo / "harness")


def test_wrapper_reads_a_relative_job_file_from_the_callers_directory(tmp_path):
    """./mdsplit harness run JOB (the real harness): JOB is the caller's file, not the repo's."""
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("the wrapper runs /usr/bin/python3, which is not installed")
    repo = _wrapper(tmp_path, harness_pkg="real")
    user = tmp_path / "user"
    user.mkdir()
    (user / "mine.fio").write_bytes(b"[j]\n\xff\n")       # refused before any fio runs
    r = _run(repo, user, "harness", "run", "mine.fio")
    assert (r.returncode, r.stderr.splitlines()) == \
        (2, ["run: job file mine.fio: byte 4 is not UTF-8; allowed: a UTF-8 text file"])


def _prefix_wrapper(tmp_path) -> Path:
    """A wrapper whose ci/build.sh and ci/test.sh print the install prefix they get."""
    repo = _wrapper(tmp_path)
    for name in ("build.sh", "test.sh"):
        s = repo / "ci" / name
        s.write_text('#!/bin/sh\necho "prefix=${MDSPLIT_PREFIX:-} args=$*"\n')
        s.chmod(0o755)
    return repo


@pytest.mark.parametrize("argv", [["build", "--prefix", "opt"], ["test", "--prefix=opt", "--quick"],
                                  ["reproduce", "--prefix", "opt", "passthrough"]],
                         ids=["build", "test", "reproduce"])
def test_prefix_reaches_the_build_and_leaves_the_other_arguments(tmp_path, argv):
    """./mdsplit CMD --prefix DIR: ci/build.sh gets MDSPLIT_PREFIX=DIR (made absolute), the rest passes on."""
    repo = _prefix_wrapper(tmp_path)
    r = _run(repo, tmp_path, *argv)
    assert r.returncode == 0, r.stderr
    if argv[0] == "reproduce":                        # the fake harness echoes its arguments
        assert r.stdout.splitlines()[-1] == "reproduce passthrough"
    else:
        rest = [a for a in argv[1:] if not a.startswith("--prefix") and a != "opt"]
        rest = " ".join(rest) if argv[0] == "test" else str(tmp_path / "repo" / "build")
        assert r.stdout.splitlines()[-1] == f"prefix={tmp_path / 'opt'} args={rest}"


def test_prefix_without_a_directory_is_one_line(tmp_path):
    """./mdsplit build --prefix (no DIR): one line naming the option, exit 2."""
    r = _run(_prefix_wrapper(tmp_path), tmp_path, "build", "--prefix")
    assert r.returncode == 2 and r.stderr == "mdsplit: --prefix needs a directory; allowed: --prefix DIR\n"


def test_build_progress_shows_the_compilers_step_count(tmp_path):
    """ci/build-progress.awk: plain lines per 10 % off a terminal, one redrawn line on one, all in the log."""
    out = "cmake\n[  5%] Building CXX object a.o\n[ 12%] Building CXX object b.o\n" \
          "[ 50%] Linking CXX shared library x.so\n[100%] Built target x\n"
    log = tmp_path / "build.log"
    plain = subprocess.run(["awk", "-v", f"LOG={log}", "-v", "TTY=0", "-f",
                            str(ROOT / "ci" / "build-progress.awk")], input=out,
                           capture_output=True, text=True, timeout=30)
    lines = plain.stderr.splitlines()
    assert [ln.split("]")[0] for ln in lines[:-1]] == ["mdsplit: building [  5%", "mdsplit: building [ 50%"]
    assert "elapsed, ETA" in lines[0] and lines[-1].startswith("mdsplit: build steps done in ")
    assert log.read_text() == out
    tty = subprocess.run(["awk", "-v", f"LOG={log}", "-v", "TTY=1", "-f",
                          str(ROOT / "ci" / "build-progress.awk")], input=out.encode(),
                         capture_output=True, timeout=30)
    assert tty.stderr.count(b"\r") >= 3 and tty.stderr.count(b"\n") == 1
    quiet = subprocess.run(["awk", "-v", f"LOG={log}", "-v", "TTY=0", "-f",
                            str(ROOT / "ci" / "build-progress.awk")], input="[100%] Built target x\n",
                           capture_output=True, text=True, timeout=30)
    assert quiet.stderr == ""                          # an up-to-date build says nothing
