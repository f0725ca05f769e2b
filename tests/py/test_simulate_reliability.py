"""harness simulate against what a user of fio expects (issue 41, items 6-9):
--no-data with verify, per-direction runtimes of a write-then-verify job,
sidecars of a real fio run, and the messages of include cycles and of
forked jobs sharing a RAID5."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.fio_runner import run_fio, run_simulated

ROOT = Path(__file__).resolve().parents[2]

FILE_STACK = ('[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\nsize = "16m"\n'
              'model = "nvme"\n')


def job_text(body, engine="/usr/local/lib/mdsplit/libmdsplit.so"):
    return (f"[global]\nioengine=external:{engine}\nmdsplit_config=stack.toml\n"
            "filename=md0\ndirect=1\n" + body)


def run_cli(args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # from any directory
    return subprocess.run([sys.executable, "-m", "harness", "simulate", *args], cwd=cwd,
                          capture_output=True, text=True, env=env)


def test_no_data_times_verify_reads_without_comparing_them(tmp_path, mdsplit_module):
    """--no-data on a job that verifies: exit 0, the same figures as with data,
    and one line saying the verify reads were not compared."""
    (tmp_path / "stack.toml").write_text(FILE_STACK)
    job = tmp_path / "v.fio"
    job.write_text(job_text("[v]\nrw=randwrite\nbsrange=4k-64k\nsize=4m\niodepth=8\n"
                            "verify=crc32c\ndo_verify=1\n"))
    out = {}
    for mode in ("data", "no-data"):
        p = run_cli([str(job), "--output-format", "json", "--output", str(tmp_path / mode)]
                    + (["--no-data"] if mode == "no-data" else []))
        assert p.returncode == 0, p.stderr
        out[mode] = (json.loads((tmp_path / mode).read_text()), p.stderr)
    with_data, no_data = out["data"][0]["jobs"][0], out["no-data"][0]["jobs"][0]
    assert no_data["error"] == 0 and no_data["verify_errors"] == 0
    assert no_data["read"] == with_data["read"] and no_data["write"] == with_data["write"]
    note = ("simulate: job v: verify=crc32c: --no-data keeps no data, so its 4194304 bytes "
            "of verify reads were timed but not compared")
    assert out["no-data"][1].splitlines() == [note]
    assert out["no-data"][0]["warnings"] == [note]
    assert out["data"][1] == ""


def test_write_then_verify_reports_each_phase_with_its_own_time(tmp_path, engine, mdsplit_module):
    """randwrite + verify: as fio (backend.c update_runtime()), the write runtime
    is the write phase's and the read runtime the verify phase's, so the two
    add up to the job's runtime, in real fio and in simulate alike."""
    (tmp_path / "stack.toml").write_text(FILE_STACK)
    job = tmp_path / "v.fio"
    job.write_text(job_text("[v]\nrw=randwrite\nbs=4k\nsize=1m\nrate_iops=1000\n"
                            "verify=crc32c\ndo_verify=1\n", engine))
    real = run_fio(job, timeout=120).job("v")
    sim = run_simulated(job).job("v")
    for who, j in (("fio", real), ("simulate", sim)):
        w, r = j["write"], j["read"]
        assert w["total_ios"] == r["total_ios"] == 256, who
        # 256 writes at 1000 IOPS: at least a quarter second (a busy host adds).
        assert w["runtime"] >= 250, (who, w["runtime"])
        # The phases do not overlap: each runtime (rounded up to a ms) is
        # its own phase's, within the job's (rounded down).
        assert 0 < r["runtime"] and w["runtime"] + r["runtime"] <= j["job_runtime"] + 3, \
            (who, w["runtime"], r["runtime"], j["job_runtime"])
        for d in (w, r):  # each direction's IOPS over its own runtime
            assert d["iops"] == pytest.approx(256 / (d["runtime"] / 1000), rel=0.06), (who, d)
    assert sim["write"]["runtime"] <= 260  # the virtual clock: the rate alone


