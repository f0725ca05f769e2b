"""Buffered I/O through the page cache (seed 003), on a virtual clock:
io_uring's buffered read paths by variant, the QD sweep's shape, and
buffered writes over RAID5 that pass the parity checker."""
import random
import tempfile
from pathlib import Path

import pytest

from fio_jobs import job, run
from harness.parity_check import check_parity

KiB = 1024
MiB = 1024 * KiB

VARIANTS = ["pre-c8d317aa", "c8d317aa", "forced-ra"]


def nvme_stack(size="64m", cache="16m", ra_kb=0, rasync=True, variant="forced-ra", backend="ram"):
    return f"""
[device]
kind = "passthrough"

[[members]]
path = "m0"
size = "{size}"
backend = "{backend}"
model = "nvme"

[page_cache]
size = "{cache}"
ra_kb = {ra_kb}
rasync = {"true" if rasync else "false"}
variant = "{variant}"
"""


def pattern(offset, length, seed=0):
    return random.Random(offset * 7919 + seed).randbytes(length)


# (variant, rasync, ra_kb) -> what one 4k read of an uncached page does:
# inline attempts, callbacks armed, punted, issued by, completed in.
MISS_PATHS = {
    ("pre-c8d317aa", True, 0): (2, 0, True, "worker", "worker"),
    ("pre-c8d317aa", False, 0): (1, 0, True, "worker", "worker"),
    ("c8d317aa", True, 0): (3, 1, False, "submitter", "task_work"),
    ("c8d317aa", False, 0): (1, 0, True, "worker", "worker"),
    ("forced-ra", True, 0): (3, 1, False, "submitter", "task_work"),
    ("forced-ra", False, 0): (1, 0, True, "submitter", "worker"),
}
for v in VARIANTS:  # readahead on: a lone random read reads its page from attempt #1
    MISS_PATHS[(v, True, 128)] = (3, 1, False, "submitter", "task_work")
    MISS_PATHS[(v, False, 128)] = (1, 0, True, "submitter", "worker")


@pytest.mark.parametrize("variant,rasync,ra_kb", sorted(MISS_PATHS))
def test_where_an_uncached_read_is_issued(mdsplit_module, variant, rasync, ra_kb):
    sim = mdsplit_module.BufferedSimulation(nvme_stack(ra_kb=ra_kb, rasync=rasync, variant=variant))
    data = pattern(MiB, 4096)
    sim.direct_write(MiB, data)
    cookie = sim.submit("read", MiB, 4096)
    [done] = sim.run()
    assert done["cookie"] == cookie and done["error"] == 0 and done["data"] == data
    p = done["path"]
    attempts, armed, punted, issued_by, completed_in = MISS_PATHS[(variant, rasync, ra_kb)]
    assert (p["inline_attempts"], p["callbacks_armed"], p["punted"], p["issued_by"],
            p["completed_in"]) == (attempts, armed, punted, issued_by, completed_in)
    assert p["completions"] == 1
    assert p["submitter_reads"] + p["worker_reads"] == 1
    assert p["worker_sleeps"] == (1 if punted else 0)
    # Cached now: one inline attempt, completed inline.
    sim.submit("read", MiB, 4096)
    [hit] = sim.run()
    assert hit["data"] == data
    assert (hit["path"]["inline_attempts"], hit["path"]["completed_in"], hit["path"]["issued_by"]) == \
        (1, "submitter", "none")
    pc = sim.page_cache_stats()
    assert (pc["hits"], pc["misses"], pc["inline_completions"], pc["double_completions"]) == (1, 1, 1, 0)
    assert pc["punts"] == (1 if punted else 0)
    assert pc["callbacks_armed"] == armed
    assert pc["variant"] == variant and pc["rasync"] == rasync and pc["ra_kb"] == ra_kb


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("rasync", [True, False])
@pytest.mark.parametrize("ra_kb", [0, 128])
def test_no_read_is_lost_or_completed_twice(mdsplit_module, variant, rasync, ra_kb):
    sim = mdsplit_module.BufferedSimulation(
        nvme_stack(size="8m", cache="1m", ra_kb=ra_kb, rasync=rasync, variant=variant))
    data = pattern(0, 4 * MiB, 5)
    sim.direct_write(0, data)
    rng = random.Random(7)
    ios = []
    for _ in range(400):  # overlapping, unaligned, some repeated: several readers per page
        off = rng.randrange(0, 4 * MiB - 20000)
        ios.append(("read", off, rng.randrange(1, 20000)))
    cookies = sim.submit_batch(ios)
    done = sim.run()
    assert sorted(d["cookie"] for d in done) == sorted(cookies)
    by_cookie = {d["cookie"]: d for d in done}
    for cookie, (_, off, length) in zip(cookies, ios):
        d = by_cookie[cookie]
        assert d["error"] == 0 and d["path"]["completions"] == 1
        assert d["data"] == data[off:off + length], (cookie, off, length)
    pc = sim.page_cache_stats()
    assert pc["double_completions"] == 0 and pc["submitter_blocks"] == 0
    assert pc["inline_completions"] + pc["task_work_completions"] + pc["worker_completions"] == 400
    if not rasync:
        assert pc["callbacks_armed"] == 0
    if rasync and variant != "pre-c8d317aa":
        assert pc["punts"] == 0


