"""md's superblock on a RAID5 of member files (engine/core/md/md_superblock.h):
the array is assembled as md assembles it. A run killed outright leaves the
array active and the next run that may write resyncs its parity (the write
hole a SIGKILL cut); a new array over members that hold data is resynced; a
new file in a member's place is rebuilt (recovery); a member that failed
stays out of the next runs; what md would not assemble is refused with one
line. Each case is checked through fio with the engine, with the parity
checker and with fio's verify on the array degraded."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import write_job
from harness import run_fio
from harness.parity_check import check_parity

CHUNK = 64 * 1024
XATTR = "user.mdsplit.md"


def stack(workdir, name="r5.toml", order=(0, 1, 2, 3), chunk="64k", failed=None, size="16m"):
    text = f'[device]\nkind = "raid5"\nchunk = "{chunk}"\n'
    for i in order:
        text += f'[[members]]\npath = "m{i}.img"\nsize = "{size}"\n'
        if failed == i:
            text += "failed = true\n"
    (workdir / name).write_text(text)
    return name


def job(engine, workdir, name, body, config="r5.toml"):
    return write_job(workdir, name, (
        f"[global]\nioengine=external:{engine}\nmdsplit_config={config}\nfilename=md0\n"
        f"direct=1\nmdsplit_stats={name}.json\n[{name}]\n{body}"))


WRITE = "rw=randwrite\nbs=4k\niodepth=16\nnumber_ios=2000\nverify=md5\nrandseed=7\n"
VERIFY = WRITE + "verify_only=1\n"


def assembly(workdir, name):
    return json.loads((workdir / f"{name}.json").read_text())["md_assembly"]


def members(workdir):
    return [workdir / f"m{i}.img" for i in range(4)]


def superblock(path) -> str:
    return os.getxattr(path, XATTR).decode()


def kill_with_jobs(p):
    """SIGKILL fio and its job processes (each in a session of its own)."""
    def children(pid):
        out = []
        for d in os.listdir("/proc"):
            try:
                if d.isdigit() and int(open(f"/proc/{d}/stat").read().rsplit(") ", 1)[1]
                                       .split()[1]) == pid:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
        return out
    for pid in children(p.pid) + [p.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait()


def test_a_new_array_on_empty_members_is_clean_and_marked(engine, workdir, xattrs):
    """Fresh sparse members: no resync; each member's superblock names its role, clean after the run."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", WRITE + "do_verify=1\n"), timeout=60)
    assert assembly(workdir, "w") == {"superblocks": True, "action": "new", "resync_rows": 0,
                                      "recovered_rows": 0, "kicked": [], "events": 1}
    for i, m in enumerate(members(workdir)):
        assert f" disks=4 chunk=65536 layout=2 role={i} state=clean events=2 " in superblock(m)


def test_a_new_array_over_members_holding_data_is_resynced(engine, workdir, xattrs):
    """Members full of random bytes: parity is computed first, so the array survives a failed member."""
    for m in members(workdir):
        m.write_bytes(os.urandom(16 << 20))
    stack(workdir)
    run_fio(job(engine, workdir, "w", WRITE), timeout=60)
    a = assembly(workdir, "w")
    assert a["action"] == "new, resynced" and a["resync_rows"] == 256
    assert check_parity(members(workdir), CHUNK, "left-symmetric") == []
    stack(workdir, "r5f.toml", failed=3)
    run_fio(job(engine, workdir, "v", VERIFY, config="r5f.toml"), timeout=60)


