"""[members.faults] through a real fio: each fault kind fails exactly the I/Os
it should; RAID5 hides one failed member (a full verify pass succeeds) and
returns errors once two have failed, without hanging.

Single-member stacks run sequential 4 KiB reads at iodepth 1, so fio's Nth
I/O is the member's Nth request; fio's per-I/O latency log (log_offset=1)
lists every I/O that succeeded, so the failed ones are exactly the offsets
missing from it."""
import json
import subprocess
import time
from pathlib import Path

import pytest

from conftest import write_job
from harness import run_fio
from harness.fio_runner import parse_fio_json

REPO = Path(__file__).resolve().parents[2]

KiB = 1024
MiB = 1024 * KiB
BLOCKS = 1024  # 4 MiB of 4 KiB reads
EIO = 5


def splitmix64_failures(seed, p, n):
    """The request numbers (1-based) fail_probability fails: FaultInjector's
    splitmix64 stream, one draw per request."""
    mask = (1 << 64) - 1
    state, out = seed, []
    for i in range(1, n + 1):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        if (z >> 11) * 2.0 ** -53 < p:
            out.append(i)
    return out


def passthrough_stack(faults, extra=""):
    return f"""
[device]
kind = "passthrough"
[[members]]
path = "m0.img"
size = "4m"
{extra}
[members.faults]
{faults}
"""


def sequential_job(engine, name, extra=""):
    return f"""
[{name}]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
rw=read
bs=4k
iodepth=1
size=4m
continue_on_error=all
write_lat_log={name}
log_offset=1
mdsplit_stats=stats/{name}.json
{extra}
"""


def clat_log(workdir, name):
    """[(time_ms, clat_ns, offset)] of the I/Os that completed without error."""
    rows = []
    for line in (workdir / f"{name}_clat.1.log").read_text().splitlines():
        f = [int(x) for x in line.split(",")]
        rows.append((f[0], f[1], f[4]))
    return rows


def run_sequential(engine, workdir, faults, extra_member="", extra_job=""):
    (workdir / "stack.toml").write_text(passthrough_stack(faults, extra_member))
    result = run_fio(write_job(workdir, "f.fio", sequential_job(engine, "f", extra_job)),
                     timeout=120)
    job = result.job("f")
    log = clat_log(workdir, "f")
    ok = {off for _, _, off in log}
    failed = sorted(i + 1 for i in range(BLOCKS) if i * 4 * KiB not in ok)
    return result, job, log, failed


def test_fail_nth(engine, workdir):
    result, job, _, failed = run_sequential(engine, workdir, "fail_nth = [10, 20, 777]")
    assert failed == [10, 20, 777]
    assert job["total_err"] == 3 and job["first_error"] == EIO
    assert job["read"]["total_ios"] == BLOCKS
    m0 = result.sidecars["stats/f.json"].device("m0")
    assert m0["read"]["errors"] == 3
    assert result.mdsplit_errors() == []


