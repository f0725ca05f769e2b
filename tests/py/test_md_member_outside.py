"""A RAID5 member file written by a stack that is not its array (issue 41,
item 1). A passthrough stack over r1.img wrote 1 MiB into the array behind
md's back: the superblock still said clean, the next array run trusted the
parity, and a degraded read returned wrong data. Now such a stack is refused
(device safety, like an md signature on a block device) unless the member
sets force = true; with force the array is marked dirty, so its next run
resyncs the parity from the data."""
import json
import os

import pytest

from conftest import write_job
from harness import run_fio
from harness.parity_check import check_parity

XATTR = "user.mdsplit.md"
CHUNK = 64 * 1024
R5 = ('[device]\nkind = "raid5"\nchunk = "64k"\n' +
      "".join(f'[[members]]\npath = "m{i}.img"\nsize = "8m"\n' for i in range(4)))


@pytest.fixture
def array(engine, workdir, xattrs):
    """A written 4-member array m0..m3.img (its superblocks say clean)."""
    (workdir / "r5.toml").write_text(R5)
    run_fio(job(engine, workdir, "w", "r5.toml", "rw=write\nbs=64k\nverify=md5\n"), timeout=60)
    return workdir


def job(engine, workdir, name, config, body):
    return write_job(workdir, name + ".fio", (
        f"[global]\nioengine=external:{engine}\nmdsplit_config={config}\nfilename=md0\n"
        f"direct=1\nmdsplit_stats={name}.json\n[{name}]\n{body}"))


def passthrough(workdir, force=False):
    (workdir / "pt.toml").write_text('[[members]]\npath = "m1.img"\n' +
                                     ("force = true\n" if force else ""))


def members(workdir):
    return [workdir / f"m{i}.img" for i in range(4)]


def test_a_passthrough_writer_on_a_raid5_member_is_refused(engine, array):
    """rw=write through a passthrough stack on m1.img: one line naming the md superblock; nothing written."""
    passthrough(array)
    before = (array / "m1.img").read_bytes()
    r = run_fio(job(engine, array, "pt", "pt.toml", "rw=write\nbs=64k\nsize=1m\n"), check=False,
                timeout=60)
    assert r.returncode != 0
    lines = [l for l in r.stderr.splitlines() if l.startswith("mdsplit:")]
    assert len(lines) == 1, r.stderr
    assert lines[0] == (
        f'mdsplit: pt.toml: members[0].path: "{array}/m1.img" carries an md superblock '
        "(xattr user.mdsplit.md: member 1 of a raid5 of 4 members): writing it outside the "
        "array would leave the array's parity wrong; allowed: the array's own raid5 stack "
        "file, jobs that only read, or force = true on members[0] in the stack file (the "
        "array is then resynced at its next run)")
    assert (array / "m1.img").read_bytes() == before
    assert check_parity(members(array), CHUNK, "left-symmetric") == []


def test_a_passthrough_reader_on_a_raid5_member_is_accepted(engine, array):
    """Reading a member through a passthrough stack changes nothing: accepted, the superblock still clean."""
    passthrough(array)
    run_fio(job(engine, array, "pt", "pt.toml", "rw=read\nbs=64k\nsize=1m\n"), timeout=60)
    assert " state=clean " in os.getxattr(array / "m1.img", XATTR).decode()


def test_force_marks_the_array_dirty_and_its_next_run_resyncs(engine, array):
    """force = true: the write goes through, m1's superblock says active, the array's next run resyncs the parity."""
    passthrough(array, force=True)
    run_fio(job(engine, array, "pt", "pt.toml", "rw=write\nbs=64k\nsize=1m\n"), timeout=60)
    assert " state=active " in os.getxattr(array / "m1.img", XATTR).decode()
    assert check_parity(members(array), CHUNK, "left-symmetric") != []
    run_fio(job(engine, array, "r", "r5.toml", "rw=write\nbs=64k\nsize=64k\n"), timeout=60)
    assert json.loads((array / "r.json").read_text())["md_assembly"]["action"] == "resync"
    assert check_parity(members(array), CHUNK, "left-symmetric") == []