def buffered_jobs(mdsplit, tmp_path, stack_text, *jobs):
    """Buffered (direct=0) fio jobs, one after the other (stonewall), on the
    stack: (per-job results, the stack's page-cache statistics)."""
    jobs = [dict(j, direct=False, phase=i) for i, j in enumerate(jobs)]
    results, stats = run(mdsplit, tmp_path, stack_text, jobs)
    for r in results:
        assert r["error"] == 0 and r["read"]["errors"] == 0 and r["write"]["errors"] == 0
    return results, stats["page_cache"]


def iops(r, rw="read"):
    return r[rw]["ios"] * 1e9 / r["runtime_ns"]


def test_sequential_reads_ramp_up_readahead(mdsplit_module, tmp_path):
    (r,), pc = buffered_jobs(mdsplit_module, tmp_path, nvme_stack(ra_kb=128, variant="c8d317aa"),
                             job("read", iodepth=1, total=2 * MiB))
    assert r["read"]["ios"] == 512
    ra = pc["readahead"]
    # initial window 4 pages, then 8, 16, 32, 32, ...
    assert ra["window_sizes"]["4"] == 1 and ra["window_sizes"]["8"] == 1
    assert ra["window_sizes"]["16"] == 1 and ra["window_sizes"]["32"] >= 10
    assert ra["sync"]["windows"] == 1 and ra["async"]["windows"] >= 13
    # A reader that catches up with a window still in flight finds its pages
    # locked: those count as misses too, but no page is read twice.
    assert pc["hits"] + pc["misses"] == 512 and pc["misses"] < 32
    assert pc["pages_read"] <= 512 + 64
    # (readahead may still be in flight when the last read completes)
    assert pc["submitter_page_reads"] >= pc["pages_read"] and pc["worker_page_reads"] == 0


def sweep(mdsplit_module, tmp_path, variant, rasync, qd):
    (r,), pc = buffered_jobs(
        mdsplit_module, tmp_path,
        nvme_stack(size="1g", cache="1g", ra_kb=0, rasync=rasync, variant=variant),
        job("randread", iodepth=qd, total=max(300, 30 * qd) * 4096, seed=2, norandommap=True))
    return iops(r), pc


def test_qd_sweep_has_the_threads_shape(mdsplit_module, tmp_path):
    iops = {}
    for variant in ("c8d317aa", "forced-ra"):
        for rasync in (True, False):
            for qd in (1, 32, 128):
                iops[variant, rasync, qd], pc = sweep(mdsplit_module, tmp_path, variant, rasync, qd)
                if qd == 128:
                    assert pc["worker_high_water"] <= min(128, 4 * 16)
    for qd in (32, 128):
        # c8d317aa: the worker path beats rasync (the submitter issues the reads)
        assert iops["c8d317aa", False, qd] > 1.2 * iops["c8d317aa", True, qd]
        # forced-ra: rasync beats the worker path (the submitter issues the
        # read in both, and punting costs more than the callback)
        assert iops["forced-ra", True, qd] > 1.1 * iops["forced-ra", False, qd]
    for variant in ("c8d317aa", "forced-ra"):
        a, b = iops[variant, True, 1], iops[variant, False, 1]
        assert abs(a - b) / max(a, b) < 0.10


def test_measured_costs_feed_a_simulation(mdsplit_module, tmp_path):
    # The reproduction's costs: measured on this machine, same keys as the
    # defaults; no figure is compared with a bound (noisy machines).
    measured = mdsplit_module.measure_buffered_costs(scratch_dir="/var/tmp", reads=64, wakeups=20)
    defaults = mdsplit_module.buffered_default_costs()
    assert measured.keys() == defaults.keys()
    for k in ("bio_submit_ns", "copy_4k_ns", "punt_ns", "wakeup_ns"):
        assert measured[k] > 0, k
    assert measured["fio_submit_ns"] == defaults["fio_submit_ns"]  # the harness measures fio's
    # as the reproduction gives them: the stack file's [cpu.buffered] table
    from harness.experiments.buffered import costs_toml
    stack = nvme_stack(size="1g", cache="1g", variant="c8d317aa") + costs_toml(measured)
    sim = mdsplit_module.BufferedSimulation(stack)
    assert sim.costs() == measured
    (r,), _ = buffered_jobs(mdsplit_module, tmp_path, stack,
                            job("randread", iodepth=8, total=200 * 4096, seed=2))
    assert r["read"]["ios"] == 200


