"""An old copy of a RAID5 member is kicked, never trusted (issue 41, item 2).

Write the array, copy m1.img (cp -a keeps its md superblock xattr), write
the array again, put the copy back: the next run assembled clean and read
m1's old chunks as data, and a degraded read rebuilt wrong data from them.
md keeps an event count in every superblock, bumped by each superblock
update (the array going active, a member failing, the clean stop), and
kicks a member whose count is behind the freshest's ("md: kicking non-fresh
... from array!", md.c super_1_validate / analyze_sbs). Here a run that may
write rebuilds the kicked member from the others; a read-only run leaves it
out and reads around it.

The data is verified against the known pattern of the last writer
(verify=pattern): fio's header verify (md5 ...) takes a read-only job's seed
from each block's own header, so an old but self-consistent block passes it.
"""
import json
import os
import shutil
import subprocess

import pytest

from conftest import write_job
from harness import run_fio
from harness.parity_check import check_parity

XATTR = "user.mdsplit.md"
CHUNK = 64 * 1024


def r5(failed=None):
    text = '[device]\nkind = "raid5"\nchunk = "64k"\n'
    for i in range(4):
        text += f'[[members]]\npath = "m{i}.img"\nsize = "8m"\n'
        text += "failed = true\n" if failed == i else ""
    return text


def job(engine, workdir, name, body, config="r5.toml"):
    return write_job(workdir, name + ".fio", (
        f"[global]\nioengine=external:{engine}\nmdsplit_config={config}\nfilename=md0\n"
        f"direct=1\nbs=64k\nmdsplit_stats={name}.json\n[{name}]\n{body}"))


def assembly(workdir, name):
    return json.loads((workdir / f"{name}.json").read_text())["md_assembly"]


def members(workdir):
    return [workdir / f"m{i}.img" for i in range(4)]


def pattern(p):
    return f"verify=pattern\nverify_pattern={p}\n"


@pytest.fixture
def restored(engine, workdir, xattrs):
    """The array written twice (patterns 0xaa, then 0xbb), m1.img put back as it was after the first."""
    (workdir / "r5.toml").write_text(r5())
    run_fio(job(engine, workdir, "w1", "rw=write\n" + pattern("0xaa")), timeout=60)
    subprocess.run(["cp", "-a", "m1.img", "m1.old"], cwd=workdir, check=True)
    run_fio(job(engine, workdir, "w2", "rw=write\n" + pattern("0xbb")), timeout=60)
    shutil.copyfile(workdir / "m1.img", workdir / "m1.current")
    subprocess.run(["cp", "-a", "m1.old", "m1.img"], cwd=workdir, check=True)
    return workdir


def test_the_event_count_is_bumped_by_each_update_and_the_old_copy_is_behind(restored):
    """Each run bumps the count twice (active, clean stop): the copy says 2, the others 4."""
    counts = [int(os.getxattr(m, XATTR).decode().split(" events=")[1].split()[0])
              for m in members(restored)]
    assert counts == [4, 2, 4, 4]


def test_a_read_only_run_leaves_the_old_copy_out_and_reads_the_current_data(engine, restored):
    """Read-only: m1 is kicked (one md line on stderr) and the array reads around it: the 0xbb data verifies."""
    r = run_fio(job(engine, restored, "r", "rw=read\n" + pattern("0xbb")), check=False,
                timeout=60)
    assert r.returncode == 0, r.stderr
    kicks = [l for l in r.stderr.splitlines() if "kicking non-fresh" in l]
    assert len(kicks) == 1 and kicks[0].startswith(
        "mdsplit: md: kicking non-fresh members[1] (") and "event count 2, the freshest 4" \
        in kicks[0], r.stderr
    a = assembly(restored, "r")
    assert a["action"] == "read-only" and a["kicked"] == [1]
    assert (restored / "m1.img").read_bytes() == (restored / "m1.old").read_bytes()


def test_a_run_that_may_write_rebuilds_the_old_copy(engine, restored):
    """A writer: m1 is rebuilt from the others (recovery), byte for byte the current m1, parity whole."""
    run_fio(job(engine, restored, "w", "rw=write\nsize=64k\n" + pattern("0xbb")), timeout=60)
    a = assembly(restored, "w")
    assert a["action"] == "recovery of members[1]" and a["kicked"] == [1]
    assert (restored / "m1.img").read_bytes() == (restored / "m1.current").read_bytes()
    assert check_parity(members(restored), CHUNK, "left-symmetric") == []
    (restored / "r5f.toml").write_text(r5(failed=0))
    run_fio(job(engine, restored, "d", "rw=read\n" + pattern("0xbb"), config="r5f.toml"),
            timeout=60)


def test_the_old_copy_and_a_failed_member_are_refused(engine, restored):
    """m0 failed and m1 an old copy: two members out of an array that survives one: refused, nothing read."""
    (restored / "r5f.toml").write_text(r5(failed=0))
    r = run_fio(job(engine, restored, "d", "rw=read\n" + pattern("0xbb"), config="r5f.toml"),
                check=False, timeout=60)
    assert r.returncode != 0
    assert "m0.img), members[1] (" in r.stderr
    assert "are new, non-fresh or failed in an array that survives one" in r.stderr
