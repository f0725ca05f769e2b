"""Kernel reference runs (harness/kernel_fixtures.py and each experiment's reference()): the trace parser and the
bfq job generation everywhere; the real runs where root, a loop device and
tracefs (bfq: the kernel's bfq and a blkio / io cgroup hierarchy) are
available (skipped with the reason elsewhere)."""
import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from harness import kernel_fixtures as K, paths
from harness.experiments import bfq as Q, bio_size as D
from harness.experiments import buffered as B
from harness.fio_runner import run_fio
from harness.jobfile import read_sections, write_sections

FULL = 1024          # sectors in a 512 KiB request
IO_SECTORS = 64 * 1024 * 1024 // 512

TRACE = """\
# tracer: nop
#
             fio-29351   [001] .....  3566.435008: block_bio_queue: 7,0 R 0 + 4072 [fio]
             fio-29351   [001] .....  3566.435020: block_split: 7,0 R 0 / 1024 [fio]
             fio-29351   [001] .....  3566.435021: block_bio_queue: 253,0 R 9000 + 8 [loop0]
             fio-29351   [001] .....  3566.435029: block_split: 7,0 R 1024 / 2048 [fio]
             fio-29351   [001] .....  3566.435033: block_rq_issue: 7,0 R 524288 () 0 + 1024 be,0,4 [fio]
             fio-29351   [001] .N...  3566.435066: block_split: 7,0 R 2048 / 3072 [fio]
             fio-29351   [001] .N...  3566.435067: block_rq_issue: 7,0 R 524288 () 1024 + 1024 be,0,4 [fio]
             fio-29351   [001] .N...  3566.435071: block_rq_issue: 7,0 R 524288 () 2048 + 1024 [fio]
             fio-29351   [001] .....  3566.436726: block_bio_queue: 7,0 R 4072 + 4080 [fio]
             fio-29351   [001] .....  3566.436732: block_split: 7,0 R 4072 / 5096 [fio]
             fio-29351   [001] .....  3566.436737: block_rq_issue: 7,0 R 512000 () 3072 + 1000 be,0,4 [fio]
   iou-wrk-30280-30281   [000] .....  3766.408809: block_rq_issue: 7,0 R 524288 () 5096 + 1024 be,0,4 [iou-wrk-30280]
             fio-29351   [001] .....  3566.436800: block_rq_issue: 7,0 R 524288 () 4072 + 1024 be,0,4 [fio]
             fio-29351   [001] .....  3566.436900: block_rq_issue: 7,0 WS 4096 () 0 + 8 be,0,4 [fio]
"""


def test_parse_trace_keeps_one_device_and_reads_each_event():
    ev = K.parse_trace(TRACE, (7, 0))
    assert all((e.major, e.minor) == (7, 0) for e in ev)
    assert [e.event for e in ev].count("block_bio_queue") == 2
    split = next(e for e in ev if e.event == "block_split")
    assert (split.sector, split.nr_sectors) == (0, 1024)        # the front: new_sector - sector
    issue = [e for e in ev if e.event == "block_rq_issue"]
    assert (issue[2].sector, issue[2].nr_sectors) == (2048, 1024)  # without the ioprio field
    assert issue[-1].rwbs == "WS"
    assert len(K.parse_trace(TRACE)) == len(ev) + 1              # unfiltered: the 253,0 bio too


def test_distributions_per_direction_order_and_tails():
    d = K.distributions(K.parse_trace(TRACE, (7, 0)), "read")
    assert d.bios == Counter({4072: 1, 4080: 1})
    assert d.splits == Counter({1024: 4})
    assert d.requests == Counter({1024: 5, 1000: 1})
    # 0, 1024, 2048, 3072+1000, 5096 (out of order), 4072: two breaks of five.
    assert d.out_of_order == 1
    assert d.sequential_pct == pytest.approx(100 * 3 / 5)
    w = K.distributions(K.parse_trace(TRACE, (7, 0)), "write")
    assert w.requests == Counter({8: 1}) and not w.bios