def test_fail_sectors(engine, workdir):
    # [2048, 2056): the 4 KiB block at 1 MiB; [4100, 4101): the block at 2 MiB.
    _, job, _, failed = run_sequential(engine, workdir,
                                       "fail_sectors = [[2048, 2056], [4100, 4101]]")
    assert failed == [1 * MiB // (4 * KiB) + 1, 2 * MiB // (4 * KiB) + 1]
    assert job["total_err"] == 2


def test_fail_probability_is_the_seeded_stream(engine, workdir):
    _, job, _, failed = run_sequential(engine, workdir, "fail_probability = 0.02\nseed = 7")
    expected = splitmix64_failures(7, 0.02, BLOCKS)
    assert failed == expected
    assert job["total_err"] == len(expected)
    assert 5 < len(expected) < 45


def test_latency_spike(engine, workdir):
    result, job, log, failed = run_sequential(
        engine, workdir, 'latency_spike = { every = 100, extra = "20ms" }')
    assert failed == [] and job["total_err"] == 0
    slow = sorted(off // (4 * KiB) + 1 for _, clat, off in log if clat >= 20_000_000)
    assert slow == list(range(100, BLOCKS + 1, 100))
    assert result.mdsplit_errors() == []


def test_fail_at_kills_the_member(engine, workdir):
    # 10 ms per request: at most 100 reads succeed before 1 s, none after.
    # fail_at counts from the stack's opening, before fio's first I/O: 1 s
    # leaves a loaded host time to start fio and still see reads succeed.
    _, job, log, failed = run_sequential(
        engine, workdir, 'fail_at = "1s"',
        extra_member='model = { command = "10ms" }')
    assert log and failed
    first = failed[0]
    assert failed == list(range(first, BLOCKS + 1)), "an I/O succeeded after fail_at"
    # No more than fit in 1 s at 10 ms each; how many fewer depends on how
    # fast this (possibly loaded) host runs fio, so only "some" below.
    assert 1 < first <= 101, first
    assert job["total_err"] == BLOCKS - first + 1


def test_fail_at_without_continue_on_error_stops_fio(engine, workdir):
    (workdir / "stack.toml").write_text(passthrough_stack('fail_at = "100ms"',
                                                          'model = { command = "1ms" }'))
    job = sequential_job(engine, "stop", "time_based=1\nruntime=20s").replace(
        "continue_on_error=all", "")
    t0 = time.monotonic()
    result = run_fio(write_job(workdir, "stop.fio", job), check=False, timeout=60)
    assert result.returncode != 0
    assert time.monotonic() - t0 < 10
    assert "Input/output error" in result.stderr
    assert result.job("stop")["error"] == EIO


# ------------------------------------------------- buffered write-back

def buffered_writer(engine, sync_lines):
    return f"""
[w]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=0
rw=write
bs=4k
size=1m
{sync_lines}
"""


@pytest.mark.parametrize("sync, op", [("fsync=64", "sync"), ("end_fsync=1", "sync"),
                                      ("fdatasync=64", "datasync"),
                                      ("sync_file_range=write,wait_after:64", "sync_file_range")])
def test_failed_write_back_fails_the_job_at_its_sync(engine, workdir, sync, op):
    """A buffered write-back that fails (fail_nth) makes the next sync fail the job with EIO."""
    (workdir / "stack.toml").write_text(passthrough_stack("fail_nth = [2]"))
    result = run_fio(write_job(workdir, "w.fio", buffered_writer(engine, sync)), check=False,
                     timeout=60)
    assert result.returncode != 0
    assert result.job("w")["error"] == EIO
    assert f"fio: io_u error on file md0: Input/output error: {op} offset=" in result.stderr


def test_failed_write_back_is_counted_under_continue_on_error(engine, workdir):
    """The same with continue_on_error=all: fio goes on, and counts the sync's EIO."""
    (workdir / "stack.toml").write_text(passthrough_stack("fail_nth = [2]"))
    result = run_fio(write_job(workdir, "w.fio",
                               buffered_writer(engine, "fsync=64\ncontinue_on_error=all")),
                     timeout=60)
    job = result.job("w")
    assert job["total_err"] == 1 and job["first_error"] == EIO
    assert job["write"]["total_ios"] == 256


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_failed_write_back_without_a_sync_is_said_not_failed(engine, workdir, run):
    """No sync asked: the job ends without error, as on the kernel, and stderr says how many pages were lost."""
    (workdir / "stack.toml").write_text(passthrough_stack("fail_nth = [2]"))
    job = write_job(workdir, "w.fio", buffered_writer(engine, ""))
    if run == "fio":
        cmd = ["fio", "--output-format=json", str(job)]
    else:
        cmd = ["/usr/bin/python3", "-m", "harness", "simulate", "--output-format=json", str(job)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                       cwd=workdir if run == "fio" else REPO)
    assert p.returncode == 0, p.stderr
    assert parse_fio_json(p.stdout)["jobs"][0]["error"] == 0
    assert ("mdsplit: md0: the write-back of 256 pages failed after their writes completed, "
            "and no sync reported it") in p.stderr


# ---------------------------------------------------------------- RAID5

def raid5_stack(faults, members=5, size="16m", model=""):
    text = '[device]\nkind = "raid5"\nchunk = "64k"\n'
    for i in range(members):
        text += f'\n[[members]]\npath = "m{i}.img"\nsize = "{size}"\n{model}\n'
        if i in faults:
            text += f"[members.faults]\n{faults[i]}\n"
    return text


def raid5_verify_job(engine, name, extra=""):
    return f"""
[{name}]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
thread=1
rw=randwrite
bsrange=4k-256k
iodepth=16
size=48m
verify=md5
do_verify=1
verify_fatal=1
mdsplit_stats=stats/{name}.json
{extra}
"""


@pytest.mark.parametrize("faults", [
    'fail_nth = [300]',
    'fail_sectors = [[4096, 4104]]',
    'fail_probability = 0.01\nseed = 3',
])
def test_raid5_one_faulty_member_full_verify_passes(engine, workdir, faults):
    (workdir / "stack.toml").write_text(raid5_stack({2: faults}))
    result = run_fio(write_job(workdir, "v.fio", raid5_verify_job(engine, "v")), timeout=300)
    job = result.job("v")
    assert job["error"] == 0
    assert job["write"]["io_bytes"] == 48 * MiB
    assert job["read"]["io_bytes"] == 48 * MiB
    devices = {d["name"]: d for d in result.sidecars["stats/v.json"].devices}
    m2 = devices["m2"]
    # The first failed request made the member Faulty: only requests already
    # in flight then (at most its queue depth) can fail too.
    failed = m2["read"]["errors"] + m2["write"]["errors"]
    assert 1 <= failed <= 64
    if faults.startswith("fail_nth"):
        assert failed == 1
    assert devices["md0"]["read"]["errors"] == 0 and devices["md0"]["write"]["errors"] == 0
    # The one line the engine prints: m2 failed and is stale from now on.
    [notice] = result.mdsplit_errors()
    assert notice.startswith("mdsplit: md0: members[2] (")
    assert "keep it out of the next runs" in notice


def test_raid5_member_failed_in_one_run_is_named_for_the_next(engine, workdir):
    # A member that failed in one run holds stale data afterwards; md keeps
    # that in the members' superblocks, and so does the engine (the member
    # file's xattr, md_superblock.h): it names the member, and a second run
    # that is not told reads back what the first wrote, without it.
    (workdir / "stack.toml").write_text(raid5_stack({1: "fail_nth = [10]"}, members=3))
    write = raid5_verify_job(engine, "w").replace("rw=randwrite", "rw=write").replace(
        "size=48m", "size=24m")
    result = run_fio(write_job(workdir, "w.fio", write), timeout=300)
    assert result.job("w")["error"] == 0
    [notice] = result.mdsplit_errors()
    member = str(workdir / "m1.img")
    assert notice == (
        f"mdsplit: md0: members[1] ({member}) failed during this run (an I/O error; "
        "md_error) and the array went on without it: its data is stale from then on, and "
        "the array's md superblocks (xattr user.mdsplit.md) keep it out of the next runs; "
        "allowed: a new member file in its place, which the next run that may write rebuilds "
        "(md's recovery)")
    (workdir / "stack.toml").write_text(raid5_stack({}, members=3))
    check = raid5_verify_job(engine, "r").replace("rw=randwrite", "rw=write").replace(
        "size=48m", "size=24m")
    result = run_fio(write_job(workdir, "r.fio", check + "verify_only=1\n"), timeout=300)
    assert result.job("r")["error"] == 0
    assert result.job("r")["read"]["io_bytes"] == 24 * MiB
    assert result.mdsplit_errors() == []


def test_raid5_member_failing_half_way_verify_passes(engine, workdir):
    # Paced members; m3 dies at 600 ms. The run's length is the number of
    # member requests times the command time, and a loaded host merges more
    # (bigger batches in one plug), so the pacing leaves a wide margin: about
    # 5 s of I/O on a quiet host (at 400 us x 2 a loaded CI host once finished
    # before 600 ms).
    (workdir / "stack.toml").write_text(
        raid5_stack({3: 'fail_at = "600ms"'},
                    model='model = { command = "1ms", parallelism = 1 }'))
    result = run_fio(write_job(workdir, "h.fio", raid5_verify_job(engine, "h")), timeout=300)
    job = result.job("h")
    assert job["error"] == 0
    assert job["read"]["io_bytes"] == 48 * MiB
    devices = {d["name"]: d for d in result.sidecars["stats/h.json"].devices}
    m3 = devices["m3"]
    assert m3["write"]["errors"] + m3["read"]["errors"] > 0, "m3 never died"
    assert m3["write"]["ios"] - m3["write"]["errors"] > 0, "m3 died before the run started"
    assert devices["md0"]["read"]["errors"] == 0 and devices["md0"]["write"]["errors"] == 0


def test_raid5_two_failed_members_fail_fio_within_runtime(engine, workdir):
    (workdir / "stack.toml").write_text(
        raid5_stack({1: 'fail_at = "300ms"', 4: 'fail_at = "600ms"'},
                    model='model = { command = "100us" }'))
    job = f"""
[two]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
thread=1
rw=randrw
bs=16k
iodepth=8
size=48m
time_based=1
runtime=30s
mdsplit_stats=stats/two.json
"""
    t0 = time.monotonic()
    result = run_fio(write_job(workdir, "two.fio", job), check=False, timeout=120)
    elapsed = time.monotonic() - t0
    assert result.returncode != 0
    assert elapsed < 15, elapsed
    assert result.job("two")["error"] == EIO
    assert "Input/output error" in result.stderr
    md0 = result.sidecars["stats/two.json"].device("md0")
    assert md0["read"]["ios"] + md0["write"]["ios"] > 0


@pytest.mark.parametrize("scale", [1, 4])
def test_fault_delays_are_device_time(mdsplit_module, tmp_path, scale):
    """A latency spike and fail_at are the device's times: slow motion
    (time_scale k) stretches them k times, as it stretches the model."""
    spike = ('[device]\ntime_scale = %d\n[[members]]\nbackend = "ram"\nsize = "4m"\n'
             'faults = { latency_spike = { every = 1, extra = "1ms" } }\n' % scale)
    from fio_jobs import job, run
    (r,), _ = run(mdsplit_module, tmp_path, spike,
                  [job("randread", iodepth=1, total=4096 * 10, fio_submit_ns=0,
                       fio_complete_ns=0)])
    assert r["read"]["clat"]["sum"] / r["read"]["clat"]["n"] == 1_000_000 * scale
    # A member failing at 1 ms of device time: behind a 100 us (device time)
    # model, the 10th read (at 0.9..1.0 ms device time) still succeeds, the 11th fails.
    dying = ('[device]\ntime_scale = %d\n[[members]]\nbackend = "ram"\nsize = "4m"\n'
             'model = { command = "100us", bandwidth = 1_000_000_000_000, parallelism = 1 }\n'
             'faults = { fail_at = "1ms" }\n' % scale)
    sim = mdsplit_module.Simulation(dying, str(tmp_path))
    errors = []
    for i in range(12):
        sim.submit("read", i * 4096, 4096)
        [done] = sim.run()
        errors.append(done["error"])
    assert errors[:10] == [0] * 10 and errors[10] != 0, errors


# Jobs that write, rewrite and read a RAID5 one after another, each with an
# array of its own (forked jobs, or threads with create_serialize=0).
SEQUENTIAL_ARRAYS = """[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
bs=64k
direct=1
size=8m
verify=pattern
{extra}
[A]
rw=write
verify_pattern=0x0f0f0f0f
do_verify=0
[B]
stonewall
rw=write
verify_pattern=0x5a5a5a5a
do_verify=0
[C]
stonewall
rw=read
verify_pattern=0x5a5a5a5a
"""


@pytest.mark.parametrize("extra", ["", "thread=1\ncreate_serialize=0"],
                         ids=["forked", "threads-create_serialize=0"])
def test_raid5_member_failed_by_one_job_stays_failed_for_the_next(engine, workdir, extra):
    """A member that failed in job A is failed for B's and C's arrays too (md's
    superblocks): C reads back what B wrote (it read m1's stale chunks), and
    the failure is named once."""
    (workdir / "stack.toml").write_text(raid5_stack({1: "fail_nth = [40]"}, members=3,
                                                    size="8m"))
    job = write_job(workdir, "seq.fio", SEQUENTIAL_ARRAYS.format(engine=engine, extra=extra))
    result = run_fio(job, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert [result.job(n)["error"] for n in "ABC"] == [0, 0, 0]
    assert result.job("C")["read"]["io_bytes"] == 8 * MiB
    notices = result.mdsplit_errors()
    assert len(notices) == 1 and notices[0].startswith("mdsplit: md0: members[1] ("), notices


def test_simulate_keeps_a_member_failed_by_one_job_for_the_next(workdir, engine):
    """harness simulate's arrays remember the failure across jobs as the engine's:
    B's and C's arrays never use m1, so it fails once (each array failed it
    anew at its own 40th request, and each named it)."""
    (workdir / "stack.toml").write_text(raid5_stack({1: "fail_nth = [40]"}, members=3,
                                                    size="8m"))
    text = SEQUENTIAL_ARRAYS.format(engine=engine, extra="").replace("verify=pattern\n", "")
    text = "\n".join(l for l in text.splitlines() if not l.startswith(("verify_pattern", "do_verify")))
    job = write_job(workdir, "seq.fio", text + "\n")
    r = subprocess.run(["/usr/bin/python3", "-m", "harness", "simulate", str(job),
                        "--output-format", "json"], capture_output=True, text=True,
                       timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    jobs = {j["jobname"]: j for j in json.loads(r.stdout)["jobs"]}
    assert [jobs[n]["error"] for n in "ABC"] == [0, 0, 0]
    notices = [l for l in r.stderr.splitlines() if l.startswith("mdsplit: md0: members[1] (")]
    assert len(notices) == 1, r.stderr
