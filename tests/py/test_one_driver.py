"""One virtual-time driver: the reproductions (harness/experiments/ and
harness/sweep.py) reach the virtual clock only through `harness simulate` of
a job file (harness.simulate / fio_runner.run_simulated /
experiment.simulate_copy / bands), never by building a simulation of their
own or calling a closed-loop driver of the bindings."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The bindings' own simulations and the closed-loop drivers (gone: a
# reproduction's parameters are job-file options or stack-TOML keys).
FORBIDDEN = {"Simulation", "BufferedSimulation", "run_workload", "run_workloads",
             "run_buffered_workload", "run_fio_jobs"}


def reproduction_files() -> list:
    return sorted((ROOT / "harness" / "experiments").rglob("*.py")) + [ROOT / "harness" / "sweep.py"]


def violations(source: str, name: str = "<text>") -> list:
    """'file:line: NAME' for each use of a FORBIDDEN name: an attribute
    (mdsplit.Simulation), a bare name or import, or a string naming it
    (getattr(m, "Simulation"))."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        used = None
        if isinstance(node, ast.Attribute):
            used = node.attr
        elif isinstance(node, ast.Name):
            used = node.id
        elif isinstance(node, ast.alias):
            used = node.name.rsplit(".", 1)[-1]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used = node.value
        if used in FORBIDDEN:
            out.append(f"{name}:{getattr(node, 'lineno', '?')}: {used}")
    return out


def test_reproductions_reach_the_virtual_clock_only_through_simulate():
    """No experiment or sweep builds a Simulation or calls a driver of its own."""
    found = [v for p in reproduction_files()
             for v in violations(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "use `harness simulate` of a job file (simulate_copy): " + ", ".join(found)


def test_the_scan_sees_every_experiment():
    names = {p.stem for p in reproduction_files()}
    assert {"bfq", "bio_size", "buffered", "sweep"} <= names


def test_a_violation_is_found():
    """Each way of reaching a simulation directly is reported with its line."""
    cases = {
        "sim = mdsplit.Simulation(text)\n": "Simulation",
        "from mdsplit import BufferedSimulation\n": "BufferedSimulation",
        "sim.run_workloads(tasks)\n": "run_workloads",
        "x = 1\nr = getattr(m, 'run_workload')(spec)\n": "run_workload",
        "m.run_fio_jobs([], [])\n": "run_fio_jobs",
    }
    for source, name in cases.items():
        found = violations(source, "exp.py")
        assert found and found[0].endswith(f": {name}"), (source, found)
    assert violations("x = 1\nsim = mdsplit.Simulation(t)\n", "e.py") == ["e.py:2: Simulation"]
    assert violations("fio = simulate_copy(jobs, JOB, out)\n") == []
