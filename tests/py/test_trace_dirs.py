"""mdsplit_trace and several jobs: each stack writes DIR/<device>.blktrace.0
with O_TRUNC, and every stack names its members m0, m1, ... -- so two jobs
with devices of their own must not name one directory (the last to open it
truncated the other's traces), forked subjobs of numjobs write DIR.1,
DIR.2, ... as their sidecars do, and threads sharing one stack share its
traces."""
import fcntl
import json
import os
import subprocess

import pytest

from conftest import PASSTHROUGH_FILE_STACK, write_job
from harness import run_fio
from harness.simulate import SimulateError, simulate_job

STACK = PASSTHROUGH_FILE_STACK


def job_text(engine, body, thread=False):
    return f"""[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
rw=randread
bs=4k
size=256k
{"thread=1" if thread else ""}
{body}"""


# Two forked jobs, two copies of the device, one trace directory: refused
# at setup with one line naming the option and the other job.
def test_forked_jobs_naming_one_trace_dir_are_refused(engine, tmp_path):
    (tmp_path / "stack.toml").write_text(STACK)
    job = write_job(tmp_path, "t.fio", job_text(engine, "[a]\nmdsplit_trace=tr\n[b]\nmdsplit_trace=tr\n"))
    result = run_fio(job, check=False)
    assert result.returncode != 0
    errors = result.mdsplit_errors()
    assert any(e.startswith("mdsplit: mdsplit_trace=tr: job ") and "allowed: a directory per job" in e
               for e in errors), result.stderr
    assert not (tmp_path / "tr").exists()


# "tr" and "tr/" are one directory (run_path): two forked jobs naming it so are refused too
# (the second truncated the first's traces).
@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_forked_jobs_naming_one_trace_dir_with_a_slash_are_refused(engine, tmp_path, run):
    (tmp_path / "stack.toml").write_text(STACK)
    job = write_job(tmp_path, "t.fio", job_text(engine, "[a]\nmdsplit_trace=tr\n[b]\nmdsplit_trace=tr/\n"))
    tail = (" writes its traces there too, from a device of its own, so one job's blktrace "
            "files would overwrite the other's; allowed: a directory per job, or thread=1 with "
            "the same mdsplit_config and filename (one shared device, one set of traces)")
    # Each job's setup refuses, naming the other; job a's line comes first.
    first = "mdsplit: mdsplit_trace=tr: job b" + tail
    second = "mdsplit: mdsplit_trace=tr/: job a" + tail
    if run == "fio":
        result = run_fio(job, check=False)
        assert result.returncode != 0
        assert [e for e in result.mdsplit_errors() if "mdsplit_trace" in e] == [first, second], \
            result.stderr
    else:
        with pytest.raises(SimulateError) as e:
            simulate_job(job)
        assert str(e.value) == first  # the engine's first line


def run_accepted(run, job):
    """Runs the job with fio or simulate; it must succeed."""
    if run == "fio":
        result = run_fio(job, check=False)
        assert result.returncode == 0, result.stderr
    else:
        simulate_job(job)


# Threads sharing one device agree on its trace directory when one says "tr" and another
# "tr/" (they were refused as naming two).
@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_threads_sharing_a_stack_may_name_its_trace_dir_with_a_slash(engine, tmp_path, run):
    (tmp_path / "stack.toml").write_text(STACK)
    job = write_job(tmp_path, "t.fio", job_text(
        engine, "[a]\nmdsplit_trace=tr\n[b]\nmdsplit_trace=tr/\n", thread=True))
    run_accepted(run, job)
    assert (tmp_path / "tr" / "m0.blktrace.0").stat().st_size > 0


# A forked subjob of mdsplit_trace=tr/ traces into tr.1, as one of tr does (it was tr/.1,
# inside tr).
@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_forked_subjobs_of_a_trace_dir_with_a_slash_write_dir_dot_n(engine, tmp_path, run):
    (tmp_path / "stack.toml").write_text(STACK)
    job = write_job(tmp_path, "t.fio", job_text(engine, "[a]\nnumjobs=2\nmdsplit_trace=tr/\n"))
    run_accepted(run, job)
    assert (tmp_path / "tr.1" / "m0.blktrace.0").stat().st_size > 0
    assert not (tmp_path / "tr" / ".1").exists()


# Forked subjobs of numjobs each trace their own copy: DIR, DIR.1, DIR.2.
def test_forked_subjobs_write_numbered_trace_dirs(engine, tmp_path):
    (tmp_path / "stack.toml").write_text(STACK)
    job = write_job(tmp_path, "t.fio", job_text(engine, "[a]\nnumjobs=3\nmdsplit_trace=tr\n"))
    result = run_fio(job, check=False)
    assert result.returncode == 0, result.stderr
    for d in ("tr", "tr.1", "tr.2"):
        trace = tmp_path / d / "m0.blktrace.0"
        assert trace.stat().st_size > 0, d


# Threads of numjobs share one stack, so one set of traces in DIR itself.
def test_threads_sharing_a_stack_share_its_trace_dir(engine, tmp_path):
    (tmp_path / "stack.toml").write_text(STACK)
    job = write_job(tmp_path, "t.fio",
                    job_text(engine, "[a]\nnumjobs=2\nmdsplit_trace=tr\n", thread=True))
    result = run_fio(job, check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "tr" / "m0.blktrace.0").stat().st_size > 0
    assert not (tmp_path / "tr.1").exists()