def test_a_killed_run_leaves_the_array_active_and_the_next_writer_resyncs_it(engine, workdir,
                                                                             xattrs):
    """SIGKILL mid-write: superblocks say active; the next run that may write resyncs the parity."""
    stack(workdir)
    p = subprocess.Popen(["fio", "--output=/dev/null", str(job(
        engine, workdir, "k", "thread=1\nrw=randwrite\nbsrange=4k-64k\niodepth=32\n"
        "time_based=1\nruntime=60\n"))], cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    time.sleep(3)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert all("state=active" in superblock(m) for m in members(workdir))
    run_fio(job(engine, workdir, "w", "rw=write\nbs=64k\nsize=64k\n"), timeout=60)
    assert assembly(workdir, "w")["action"] == "resync"
    assert check_parity(members(workdir), CHUNK, "left-symmetric") == []
    assert all("state=clean" in superblock(m) for m in members(workdir))


def test_a_dirty_array_is_not_started_degraded(engine, workdir, xattrs):
    """Active superblocks (a killed run) and a failed member: refused, one line, nothing written."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", WRITE), timeout=60)
    for m in members(workdir):
        os.setxattr(m, XATTR, superblock(m).replace("state=clean", "state=active").encode())
    stack(workdir, "r5f.toml", failed=1)
    for name, body in (("v", VERIFY), ("r", "rw=read\nbs=64k\nsize=1m\n")):
        r = run_fio(job(engine, workdir, name, body, config="r5f.toml"), check=False, timeout=60)
        assert r.returncode != 0
        line = [l for l in r.stderr.splitlines() if "cannot start dirty degraded array" in l]
        assert len(line) == 1 and "r5f.toml: members[1] (" in line[0], r.stderr
        assert "m1.img) out: the array was not stopped cleanly" in line[0]
    assert all("state=active" in superblock(m) for m in members(workdir))


def test_a_new_file_in_a_members_place_is_rebuilt(engine, workdir, xattrs):
    """m2.img removed after a clean run: the next run recovers it, byte for byte."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", WRITE), timeout=60)
    shutil.copy(workdir / "m2.img", workdir / "m2.before")
    (workdir / "m2.img").unlink()
    run_fio(job(engine, workdir, "v", VERIFY), timeout=60)
    a = assembly(workdir, "v")
    assert a["action"] == "recovery of members[2]" and a["recovered_rows"] > 0
    assert (workdir / "m2.img").read_bytes() == (workdir / "m2.before").read_bytes()


