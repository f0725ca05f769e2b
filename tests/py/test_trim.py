"""Discard (fio's trim, randtrim): through the stack to files (a punched
hole), block devices (the kernel's discard) and RAID5 (whole stripes only,
as md's make_discard_request), with blktrace's discard category and
iostat's d/s ... dareq-sz fields in the sidecar."""
import json
import os
import subprocess

import pytest

from conftest import losetup_works, stack_job
from harness import run_fio

KIB = 1024
MIB = 1024 * KIB


def raid5(tmp_path, safely, members=3):
    return ('[device]\nkind = "raid5"\nchunk = "64k"\n' +
            (f"devices_handle_discard_safely = {'true' if safely else 'false'}\n") +
            "".join(f'[[members]]\npath = "{tmp_path}/r{i}.img"\nsize = "8m"\n'
                    for i in range(members)))


def test_trim_punches_a_hole_in_a_file_member(tmp_path, engine):
    """rw=trim over the first 4 MiB of a written 8 MiB file member frees
    those blocks, leaves the rest, and counts 64 KiB discards in the sidecar."""
    stack = f'[[members]]\npath = "{tmp_path}/m.img"\nsize = "8m"\n'
    body = ("bs=64k\nsize=8m\n[w]\nrw=write\nbuffer_pattern=0x5a\n"
            "[t]\nstonewall\nrw=trim\nsize=4m\nmdsplit_stats=t.json\n")
    result = run_fio(stack_job(tmp_path, engine, stack, body), check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    data = (tmp_path / "m.img").read_bytes()
    assert data[:4 * MIB] == bytes(4 * MIB)
    assert data[4 * MIB:] == b"\x5a" * (4 * MIB)
    assert os.stat(tmp_path / "m.img").st_blocks * 512 <= 4 * MIB + 64 * KIB
    member = next(d for d in json.loads((tmp_path / "t.json").read_text())["devices"]
                  if d["role"] == "member")
    assert member["discard"]["ios"] == 64 and member["discard"]["sectors"] == 8192
    assert member["dareq_sz_kb"] == 64.0 and member["discard"]["merges"] == 0


def test_discard_events_carry_the_discard_category(tmp_path, engine, mdsplit_module):
    """The member's blktrace has Q/G/D/C events of op discard for a trim job."""
    stack = f'[[members]]\npath = "{tmp_path}/m.img"\nsize = "1m"\n'
    body = "bs=256k\nsize=1m\n[t]\nrw=trim\nmdsplit_trace=tr\n"
    result = run_fio(stack_job(tmp_path, engine, stack, body), check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    events = mdsplit_module.read_blktrace(str(tmp_path / "tr" / "m0.blktrace.0"))
    issued = [e for e in events if e["action"] == "D"]
    assert len(issued) == 4 and all(e["op"] == "D" for e in issued), issued


def test_raid5_refuses_discard_without_devices_handle_discard_safely(tmp_path, engine):
    """md's default: an array without devices_handle_discard_safely fails discards (EOPNOTSUPP)."""
    body = "bs=128k\nsize=1m\n[t]\nrw=trim\n"
    result = run_fio(stack_job(tmp_path, engine, raid5(tmp_path, False), body), check=False,
                     timeout=60)
    assert result.returncode != 0
    assert result.jobs[0]["error"] == 95  # EOPNOTSUPP


def test_raid5_discards_whole_stripes_only(mdsplit_module, tmp_path):
    """A 384 KiB discard from 64 KiB on 3 members (128 KiB stripes) discards
    stripes 1 and 2 only: member sectors [128, 384) on every member."""
    stack = ('[device]\nkind = "raid5"\nchunk = "64k"\ndevices_handle_discard_safely = true\n' +
             '[[members]]\nbackend = "ram"\nsize = "4m"\n' * 3)
    sim = mdsplit_module.Simulation(stack, str(tmp_path))
    sim.submit("discard", 64 * KIB, 384 * KIB)
    [done] = sim.run()
    assert done["error"] == 0
    for m in ("m0", "m1", "m2"):
        issued = [(e["sector"], e["bytes"]) for e in sim.events(device=m, actions="D")]
        assert issued == [(128, 256 * 512)], (m, issued)


def test_raid5_partial_stripe_discard_touches_nothing(mdsplit_module, tmp_path):
    """A discard smaller than a stripe completes without member I/O, and the data stays."""
    stack = ('[device]\nkind = "raid5"\nchunk = "64k"\ndevices_handle_discard_safely = true\n' +
             '[[members]]\nbackend = "ram"\nsize = "4m"\n' * 3)
    sim = mdsplit_module.Simulation(stack, str(tmp_path))
    sim.write(0, b"\x33" * (128 * KIB))
    sim.run()
    sim.clear_events()
    sim.submit("discard", 4 * KIB, 120 * KIB)
    [done] = sim.run()
    assert done["error"] == 0
    assert sim.events(actions="D") == []
    assert sim.read(0, 128 * KIB) == b"\x33" * (128 * KIB)


def test_raid5_trim_keeps_parity(tmp_path, engine):
    """randwrite, then trim of the first half, over 3 file members: the
    parity checker finds every row consistent, and the trimmed stripes read zero."""
    body = ("bs=128k\nsize=16m\n[w]\nrw=randwrite\n"
            "[t]\nstonewall\nrw=trim\nsize=8m\n")
    jobfile = stack_job(tmp_path, engine, raid5(tmp_path, True), body)
    result = run_fio(jobfile, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    check = subprocess.run(["/usr/bin/python3", "-m", "harness.parity_check",
                            str(tmp_path / "stack.toml")], capture_output=True, text=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert check.returncode == 0, check.stdout + check.stderr
    for i in range(3):  # stripes 0..63 (8 MiB of data) are member bytes [0, 4 MiB)
        with open(tmp_path / f"r{i}.img", "rb") as f:
            assert f.read(4 * MIB) == bytes(4 * MIB)


def test_trim_on_a_loop_device_discards(tmp_path, engine):
    """On a loop device member, trim reaches the kernel's discard: the
    backing file loses the blocks (loop punches holes)."""
    reason = losetup_works()
    if reason:
        pytest.skip(reason)
    backing = tmp_path / "loop.img"
    with open(backing, "wb") as f:
        f.write(b"\x77" * (4 * MIB))
    dev = subprocess.run(["losetup", "-f", "--show", str(backing)], check=True,
                         capture_output=True, text=True).stdout.strip()
    try:
        stack = f'[[members]]\npath = "{dev}"\nforce = true\n'
        body = "bs=1m\nsize=4m\n[t]\nrw=trim\n"
        result = run_fio(stack_job(tmp_path, engine, stack, body), check=False, timeout=60)
        assert result.returncode == 0, result.stderr
        with open(dev, "rb") as f:
            assert f.read(4 * MIB) == bytes(4 * MIB)
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


TRIMWRITE = "iodepth=16\nbs=192k\nsize=12m\nverify=crc32c\n[tw]\nrw={rw}\n"


@pytest.mark.parametrize("rw", ["trimwrite", "randtrimwrite"])
def test_trimwrite_at_depth_keeps_the_writes_on_a_file(tmp_path, engine, rw):
    """trimwrite at iodepth 16 on a file member verifies: a block's write waits
    for the hole punched before it (the punch landed after the write and the
    data read back as zeros)."""
    stack = f'[[members]]\npath = "{tmp_path}/m.img"\nsize = "32m"\n'
    result = run_fio(stack_job(tmp_path, engine, stack, TRIMWRITE.format(rw=rw)), check=False,
                     timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.jobs[0]["error"] == 0


def test_trimwrite_at_depth_keeps_the_writes_on_a_loop_device(tmp_path, engine, loop_devices):
    """The same on a loop device member, where the discard is the kernel's
    (io_uring's or BLKDISCARD after its completion)."""
    dev = loop_devices(32 << 20)
    stack = f'[[members]]\npath = "{dev}"\n'
    result = run_fio(stack_job(tmp_path, engine, stack, TRIMWRITE.format(rw="randtrimwrite")),
                     check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.jobs[0]["error"] == 0
