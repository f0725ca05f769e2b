"""`harness simulate --output FILE` where FILE is a file the run reads or
writes: refused before the run with one line, exit 2, the file untouched
(the report, written after the run, replaced a member, the stack or job
file, a trace, or a loop device's backing file). A sidecar there keeps the
engine's refusal of one on fio's --output (exit 1)."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, losetup_works

STACK = '[[members]]\npath = "m0.img"\nsize = "1m"\n'
JOB = ("[j]\nioengine=external:/usr/local/lib/mdsplit/libmdsplit.so\nmdsplit_config=stack.toml\n"
       "filename=md0\ndirect=1\nrw=write\nbs=4k\nsize=64k\nmdsplit_trace=tr\n"
       "mdsplit_stats=side.json\ninclude more.fio\n")


def simulate(*args, cwd):
    p = subprocess.run([sys.executable, "-m", "harness", "simulate", *map(str, args)], cwd=cwd,
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return p.returncode, p.stderr.strip()


@pytest.fixture
def run_dir(tmp_path, mdsplit_module):
    """A job file (with an include), its stack, and the member, trace files
    and sidecar of a first run."""
    (tmp_path / "stack.toml").write_text(STACK)
    (tmp_path / "job.fio").write_text(JOB)
    (tmp_path / "more.fio").write_text("iodepth=2\n")
    assert simulate("job.fio", "--output", "first.txt", cwd=tmp_path) == (0, "")
    return tmp_path


# One run per file of the run: what the line calls it.
@pytest.mark.parametrize("name, what", [
    ("m0.img", "members[0] of stack.toml"),
    ("stack.toml", "the stack file stack.toml"),
    ("job.fio", "the job file job.fio"),
    ("more.fio", "the job file more.fio"),
    ("tr/m0.blktrace.0", "the trace file tr/m0.blktrace.0 of job j"),
    ("tr/md0.blktrace.0", "the trace file tr/md0.blktrace.0 of job j"),
])
def test_output_over_a_file_of_the_run_is_refused_untouched(run_dir, name, what):
    """--output naming a file the run reads or writes: one line, exit 2, the file unchanged."""
    before = (run_dir / name).read_bytes()
    assert simulate("job.fio", "--output", name, cwd=run_dir) == (
        2, f"simulate: --output {name} is {what}: the report would replace it; allowed: a file "
           "that the run neither reads nor writes")
    assert (run_dir / name).read_bytes() == before


def test_output_over_a_sidecar_is_refused_untouched_with_the_engines_line(run_dir):
    """--output naming a sidecar: the engine's line for a sidecar on fio's --output, unchanged."""
    before = (run_dir / "side.json").read_bytes()
    assert simulate("job.fio", "--output", "side.json", cwd=run_dir) == (
        1, "mdsplit: mdsplit_stats=side.json is where fio writes its own report (stdout or "
           "--output): the sidecar would mix into it; allowed: another file or stream, such as "
           "/dev/stderr")
    assert (run_dir / "side.json").read_bytes() == before


def test_output_over_a_loop_devices_backing_file_is_refused(run_dir):
    """--output naming the backing file of a loop device (mdsplit.file_in_use): refused, unchanged."""
    reason = losetup_works()
    if reason:
        pytest.skip(reason)
    img = run_dir / "l.img"
    img.write_bytes(b"\x5a" * (1 << 20))
    dev = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        rdev = os.stat(dev).st_rdev
        code, line = simulate("job.fio", "--output", "l.img", cwd=run_dir)
        assert (code, line) == (
            2, f"simulate: --output l.img is the backing file of loop {os.major(rdev)}:{os.minor(rdev)}: "
               "the report would replace it; allowed: a file that the run neither reads nor writes")
        assert img.read_bytes() == b"\x5a" * (1 << 20)
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)


def test_output_elsewhere_is_written(run_dir):
    """An --output that is no file of the run is written as before."""
    assert simulate("job.fio", "--output", "report.txt", cwd=run_dir) == (0, "")
    assert (run_dir / "report.txt").read_text().startswith("mdsplit-simulate-1")