def test_measure_costs_writes_only_in_an_existing_scratch_dir(mdsplit_module, tmp_path,
                                                             monkeypatch):
    # "" used to put a 64 MiB scratch file in /; a relative directory was
    # joined twice; the scratch file is gone afterwards.
    for bad in ("", str(tmp_path / "missing")):
        with pytest.raises(ValueError, match="scratch_dir: .* is not an existing directory"):
            mdsplit_module.measure_buffered_costs(bad, reads=1, wakeups=1)
    # /var/tmp, as the default: the probe's member is O_DIRECT.
    with tempfile.TemporaryDirectory(dir="/var/tmp") as base:
        (Path(base) / "scr").mkdir()
        monkeypatch.chdir(base)
        mdsplit_module.measure_buffered_costs("scr", reads=4, wakeups=2)
        assert list((Path(base) / "scr").iterdir()) == []
        with pytest.raises(ValueError, match="wakeups"):
            mdsplit_module.measure_buffered_costs("scr", reads=4, wakeups=100001)


def test_costs_can_be_changed(mdsplit_module):
    sim = mdsplit_module.BufferedSimulation(nvme_stack())
    c = sim.costs()
    assert c == mdsplit_module.buffered_default_costs()
    sim.set_costs({"punt_ns": 100, "cpus": 2})
    assert sim.costs()["punt_ns"] == 100
    sim.set_iodepth(64)
    assert sim.max_workers == 8
    with pytest.raises(KeyError):
        sim.set_costs({"nope": 1})
    with pytest.raises(ValueError):
        mdsplit_module.BufferedSimulation(nvme_stack(), variant="6.1")


def test_writes_fsync_and_invalidate(mdsplit_module):
    sim = mdsplit_module.BufferedSimulation(nvme_stack(size="8m", cache="512k", ra_kb=128))
    model = bytearray(pattern(0, 8 * MiB, 1))
    sim.direct_write(0, bytes(model))
    rng = random.Random(3)
    for i in range(300):
        off = rng.randrange(0, 8 * MiB - 9000)
        d = pattern(off, rng.randrange(1, 9000), i + 9)
        sim.write(off, d)
        model[off:off + len(d)] = d
    st = sim.cache_state()
    assert st["pages"] <= st["capacity_pages"] + 64
    c = sim.fsync()
    [done] = sim.run()
    assert done["cookie"] == c and done["error"] == 0
    assert sim.cache_state()["dirty"] == 0 and sim.cache_state()["writeback"] == 0
    assert sim.direct_read(0, 8 * MiB) == bytes(model)
    assert sim.read(12345, 300000) == bytes(model[12345:312345])
    sim.invalidate()
    assert sim.cache_state()["pages"] == 0
    assert sim.read(0, 8 * MiB) == bytes(model)
    pc = sim.page_cache_stats()
    assert pc["read_for_write"] > 0 and pc["writeback_pages"] > 0 and pc["evictions"] > 0
    assert pc["fsyncs"] == 1 and pc["errors"] == 0


def raid5_stack(dir, members=4, size="4m", chunk="16k", cache="1m"):
    text = f"""
[device]
kind = "raid5"
chunk = "{chunk}"
max_sectors = "1m"

[page_cache]
size = "{cache}"
ra_kb = 128
rasync = true
variant = "forced-ra"
"""
    for i in range(members):
        text += f"""
[[members]]
path = "{dir}/r{i}.img"
size = "{size}"
backend = "io_uring"
max_sectors = "512k"
"""
    return text


def test_buffered_randwrite_verify_over_raid5_passes_parity(mdsplit_module, tmp_path):
    sim = mdsplit_module.BufferedSimulation(raid5_stack(tmp_path))
    size = sim.size
    model = bytearray(size)
    rng = random.Random(11)
    errors = 0
    for i in range(600):
        bs = rng.choice([4096, 4096, 8192, 512, 3000])
        off = rng.randrange(0, size - bs)
        if rng.random() < 0.7:
            d = rng.randbytes(bs)
            sim.write(off, d)
            model[off:off + bs] = d
        elif sim.read(off, bs) != bytes(model[off:off + bs]):
            errors += 1
    sim.sync()
    # verify through the page cache, then from the members
    for off in range(0, size, 256 * KiB):
        if sim.read(off, 256 * KiB) != bytes(model[off:off + 256 * KiB]):
            errors += 1
    assert errors == 0
    paths = [str(tmp_path / f"r{i}.img") for i in range(4)]
    assert check_parity(paths, 16 * KiB, "left-symmetric") == []
    sim.invalidate()
    assert sim.direct_read(0, size) == bytes(model)


