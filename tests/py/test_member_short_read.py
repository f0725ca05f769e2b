"""A member file cut short while in use (issue 41, item 5).

A read the member file ends inside came back short, and the rest of the
buffer kept what it held before: fio's verify found the previous block's
bytes ("bad header offset ..."), a plain read job ended with error 0, a
RAID5 did not fail the member, and Simulation.read() returned 0 bytes in the
middle of the array. Now a member read that comes back short is an error,
as a direct-I/O loop device ends one (loop.c lo_complete_rq: EIO, the rest
zero-filled): a passthrough read fails with EIO, and a RAID5 fails the
member and rebuilds the read from the others (md_error, the read retried
through the stripe cache).
"""
import json
import os
import subprocess
import time

import pytest

from conftest import write_job
from harness import run_fio

MiB = 1 << 20


def data(n, seed):
    return bytes((i * 131 + seed) & 0xFF for i in range(n))


def test_simulation_read_of_a_cut_member_fails_with_eio(mdsplit_module, tmp_path):
    """Passthrough on m0.img, the file cut to 0 bytes: read(65536, 65536) raises EIO, never returns 0 bytes."""
    (tmp_path / "m0.img").write_bytes(data(MiB, 1))
    sim = mdsplit_module.Simulation('[[members]]\npath = "m0.img"\n', str(tmp_path))
    assert sim.read(65536, 4096) == data(MiB, 1)[65536:65536 + 4096]
    os.truncate(tmp_path / "m0.img", 0)
    with pytest.raises(RuntimeError, match="Input/output error"):
        sim.read(65536, 65536)


def test_simulation_raid5_read_of_a_cut_member_is_rebuilt(mdsplit_module, tmp_path):
    """RAID5 of four files, m1.img cut to 0 bytes: the whole array reads back as written (m1 failed, rebuilt)."""
    stack = '[device]\nkind = "raid5"\nchunk = "64k"\n' + "".join(
        f'[[members]]\npath = "m{i}.img"\nsize = "1m"\n' for i in range(4))
    sim = mdsplit_module.Simulation(stack, str(tmp_path))
    written = data(sim.size, 7)
    sim.write(0, written)
    os.truncate(tmp_path / "m1.img", 0)
    assert sim.read(0, sim.size) == written
    assert sim.stats()["devices"][0]["raid5"]["member_errors"] >= 1


def cut_while_reading(engine, workdir, stack, member, body):
    """Runs a rate-limited read job and cuts `member` to 0 bytes a second in; fio's result."""
    (workdir / "s.toml").write_text(stack)
    job = write_job(workdir, "r.fio", (
        f"[global]\nioengine=external:{engine}\nmdsplit_config=s.toml\nfilename=md0\n"
        f"direct=1\nbs=64k\nmdsplit_stats=r.json\n[r]\nrw=read\nrate=4m\n{body}"))
    p = subprocess.Popen(["fio", "--output-format=json", str(job)], cwd=workdir,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    os.truncate(workdir / member, 0)
    out, err = p.communicate(timeout=60)
    return p.returncode, json.loads(out[out.index("{"):]) if "{" in out else None, err


def test_fio_read_of_a_cut_passthrough_member_fails_with_eio(engine, workdir):
    """A read job at 4 MiB/s, m0.img cut mid-run: the job ends with EIO, not error 0 and not stale bytes."""
    (workdir / "m0.img").write_bytes(b"\0" * (16 * MiB))
    rc, out, err = cut_while_reading(engine, workdir, '[[members]]\npath = "m0.img"\n',
                                     "m0.img", "size=16m\n")
    assert rc != 0, err
    assert out["jobs"][0]["error"] == 5, err  # EIO
    assert out["jobs"][0]["read"]["io_bytes"] < 16 * MiB


def test_fio_verify_on_a_raid5_with_a_cut_member_passes_and_fails_the_member(engine, workdir):
    """R5 written with md5, then read and verified at 4 MiB/s while m0.img is cut: m0 failed, every block verifies."""
    stack = '[device]\nkind = "raid5"\nchunk = "64k"\n' + "".join(
        f'[[members]]\npath = "m{i}.img"\nsize = "8m"\n' for i in range(4))
    (workdir / "s.toml").write_text(stack)
    run_fio(write_job(workdir, "w.fio", (
        f"[global]\nioengine=external:{engine}\nmdsplit_config=s.toml\nfilename=md0\n"
        "direct=1\nbs=64k\n[w]\nrw=write\nverify=md5\ndo_verify=0\n")), timeout=60)
    rc, out, err = cut_while_reading(engine, workdir, stack, "m0.img",
                                     "verify=md5\n")
    assert rc == 0, err
    assert out["jobs"][0]["error"] == 0
    assert "members[0]" in err, err  # md's member failure notice
    stats = json.loads((workdir / "r.json").read_text())
    assert stats["devices"][0]["raid5"]["member_errors"] >= 1