def test_a_real_runs_sidecar_is_not_replaced(tmp_path, engine, mdsplit_module):
    """After fio with the engine wrote a job's sidecar, simulate of the same
    job file refuses with one line (exit 2) and leaves the sidecar as it was;
    its own sidecar it replaces, run after run."""
    (tmp_path / "stack.toml").write_text(FILE_STACK)
    job = tmp_path / "s.fio"
    job.write_text(job_text("[s]\nrw=randread\nsize=1m\nmdsplit_stats=stats/s.json\n", engine))
    for _ in range(2):
        p = run_cli([str(job)])
        assert p.returncode == 0, p.stderr
        assert json.loads((tmp_path / "stats/s.json").read_text())["clock"] == "virtual"
    run_fio(job, timeout=120)
    real = (tmp_path / "stats/s.json").read_bytes()
    assert json.loads(real)["clock"] == "real"
    p = run_cli([str(job)])
    assert p.returncode == 2
    assert p.stderr.splitlines() == [
        "simulate: mdsplit_stats=stats/s.json holds the sidecar of a real-clock run (fio with "
        "the engine), which simulate did not write: replacing it would lose that run's figures; "
        "allowed: move it away first, or simulate a copy of the job file naming another "
        "mdsplit_stats"]
    assert (tmp_path / "stats/s.json").read_bytes() == real


def test_an_include_cycle_is_one_line_naming_it(tmp_path, mdsplit_module):
    """A job file that includes itself, or two that include each other:
    exit 2 and one line naming the cycle (it was a 63-line RecursionError)."""
    (tmp_path / "stack.toml").write_text(FILE_STACK)
    (tmp_path / "self.fio").write_text(job_text("[j]\nrw=read\ninclude self.fio\n"))
    (tmp_path / "a.fio").write_text(job_text("[j]\nrw=read\ninclude b.inc\n"))
    (tmp_path / "b.inc").write_text("size=1m\ninclude a.fio\n")
    (tmp_path / "c.fio").write_text(job_text("[j]\nrw=read\ninclude s.inc\n"))
    (tmp_path / "s.inc").write_text("size=1m\ninclude s.inc\n")
    for job, cycle in (("self.fio", "self.fio -> self.fio"), ("a.fio", "a.fio -> b.inc -> a.fio"),
                       ("c.fio", "s.inc -> s.inc")):
        p = run_cli([job], cwd=tmp_path)
        assert p.returncode == 2
        assert p.stderr.splitlines() == [
            f"simulate: {cycle.split()[0]}: a cycle of includes ({cycle}); allowed: includes "
            "that do not lead back to a file that includes them"], p.stderr


# A python3 where matplotlib cannot be imported (as on a host without it).
NO_MATPLOTLIB = """
import runpy, sys
class NoMatplotlib:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "matplotlib":
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NoMatplotlib())
sys.argv = ["harness"] + sys.argv[1:]
runpy.run_module("harness", run_name="__main__")
"""


@pytest.mark.parametrize("args", [["simulate", "{job}"], ["run", "--simulate", "{job}"],
                                  ["history", "--help"], ["check", "--help"],
                                  ["compare", "--help"], ["reproduce", "--help"]])
def test_commands_that_draw_nothing_run_without_matplotlib(tmp_path, mdsplit_module, args):
    """simulate, run and the commands' help never import matplotlib: without
    it they work (they died with a 30-line ModuleNotFoundError)."""
    (tmp_path / "stack.toml").write_text(FILE_STACK)
    job = tmp_path / "r.fio"
    job.write_text(job_text("[r]\nrw=read\nsize=64k\n"))
    p = subprocess.run([sys.executable, "-c", NO_MATPLOTLIB,
                        *[a.format(job=job) for a in args]], cwd=ROOT, capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr
    assert "matplotlib" not in p.stderr