def test_stats_have_the_page_cache_object(mdsplit_module, tmp_path):
    sim = mdsplit_module.BufferedSimulation(nvme_stack())
    assert sim.stats()["page_cache"]["enabled"] is False  # no buffered I/O yet
    _, pc = buffered_jobs(mdsplit_module, tmp_path, nvme_stack(),
                          job("randread", iodepth=8, total=64 * 4096, size=MiB, norandommap=True))
    assert pc["enabled"] is True
    for key in ("hits", "misses", "readahead", "inline_completions", "callbacks_armed", "punts",
                "worker_high_water", "inline_attempts", "task_work_runs", "pages_read"):
        assert key in pc, key
    assert pc["readahead"]["forced"]["windows"] == pc["pages_read"]
    assert pc["readahead"]["window_sizes"] == {"1": pc["pages_read"]}
    # a direct-only simulation reports the page cache as unused
    plain = mdsplit_module.Simulation(nvme_stack())
    assert plain.stats()["page_cache"]["enabled"] is False


def test_virtual_time_buffered_runs_are_deterministic(mdsplit_module, tmp_path):
    def one():
        stack = nvme_stack(size="16m", cache="2m", ra_kb=128, rasync=False, variant="c8d317aa")
        return buffered_jobs(mdsplit_module, tmp_path, stack,
                             job("randread", iodepth=32, total=2000 * 4096, seed=4,
                                 norandommap=True),
                             job("randwrite", 8192, iodepth=8, total=500 * 8192, seed=5,
                                 norandommap=True, end_fsync=True))
    assert one() == one()


def test_qd1_note_reads_the_kernels_gap_from_this_machines_history(tmp_path):
    from harness.experiments.buffered import kernel_qd1_note
    from harness.history import History, machine_info
    db = tmp_path / "history.sqlite"
    assert "not measured yet" in kernel_qd1_note(db)
    me = machine_info()
    other = dict(me, hostname=me["hostname"] + "-elsewhere")
    with History(db) as h:
        h.record("kernel-buffered", {"kernel.qd1_iops": 30000, "kernel_iowq.qd1_iops": 15000},
                 source="kernel", machine=other)  # another machine's run is not this one's
        assert "not measured yet" in kernel_qd1_note(db)
        h.record("kernel-buffered", {"kernel.qd1_iops": 27500}, source="kernel", machine=me)
        assert "not measured yet" in kernel_qd1_note(db)  # no io-wq figure in that run
        run = h.record("kernel-buffered", {"kernel.qd1_iops": 27500,
                                           "kernel_iowq.qd1_iops": 22900}, source="kernel",
                       machine=me)
    note = kernel_qd1_note(db)
    assert f"reference run {run}" in note
    assert "QD1 = 0.83 (22.9 vs 27.5 kIOPS)" in note


def test_least_costs_splits_the_least_read_times_again():
    from harness.experiments.buffered import least_costs
    # rounds: (submit, page) -> 1-page read = submit + page, 8-page = submit + 8 page
    runs = [{"punt_ns": 3000, "bio_submit_ns": 2900, "bio_page_ns": 300, "cpus": 16},  # 3200, 5300
            {"punt_ns": 7000, "bio_submit_ns": 3000, "bio_page_ns": 0, "cpus": 16},    # 3000, 3000
            {"punt_ns": 2600, "bio_submit_ns": 3100, "bio_page_ns": 250, "cpus": 16}]  # 3350, 5100
    costs = least_costs(runs)
    assert costs["punt_ns"] == 2600          # measured itself: the least of the rounds
    # least 1-page read 3000, least 8-page read 3000: no per-page cost seen
    assert (costs["bio_submit_ns"], costs["bio_page_ns"]) == (3000, 0)
    runs[1].update(bio_submit_ns=3400, bio_page_ns=400)  # 3800, 6200: 3200 and 5100 are least
    costs = least_costs(runs)
    assert (costs["bio_submit_ns"], costs["bio_page_ns"]) == (3200 - 271, 271)
    assert costs["cpus"] == 16


# A buffered fio job reads and writes; a trim is refused by name.
def test_buffered_job_rejects_trim(mdsplit_module, tmp_path):
    with pytest.raises(ValueError, match=r'^run_fio_jobs: jobs\[0\]: trim: "trim" with direct=False; '
                                         r"allowed: direct=True for a job that trims, or no trim$"):
        run(mdsplit_module, tmp_path, nvme_stack(ra_kb=128, variant="c8d317aa"),
            [dict(job("randread", total=4096), trim="trim", direct=False)])
