"""Buffered jobs (direct=0) through the engine's page cache, in a real fio."""
import json

import pytest

from conftest import stack_job, write_job
from harness import run_fio
from harness.simulate import simulate_job
from harness.parity_check import check_parity, load_stack

STACKS = {
    "passthrough": '[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\nsize = "64m"\n',
    "raid5": '[device]\nkind = "raid5"\nchunk = "64k"\n' + "".join(
        f'[[members]]\npath = "r{i}.img"\nsize = "32m"\n' for i in range(4)),
}


@pytest.mark.parametrize("kind", sorted(STACKS))
def test_buffered_randwrite_fsync_verify(engine, workdir, kind):
    (workdir / "stack.toml").write_text(STACKS[kind] + '[page_cache]\nsize = "8m"\n')
    job = write_job(workdir, "b.fio", f"""
[b]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=0
rw=randwrite
bsrange=1k-64k
iodepth=8
size=32m
fsync=16
end_fsync=1
verify=crc32c
mdsplit_stats=stats/b.json
""")
    result = run_fio(job, timeout=120)
    assert result.job("b")["error"] == 0
    pc = result.sidecars["stats/b.json"]
    # Everything written reached the members (write-back on fsync/job end).
    written = sum(m["write"]["sectors"] for m in pc.members) * 512
    assert written >= 32 * 1024 * 1024
    if kind == "raid5":
        # What write-back left on the members is what md would store.
        members, chunk, layout, _, sizes = load_stack(workdir / "stack.toml")
        assert check_parity(members, chunk, layout, sizes=sizes) == []


def test_buffered_data_survives_a_new_stack(engine, workdir):
    """Write buffered with a small cache (eviction + write-back), then read it
    back with verify_only in a second fio run: the data is on the members."""
    (workdir / "stack.toml").write_text(STACKS["passthrough"] + '[page_cache]\nsize = "4m"\n')
    common = f"""
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
rw=write
bs=16k
size=16m
verify=md5
"""
    w = write_job(workdir, "w.fio", "[w]\ndirect=0\ndo_verify=0\n" + common)
    assert run_fio(w, timeout=120).job("w")["error"] == 0
    r = write_job(workdir, "r.fio", "[w]\ndirect=1\nverify_only=1\n" + common)
    assert run_fio(r, timeout=120).job("w")["error"] == 0


@pytest.mark.parametrize("kind", sorted(STACKS))
def test_buffered_read_after_a_direct_write_sees_it(engine, workdir, kind):
    """Jobs of one stack one after another (thread=1, stonewall): a buffered
    write leaves its pages cached, a direct write overwrites the range, and a
    buffered read of it returns the direct write's data (the direct write
    dropped the cached pages, as the kernel's kiocb_invalidate_pages does)."""
    (workdir / "stack.toml").write_text(STACKS[kind])
    job = write_job(workdir, "mixed.fio", f"""
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
thread=1
stonewall
bs=4k
size=1m
[buffered-write]
direct=0
rw=write
buffer_pattern=0xaa
[direct-write]
direct=1
rw=write
buffer_pattern=0xbb
[buffered-read]
direct=0
rw=read
verify=pattern
verify_pattern=0xbb
verify_only=1
""")
    result = run_fio(job, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert [result.job(n)["error"] for n in ("buffered-write", "direct-write", "buffered-read")] \
        == [0, 0, 0]


def test_a_job_whose_buffers_fio_failed_to_allocate_is_refused(engine, workdir):
    """iomem=shmhuge with no huge pages: fio reports the failed allocation and
    runs the job without buffers; the engine refuses it with one line (the
    page cache copied into an invalid address and crashed)."""
    meminfo = open("/proc/meminfo").read()
    if "HugePages_Total:       0" not in meminfo:
        pytest.skip("this machine has huge pages, so fio's iomem=shmhuge allocation succeeds")
    (workdir / "stack.toml").write_text(STACKS["passthrough"])
    job = write_job(workdir, "nobuf.fio", f"""
[j]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
thread=1
direct=0
rw=read
bs=4k
size=1m
iomem=shmhuge
""")
    result = run_fio(job, check=False, timeout=60)
    assert result.returncode != 0 and result.returncode < 128, result.stderr
    assert ("mdsplit: the job has no I/O buffers (fio's iomem= allocation failed, see its error "
            "above); allowed: an iomem= this machine can provide, such as malloc (the default)"
            in result.stderr.splitlines()), result.stderr


def invalidate_run(engine, workdir, run, invalidate):
    job = stack_job(workdir, engine, STACKS["passthrough"], f"""thread=1
direct=0
bs=4k
size=1m
{"" if invalidate is None else f"invalidate={invalidate}"}
mdsplit_stats=stats/inv.json
[w]
rw=write
[r]
stonewall
rw=read
""")
    if run == "fio":
        run_fio(job, timeout=60)
    else:
        simulate_job(job)
    return json.loads((workdir / "stats" / "inv.json").read_text())["page_cache"]


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_reader_after_a_writer_starts_cold_by_default(engine, workdir, run):
    """fio's invalidate=1 (the default) drops the cache as each job opens the device: the reader reads from the member."""
    pc = invalidate_run(engine, workdir, run, None)
    assert pc["invalidations"] == 2  # one per job's open
    assert pc["invalidated_pages"] == 256  # the writer's pages, dropped before the reader
    assert pc["pages_read"] >= 256


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_invalidate_0_keeps_the_writers_pages(engine, workdir, run):
    """invalidate=0: the reader finds every page the writer left, and reads nothing."""
    pc = invalidate_run(engine, workdir, run, 0)
    assert pc["invalidations"] == 0
    assert pc["hits"] == 256 and pc["pages_read"] == 0