def test_a_resync_and_a_recovery_say_so_on_stderr_as_md_logs_them(engine, workdir, xattrs):
    """md_do_sync's two log lines (start, done) on stderr for a recovery and a resync; fio's JSON on stdout stays clean."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", WRITE), timeout=60)
    (workdir / "m2.img").unlink()
    r = subprocess.run(["fio", "--output-format=json", str(job(engine, workdir, "v", VERIFY))],
                       cwd=workdir, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)
    lines = [l for l in r.stderr.splitlines() if l.startswith("mdsplit: md: ")]
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith("mdsplit: md: recovery of RAID array r5.toml (4 members, 16.0 MiB "
                               "each): members[2] (")
    rows = assembly(workdir, "v")["recovered_rows"]
    assert lines[1].startswith(f"mdsplit: md: r5.toml: recovery done: {rows} of 256 chunk rows "
                               "written, in ")
    for m in members(workdir):  # as a kill leaves them
        os.setxattr(m, XATTR, superblock(m).replace("state=clean", "state=active").encode())
    r = subprocess.run(["fio", "--output-format=json", str(job(engine, workdir, "v2", VERIFY))],
                       cwd=workdir, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("mdsplit: md: ")]
    assert len(lines) == 2 and "resync of RAID array r5.toml" in lines[0], r.stderr
    assert lines[1].startswith("mdsplit: md: r5.toml: resync done: 0 of 256 chunk rows"), r.stderr


def test_a_clean_assembly_logs_nothing(engine, workdir, xattrs):
    """A clean array, and a new one over empty members: no resync, so no md line on stderr."""
    stack(workdir)
    for name in ("w", "w2"):
        r = subprocess.run(["fio", "--output-format=json", str(job(engine, workdir, name, WRITE))],
                           cwd=workdir, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "mdsplit: md:" not in r.stderr, r.stderr


STONEWALLED = ("[global]\nioengine=external:{engine}\nmdsplit_config=r5.toml\nfilename=md0\n"
               "direct=1\nrw=write\nbs=64k\nsize=16m\n[A]\n[B]\nstonewall\n")


@pytest.mark.parametrize("failed", [None, 1], ids=["whole", "member-failed"])
def test_forked_stonewalled_jobs_each_assemble_after_the_last_stopped(engine, workdir, xattrs,
                                                                      failed):
    """fio sets forked jobs up before any runs: B's array is still assembled after A's clean stop (no resync, no dirty-degraded refusal)."""
    stack(workdir, failed=failed)
    jobfile = write_job(workdir, "ab.fio", STONEWALLED.format(engine=engine))
    r = subprocess.run(["fio", "--output-format=json", str(jobfile)], cwd=workdir, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "mdsplit: md:" not in r.stderr, r.stderr
    assert [j["error"] for j in json.loads(r.stdout)["jobs"]] == [0, 0]
    if failed is None:
        assert check_parity(members(workdir), CHUNK, "left-symmetric") == []
    assert all("state=clean" in superblock(m) or "state=faulty" in superblock(m)
               for m in members(workdir))


def test_a_member_that_failed_stays_out_of_the_next_runs(engine, workdir, xattrs):
    """fail_nth fails m1 while writing; the next run leaves it out (faulty) and reads verify."""
    stack(workdir)
    text = (workdir / "r5.toml").read_text().replace(
        'path = "m1.img"\nsize = "16m"\n', 'path = "m1.img"\nsize = "16m"\nfaults = { fail_nth = [50] }\n')
    (workdir / "r5.toml").write_text(text)
    r = run_fio(job(engine, workdir, "w", WRITE + "continue_on_error=all\n"), check=False,
                timeout=60)
    assert "members[1]" in r.stderr and "keep it out of the next runs" in r.stderr
    assert "state=faulty" in superblock(workdir / "m1.img")
    stack(workdir)  # no faults, no failed = true: the superblock keeps m1 out
    run_fio(job(engine, workdir, "v", VERIFY), timeout=60)
    assert "state=faulty" in superblock(workdir / "m1.img")


def test_members_in_another_order_are_refused(engine, workdir, xattrs):
    """m1 and m0 swapped in the stack file: refused by the superblock's role, nothing written."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", WRITE), timeout=60)
    before = [m.read_bytes() for m in members(workdir)]
    stack(workdir, order=(1, 0, 2, 3))
    r = run_fio(job(engine, workdir, "v", VERIFY), check=False, timeout=60)
    assert r.returncode != 0
    assert 'members[0] (' in r.stderr and "m1.img) is member 1 of its array" in r.stderr
    assert "allowed: the members in their array order, or new member files" in r.stderr
    assert [m.read_bytes() for m in members(workdir)] == before


def test_another_chunk_size_is_refused(engine, workdir, xattrs):
    """The same members with chunk 128k: refused, naming the geometry they were written with."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", WRITE), timeout=60)
    stack(workdir, chunk="128k")
    r = run_fio(job(engine, workdir, "v", "rw=read\nbs=64k\nsize=1m\n"), check=False, timeout=60)
    assert r.returncode != 0
    assert "was written as one of 4 members with chunk 65536 bytes" in r.stderr


def test_two_new_members_are_refused(engine, workdir, xattrs):
    """Two member files replaced at once: RAID5 rebuilds one; refused."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", WRITE), timeout=60)
    (workdir / "m0.img").unlink()
    (workdir / "m3.img").unlink()
    r = run_fio(job(engine, workdir, "v", VERIFY), check=False, timeout=60)
    assert r.returncode != 0
    assert "m0.img), members[3] (" in r.stderr
    assert "are new (no md superblock, xattr user.mdsplit.md), non-fresh (kicked: an older " \
           "event count) or failed in an array that survives one" in r.stderr


def test_a_member_failed_in_the_stack_file_stays_out_after_a_run_that_wrote(engine, workdir,
                                                                           xattrs):
    """failed = true on m2 while writing new data: m2 is stale, so the next run without that
    line still leaves it out (it came back as in sync, its old data read)."""
    stack(workdir)
    pattern = "rw=write\nsize=40m\nverify=pattern\nverify_pattern={}\n"
    run_fio(job(engine, workdir, "a", pattern.format("0xaa")), timeout=60)
    stack(workdir, "r5f.toml", failed=2)
    run_fio(job(engine, workdir, "b", pattern.format("0xbb"), config="r5f.toml"), timeout=60)
    assert "state=faulty" in superblock(workdir / "m2.img")
    assert all(" faulty=2" in superblock(m) for m in members(workdir))
    run_fio(job(engine, workdir, "c", pattern.format("0xbb") + "verify_only=1\n"), timeout=60)
    assert assembly(workdir, "c")["action"] == "clean"


