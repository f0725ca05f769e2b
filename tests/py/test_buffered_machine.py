"""The thread's machine of seed 003 ([machines.seed003] in jobs/machines.toml)
as the buffered reproduction runs it: stated once, deterministic."""
import tomllib
from pathlib import Path

from harness.experiments import buffered
from harness.paths import import_mdsplit

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def test_machine_costs_and_drive_are_stated_once():
    # the machine names its costs (BufferedCosts' defaults) and its drive (a
    # jobs/models.toml preset) instead of repeating their numbers, and every
    # buffered stack file puts its member on that drive
    machine = buffered.thread_machine(JOBS)
    assert machine["costs"] == import_mdsplit().buffered_default_costs()
    stated = tomllib.loads((JOBS / "machines.toml").read_text())["machines"]["seed003"]
    assert stated["costs"] == "BufferedCosts" and "device" not in stated
    assert machine["device"]["parallelism"] == 40
    for f in JOBS.glob("buffered-*.toml"):
        members = tomllib.loads(f.read_text())["members"]
        assert [m["model"] for m in members] == [machine["model"]], f.name


def test_machine_sweep_repeats_exactly():
    # two runs of the checked sweep give identical figures (virtual clock)
    machine = buffered.thread_machine(JOBS)
    runs = [buffered.sweep(JOBS, lambda m: None, machine["costs"], depths=[1, 32])
            for _ in range(2)]
    assert runs[0] == runs[1]


def test_machine_drive_latency_grows_with_depth():
    # die collisions: per-read time at QD16 above QD1's, on the worker path
    # whose submitter is far from its limit at QD16
    machine = buffered.thread_machine(JOBS)
    r = buffered.sweep(JOBS, lambda m: None, machine["costs"], depths=[1, 16])
    lat1 = 1 / r[("c8d317aa", False, 1)]
    lat16 = 16 / r[("c8d317aa", False, 16)]
    assert lat16 > 1.1 * lat1
