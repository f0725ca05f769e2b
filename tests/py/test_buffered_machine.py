"""The thread's machine of seed 003 ([machines.seed003] in jobs/machines.toml)
as the buffered reproduction runs it: stated once, deterministic."""
from pathlib import Path

from harness.experiments import buffered
from harness.paths import import_mdsplit

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def test_machine_costs_are_the_built_in_defaults():
    # jobs/machines.toml and BufferedCosts' defaults state the same fit
    assert buffered.thread_machine(JOBS)["costs"] == import_mdsplit().buffered_default_costs()


def test_machine_sweep_repeats_exactly():
    # two runs of the checked sweep give identical figures (virtual clock)
    machine = buffered.thread_machine(JOBS)
    runs = [buffered.sweep(JOBS, lambda m: None, machine["costs"], depths=[1, 32],
                           device=machine["device"]) for _ in range(2)]
    assert runs[0] == runs[1]


def test_machine_drive_latency_grows_with_depth():
    # die collisions: per-read time at QD16 above QD1's, on the worker path
    # whose submitter is far from its limit at QD16
    machine = buffered.thread_machine(JOBS)
    r = buffered.sweep(JOBS, lambda m: None, machine["costs"], depths=[1, 16],
                       device=machine["device"])
    lat1 = 1 / r[("c8d317aa", False, 1)]
    lat16 = 16 / r[("c8d317aa", False, 16)]
    assert lat16 > 1.1 * lat1
