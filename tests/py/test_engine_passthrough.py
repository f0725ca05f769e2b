"""The engine in a real fio: data integrity, fio's contract, traces, sidecar."""
import subprocess
from pathlib import Path

import pytest

from conftest import losetup_works, write_job
from harness import read_trace_dir, run_fio


def stack_toml(member_path, size="256m", backend="io_uring", extra=""):
    return f"""
[device]
kind = "passthrough"

[[members]]
path = "{member_path}"
size = "{size}"
backend = "{backend}"
max_sectors = "512k"
{extra}
"""


def verify_job(engine, mode_line, trace=True):
    return f"""
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
size=64m
{mode_line}

[verify]
rw=randwrite
bsrange=4k-256k
iodepth=32
verify=crc32c
do_verify=1
verify_fatal=1
mdsplit_stats=stats/verify.json
{"mdsplit_trace=traces" if trace else ""}
"""


@pytest.mark.parametrize("mode", ["fork", "thread"])
def test_randwrite_then_verify_passes(engine, workdir, mode):
    (workdir / "stack.toml").write_text(stack_toml("m0.img"))
    job = write_job(workdir, "verify.fio", verify_job(engine, "thread=1" if mode == "thread" else ""))
    result = run_fio(job)
    j = result.job("verify")
    assert j["error"] == 0
    assert j["write"]["io_bytes"] == 64 * 1024 * 1024
    assert j["read"]["io_bytes"] == 64 * 1024 * 1024  # the verify pass read it all back
    assert result.mdsplit_errors() == []

    total_ios = result.total_ios(j)
    # blkparse reads the virtual device's trace: one C per fio I/O.
    out = subprocess.run(["blkparse", "-i", str(workdir / "traces" / "md0")],
                         capture_output=True, text=True, check=True).stdout
    completions = sum(1 for line in out.splitlines() if line.split()[5:6] == ["C"])
    assert completions == total_ios

    # The sidecar counts what fio counted.
    sidecar = result.sidecars["stats/verify.json"]
    md0 = sidecar.device("md0")
    assert md0["read"]["ios"] + md0["write"]["ios"] == total_ios
    assert md0["read"]["sectors"] * 512 == j["read"]["io_bytes"]
    assert md0["write"]["sectors"] * 512 == j["write"]["io_bytes"]
    m0 = sidecar.device("m0")
    assert m0["write"]["sectors"] * 512 == j["write"]["io_bytes"]
    assert m0["read"]["ios"] + m0["write"]["ios"] == len(
        [r for r in read_trace_dir(workdir / "traces")["m0"] if r.action == "C"])
    # One job owns the stack: its io_u buffers are the ring's fixed buffer,
    # and every member I/O (one per fio I/O here) is issued from it.
    assert sidecar.io_uring["registered_buffer_bytes"] >= 256 * 1024 * 32
    assert sidecar.io_uring["fixed_buffer_ios"] == m0["read"]["ios"] + m0["write"]["ios"]


def test_numjobs_each_get_their_stack(engine, workdir):
    (workdir / "stack.toml").write_text(stack_toml("m0.img"))
    job = write_job(workdir, "nj.fio", f"""
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
size=16m
offset_increment=16m

[nj]
rw=write
bs=64k
iodepth=8
numjobs=3
verify=md5
mdsplit_stats=stats/nj.json
""")
    result = run_fio(job)
    assert all(j["error"] == 0 for j in result.jobs)
    assert len(result.jobs) == 3
    # Subjobs write their own sidecar: nj.json, nj.json.1, nj.json.2
    assert set(result.sidecars) == {"stats/nj.json", "stats/nj.json.1", "stats/nj.json.2"}


def test_buffered_member_open(engine, workdir):
    (workdir / "stack.toml").write_text(stack_toml("m0.img", size="1m"))
    job = write_job(workdir, "short.fio", f"""
[short]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=0
rw=read
bs=64k
size=1m
mdsplit_stats=stats/short.json
""")
    result = run_fio(job)
    j = result.job("short")
    assert j["error"] == 0
    assert j["read"]["io_bytes"] == 1024 * 1024
    # Member reads go into the engine's page cache, not fio's buffers.
    assert result.sidecars["stats/short.json"].io_uring["fixed_buffer_ios"] == 0


def test_io_error_reaches_fio(engine, workdir):
    # A member smaller than the stack claims is impossible to configure, so
    # provoke an error with a read-only member file and a write job.
    member = workdir / "ro.img"
    member.write_bytes(b"\0" * (1024 * 1024))
    (workdir / "stack.toml").write_text(stack_toml(member.name, size="1m"))
    member.chmod(0o444)
    job = write_job(workdir, "ro.fio", f"""
[ro]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
rw=write
bs=4k
size=1m
""")
    result = run_fio(job, check=False)
    import os
    if os.geteuid() == 0:
        # root opens a 0444 file for writing anyway; nothing to provoke here.
        assert result.returncode == 0
    else:
        assert result.returncode != 0
        assert result.mdsplit_errors()


def test_enghelp_lists_every_option(engine):
    out = subprocess.run(["fio", f"--enghelp={engine}"], capture_output=True, text=True).stdout
    for opt in ["mdsplit_config", "mdsplit_stats", "mdsplit_trace", "mdsplit_group",
                "mdsplit_group_weight"]:
        assert opt in out, out


def test_json_output_is_not_corrupted_by_the_engine(engine, workdir):
    (workdir / "stack.toml").write_text(stack_toml("m0.img", size="8m"))
    job = write_job(workdir, "j.fio", f"""
[j]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
rw=randrw
bs=4k
size=8m
""")
    proc = subprocess.run(["fio", "--output-format=json", str(job)], cwd=workdir,
                          capture_output=True, text=True)
    import json
    json.loads(proc.stdout)  # stdout is fio's JSON and nothing else


def test_loop_device_member(engine, workdir):
    reason = losetup_works()
    if reason:
        pytest.skip(reason)
    backing = workdir / "loop.img"
    with open(backing, "wb") as f:
        f.truncate(128 * 1024 * 1024)
    dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(backing)],
                         capture_output=True, text=True, check=True).stdout.strip()
    try:
        (workdir / "stack.toml").write_text(stack_toml(dev, size="128m"))
        job = write_job(workdir, "verify.fio", verify_job(engine, "", trace=False))
        result = run_fio(job)
        assert result.job("verify")["error"] == 0
        assert result.sidecars["stats/verify.json"].device("m0")["write"]["sectors"] > 0
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)


# grow = true on a file shorter than size, opened by a job that only reads
# (so not grown): the tail reads as zeros, never as a short read.
def test_read_only_run_over_an_ungrown_member_reads_zeros_past_its_end(engine, workdir):
    (workdir / "m0.img").write_bytes(b"\x77" * (1 << 20))
    (workdir / "stack.toml").write_text(
        '[[members]]\npath = "m0.img"\nsize = "4m"\ngrow = true\n')
    job = f"""
[r]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
rw=read
bs=64k
size=4m
verify=pattern
verify_pattern=0x00
verify_only=1
offset=1m
"""
    result = run_fio(write_job(workdir, "r.fio", job))
    r = result.job("r")
    assert r["error"] == 0
    assert r["read"]["io_bytes"] == 3 << 20
    assert (workdir / "m0.img").stat().st_size == 1 << 20  # a reader never grows it
