"""Restructuring keeps behaviour: the virtual-clock statistics of a fixed set of
stacks (tests/golden/stacks.fio: passthrough, RAID5 legacy/fixed reads and writes,
BFQ legacy/fixed groups, each buffered variant x rasync) are byte-identical to the
files kept in tests/golden/expected/. An intended behaviour change regenerates them:
    MDSPLIT_UPDATE_GOLDEN=1 /usr/bin/python3 -m pytest tests/py/test_golden_stats.py
and the diff of expected/ is part of that commit."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
EXPECTED = GOLDEN / "expected"
UPDATE = os.environ.get("MDSPLIT_UPDATE_GOLDEN") == "1"


def simulate_golden(dest: Path) -> dict:
    """Run stacks.fio from a copy in dest (no data: members are not touched);
    return {relative path: bytes} of the fio JSON and every sidecar."""
    for p in GOLDEN.iterdir():
        if p.is_file():
            shutil.copy(p, dest / p.name)
    out = dest / "out.json"
    run = subprocess.run([sys.executable, "-m", "harness", "simulate", str(dest / "stacks.fio"),
                          "--no-data", "--output-format", "json", "--output", str(out)],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    fio = json.loads(out.read_text())
    fio.pop("mdsplit-version")   # the release number is not behaviour
    files = {"fio.json": (json.dumps(fio, indent=1, sort_keys=True) + "\n").encode()}
    for p in sorted((dest / "stats").iterdir()):
        files[f"stats/{p.name}"] = p.read_bytes()
    return files


@pytest.fixture(scope="module")
def produced(tmp_path_factory, mdsplit_module):
    return simulate_golden(tmp_path_factory.mktemp("golden"))


def test_golden_set_is_complete(produced):
    """Every expected file is produced and nothing produced is unexpected."""
    if UPDATE:
        shutil.rmtree(EXPECTED, ignore_errors=True)
        (EXPECTED / "stats").mkdir(parents=True)
        for name, data in produced.items():
            (EXPECTED / name).write_bytes(data)
    kept = sorted(str(p.relative_to(EXPECTED)) for p in EXPECTED.rglob("*") if p.is_file())
    assert kept == sorted(produced)


@pytest.mark.parametrize("name", sorted(
    str(p.relative_to(EXPECTED)) for p in EXPECTED.rglob("*") if p.is_file()))
def test_statistics_are_byte_identical(produced, name):
    """One kept statistics file equals, byte for byte, what the code produces now."""
    assert produced.get(name) == (EXPECTED / name).read_bytes(), (
        f"{name} changed; if intended, regenerate with MDSPLIT_UPDATE_GOLDEN=1")
