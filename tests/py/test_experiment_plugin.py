"""An experiment is a plug-in: a copy of an existing reproduction under a
new name, added to a copy of the tree as one file of its own in
harness/experiments/, is found and run by `reproduce NEWNAME` with no other
file changed (docs/dev/adding-a-behaviour.md)."""
import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import paths

ROOT = Path(__file__).resolve().parents[2]
SOURCE, COPY = "raid5", "raid5-copy"


def tracked_tree(dest: Path) -> list:
    """The tracked files of harness/ and jobs/ copied under dest; their paths."""
    files = subprocess.run(["git", "ls-files", "harness", "jobs"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dest / f)
    return files


def test_copied_reproduction_runs_under_its_new_name(tmp_path, engine):
    """`reproduce raid5-copy` runs a copy of raid5.py that names itself raid5-copy, nothing else edited."""
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    tree = tmp_path / "tree"
    files = tracked_tree(tree)
    src = (ROOT / "harness" / "experiments" / "raid5.py").read_text()
    assert src.count(f'NAME = "{SOURCE}"\n') == 1
    own = tree / "harness" / "experiments" / "raid5_copy.py"
    own.write_text(src.replace(f'NAME = "{SOURCE}"\n', f'NAME = "{COPY}"\n'))
    env = dict(os.environ, MDSPLIT_BUILD_DIR=str(paths.BUILD),
               MDSPLIT_ENGINE=str(engine), PYTHONPATH=str(tree))
    report = tmp_path / "report"
    run = subprocess.run([sys.executable, "-m", "harness", "reproduce", COPY,
                          "--report-dir", str(report), "--no-history"],
                         cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    result = json.loads((report / COPY / "result.json").read_text())
    assert result["name"] == COPY and result["metrics"]["fixed.md0_MBps"] > 0
    assert len(result["checks"]) >= 40                 # raid5's expectations, evaluated
    assert f"| {COPY} | ok |" in (report / "summary.md").read_text()
    # nothing outside its own file was edited (or written) for it
    assert [f for f in files if not filecmp.cmp(ROOT / f, tree / f, shallow=False)] == []
