"""Several fio jobs on one device: one stack, one owner (thread=1)."""
from conftest import write_job
from harness import run_fio

RAID5 = """
[device]
kind = "raid5"
chunk = "64k"
""" + "".join(f"""
[[members]]
path = "m{i}.img"
size = "64m"
""" for i in range(4))

PASSTHROUGH = """
[device]
kind = "passthrough"

[[members]]
path = "p0.img"
size = "128m"
"""


def two_writers(engine, thread):
    return f"""
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
rw=randwrite
bsrange=4k-128k
iodepth=8
size=32m
verify=md5
{"thread=1" if thread else ""}

[a]
offset=0
mdsplit_stats=stats/a.json

[b]
offset=64m
mdsplit_stats=stats/b.json
"""


def test_raid5_shared_by_jobs_needs_thread_mode(engine, workdir):
    """Two forked jobs on one raid5: refused with one line (each job's setup finds it; said once)."""
    (workdir / "stack.toml").write_text(RAID5)
    job = write_job(workdir, "two.fio", two_writers(engine, thread=False))
    result = run_fio(job, check=False, timeout=60)
    assert result.returncode != 0
    errors = result.mdsplit_errors()
    assert len(errors) == 1 and "thread=1" in errors[0], result.stderr


def test_raid5_shared_by_two_threads_verifies(engine, workdir):
    (workdir / "stack.toml").write_text(RAID5)
    job = write_job(workdir, "two.fio", two_writers(engine, thread=True))
    result = run_fio(job, timeout=120)
    assert [j["error"] for j in result.jobs] == [0, 0]
    # One stack: both sidecars describe the same device, which saw both jobs' writes.
    a = result.sidecars["stats/a.json"].virtual
    b = result.sidecars["stats/b.json"].virtual
    total = sum(j["write"]["io_bytes"] for j in result.jobs)
    assert max(a["write"]["sectors"], b["write"]["sectors"]) * 512 == total


def test_sidecar_is_written_when_the_devices_last_job_ends(engine, workdir):
    """A job that ends first still reports the whole device: its sidecar is
    written when the last job on the device ends, and counts every job's I/O."""
    (workdir / "stack.toml").write_text(PASSTHROUGH)
    job = write_job(workdir, "two.fio", f"""
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
thread=1
rw=randwrite
bs=4k
iodepth=4

[short]
size=1m
mdsplit_stats=stats/short.json

[long]
offset=64m
size=8m
""")
    result = run_fio(job, timeout=120)
    assert [j["error"] for j in result.jobs] == [0, 0]
    short = result.sidecars["stats/short.json"].virtual
    total = sum(j["write"]["io_bytes"] for j in result.jobs)
    assert total == 9 * 2**20
    assert short["write"]["sectors"] * 512 == total


def test_passthrough_shared_by_threads_verifies(engine, workdir):
    (workdir / "stack.toml").write_text(PASSTHROUGH)
    job = write_job(workdir, "two.fio", two_writers(engine, thread=True))
    result = run_fio(job, timeout=120)
    assert [j["error"] for j in result.jobs] == [0, 0]


BFQ = """
[device]
kind = "passthrough"
scheduler = "bfq"

[[members]]
path = "q0.img"
size = "64m"
model = "nvme"
"""


def test_bfq_shared_by_jobs_in_two_groups_verifies(engine, workdir):
    """Four jobs, two cgroups, one bfq scheduler: each job is its own sync
    queue, and every job's data verifies."""
    (workdir / "stack.toml").write_text(BFQ)
    jobs = "".join(f"""
[j{i}]
offset={i * 16}m
mdsplit_group={"fast" if i % 2 else "slow"}
mdsplit_group_weight={300 if i % 2 else 100}
{"mdsplit_stats=stats/bfq.json" if i == 0 else ""}
""" for i in range(4))
    job = write_job(workdir, "bfq.fio", f"""
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
thread=1
rw=randwrite
bsrange=4k-64k
iodepth=4
size=8m
verify=crc32c
{jobs}""")
    result = run_fio(job, timeout=120)
    assert [j["error"] for j in result.jobs] == [0, 0, 0, 0]
    bfq = result.sidecars["stats/bfq.json"].members[0]["bfq"]
    assert len(bfq["queues"]) >= 4, bfq
    assert {"fast", "slow"} <= {g["name"] for g in bfq["groups"]}, bfq