# harness simulate (the virtual clock) follows the engine: the same refusal,
# and the same numbered directories for forked subjobs.
def test_simulate_names_trace_dirs_as_the_engine(engine, tmp_path):
    (tmp_path / "stack.toml").write_text(STACK)
    job = write_job(tmp_path, "t.fio", job_text(engine, "[a]\nmdsplit_trace=tr\n[b]\nmdsplit_trace=tr\n"))
    with pytest.raises(SimulateError, match=r"^mdsplit: mdsplit_trace=tr: job b writes its traces"):
        simulate_job(job)
    job = write_job(tmp_path, "u.fio", job_text(engine, "[a]\nnumjobs=2\nmdsplit_trace=vt\n"))
    simulate_job(job)
    assert (tmp_path / "vt" / "m0.blktrace.0").stat().st_size > 0
    assert (tmp_path / "vt.1" / "m0.blktrace.0").stat().st_size > 0


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_trace_file_that_is_not_a_regular_file_is_refused(engine, tmp_path, run):
    """A trace file name in DIR that is a FIFO (or a link to a device): refused, never written through."""
    (tmp_path / "stack.toml").write_text(STACK)
    (tmp_path / "tr").mkdir()
    os.mkfifo(tmp_path / "tr" / "m0.blktrace.0")
    job = write_job(tmp_path, "t.fio", job_text(engine, "[a]\nmdsplit_trace=tr\n"))
    line = ("mdsplit: mdsplit_trace: tr/m0.blktrace.0 exists and is not a regular "
            "file; allowed: a directory whose trace files are regular files or absent")
    if run == "fio":
        result = run_fio(job, check=False, timeout=60)
        assert result.returncode != 0
        assert line in result.mdsplit_errors(), result.stderr
    else:
        with pytest.raises(SimulateError, match="exists and is not a regular file"):
            simulate_job(job)


# A trace that cannot be written (here: the file-size limit) fails the job
# with one line; fio ends normally and the sidecar is still written (before,
# the stack's destructor threw the error again and fio aborted, SIGABRT).
@pytest.mark.parametrize("thread", [False, True])
def test_trace_write_error_fails_the_job_without_a_crash(engine, tmp_path, thread):
    (tmp_path / "stack.toml").write_text(
        '[[members]]\npath = "m0.img"\nsize = "1m"\n')
    job = write_job(tmp_path, "t.fio", job_text(
        engine, "[j]\nrw=randwrite\nsize=1m\nloops=20\nmdsplit_trace=tr\n"
        "mdsplit_stats=st.json\n", thread=thread))
    # 1536 blocks of 1 KiB: the traces outgrow it, the 1 MiB member does not.
    p = subprocess.run(["bash", "-c", "trap '' XFSZ; ulimit -f 1536; "
                        f"exec fio --output-format=json {job}"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    errors = [l for l in p.stderr.splitlines() if l.startswith("mdsplit:")]
    assert errors == ["mdsplit: mdsplit_trace: cannot write tr/m0.blktrace.0: File too large"]
    assert "terminate called" not in p.stderr
    assert json.loads((tmp_path / "st.json").read_text())["devices"]


# An output path that is a dangling symlink names the file the link will
# create: here the member the job creates, so the sidecar is refused (it used
# to replace the 4 MiB just written).
def test_sidecar_through_a_dangling_link_to_a_new_member_is_refused(engine, tmp_path):
    (tmp_path / "stack.toml").write_text('[[members]]\npath = "new.img"\nsize = "4m"\n')
    os.symlink("new.img", tmp_path / "stats.json")
    job = write_job(tmp_path, "s.fio", job_text(
        engine, "[j]\nrw=write\nsize=4m\nmdsplit_stats=stats.json\n"))
    # Not run_fio: it would read the sidecar through the link.
    p = subprocess.run(["fio", "--output-format=json", str(job)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert [l for l in p.stderr.splitlines() if l.startswith("mdsplit:")] == [
        "mdsplit: mdsplit_stats=stats.json is members[0] of stack.toml: the sidecar would "
        "overwrite it; allowed: a file that is neither a member nor a stack file of the run"]
    assert not (tmp_path / "new.img").exists()


# A file another mdsplit run has claimed as a member (flock, member_claim.h;
# held here by the test as that run would) is never replaced by a sidecar or
# a trace: that run's data would be gone.
@pytest.mark.parametrize("output", ["stats", "trace"])
def test_outputs_never_replace_a_member_of_another_run(engine, tmp_path, output):
    (tmp_path / "stack.toml").write_text(STACK)
    (tmp_path / "tr").mkdir()
    other = tmp_path / ("other.img" if output == "stats" else "tr/m0.blktrace.0")
    other.write_bytes(b"\x5a" * 65536)
    body = "mdsplit_stats=other.img\n" if output == "stats" else "mdsplit_trace=tr\n"
    job = write_job(tmp_path, "o.fio", job_text(engine, "[j]\n" + body))
    with open(other, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        p = subprocess.run(["fio", "--output-format=json", str(job)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    [line] = [l for l in p.stderr.splitlines() if l.startswith("mdsplit:")]
    assert "is a member being written by another mdsplit run" in line, line
    assert other.read_bytes() == b"\x5a" * 65536
