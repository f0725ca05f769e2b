"""The harness's Python entry points checked as its command line checks them:
run_fio() refuses a job file `run` refuses, run_simulated() takes one section
as a str, and simulate names a job by its name where run_fio_jobs names it by
its index."""
import subprocess
import sys

from child_outcome import ROOT, outcome

JOBS = ROOT / "jobs"

STACK = '[[members]]\nbackend = "ram"\nsize = "1m"\n'


def test_run_fio_refuses_a_device_as_the_cli_does():
    """harness.run_fio('/dev/zero') is the CLI's one line (it hung, fio reading /dev/zero)."""
    # The timeout ends a fio that reads it after all (which kills fio).
    r = outcome("from harness import run_fio\nrun_fio('/dev/zero', timeout=5)", timeout=60)
    assert r == ("JobFileError: run: job file /dev/zero is not a regular file; allowed: a text "
                 "file")


def test_run_simulated_takes_one_section_as_a_str(tmp_path, mdsplit_module):
    """run_simulated(job, sections="legacy") runs that section (the str was iterated)."""
    from harness.fio_runner import run_simulated
    d = tmp_path / "jobs"
    d.mkdir()
    for p in JOBS.iterdir():
        if p.is_file() and p.suffix in (".fio", ".toml"):
            (d / p.name).write_text(p.read_text())
    res = run_simulated(d / "raid5-split-order.fio", sections="legacy")
    assert [j["jobname"] for j in res.jobs] == ["legacy"]


def test_simulate_names_a_job_by_its_name(tmp_path, mdsplit_module):
    """simulate's message for a job's offset past the end names the job, in the one-line form."""
    (tmp_path / "s.toml").write_text(STACK)
    (tmp_path / "j.fio").write_text("[global]\nmdsplit_config=s.toml\nfilename=md0\n"
                                    "ioengine=external:/usr/local/lib/mdsplit/libmdsplit.so\n"
                                    "direct=1\n[far]\nrw=read\noffset=2m\n")
    p = subprocess.run([sys.executable, "-m", "harness", "simulate", str(tmp_path / "j.fio")],
                       cwd=ROOT, capture_output=True, text=True)
    assert (p.returncode, p.stderr.strip()) == (
        1, "simulate: job far: offset: 2097152 is past the end of the device (1048576 bytes); "
           "allowed: 0..1048575")
