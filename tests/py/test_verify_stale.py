"""What a read-only verify can catch (issue 41, item 10).

fio's header verify (md5, crc32c, ...) in a job that only reads or only
writes takes each block's seed from the block's own header (verify.c
verify_io_u: "if (!td_rw(td) ...) io_u->rand_seed = hdr->rand_seed"): a block
an older writer left at the same offset is self-consistent and passes. So
the tests that must tell stale data from current data (an old member copy
kicked, a rebuild) verify against the last writer's known pattern
(verify=pattern), and the ones that verify a reconstruction hash it with md5:
crc32c cannot tell a right block from the XOR of three valid fio blocks.
"""
import shutil

from conftest import write_job
from harness import run_fio

STACK = '[[members]]\npath = "m0.img"\nsize = "4m"\n'


def job(engine, workdir, name, body):
    return write_job(workdir, name + ".fio", (
        f"[global]\nioengine=external:{engine}\nmdsplit_config=s.toml\nfilename=md0\n"
        f"direct=1\nbs=64k\n[{name}]\n{body}"))


def stale_member(engine, workdir, first, second):
    """m0.img written with `first`, copied, written with `second`, the copy put back."""
    (workdir / "s.toml").write_text(STACK)
    run_fio(job(engine, workdir, "w1", "rw=write\n" + first), timeout=60)
    shutil.copyfile(workdir / "m0.img", workdir / "m0.old")
    run_fio(job(engine, workdir, "w2", "rw=write\n" + second), timeout=60)
    shutil.copyfile(workdir / "m0.old", workdir / "m0.img")


def test_a_read_only_md5_verify_passes_stale_self_consistent_blocks(engine, workdir):
    """The trap: md5 blocks of randseed=1 put back under a randseed=2 verify pass it (fio takes the header's seed)."""
    stale_member(engine, workdir, "verify=md5\nrandseed=1\n", "verify=md5\nrandseed=2\n")
    r = run_fio(job(engine, workdir, "r", "rw=read\nverify=md5\nrandseed=2\n"), check=False,
                timeout=60)
    assert r.returncode == 0 and r.jobs[0]["error"] == 0, r.stderr


def test_a_known_pattern_verify_fails_stale_blocks(engine, workdir):
    """verify=pattern with the last writer's pattern: the same stale blocks fail ("got pattern 'aa', wanted 'bb'")."""
    stale_member(engine, workdir, "verify=pattern\nverify_pattern=0xaa\n",
                 "verify=pattern\nverify_pattern=0xbb\n")
    r = run_fio(job(engine, workdir, "r", "rw=read\nverify=pattern\nverify_pattern=0xbb\n"),
                check=False, timeout=60)
    assert r.returncode != 0
    assert "got pattern 'aa', wanted 'bb'" in r.stderr, r.stderr
