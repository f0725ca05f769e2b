"""A member may not be one of fio's own files (issue 41, item 4): the job
file, fio's report (--output), a job's write_iolog or write_*_log file. A
writing run replaced them with member data (and fio writes its report and
logs over a member even a reading run uses); now it is refused with one line
naming the member and the file."""
import subprocess

import pytest

from conftest import write_job


def stack(workdir, member):
    (workdir / "s.toml").write_text(f'[[members]]\npath = "{member}"\nsize = "1m"\ngrow = true\n')


def job(engine, workdir, extra=""):
    return write_job(workdir, "run.fio", (
        f"[global]\nioengine=external:{engine}\nmdsplit_config=s.toml\nfilename=md0\n"
        f"direct=1\nrw=write\nbs=4k\nsize=64k\n[j]\n{extra}"))


def refused(r, member, what):
    assert r.returncode != 0
    lines = [l for l in r.stderr.splitlines() if l.startswith("mdsplit:")]
    assert len(lines) == 1, r.stderr
    assert f'members[0].path: "{member}" is {what}: member data would overwrite it; allowed: ' \
           in lines[0], r.stderr


def fio(workdir, *args):
    return subprocess.run(["fio", *args], cwd=workdir, capture_output=True, text=True,
                          timeout=60)


def test_the_job_file_as_a_member_is_refused(engine, workdir):
    """grow = true on a member that is the job file: refused, the job file unchanged."""
    stack(workdir, "run.fio")
    jobfile = job(engine, workdir)
    before = jobfile.read_bytes()
    r = fio(workdir, "--output=/dev/null", "run.fio")
    refused(r, workdir / "run.fio", "fio's job file run.fio")
    assert jobfile.read_bytes() == before


@pytest.mark.parametrize("form", ["--output=out.txt", "--output out.txt"], ids=["eq", "space"])
def test_fios_report_file_as_a_member_is_refused(engine, workdir, form):
    """--output names the member: refused (named as fio's report, whichever form)."""
    stack(workdir, "out.txt")
    job(engine, workdir)
    r = fio(workdir, *form.split(), "run.fio")
    refused(r, workdir / "out.txt", "fio's report (--output, or the file of its stdout)")
    assert (workdir / "out.txt").stat().st_size < 4096  # fio's text, no member data


def test_a_write_iolog_file_as_a_member_is_refused(engine, workdir):
    """write_iolog names the member: refused."""
    stack(workdir, "io.log")
    job(engine, workdir, "write_iolog=io.log\n")
    r = fio(workdir, "--output=/dev/null", "run.fio")
    refused(r, workdir / "io.log", "the write_iolog file io.log of job j")


@pytest.mark.parametrize("option,file", [("write_bw_log=x", "x_bw.1.log"),
                                         ("write_iops_log=x", "x_iops.1.log"),
                                         ("write_lat_log=x", "x_clat.1.log"),
                                         ("write_hist_log=x\nlog_hist_msec=100", "x_clat_hist.1.log")],
                         ids=["bw", "iops", "lat", "hist"])
def test_a_write_log_file_as_a_member_is_refused(engine, workdir, option, file):
    """A job's write_*_log file (fio's gen_log_name: NAME_TYPE.JOB.log) is the member: refused."""
    stack(workdir, file)
    job(engine, workdir, option + "\n")
    r = fio(workdir, "--output=/dev/null", "run.fio")
    refused(r, workdir / file, f"the {option.split('=')[0]} file {file} of job j")



def test_a_reading_run_is_refused_too(engine, workdir):
    """fio writes its log over a member a read-only run reads: refused as well."""
    (workdir / "x_bw.1.log").write_bytes(b"\1" * (1 << 20))
    (workdir / "s.toml").write_text('[[members]]\npath = "x_bw.1.log"\n')
    write_job(workdir, "run.fio", (
        f"[global]\nioengine=external:{engine}\nmdsplit_config=s.toml\nfilename=md0\n"
        "direct=1\nrw=read\nbs=4k\nsize=64k\nwrite_bw_log=x\n[j]\n"))
    r = fio(workdir, "--output=/dev/null", "run.fio")
    refused(r, workdir / "x_bw.1.log", "the write_bw_log file x_bw.1.log of job j")
