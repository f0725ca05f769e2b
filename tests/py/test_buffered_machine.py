"""The thread's machine of seed 003 ([machines.seed003] in jobs/machines.toml)
as the buffered reproduction runs it: stated once, deterministic."""
import tomllib
from pathlib import Path

import pytest

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


def test_costs_reach_the_simulated_job_file_as_cpu_buffered():
    # the measured-cost sweep writes its costs into each stack file's
    # [cpu.buffered]: a dearer punt lowers the worker path's QD128 plateau
    # (the submitter pays fio + lookup + alloc + punt per read)
    machine = buffered.thread_machine(JOBS)
    base = buffered.sweep(JOBS, lambda m: None, None, depths=[128])
    dear = buffered.sweep(JOBS, lambda m: None, dict(machine["costs"], punt_ns=3800),
                          depths=[128])
    same = buffered.sweep(JOBS, lambda m: None, machine["costs"], depths=[128])
    assert same == base
    plateau, slower = base[("c8d317aa", False, 128)], dear[("c8d317aa", False, 128)]
    assert slower < 0.75 * plateau


def test_costs_toml_is_a_cpu_buffered_table_the_loader_takes(tmp_path):
    costs = import_mdsplit().buffered_default_costs()
    text = buffered.costs_toml(dict(costs, punt_ns=2500, cpus=4))
    assert text.startswith("[cpu.buffered]\n") and 'punt = "2500ns"' in text and "cpus = 4" in text
    stack = (JOBS / "buffered-c8d317aa.toml").read_text() + text
    sim = import_mdsplit().BufferedSimulation(stack, base_dir=str(tmp_path))  # its member file
    assert sim.costs() == dict(costs, punt_ns=2500, cpus=4)


def test_the_sweeps_shorter_runtime_keeps_the_checked_figures():
    # harness sweep buffered simulates each draw with runtime=100ms: at the
    # default costs its figures stay within 1 % of the checked (500ms) ones
    from harness.sweep import BUFFERED_RUNTIME
    short = buffered.sweep(JOBS, lambda m: None, None, depths=[1, 32, 128],
                           runtime=BUFFERED_RUNTIME)
    full = buffered.sweep(JOBS, lambda m: None, None, depths=[1, 32, 128])
    assert short.keys() == full.keys()
    for k in full:
        assert short[k] == pytest.approx(full[k], rel=0.01), k
