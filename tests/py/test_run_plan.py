"""The run plan (engine/stack/run_plan.h) decides across a run's jobs for
the engine and for `harness simulate` alike: both refuse a run with the
same line, and the harness keeps no copy of those rules."""
from pathlib import Path

import pytest

from conftest import write_job
from harness import run_fio
from harness.simulate import SimulateError, simulate_job

ROOT = Path(__file__).resolve().parents[2]

# Phrases of the run plan's refusals (run_plan.cpp): none may be written
# again in the harness.
PLAN_PHRASES = ["needs one owner", "each has its own empty memory",
                "keep their own page cache", "of one device at two weights",
                "frees its cgroup mount", "which writes one set of traces",
                "would set up after fio has freed"]

RAID5 = """[device]
kind = "raid5"
chunk = "64k"
[[members]]
path = "m0.img"
size = "8m"
[[members]]
path = "m1.img"
size = "8m"
[[members]]
path = "m2.img"
size = "8m"
"""

RAM = """[device]
kind = "passthrough"
[[members]]
backend = "ram"
size = "8m"
"""


def job_text(engine, body):
    return f"""[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
bs=64k
size=1m
{body}"""


def test_the_harness_keeps_no_copy_of_the_run_plans_lines():
    """No harness module spells a refusal of the run plan's."""
    for path in (ROOT / "harness").rglob("*.py"):
        text = path.read_text()
        for phrase in PLAN_PHRASES:
            assert phrase not in text, f"{path.relative_to(ROOT)} repeats {phrase!r}"


@pytest.mark.parametrize("stack, body", [
    (RAID5, "[t]\nthread=1\nrw=write\n[f]\nrw=read\n"),
    (RAM, "[w]\nrw=write\n[r]\nstonewall\nrw=read\n"),
    (RAID5, "[a]\nthread=1\ncgroup=g\nrw=read\n[b]\nthread=1\nrw=read\n"),
], ids=["forked-raid5", "forked-ram", "thread-cgroup"])
def test_fio_and_simulate_refuse_with_one_line(engine, tmp_path, stack, body):
    """A run the plan refuses: fio's and simulate's line are the same."""
    (tmp_path / "stack.toml").write_text(stack)
    job = write_job(tmp_path, "t.fio", job_text(engine, body))
    result = run_fio(job, check=False, timeout=60)
    assert result.returncode != 0
    with pytest.raises(SimulateError) as e:
        simulate_job(job, data=False)
    assert str(e.value) in result.mdsplit_errors(), (str(e.value), result.stderr)
    assert str(e.value).startswith("mdsplit: ")
