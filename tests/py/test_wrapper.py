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