def test_a_member_an_earlier_job_failed_is_faulty_before_the_writer_runs(engine, workdir,
                                                                       xattrs):
    """A reader's array fails m1 (fail_nth); the writer after it takes m1 as failed and the
    superblocks say so at once, so a kill mid-write cannot bring m1 back by a resync."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", "rw=write\nsize=40m\n"), timeout=60)
    text = (workdir / "r5.toml").read_text().replace(
        'path = "m1.img"\nsize = "16m"\n', 'path = "m1.img"\nsize = "16m"\nfaults = { fail_nth = [20] }\n')
    (workdir / "fault.toml").write_text(text)
    two = write_job(workdir, "two.fio", (
        f"[global]\nioengine=external:{engine}\nfilename=md0\ndirect=1\nbs=64k\n"
        "[r]\nmdsplit_config=fault.toml\nrw=read\nsize=8m\ncontinue_on_error=all\n"
        "[w]\nstonewall\nmdsplit_config=r5.toml\nrw=write\nsize=40m\nrate=4m\n"))
    p = subprocess.Popen(["fio", "--output=/dev/null", str(two)], cwd=workdir,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while "state=faulty" not in superblock(workdir / "m1.img"):
        assert time.monotonic() < deadline and p.poll() is None, "m1 never marked faulty"
        time.sleep(0.05)
    time.sleep(1)
    kill_with_jobs(p)
    assert all(" faulty=1" in superblock(m) for m in members(workdir))
    r = run_fio(job(engine, workdir, "x", "rw=write\nsize=64k\n"), check=False, timeout=60)
    assert "cannot start dirty degraded array" in r.stderr and "members[1]" in r.stderr


@pytest.mark.parametrize("value", [b"x" * 300, b"mdsplit-md 2 something"])
def test_an_xattr_this_version_cannot_read_is_refused(engine, workdir, xattrs, value):
    """A foreign or over-long user.mdsplit.md: one line naming the member (it turned
    superblocks off, or made the member a new disk to rebuild over)."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", "rw=write\nsize=1m\n"), timeout=60)
    os.setxattr(workdir / "m0.img", XATTR, value)
    r = run_fio(job(engine, workdir, "v", "rw=write\nsize=1m\n"), check=False, timeout=60)
    assert r.returncode != 0
    line = [l for l in r.stderr.splitlines() if l.startswith("mdsplit:")][0]
    assert "members[0] (" in line and "its xattr user.mdsplit.md" in line, r.stderr
    assert "allowed: the xattr removed" in line


@pytest.mark.parametrize("field,value", [("disks", "4294967297"), ("role", "-1"),
                                         ("chunk", "18446744073709551616"), ("faulty", "4294967296")])
def test_a_number_past_its_fields_range_is_refused_not_wrapped(engine, workdir, xattrs, field,
                                                               value):
    """disks=4294967297 was "one of 1 members", role=-1 "member 4294967295": now the field is named as unreadable."""
    stack(workdir)
    run_fio(job(engine, workdir, "w", "rw=write\nsize=1m\n"), timeout=60)
    text = superblock(workdir / "m0.img")
    old = next(f for f in text.split() if f.startswith(field + "="))
    os.setxattr(workdir / "m0.img", XATTR, text.replace(old, f"{field}={value}").encode())
    r = run_fio(job(engine, workdir, "v", "rw=read\nsize=1m\n"), check=False, timeout=60)
    assert r.returncode != 0
    line = [l for l in r.stderr.splitlines() if l.startswith("mdsplit:")][0]
    limit = {"disks": 4294967295, "role": 4294967295, "faulty": 4294967295,
             "chunk": 18446744073709551615}[field]
    assert ("members[0] (" in line and "its xattr user.mdsplit.md is no md superblock this "
            f"version reads ({field}={value}: not a whole number from 0 to {limit})" in line), \
        r.stderr