def test_a_bio_queued_twice_is_io_urings_nowait_retry():
    text = ("fio-1 [001] ..... 10.000001: block_bio_queue: 7,3 R 0 + 131072 [fio]\n"
            "iou-wrk-1-2 [000] ..... 10.000300: block_bio_queue: 7,3 R 0 + 131072 [iou-wrk-1]\n"
            "iou-wrk-1-2 [000] ..... 10.000310: block_split: 7,3 R 0 / 1024 [iou-wrk-1]\n")
    d = K.distributions(K.parse_trace(text, (7, 3)), "read")
    assert d.bios == Counter({131072: 1}) and d.retried == 1


def test_format_counts_and_means():
    assert K.format_counts({"1024": 3, 8: 1}) == "1024 x 3, 8 x 1"
    assert K.mean_size({"1024": 3, "8": 1}) == pytest.approx((3 * 1024 + 8) / 4)
    assert "6.6" in K.plug_note() and "lifo" in K.plug_note()


# --- on this machine ------------------------------------------------------------

def _unavailable(*requirements) -> str:
    """'' when every requirement holds (each raises ReferenceUnavailable
    otherwise), else the first one's reason; by default the bio-size and
    buffered references' (fio, losetup, tracefs)."""
    try:
        for require in requirements or (K.require_fio, K.require_losetup, K.tracefs):
            require()
    except K.ReferenceUnavailable as e:
        return str(e)
    return ""


@pytest.fixture
def needs_machine():
    reason = _unavailable()
    if reason:
        pytest.skip(f"kernel reference unavailable: {reason}")


def _ours_left() -> list:
    """Loop devices, tracefs instances and directories of this process."""
    left = []
    r = subprocess.run(["losetup", "--list", "--json", "--output", "NAME,BACK-FILE"],
                       capture_output=True, text=True)
    for d in (json.loads(r.stdout).get("loopdevices", []) if r.stdout.strip() else []):
        if f"/{K.PREFIX}{os.getpid()}-" in (d.get("back-file") or ""):
            left.append(d["name"])
    left += [str(p) for p in (K.tracefs() / "instances").glob(f"{K.PREFIX}{os.getpid()}-*")]
    left += [str(p) for p in Path("/tmp").glob(f"{K.PREFIX}{os.getpid()}-*")]
    for root in K._cgroup_roots():
        left += [str(p) for p in root.glob(f"{K.PREFIX}{os.getpid()}-*")]
    return left


def test_kernel_bio_size_reference(needs_machine, tmp_path):
    hp_before = Path("/proc/sys/vm/nr_hugepages").read_text()
    ref = D.bio_size_reference(engines=("psync",), rws=("read",), mems=("malloc", "mmaphuge"),
                               keep_dir=tmp_path)
    tables = D.format_bio_size(ref)
    print("\n\n".join(tables))
    row = ref.row("psync", "malloc", "read")
    assert row is not None, ref.rows[0].skipped
    d = row.dist
    assert sum(k * v for k, v in d.bios.items()) == IO_SECTORS
    assert sum(k * v for k, v in d.requests.items()) == IO_SECTORS
    assert max(d.requests) <= FULL                      # max_sectors_kb 512 holds
    assert sum(d.splits.values()) >= 1                  # 64 MiB bios of 256 bvecs must split
    # At most one odd (non-full) request per bio: the split's tail.
    assert sum(v for k, v in d.requests.items() if k != FULL) <= sum(d.bios.values())
    huge = ref.row("psync", "mmaphuge", "read")
    if huge is not None:
        # 2 MiB pages: 256 bvecs hold far more than 64 MiB, so one bio, split
        # into full requests only.
        assert huge.dist.bios == Counter({IO_SECTORS: 1})
        assert huge.dist.requests == Counter({FULL: IO_SECTORS // FULL})
    else:
        print("mmaphuge row skipped:", ref.rows[-1].skipped)
    assert (tmp_path / "bio-read-psync-malloc.trace").exists()
    m = ref.metrics()
    assert m["kernel.read.psync_malloc_bios_count"] == sum(d.bios.values())
    # Everything undone.
    assert _ours_left() == []
    assert Path("/proc/sys/vm/nr_hugepages").read_text() == hp_before


def test_cleanup_after_a_failure_inside_the_run(needs_machine, monkeypatch):
    seen = {}

    def boom(job, **kw):
        seen["left"] = _ours_left()
        raise KeyboardInterrupt("interrupted in the middle")

    monkeypatch.setattr(D, "run_fio", boom)
    with pytest.raises(KeyboardInterrupt):
        D.bio_size_reference(engines=("psync",), rws=("read",), mems=("malloc",))
    assert seen["left"], "the loop device and instance existed during the run"
    assert _ours_left() == []


def test_kernel_buffered_sweep(needs_machine):
    sweep = B.buffered_sweep(depths=(1, 4), runtime_s=1, size=256 << 20)
    print("\n".join(B.format_buffered(sweep)))
    assert set(sweep.iops) == {1, 4}
    assert all(v > 0 for v in sweep.iops.values())
    assert set(sweep.iops_iowq) == {1, 4}  # the same depths with every read punted
    assert all(v > 0 for v in sweep.iops_iowq.values())
    assert sweep.target.startswith("/dev/loop")
    assert _ours_left() == []


def test_kernel_buffered_sweep_api_and_bad_depths():
    if not K.shutil.which("fio"):
        pytest.skip("fio is not installed")
    with pytest.raises(ValueError):
        B.kernel_buffered_sweep(depths=(0,), runtime_s=1, size=1 << 20)


def test_cli_reference_bio_size(needs_machine):
    r = subprocess.run(["/usr/bin/python3", "-m", "harness", "reference", "bio-size",
                        "--no-history", "--no-hugepages", "--quiet"],
                       cwd=paths.ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Kernel reference" in r.stdout and "psync/malloc" in r.stdout and "FIFO" in r.stdout


# --- the emulator with contiguity = "pagemap" beside the kernel -------------------

STACK = """
[device]
kind = "passthrough"

[[members]]
path = "m0.img"
size = "128m"
backend = "null"
max_sectors = "512k"

[bio]
policy = "original"
contiguity = "pagemap"
"""

JOB = """
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
bs=64m
size=64m
rw={rw}
hugepage-size=2m

[{rw}-malloc]
mem=malloc
mdsplit_stats=stats/{rw}-malloc.json

[{rw}-mmaphuge]
stonewall
mem=mmaphuge
mdsplit_stats=stats/{rw}-mmaphuge.json
"""


def _emulator(tmp_path, rw):
    engine = paths.engine_path()
    if not engine.exists():
        pytest.skip(f"no engine at {engine}")
    (tmp_path / "stack.toml").write_text(STACK)
    job = tmp_path / f"{rw}.fio"
    job.write_text(JOB.format(engine=engine, rw=rw))
    with K.hugepages(40) as reason:
        if reason:
            pytest.skip(f"no huge pages: {reason}")
        res = run_fio(job)
    out = {}
    for mem in ("malloc", "mmaphuge"):
        s = res.sidecars[f"stats/{rw}-{mem}.json"]
        out[mem] = {"bios": Counter({int(k): v for k, v in s.virtual["bio_sizes"].items()}),
                    "requests": Counter({int(k): v for k, v in s.members[0]["request_sizes"].items()})}
    return out


def _compare(tmp_path, rw):
    emu = _emulator(tmp_path, rw)
    ref = D.bio_size_reference(engines=("psync",), rws=(rw,), mems=("malloc", "mmaphuge"))
    print("\n\n".join(D.format_bio_size(ref, {f"pagemap/{m}": v for m, v in emu.items()},
                                         "emulator, contiguity = pagemap")))
    for mem in ("malloc", "mmaphuge"):
        k = ref.row("psync", mem, rw)
        if k is None:
            pytest.skip(f"kernel {mem} row: {[r.skipped for r in ref.rows if r.mem == mem]}")
        e = emu[mem]
        for side in (k.dist.bios, e["bios"]):
            assert sum(s * n for s, n in side.items()) == IO_SECTORS
            # 256 bvecs of at least a page: no bio below 1 MiB but the last.
            assert sum(n for s, n in side.items() if s < 2048) <= 1
        for bios, reqs in ((k.dist.bios, k.dist.requests), (e["bios"], e["requests"])):
            # Split at max_sectors: full requests plus at most one tail per bio.
            assert max(reqs) == FULL
            assert sum(n for s, n in reqs.items() if s != FULL) <= sum(bios.values())
    # Huge pages: the same bio and the same requests, exactly.
    assert emu["mmaphuge"]["bios"] == ref.row("psync", "mmaphuge", rw).dist.bios == \
        Counter({IO_SECTORS: 1})
    assert emu["mmaphuge"]["requests"] == ref.row("psync", "mmaphuge", rw).dist.requests


def test_pagemap_emulator_beside_kernel_write(needs_machine, tmp_path):
    _compare(tmp_path, "write")


def test_pagemap_emulator_beside_kernel_read(needs_machine, tmp_path):
    _compare(tmp_path, "read")


# --- seed 004: bfq, root vs non-root cgroup --------------------------------------

def test_bfq_kernel_job_keeps_the_emulators_workload():
    job = Q.bfq_kernel_job("/dev/loop7")
    sections = read_sections(job.text)
    glob = dict(sections[0][1])
    emu = dict(read_sections(Q.BFQ_JOB.read_text(), Q.BFQ_JOB)[0][1])
    assert sections[0][0] == "global"
    assert glob["ioengine"] == "psync" and glob["filename"] == "/dev/loop7"
    for k in ("thread", "direct", "iodepth", "rw", "bs", "offset_increment", "size",
              "time_based", "runtime"):
        assert glob[k] == emu[k], k
    assert not any(k.startswith("mdsplit_") or k.startswith("write_bw") or k == "log_avg_msec"
                   for _, opts in sections for k, _ in opts)
    assert [n for n, _ in sections[1:]] == [f"test{i}" for i in range(1, 9)]
    assert job.jobs == 8 and job.delays_ms == [250.0 * i for i in range(8)]
    assert job.span == 8 * 256 * K.MiB and job.runtime_s == 30
    assert job.tunables == {"slice_idle": 8, "low_latency": 0}       # bfq-fixed.toml's [bfq]
    short = Q.bfq_kernel_job("/dev/loop7", runtime_s=2, delay_scale=0.5)
    assert short.runtime_s == 2 and short.delays_ms[-1] == 875
    assert "runtime=2\n" in short.text and "startdelay=875ms" in short.text
    # fio reads "62.5ms" as 62.5 s: fractional delays are written in us.
    quarter = Q.bfq_kernel_job("/dev/loop7", runtime_s=2.5, delay_scale=0.25)
    assert quarter.delays_ms[1] == 62.5
    assert "startdelay=62500us" in quarter.text and "runtime=2500ms\n" in quarter.text


def test_read_sections_bare_options_and_comments():
    s = read_sections("; c\n[global]\nbs=4k ; why\n# c\n[a]\nstonewall\nstartdelay = 1s\n")
    assert s == [("global", [("bs", "4k")]), ("a", [("stonewall", None), ("startdelay", "1s")])]
    assert write_sections(s) == "[global]\nbs=4k\n\n[a]\nstonewall\nstartdelay=1s\n"


@pytest.fixture
def needs_bfq_machine():
    reason = _unavailable(K.require_fio, K.require_losetup, K.io_cgroups)
    if reason:
        pytest.skip(f"kernel bfq reference unavailable: {reason}")


def test_kernel_bfq_root_and_child_cgroup(needs_bfq_machine, tmp_path):
    try:
        ref = Q.bfq_reference(runtime_s=2, delay_scale=0.25, warmup=False, keep_dir=tmp_path)
    except K.ReferenceUnavailable as e:       # e.g. no bfq in this kernel
        pytest.skip(f"kernel bfq reference unavailable: {e}")
    print("\n\n".join(Q.format_bfq(ref)))
    print(f"kernel non-root/root {ref.ratio:.3f} (informative only: real-clock figures)")
    for p in (ref.root, ref.nonroot):
        assert len(p.MiBps) == 1 and p.MiBps[0] > 0, p.place
        assert len(p.per_job[0]) == 8 and all(v > 0 for v in p.per_job[0]), p.place
        assert p.written[0] > 0
    # The child run's writes were charged to the child cgroup (fio really
    # ran in it), the root run's not.
    if ref.nonroot.charged[0] >= 0:
        assert ref.nonroot.charged[0] > 0
    assert "[bfq]" in ref.scheduler
    assert "filename=/dev/loop" in (tmp_path / "bfq-kernel.fio").read_text()
    assert (tmp_path / "bfq-nonroot-1.json").exists()
    # No loop device, cgroup, or directory left.
    assert _ours_left() == []


def test_kernel_bfq_cleanup_after_a_failure(needs_bfq_machine, monkeypatch):
    seen = {}

    def boom(job, **kw):
        seen["left"] = _ours_left()
        raise KeyboardInterrupt("interrupted in the middle")

    monkeypatch.setattr(Q, "run_fio", boom)
    try:
        with pytest.raises(KeyboardInterrupt):
            Q.bfq_reference(runtime_s=1, delay_scale=0.1, warmup=False)
    except K.ReferenceUnavailable as e:
        pytest.skip(f"kernel bfq reference unavailable: {e}")
    assert any("/dev/loop" in x for x in seen["left"])
    assert any(f"{K.PREFIX}{os.getpid()}-bfq" in x and "cgroup" in x for x in seen["left"])
    assert _ours_left() == []


def test_cli_reference_bfq(needs_bfq_machine):
    r = subprocess.run(["/usr/bin/python3", "-m", "harness", "reference", "bfq", "--runtime", "1",
                        "--delay-scale", "0.1", "--rounds", "1", "--no-warmup",
                        "--emulator", "none", "--no-history", "--quiet"],
                       cwd=paths.ROOT, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    print(r.stdout)
    if "skipped:" in r.stdout:
        pytest.skip(r.stdout.strip())
    assert "non-root/root" in r.stdout and "kernel" in r.stdout


def test_buffered_reference_reads_the_emulators_forced_ra_columns(tmp_path):
    metrics = {"forced-ra.rasync_on.qd1_kIOPS": 13.3, "forced-ra.rasync_on.qd32_kIOPS": 246.1,
               "forced-ra.rasync_off.qd1_kIOPS": 11.9, "c8d317aa.rasync_on.qd1_kIOPS": 99.0,
               "real.forced-ra.rasync_on.qd32_kIOPS": 133.0}
    (tmp_path / "result.json").write_text(json.dumps({"metrics": metrics}))
    cols, where = B.emulator_buffered(str(tmp_path))
    assert where == f"report {tmp_path / 'result.json'}"
    assert cols == {"emulator ra": {1: 13300.0, 32: 246100.0}, "emulator nora": {1: 11900.0},
                    "real-clock ra": {32: 133000.0}}
    assert B.emulator_buffered("none") == ({}, "not asked for (--emulator none)")
    cols, why = B.emulator_buffered(str(tmp_path / "missing"))
    assert cols == {} and "no report at" in why
    sweep = B.BufferedSweep("6.18", "/dev/loop0", 4 << 30, 3, {1: 22200.0, 32: 42900.0}, "note")
    table = B.format_buffered(sweep, {"emulator ra": {1: 13300.0}})[0].splitlines()
    assert table[0].split() == ["iodepth", "kernel", "kIOPS", "emulator", "ra"]
    assert table[1].split() == ["1", "22.2", "13.3"] and table[2].split() == ["32", "42.9", "-"]
    # With the kernel's io-wq runs: their column first, and the QD1 comparison.
    sweep.iops_iowq = {1: 14800.0, 32: 43000.0}
    out = B.format_buffered(sweep, {"emulator ra": {1: 13300.0}, "emulator io-wq": {1: 10500.0}})
    table = out[0].splitlines()
    assert table[0].split()[3:5] == ["kernel", "io-wq"]
    assert table[1].split() == ["1", "22.2", "14.8", "13.3", "10.5"]
    assert "kernel io-wq / kernel = 0.67" in out[-1]
    assert "emulator pre-c8d317aa rasync off / forced-ra rasync on = 0.79" in out[-1]
