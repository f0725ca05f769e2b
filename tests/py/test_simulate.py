"""harness simulate: fio job files on the virtual clock (harness/simulate.py,
engine/sim/fio_job_model.h). Each shipped job file runs from a fresh copy of
jobs/ (member files, sidecars and traces stay in the copy), shortened where
its real length would take minutes."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.fio_runner import parse_fio_json, run_fio, run_simulated
from harness.simulate import PERCENTILES, simulate_job

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "jobs"

# How each shipped job file is shortened: sections and a runtime override.
SHORT = {
    "raid5-split-order.fio": (None, None),
    "bio-align.fio": (None, None),
    "bfq-groups.fio": (["root-legacy-test1", "root-legacy-test2", "nonroot-fixed-test1",
                        "nonroot-fixed-test2"], "1"),
    "passthrough-demo.fio": (None, "50ms"),
    "uring-buffered-ra.fio": (["forced-ra-rasync-qd1", "c8d317aa-norasync-qd128",
                               "pre-c8d317aa-rasync-qd32"], "20ms"),
}


def copy_jobs(dest: Path, runtime=None) -> Path:
    d = dest / "jobs"
    d.mkdir(parents=True)
    for p in JOBS.iterdir():
        if p.is_file() and p.suffix in (".fio", ".toml"):
            text = p.read_text()
            if runtime and p.suffix == ".fio":
                text = re.sub(r"^runtime=.*$", f"runtime={runtime}", text, flags=re.M)
            (d / p.name).write_text(text)
    return d


def outputs(jobs_dir: Path) -> dict:
    """Every file a run wrote (sidecars, traces), by relative path."""
    out = {}
    for sub in ("stats", "traces"):
        for p in sorted((jobs_dir / sub).rglob("*")) if (jobs_dir / sub).exists() else []:
            if p.is_file():
                out[str(p.relative_to(jobs_dir))] = p.read_bytes()
    return out


def run_cli(args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "harness", "simulate", *args], cwd=cwd,
                          capture_output=True, text=True)


@pytest.mark.parametrize("job_file", sorted(SHORT))
def test_shipped_job_file_runs_byte_identically_twice(tmp_path, mdsplit_module, job_file):
    """Two runs of a shipped job file: exit 0, fio JSON, identical bytes of JSON,
    sidecars and traces."""
    sections, runtime = SHORT[job_file]
    texts, files = [], []
    d = copy_jobs(tmp_path, runtime)
    for run in ("a", "b"):   # in one directory: the sidecars name the member paths
        args = [str(d / job_file), "--output-format", "json", "--output", str(d / "out.json")]
        for s in sections or []:
            args += ["--section", s]
        p = run_cli(args)
        assert p.returncode == 0, p.stderr
        texts.append((d / "out.json").read_text())
        files.append(outputs(d))
        for sub in ("stats", "traces"):
            shutil.rmtree(d / sub, ignore_errors=True)
    assert texts[0] == texts[1]
    assert files[0].keys() == files[1].keys()
    for k in files[0]:
        assert files[0][k] == files[1][k], f"{k} differs between two runs"
    data = json.loads(texts[0])
    assert parse_fio_json(texts[0])["jobs"]
    assert data["mdsplit-simulate"] and data["seed"] == 137
    for j in data["jobs"]:
        assert j["error"] == 0, j["jobname"]
        assert j["read"]["total_ios"] + j["write"]["total_ios"] > 0


def test_json_has_fio_fields_and_default_percentiles(tmp_path, mdsplit_module):
    """read/write/trim carry fio's fields; clat has fio's 17 default percentiles."""
    d = copy_jobs(tmp_path)
    r = simulate_job(d / "raid5-split-order.fio", sections=["fixed"])
    j = r["jobs"][0]
    for key in ("io_bytes", "io_kbytes", "bw", "bw_bytes", "iops", "runtime", "total_ios",
                "slat_ns", "clat_ns", "lat_ns"):
        assert key in j["read"] and key in j["write"] and key in j["trim"]
    assert list(j["read"]["clat_ns"]["percentile"]) == [f"{p:f}" for p in PERCENTILES]
    assert j["read"]["io_bytes"] == 2240 << 20
    assert j["read"]["total_ios"] == 512
    assert sum(j["latency_ms"].values()) + sum(j["latency_us"].values()) == pytest.approx(100)
    assert j["read"]["bw_bytes"] == pytest.approx(
        j["read"]["io_bytes"] / (j["job_runtime"] / 1000), rel=0.01)


def test_harness_run_reads_simulate_output_like_fio(tmp_path, mdsplit_module):
    """run_simulated() gives a FioResult with the sidecars the job names."""
    d = copy_jobs(tmp_path)
    res = run_simulated(d / "raid5-split-order.fio", sections=["legacy"])
    assert res.simulated
    assert res.job("legacy")["read"]["total_ios"] == 512
    assert "stats/raid5-legacy.json" in res.sidecars
    assert res.sidecars["stats/raid5-legacy.json"].device("md0")["r_s"] > 0


def test_no_data_gives_the_same_figures(tmp_path, mdsplit_module):
    """Members that go nowhere (--no-data) give the same job figures: the
    virtual clock does not wait on the host's storage."""
    d = copy_jobs(tmp_path, runtime="1")
    secs = ["root-fixed-test1", "root-fixed-test2"]
    a = simulate_job(d / "bfq-groups.fio", sections=secs)
    b = simulate_job(d / "bfq-groups.fio", sections=secs, data=False)
    assert [j["write"] for j in a["jobs"]] == [j["write"] for j in b["jobs"]]


def test_seed_override_changes_random_offsets_and_is_recorded(tmp_path, mdsplit_module):
    """--seed N: recorded, and a different seed gives other random offsets."""
    write_stack(tmp_path)
    sectors = []
    for seed in (1, 2, 1):
        (tmp_path / "r.fio").write_text(job_text(
            f"[j]\nrw=randread\nsize=4m\nio_size=64k\nmdsplit_trace=traces/s{seed}\n"))
        r = simulate_job(tmp_path / "r.fio", seed=seed)
        assert r["seed"] == seed
        ev = mdsplit_module.read_blktrace(str(tmp_path / f"traces/s{seed}/md0.blktrace.0"))
        sectors.append([e["sector"] for e in ev if e["action"] == "Q"])
    assert sectors[0] == sectors[2] and sectors[0] != sectors[1]


def test_random_map_writes_every_block_once_with_random_sizes(tmp_path, mdsplit_module):
    """randwrite, bsrange, the random map on: as fio's mark_random_map(), an I/O
    is cut at the first block already written, so one pass writes each 4 KiB
    of the region exactly once (before, a third of it was never written)."""
    write_stack(tmp_path)
    (tmp_path / "w.fio").write_text(job_text(
        "[j]\nrw=randwrite\nbsrange=4k-64k\nsize=8m\niodepth=4\nmdsplit_trace=traces/w\n"))
    r = simulate_job(tmp_path / "w.fio")
    assert r["jobs"][0]["write"]["io_bytes"] == 8 << 20
    ev = mdsplit_module.read_blktrace(str(tmp_path / "traces/w/md0.blktrace.0"))
    written = [0] * (8 << 20 >> 12)
    for e in ev:
        if e["action"] == "Q":
            for b in range(e["sector"] >> 3, (e["sector"] + e["nr_sectors"]) >> 3):
                written[b] += 1
    assert written == [1] * len(written)


def write_stack(d: Path, extra="") -> Path:
    (d / "null.toml").write_text(
        '[device]\nkind = "passthrough"\n' + extra +
        '\n[[members]]\npath = "m0.img"\nsize = "64m"\nbackend = "ram"\nmodel = "nvme"\n')
    return d / "null.toml"


def job_text(body):
    return ("[global]\nioengine=external:/usr/local/lib/mdsplit/libmdsplit.so\n"
            "mdsplit_config=null.toml\nfilename=md0\ndirect=1\n" + body)


def test_unsupported_pattern_option_is_one_line_exit_2(tmp_path, mdsplit_module):
    """An option that changes the I/O pattern and is not modelled: exit 2, one line naming it."""
    write_stack(tmp_path)
    (tmp_path / "z.fio").write_text(job_text("[j]\nrw=read\nzonemode=zbd\n"))
    p = run_cli([str(tmp_path / "z.fio")])
    assert p.returncode == 2
    assert p.stderr.strip() == "simulate: option 'zonemode' is not supported in virtual time"


def test_reporting_options_are_accepted(tmp_path, mdsplit_module):
    """write_bw_log / log_avg_msec / group_reporting only change fio's reports."""
    write_stack(tmp_path)
    (tmp_path / "r.fio").write_text(job_text(
        "[j]\nrw=read\nsize=1m\nwrite_bw_log=x\nlog_avg_msec=100\ngroup_reporting\n"))
    r = simulate_job(tmp_path / "r.fio")
    assert r["jobs"][0]["read"]["io_bytes"] == 1 << 20


def test_bad_config_gives_the_loaders_error_line(tmp_path, mdsplit_module, engine):
    """A bad mdsplit_config: the engine's own line, the stack file named as the
    job names it (it was "<text>"), exit 1."""
    write_stack(tmp_path, extra='bogus_key = 1\n')
    text = job_text("[j]\nrw=read\n")
    (tmp_path / "b.fio").write_text(text)
    (tmp_path / "e.fio").write_text(text.replace("/usr/local/lib/mdsplit/libmdsplit.so",
                                                 str(engine)))
    fio = subprocess.run(["fio", "e.fio"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    [engine_line] = [l for l in fio.stderr.splitlines() if l.startswith("mdsplit: ")]
    assert engine_line.startswith("mdsplit: null.toml: ")
    p = run_cli([str(tmp_path / "b.fio")])
    assert (p.returncode, p.stderr.strip()) == (1, engine_line)


def test_numjobs_subjobs_get_offset_increment_and_numbered_sidecars(tmp_path, mdsplit_module):
    """numjobs=3 with offset_increment: three jobs, sidecars FILE, FILE.1, FILE.2."""
    write_stack(tmp_path)
    (tmp_path / "n.fio").write_text(job_text(
        "thread=1\n[j]\nrw=write\nbs=4k\nsize=1m\nnumjobs=3\noffset_increment=16m\n"
        "mdsplit_stats=stats/n.json\nmdsplit_trace=traces/n\n"))
    r = simulate_job(tmp_path / "n.fio")
    assert [j["jobname"] for j in r["jobs"]] == ["j", "j", "j"]
    assert all(j["write"]["io_bytes"] == 1 << 20 for j in r["jobs"])
    assert sorted(p.name for p in (tmp_path / "stats").iterdir()) == ["n.json", "n.json.1",
                                                                     "n.json.2"]
    events = mdsplit_module.read_blktrace(str(tmp_path / "traces/n/md0.blktrace.0"))
    starts = {e["sector"] * 512 // (16 << 20) for e in events if e["action"] == "Q"}
    assert starts == {0, 1, 2}


def test_thread_jobs_share_one_stack_forked_jobs_do_not(tmp_path, mdsplit_module):
    """thread=1 jobs on one stack+label: one device (one sidecar covering both);
    forked ones each their own."""
    write_stack(tmp_path)
    for thread in ("0", "1"):
        (tmp_path / "t.fio").write_text(job_text(
            f"thread={thread}\n[a]\nrw=read\nsize=1m\nmdsplit_stats=stats/a{thread}.json\n"
            f"[b]\nrw=read\nsize=1m\nmdsplit_stats=stats/b{thread}.json\n"))
        simulate_job(tmp_path / "t.fio")
    md0 = {n: json.loads((tmp_path / f"stats/{n}.json").read_text())["devices"][0]
           for n in ("a0", "b0", "a1", "b1")}
    assert md0["a0"]["read"]["sectors"] == 2048          # its own device
    assert md0["a1"]["read"]["sectors"] == 4096          # both jobs' I/O
    assert md0["a1"] == md0["b1"]


def test_stonewall_orders_groups_and_startdelay_counts_from_the_start(tmp_path, mdsplit_module):
    """stonewall: the second group starts when the first has ended; startdelay
    counts from the run's start (fio's genesis)."""
    write_stack(tmp_path)
    (tmp_path / "s.fio").write_text(job_text(
        "[a]\nrw=read\nsize=4m\n[b]\nstonewall\nrw=read\nsize=4m\n"
        "[c]\nrw=read\nsize=4m\nstartdelay=10ms\n"))
    r = simulate_job(tmp_path / "s.fio")
    a, b, c = r["jobs"]
    assert (a["groupid"], b["groupid"], c["groupid"]) == (0, 1, 1)
    assert b["job_start_ns"] == a["job_end_ns"]
    assert c["job_start_ns"] == max(10_000_000, a["job_end_ns"])


def test_rate_iops_limits_the_job(tmp_path, mdsplit_module):
    """rate_iops=1000 for 100 ms gives 100 I/Os."""
    write_stack(tmp_path)
    (tmp_path / "r.fio").write_text(job_text(
        "[j]\nrw=randread\nrate_iops=1000\nruntime=100ms\ntime_based=1\n"))
    r = simulate_job(tmp_path / "r.fio")
    assert r["jobs"][0]["read"]["total_ios"] == pytest.approx(100, abs=1)


def test_verify_reads_back_what_was_written(tmp_path, mdsplit_module):
    """verify=crc32c: the written blocks are read back and compared (no errors on ram)."""
    write_stack(tmp_path)
    (tmp_path / "v.fio").write_text(job_text(
        "[j]\nrw=randwrite\nbsrange=4k-64k\nsize=4m\niodepth=8\nverify=crc32c\n"))
    j = simulate_job(tmp_path / "v.fio")["jobs"][0]
    assert j["error"] == 0 and j["verify_errors"] == 0
    assert j["read"]["io_bytes"] >= 4 << 20


@pytest.mark.parametrize("sync", ["1", "sync", "dsync"])
def test_sync_buffered_writes_wait_for_the_member(tmp_path, mdsplit_module, sync):
    """sync=1|sync|dsync (O_SYNC/O_DSYNC): each buffered write completes once its
    pages are on the member, after the nvme model's 18 us write command; with
    sync=0 it completes in the page cache."""
    write_stack(tmp_path)
    body = "[j]\nrw=randwrite\nsize=1m\ndirect=0\n"
    (tmp_path / "s.fio").write_text(job_text(body + f"sync={sync}\n"))
    (tmp_path / "n.fio").write_text(job_text(body + "sync=0\n"))
    synced = simulate_job(tmp_path / "s.fio")["jobs"][0]["write"]["clat_ns"]
    cached = simulate_job(tmp_path / "n.fio")["jobs"][0]["write"]["clat_ns"]
    assert synced["min"] > 18_000
    assert cached["max"] < 18_000


def test_rwmixread_splits_directions(tmp_path, mdsplit_module):
    """randrw with rwmixread=70: about 70 % of the I/Os are reads."""
    write_stack(tmp_path)
    (tmp_path / "m.fio").write_text(job_text("[j]\nrw=randrw\nrwmixread=70\nsize=16m\n"))
    j = simulate_job(tmp_path / "m.fio")["jobs"][0]
    reads, writes = j["read"]["total_ios"], j["write"]["total_ios"]
    assert 0.65 < reads / (reads + writes) < 0.75


def engine_job(d: Path, engine, body, direct=1) -> Path:
    """d/t.fio on the null.toml stack with the build's engine, for simulate and for fio."""
    write_stack(d)
    (d / "t.fio").write_text(f"[global]\nioengine=external:{engine}\nmdsplit_config=null.toml\n"
                             f"filename=md0\ndirect={direct}\n" + body)
    return d / "t.fio"


def md0_discards(sidecar):
    return {k: v for k, v in sidecar.device("md0")["discard"].items() if k != "ticks_ns"}


def test_randtrim_counts_discards_as_fio_with_the_engine(tmp_path, engine, mdsplit_module):
    """randtrim: trim ios/bytes in the JSON, and md0's discard counters in the
    sidecar as a real fio run of the same job with the engine reports them."""
    job = engine_job(tmp_path, engine, "[j]\nrw=randtrim\nbs=64k\nsize=8m\niodepth=4\n"
                     "mdsplit_stats=stats/t.json\n")
    sim = run_simulated(job)
    real = run_fio(job, timeout=60)
    t = sim.job("j")["trim"]
    assert (t["total_ios"], t["io_bytes"]) == (128, 8 << 20)
    assert sim.job("j")["read"]["total_ios"] + sim.job("j")["write"]["total_ios"] == 0
    assert t["clat_ns"]["N"] == 128 and t["clat_ns"]["percentile"]["50.000000"] > 0
    assert (real.job("j")["trim"]["total_ios"], real.job("j")["trim"]["io_bytes"]) == \
        (128, 8 << 20)
    assert md0_discards(sim.sidecars["stats/t.json"]) == \
        md0_discards(real.sidecars["stats/t.json"]) == \
        {"ios": 128, "merges": 0, "sectors": 16384, "errors": 0}


def test_trimwrite_trims_then_writes_each_block_as_fio(tmp_path, engine, mdsplit_module):
    """trimwrite: equal trim and write bytes (size each), each write after the
    trim of its block, md0's queue order as a real fio run's."""
    job = engine_job(tmp_path, engine, "[j]\nrw=trimwrite\nbs=16k\nsize=4m\niodepth=4\n"
                     "mdsplit_trace=tr\n")
    order = {}
    for run in ("sim", "real"):
        res = run_simulated(job) if run == "sim" else run_fio(job, timeout=60)
        j = res.job("j")
        assert j["trim"]["io_bytes"] == j["write"]["io_bytes"] == 4 << 20, run
        events = mdsplit_module.read_blktrace(str(tmp_path / "tr/md0.blktrace.0"))
        order[run] = [(e["op"], e["sector"]) for e in events if e["action"] == "Q"]
        shutil.rmtree(tmp_path / "tr")
    assert order["sim"][:4] == [("D", 0), ("W", 0), ("D", 32), ("W", 32)]
    assert order["sim"] == order["real"]


def test_buffered_trim_is_refused_with_the_engines_line(tmp_path, engine, mdsplit_module):
    """direct=0 with rw=trim: the engine's one line (as fio prints it), exit 1."""
    job = engine_job(tmp_path, engine, "[j]\nrw=trim\nsize=1m\n", direct=0)
    p = run_cli([str(job)])
    assert p.returncode == 1
    real = subprocess.run(["fio", "--output-format=json", str(job)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert real.returncode != 0
    assert p.stderr.strip() in real.stderr.splitlines()
    assert p.stderr.strip().startswith("mdsplit: rw=trim/randtrim/trimwrite with direct=0")


def test_randtrimwrite_runs_byte_identically_twice(tmp_path, mdsplit_module):
    """randtrimwrite with bssplit, sidecar and trace: two runs give identical bytes."""
    write_stack(tmp_path)
    (tmp_path / "t.fio").write_text(job_text(
        "[j]\nrw=randtrimwrite\nbssplit=4k/50:64k/50\nsize=8m\niodepth=8\n"
        "mdsplit_stats=stats/t.json\nmdsplit_trace=traces/t\n"))
    texts, files = [], []
    for _ in range(2):
        p = run_cli([str(tmp_path / "t.fio"), "--output-format", "json"])
        assert p.returncode == 0, p.stderr
        texts.append(p.stdout)
        files.append(outputs(tmp_path))
        for sub in ("stats", "traces"):
            shutil.rmtree(tmp_path / sub)
    assert texts[0] == texts[1] and files[0] == files[1]
    j = json.loads(texts[0])["jobs"][0]
    assert j["trim"]["io_bytes"] == j["write"]["io_bytes"] == 8 << 20
    assert set(files[0]) == {"stats/t.json", "traces/t/md0.blktrace.0",
                             "traces/t/m0.blktrace.0"}


# The two clocks' agreement (bw and iops within 15 % where the host keeps up)
# is a timing comparison, so it is a benchmark, bench/agreement.sh, not a test.


def test_forked_jobs_naming_one_sidecar_are_refused_as_by_the_engine(tmp_path, mdsplit_module):
    """Two forked jobs, two devices, one mdsplit_stats file: the engine's first
    line (job a's setup; test_sidecar_forked.py), exit 1; thread=1 jobs sharing
    the device may share it."""
    write_stack(tmp_path)
    both = "[a]\nrw=read\nsize=1m\n[b]\nrw=read\nsize=1m\n"
    (tmp_path / "f.fio").write_text(job_text("mdsplit_stats=stats/s.json\n" + both))
    p = run_cli([str(tmp_path / "f.fio")])
    assert p.returncode == 1
    assert p.stderr.strip() == (
        "mdsplit: mdsplit_stats=stats/s.json: job b writes it too, from a device of its own, so "
        "one sidecar would overwrite the other; allowed: a file per job, or thread=1 with the "
        "same mdsplit_config and filename (one shared device, one sidecar)")
    (tmp_path / "t.fio").write_text(job_text("thread=1\nmdsplit_stats=stats/s.json\n" + both))
    r = simulate_job(tmp_path / "t.fio")
    assert [j["read"]["io_bytes"] for j in r["jobs"]] == [1 << 20, 1 << 20]


@pytest.mark.parametrize("continue_on_error", ["none", "read"])
def test_an_io_error_ends_the_job_as_in_fio_unless_continued(tmp_path, engine, mdsplit_module,
                                                             continue_on_error):
    """The 10th read fails with EIO: by default the job ends there (error 5,
    exit 1); continue_on_error=read lets it pass (total_err 1, exit 0), each
    as a real fio run of the same job reports it."""
    (tmp_path / "null.toml").write_text(
        '[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\nsize = "16m"\n'
        'backend = "ram"\nmodel = "nvme"\n[members.faults]\nfail_nth = [10]\n')
    job = tmp_path / "e.fio"
    job.write_text(f"[global]\nioengine=external:{engine}\nmdsplit_config=null.toml\n"
                   f"filename=md0\ndirect=1\nrw=read\nbs=4k\nsize=256k\n"
                   f"continue_on_error={continue_on_error}\n[j]\n")
    real = subprocess.run(["fio", "--output-format=json", job.name], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    sim = run_cli([str(job), "--output-format", "json"])
    figures = {}
    for run, p in (("real", real), ("sim", sim)):
        j = parse_fio_json(p.stdout)["jobs"][0]
        figures[run] = (p.returncode != 0, j["error"], j["read"]["total_ios"],
                        j["read"]["io_bytes"], j.get("total_err", 0))
    expected = (True, 5, 10, 9 * 4096, 0) if continue_on_error == "none" else \
        (False, 5, 64, 63 * 4096, 1)
    assert figures["sim"] == figures["real"] == expected
    if continue_on_error == "none":
        assert sim.stderr.strip() == "simulate: job j: error=5 (Input/output error)"


def test_continue_on_error_takes_fios_values(tmp_path, mdsplit_module):
    """continue_on_error=sometimes: one line naming the option and fio's values, exit 2."""
    write_stack(tmp_path)
    (tmp_path / "c.fio").write_text(job_text("[j]\nrw=read\ncontinue_on_error=sometimes\n"))
    p = run_cli([str(tmp_path / "c.fio")])
    assert p.returncode == 2
    assert p.stderr.strip() == ("simulate: continue_on_error=sometimes: allowed: none, 0, read, "
                                "write, io, verify, all, 1")


RAID5_FILES = ('[device]\nkind = "raid5"\nchunk = "16k"\n' +
               "".join(f'[[members]]\npath = "r{i}.img"\nsize = "4m"\n' for i in range(3)))
CROSS_JOB_REFUSALS = {
    "unlink": ("null.toml", "[j]\nfilename=md0\nrw=write\nsize=1m\nunlink=1\n"),
    "weight-without-group": ("null.toml",
                             "[j]\nfilename=md0\nrw=read\nsize=1m\nmdsplit_group_weight=500\n"),
    "trace-disagreement": ("null.toml", "[a]\nfilename=md0\nthread=1\nrw=read\nsize=1m\n"
                           "[b]\nfilename=md0\nthread=1\nrw=read\nsize=1m\nmdsplit_trace=trb\n"),
    "raid5-two-names": ("r5.toml", "[a]\nfilename=md0\nthread=1\nrw=write\nsize=1m\n"
                        "[b]\nfilename=md1\nthread=1\nrw=write\nsize=1m\n"),
    # Forked jobs on one raid5 that may run at once: one owner (thread=1).
    "raid5-forked": ("r5.toml", "[a]\nfilename=md0\nrw=write\nsize=1m\n"
                     "[b]\nfilename=md0\nrw=read\nsize=1m\n"),
    "raid5-forked-numjobs": ("r5.toml", "[a]\nfilename=md0\nrw=write\nsize=1m\nnumjobs=2\n"),
    "ram-forked-reader": ("ram.toml", "[w]\nfilename=md0\nrw=write\nsize=1m\n"
                          "[r]\nfilename=md0\nrw=read\nsize=1m\nstonewall\n"),
    "buffered-forked": ("files.toml", "[w]\nfilename=md0\nrw=write\nsize=1m\ndirect=0\n"
                        "[r]\nfilename=md0\nrw=read\nsize=1m\ndirect=0\n"),
    "sidecar-over-member": ("files.toml", "[w]\nfilename=md0\nrw=write\nsize=1m\n"
                            "mdsplit_stats=f0.img\n"),
    "sidecar-over-stack-file": ("files.toml", "[r]\nfilename=md0\nrw=read\nsize=1m\n"
                                "[w]\nfilename=md1\nrw=read\nsize=1m\nmdsplit_stats=files.toml\n"),
    "ioscheduler": ("null.toml", "[j]\nfilename=md0\nrw=read\nsize=1m\nioscheduler=bfq\n"),
    "group-without-bfq": ("null.toml", "[j]\nfilename=md0\nrw=read\nsize=1m\nmdsplit_group=g\n"),
    "group-and-cgroup": ("bfq.toml", "[j]\nfilename=md0\nrw=read\nsize=1m\nmdsplit_group=g\n"
                         "cgroup=mdsplit-test-h\n"),
    "cgroup-in-threads": ("bfq.toml", "[a]\nfilename=md0\nthread=1\nrw=read\nsize=1m\n"
                          "cgroup=mdsplit-test-a\n[b]\nfilename=md0\nthread=1\nrw=read\nsize=1m\n"),
}


@pytest.mark.parametrize("case", sorted(CROSS_JOB_REFUSALS))
def test_cross_job_refusals_are_the_engines_lines(tmp_path, engine, mdsplit_module, case):
    """What the engine refuses across a run's jobs (unlink, a weight without a
    group, disagreeing traces on one device, two devices over raid5 members,
    a forked reader of another process's ram, forked jobs with buffered I/O
    and a writer, a sidecar over a member or a stack file, a group without
    bfq or two groups for one job, fio's cgroup= among threads, an ioscheduler
    that is not the stack's) simulate refuses
    with the line
    fio prints first, exit 1."""
    stack, body = CROSS_JOB_REFUSALS[case]
    write_stack(tmp_path)
    (tmp_path / "r5.toml").write_text(RAID5_FILES)
    (tmp_path / "ram.toml").write_text('[[members]]\nbackend = "ram"\nsize = "4m"\n')
    (tmp_path / "files.toml").write_text('[[members]]\npath = "f0.img"\nsize = "4m"\n')
    (tmp_path / "bfq.toml").write_text('[device]\nscheduler = "bfq"\n'
                                       '[[members]]\nbackend = "null"\nsize = "4m"\n')
    (tmp_path / "t.fio").write_text(f"[global]\nioengine=external:{engine}\n"
                                    f"mdsplit_config={stack}\ndirect=1\n" + body)
    job = tmp_path / "t.fio"
    p = run_cli([str(job)])
    assert p.returncode == 1, p.stderr
    real = subprocess.run(["fio", "--output-format=json", str(job)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert real.returncode != 0
    first = [line for line in real.stderr.splitlines() if line.startswith("mdsplit:")][0]
    assert p.stderr.strip() == first


def test_buffered_writer_on_another_device_of_the_stack_file_may_fork(tmp_path, engine):
    """Forked buffered jobs on two devices (filenames) of one stack file are
    accepted by the engine and by simulate: each device keeps its own page
    cache in one process too, as two kernel block devices over one disk do."""
    (tmp_path / "files.toml").write_text('[[members]]\npath = "f0.img"\nsize = "4m"\n')
    job = tmp_path / "t.fio"
    job.write_text(f"[global]\nioengine=external:{engine}\nmdsplit_config=files.toml\n"
                   "direct=0\nsize=1m\n[w]\nfilename=md0\nrw=write\n"
                   "[r]\nfilename=md1\nrw=read\n")
    p = run_cli([str(job)])
    assert p.returncode == 0, p.stderr
    real = subprocess.run(["fio", "--output-format=json", str(job)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert real.returncode == 0, real.stderr


def test_inputs_that_are_devices_are_one_line_errors(tmp_path, mdsplit_module):
    """A job file or stack file on /dev/zero: one line, not a read without end."""
    p = run_cli(["/dev/zero"])
    assert (p.returncode, p.stderr.strip()) == (
        2, "simulate: job file /dev/zero is not a regular file; allowed: a text file")
    (tmp_path / "z.fio").write_text(job_text("[j]\nrw=read\nsize=1m\n").replace(
        "mdsplit_config=null.toml", "mdsplit_config=/dev/zero"))
    p = run_cli([str(tmp_path / "z.fio")])
    assert (p.returncode, p.stderr.strip()) == (
        1, "simulate: stack file /dev/zero is not a regular file; allowed: a text file")
    with pytest.raises(RuntimeError, match="is not a regular file"):
        mdsplit_module.read_blktrace("/dev/zero")


def test_unwritable_outputs_are_one_line_errors(tmp_path, mdsplit_module):
    """--output on a directory, mdsplit_trace on a file: one line each, no traceback."""
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text("[j]\nrw=read\nsize=1m\n"))
    p = run_cli([str(tmp_path / "j.fio"), "--output", str(tmp_path)])
    assert p.returncode == 1
    assert p.stderr.strip() == (f"simulate: --output {tmp_path}: cannot write it (Is a "
                                "directory); allowed: a file in a writable directory")
    (tmp_path / "t.fio").write_text(job_text("[j]\nrw=read\nsize=1m\nmdsplit_trace=j.fio\n"))
    p = run_cli([str(tmp_path / "t.fio")])
    assert p.returncode == 1
    # The engine's line (Stack, validation row 78), the directory as simulate opens it.
    assert p.stderr.strip() == (f"mdsplit: mdsplit_trace: cannot create {tmp_path / 'j.fio'}: "
                                "Not a directory")


@pytest.mark.parametrize("body, message", [
    ("iodepth=0", "simulate: iodepth=0: fio refuses it: below its minimum 1; allowed: 1 to "
                  "65536"),
    ("direct=2", "simulate: direct=2: not a boolean (0 or 1)"),
    ("numjobs=5000", "simulate: numjobs=5000: allowed: 1 to 4096 jobs in all (fio's "
                     "REAL_MAX_JOBS)"),
])
def test_values_fio_refuses_are_refused(tmp_path, mdsplit_module, body, message):
    """Values fio's parser refuses (minval, a bool's 0..1, REAL_MAX_JOBS) were
    run as something else (iodepth 1, direct on) or hung (2e9 jobs)."""
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text(f"[j]\nrw=read\nsize=1m\n{body}\n"))
    p = run_cli([str(tmp_path / "j.fio")])
    assert (p.returncode, p.stderr.strip()) == (2, message)


def test_seed_beyond_64_bits_is_refused(tmp_path, mdsplit_module):
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text("[j]\nrw=read\nsize=1m\n"))
    p = run_cli([str(tmp_path / "j.fio"), "--seed", str(1 << 64)])
    assert p.returncode == 2
    assert p.stderr.strip().startswith(f"simulate: --seed {1 << 64}: allowed: 0 to ")


@pytest.mark.parametrize("body, message", [
    ("bs=${MDSPLIT_TEST_UNSET_VARIABLE}", "simulate: bs=: empty; allowed: a size like 4k"),
    ("rwmixread=150", "simulate: rwmixread=150: allowed: 0 to 100"),
])
def test_values_fio_refuses_whatever_rw_is(tmp_path, mdsplit_module, body, message):
    """fio refuses an empty bs and rwmixread past 100 on any job (a traceback
    and an accepted value before)."""
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text(f"[j]\nrw=read\nsize=1m\n{body}\n"))
    p = run_cli([str(tmp_path / "j.fio")])
    assert (p.returncode, p.stderr.strip()) == (2, message)


def interrupt_simulate(job):
    """harness simulate of `job`, sent SIGINT once inside its run: (exit
    status, stderr); fails the test when the run goes on after it."""
    import signal
    import time
    p = subprocess.Popen([sys.executable, "-m", "harness", "simulate", str(job)],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(3)  # past Python's start-up, inside the run
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("simulate went on after SIGINT")
    return p.returncode, p.stderr.read().decode().strip()


def test_ctrl_c_ends_a_long_simulate(tmp_path, mdsplit_module):
    """SIGINT ends a run inside the C++ loop: its I/O drains, one line, exit
    130 (it was ignored until the run ended: minutes or never)."""
    write_stack(tmp_path)
    (tmp_path / "l.fio").write_text(job_text("[j]\nrw=randread\nsize=1m\nloops=1000000000\n"))
    assert interrupt_simulate(tmp_path / "l.fio") == (130, "simulate: interrupted")


def test_ctrl_c_leaves_raid5_member_files_consistent(tmp_path, mdsplit_module):
    """SIGINT during random writes to file-backed RAID5 members: the writes in
    flight complete, so every stripe's parity matches its data (a process
    killed at once could leave a stripe half written); no report or sidecar
    of the cut run is written."""
    from harness.parity_check import check_parity
    text = '[device]\nkind = "raid5"\nchunk = "64k"\n'
    for i in range(4):
        text += f'\n[[members]]\npath = "m{i}.img"\nsize = "16m"\nmodel = "sata-ssd"\n'
    (tmp_path / "r5.toml").write_text(text)
    (tmp_path / "w.fio").write_text(
        "[global]\nioengine=external:/usr/local/lib/mdsplit/libmdsplit.so\n"
        "mdsplit_config=r5.toml\nmdsplit_stats=stats.json\nfilename=md0\ndirect=1\n"
        "[j]\nrw=randwrite\nbsrange=4k-256k\niodepth=16\nsize=48m\nloops=1000000000\n")
    assert interrupt_simulate(tmp_path / "w.fio") == (130, "simulate: interrupted")
    members = [tmp_path / f"m{i}.img" for i in range(4)]
    assert check_parity(members, 64 * 1024, "left-symmetric") == []
    assert not (tmp_path / "stats.json").exists()


def test_allow_file_create_0_creates_no_member_file(tmp_path, mdsplit_module):
    """allow_file_create=0: a missing member file is refused with the engine's
    reason and not made (simulate made it, as the engine did before)."""
    (tmp_path / "null.toml").write_text('[[members]]\npath = "new/m.img"\nsize = "8m"\n')
    (tmp_path / "j.fio").write_text(job_text("[j]\nrw=read\nsize=1m\nallow_file_create=0\n"))
    p = run_cli([str(tmp_path / "j.fio")])
    assert p.returncode == 1
    assert "does not exist, and this run creates no files (fio's --readonly or " \
           "allow_file_create=0)" in p.stderr
    assert not (tmp_path / "new").exists()


def test_a_stack_that_cannot_open_is_named_as_the_job_names_it(tmp_path, mdsplit_module):
    """An error as the stack opens names mdsplit_config= as written (sub/s.toml), as the
    engine does, not the path simulate resolved it to."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "s.toml").write_text('[[members]]\npath = "new/m.img"\nsize = "8m"\n')
    (tmp_path / "j.fio").write_text(job_text("[j]\nrw=read\nsize=1m\nallow_file_create=0\n")
                                    .replace("null.toml", "sub/s.toml"))
    p = run_cli([str(tmp_path / "j.fio")])
    assert p.returncode == 1
    assert p.stderr.startswith('mdsplit: sub/s.toml: members[0].path: "'), p.stderr


def test_fio_log_options_are_reporting_only(tmp_path, mdsplit_module):
    """fio 3.33's log_prio, log_entries, log_compression_cpus are accepted as
    the other log_* options (they were refused as unknown)."""
    write_stack(tmp_path)
    (tmp_path / "l.fio").write_text(job_text(
        "[j]\nrw=read\nsize=1m\nlog_prio=1\nlog_entries=1024\nlog_compression_cpus=0\n"))
    assert run_cli([str(tmp_path / "l.fio")]).returncode == 0


@pytest.mark.parametrize("body, message", [
    ("size=150%", "simulate: size=150%: allowed: 0% to 100%"),
    ("bs=50%", "simulate: bs=50%: percentages are not supported in virtual time"),
    ("size=1.5g", "simulate: size=1.5g: 1 bytes is less than the minimum block size 4096 "
                  "(fio: size too small)"),
    ("loops=abc", "simulate: loops=abc: not an integer"),
    ("iodepth=abc", "simulate: iodepth=abc: not an integer"),
    ("allow_file_create=2", "simulate: allow_file_create=2: not a boolean (0 or 1)"),
])
def test_values_read_for_the_job_spec_are_one_line_refusals(tmp_path, mdsplit_module, body,
                                                            message):
    """Values read after the first checks (size, loops, iodepth, ...) gave a traceback."""
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text(f"[j]\nrw=read\nsize=1m\n{body}\n"))
    p = run_cli([str(tmp_path / "j.fio")])
    assert (p.returncode, p.stderr.strip()) == (2, message)


@pytest.mark.parametrize("body", ["direct=yes", "end_fsync=true", "randrepeat=on"])
def test_boolean_words_are_refused_as_fio_refuses_them(tmp_path, mdsplit_module, body):
    """fio's FIO_OPT_BOOL takes an integer only (parse.c check_int): yes/true/on fail."""
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text(f"[j]\nrw=read\nsize=1m\n{body}\n"))
    p = run_cli([str(tmp_path / "j.fio")])
    assert (p.returncode, p.stderr.strip()) == (
        2, f"simulate: {body}: not a boolean (0 or 1)")


def test_str_set_flag_takes_any_integer_as_fio(tmp_path, mdsplit_module):
    """norandommap=2 (an FIO_OPT_STR_SET, no maxval) is norandommap on in fio, not a refusal."""
    write_stack(tmp_path)
    for v in ("1", "2"):
        (tmp_path / f"n{v}.fio").write_text(job_text(
            f"[j]\nrw=randwrite\nsize=1m\nbsrange=4k-16k\nnorandommap={v}\n"))
    one, two = (simulate_job(tmp_path / f"n{v}.fio")["jobs"][0]["write"] for v in "12")
    assert one == two


@pytest.mark.parametrize("second", ["md1", "md0"])
def test_filename_in_global_and_section_adds_a_file_as_fio(tmp_path, mdsplit_module, second):
    """fio adds a section's filename= to [global]'s (str_filename_cb), so the
    engine refuses two files; simulate ran the section's one."""
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text(f"[j]\nrw=read\nsize=1m\nfilename={second}\n"))
    p = run_cli([str(tmp_path / "j.fio")])
    assert (p.returncode, p.stderr.strip()) == (
        1, "mdsplit: filename must name exactly one virtual device (e.g. md0); got 2 files")


def test_of_linked_options_the_last_set_wins_as_in_fio(tmp_path, mdsplit_module):
    """rwmixwrite after rwmixread sets the read share to 100 - it (str_rwmix_write_cb);
    it was rwmixread's, whatever the order."""
    write_stack(tmp_path)
    (tmp_path / "a.fio").write_text(job_text("[j]\nrw=randrw\nsize=1m\nrwmixread=80\n"
                                             "rwmixwrite=50\n"))
    (tmp_path / "b.fio").write_text(job_text("[j]\nrw=randrw\nsize=1m\nrwmixread=50\n"))
    a, b = (simulate_job(tmp_path / f"{n}.fio")["jobs"][0] for n in "ab")
    assert (a["read"]["total_ios"], a["write"]["total_ios"]) == \
        (b["read"]["total_ios"], b["write"]["total_ios"])


def test_direct_after_buffered_wins_as_in_fio(tmp_path, mdsplit_module):
    """buffered=0 then direct=0 is buffered I/O (both set o.odirect); it ran direct."""
    write_stack(tmp_path)
    (tmp_path / "a.fio").write_text(job_text("[j]\nrw=trim\nsize=1m\nbuffered=0\ndirect=0\n"))
    p = run_cli([str(tmp_path / "a.fio")])
    assert (p.returncode, p.stderr.strip()) == (1, "mdsplit: rw=trim/randtrim/trimwrite with "
                                                   "direct=0: a buffered job's discard is not "
                                                   "emulated; allowed: direct=1 for jobs that "
                                                   "trim")


@pytest.mark.parametrize("body, message", [
    ("RW=randwrite", "simulate: option 'RW' is not an fio option (names are case-sensitive); "
                     "allowed: rw"),
    ("rw=RandWrite", "simulate: rw=RandWrite: allowed: read, write, randread, randwrite, rw, "
                     "readwrite, randrw, trim, randtrim, trimwrite, randtrimwrite"),
    ("verify=1", "simulate: verify=1: unknown verify method"),
    ("prioclass=idle", "simulate: prioclass=idle: not an integer"),
    ("continue_on_error=IO", "simulate: continue_on_error=IO: allowed: none, 0, read, write, "
                             "io, verify, all, 1"),
])
def test_names_and_values_fio_refuses_by_case_are_refused(tmp_path, mdsplit_module, body,
                                                          message):
    """fio compares option names and values case-sensitively (strcmp/strncmp), has no
    verify=1, and prioclass is an integer; simulate ran all five."""
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text(f"[j]\nrw=write\nsize=1m\n{body}\n"))
    p = run_cli([str(tmp_path / "j.fio")])
    assert (p.returncode, p.stderr.strip()) == (2, message)


@pytest.mark.parametrize("option", ["exitall", "max_latency=10ms"])
def test_options_that_end_jobs_are_refused_by_name(tmp_path, mdsplit_module, option):
    """exitall (ends the other jobs) and max_latency (fails the job) change the
    I/O; they were accepted as reporting only."""
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text(f"[j]\nrw=read\nsize=1m\n{option}\n"))
    p = run_cli([str(tmp_path / "j.fio")])
    name = option.split("=")[0]
    assert (p.returncode, p.stderr.strip()) == (
        2, f"simulate: option '{name}' is not supported in virtual time")


def test_blockalign_turns_off_the_random_map_as_in_fio(tmp_path, mdsplit_module):
    """A blockalign other than the smallest bs runs without the random map
    (init.c fixup_options), as norandommap=1 does."""
    write_stack(tmp_path)
    base = "[j]\nrw=randwrite\nsize=1m\nbs=4k\nblockalign=8k\nmdsplit_stats=s{}.json\n"
    (tmp_path / "a.fio").write_text(job_text(base.format("a")))
    (tmp_path / "b.fio").write_text(job_text(base.format("b") + "norandommap=1\n"))
    a, b = (simulate_job(tmp_path / f"{n}.fio")["jobs"][0]["write"] for n in "ab")
    assert a == b
    assert (tmp_path / "sa.json").read_text() == (tmp_path / "sb.json").read_text()


def test_blockalign_of_a_sequential_job_is_ignored_as_in_fio(tmp_path, mdsplit_module):
    """fio sets blockalign to the smallest bs for a job that is not random
    (init.c fixup_options); simulate used it as the block size step."""
    write_stack(tmp_path)
    base = "[j]\nrw=write\nsize=1m\nbsrange=4k-16k\n"
    (tmp_path / "a.fio").write_text(job_text(base + "blockalign=16k\n"))
    (tmp_path / "b.fio").write_text(job_text(base))
    a, b = (simulate_job(tmp_path / f"{n}.fio")["jobs"][0]["write"] for n in "ab")
    assert a == b


def test_iodepth_batch_submit_0_is_iodepth_as_in_fio(tmp_path, mdsplit_module):
    """iodepth_batch_submit=0 submits iodepth at once (init.c fixup_options); it was 1."""
    write_stack(tmp_path)
    base = "[j]\nrw=randread\nsize=1m\niodepth=8\n"
    (tmp_path / "a.fio").write_text(job_text(base + "iodepth_batch_submit=0\n"))
    (tmp_path / "b.fio").write_text(job_text(base + "iodepth_batch_submit=8\n"))
    a, b = (simulate_job(tmp_path / f"{n}.fio")["jobs"][0]["read"] for n in "ab")
    assert a == b


def test_bsrange_sizes_are_drawn_as_fio_with_blockalign_placing_offsets_only(tmp_path,
                                                                             mdsplit_module):
    """bsrange=4k-16k, blockalign=16k: sizes 4k..16k averaging about 10 KiB, as fio's
    get_next_buflen() (blockalign was taken as the size step: every I/O 4 KiB)."""
    write_stack(tmp_path)
    (tmp_path / "b.fio").write_text(job_text(
        "[j]\nrw=randwrite\nbsrange=4k-16k\nblockalign=16k\nsize=4m\n"))
    p = run_cli([str(tmp_path / "b.fio"), "--output-format", "json"])
    assert p.returncode == 0, p.stderr
    w = json.loads(p.stdout[p.stdout.index("{"):])["jobs"][0]["write"]
    assert 9 * 1024 < w["io_bytes"] / w["total_ios"] < 11 * 1024


def test_a_sidecar_that_cannot_be_created_is_refused_before_the_run(tmp_path, mdsplit_module):
    """mdsplit_stats=afile/x.json under a regular file: the engine's line (row 110), before any
    I/O (simulate ran the job, then failed on another line)."""
    write_stack(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "s.fio").write_text(job_text("[j]\nrw=write\nsize=1m\nmdsplit_stats=afile/x.json\n"))
    p = run_cli([str(tmp_path / "s.fio")])
    assert (p.returncode, p.stderr.strip()) == (1, (
        "mdsplit: mdsplit_stats=afile/x.json: cannot create it (Not a directory); allowed: a "
        "path in a writable directory"))


def test_a_sidecar_over_a_trace_file_of_the_run_is_refused(tmp_path, mdsplit_module):
    """mdsplit_stats=tr/md0.blktrace.0 with mdsplit_trace=tr: the engine's line (row 177); the
    sidecar used to replace the trace."""
    write_stack(tmp_path)
    (tmp_path / "t.fio").write_text(job_text(
        "[j]\nrw=read\nsize=1m\nmdsplit_trace=tr\nmdsplit_stats=tr/md0.blktrace.0\n"))
    p = run_cli([str(tmp_path / "t.fio")])
    assert (p.returncode, p.stderr.strip()) == (1, (
        "mdsplit: mdsplit_stats=tr/md0.blktrace.0 is the trace file tr/md0.blktrace.0 of job j: "
        "the sidecar would replace it; allowed: a file that is not a trace file of the run"))


@pytest.mark.parametrize("option, said", [
    ("loops=0", ""),
    ("time_based=1", "fio: time_based requires a runtime/timeout setting"),
])
def test_options_fio_takes_as_one_size_bound_pass(tmp_path, mdsplit_module, option, said):
    """loops=0, and time_based without a runtime (fio says so), run one size-bound pass as
    fio does (backend.c keep_running, init.c fixup_options); simulate refused both."""
    write_stack(tmp_path)
    (tmp_path / "o.fio").write_text(job_text(f"[j]\nrw=read\nsize=1m\n{option}\n"))
    p = run_cli([str(tmp_path / "o.fio"), "--output-format", "json"])
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == said
    assert json.loads(p.stdout[p.stdout.index("{"):])["jobs"][0]["read"]["io_bytes"] == 1 << 20


def test_a_job_without_filename_gets_fio_s_name_for_its_device(tmp_path, mdsplit_module):
    """No filename=: the device is jobname.N.0 as fio names the job's file (init.c add_job),
    subjob N of numjobs its own; simulate refused the job ('got none')."""
    write_stack(tmp_path)
    (tmp_path / "n.fio").write_text(job_text("[a]\nrw=read\nsize=1m\nmdsplit_stats=a.json\n")
                                    .replace("filename=md0\n", ""))
    p = run_cli([str(tmp_path / "n.fio")])
    assert p.returncode == 0, p.stderr
    devices = json.loads((tmp_path / "a.json").read_text())["devices"]
    assert devices[0]["name"] == "a.0.0"


def test_a_nul_in_a_job_file_line_is_one_line_naming_it(tmp_path, mdsplit_module):
    """A job-file line holding a NUL: one line naming it, exit 2 (a traceback; fio takes the
    line up to the NUL, so mdsplit_stats=out<NUL>x writes "out")."""
    write_stack(tmp_path)
    (tmp_path / "n.fio").write_text(job_text("[j]\nrw=read\nsize=1m\nmdsplit_stats=out\0x\n"))
    p = run_cli([str(tmp_path / "n.fio")])
    assert (p.returncode, p.stderr.strip()) == (2, (
        f"simulate: {tmp_path / 'n.fio'}: line 9 (mdsplit_stats=out...): holds a NUL character; "
        "allowed: text lines without NUL"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("body, message", [
    ("iodepth=-1", "simulate: iodepth=-1: fio refuses it: below its minimum 1; allowed: 1 to 65536"),
    ("iodepth=2147483648", "simulate: iodepth=2147483648: fio refuses it: below its minimum 1; "
                           "allowed: 1 to 65536"),
    ("iodepth=65537", "simulate: iodepth=65537: simulate keeps at most 65536 I/Os in flight; "
                      "allowed: 1 to 65536"),
    ("thinktime=-1", "simulate: thinktime=-1: -1 us is out of range; allowed: 0 to 4294967295 "
                     "microseconds (fio keeps it in 32 bits)"),
    ("thinktime=4294967296", "simulate: thinktime=4294967296: 4294967296 us is out of range; "
                             "allowed: 0 to 4294967295 microseconds (fio keeps it in 32 bits)"),
    ("startdelay=-1", "simulate: startdelay=-1: -1000000 us is out of range; allowed: 0 to "
                      "1152921504s (the virtual clock's 2**60 ns)"),
    ("startdelay=2000000000", "simulate: startdelay=2000000000: 2000000000000000 us is out of "
                              "range; allowed: 0 to 1152921504s (the virtual clock's 2**60 ns)"),
])
def test_iodepth_thinktime_startdelay_out_of_range_name_the_option(tmp_path, mdsplit_module,
                                                                   body, message):
    """Out of range, iodepth, thinktime and startdelay are one line naming the option, exit 2
    (the bindings' lines named think_ns / start_delay_ns in nanoseconds, exit 1)."""
    write_stack(tmp_path)
    (tmp_path / "j.fio").write_text(job_text(f"[j]\nrw=read\nsize=1m\n{body}\n"))
    p = run_cli([str(tmp_path / "j.fio")])
    assert (p.returncode, p.stderr.strip()) == (2, message)


def queued_sectors(mdsplit_module, trace_file):
    events = mdsplit_module.read_blktrace(str(trace_file))
    return sorted(e["sector"] for e in events if e["action"] == "Q")


@pytest.mark.parametrize("body, ios, sectors", [
    # filesetup.c get_start_offset(): 10% of 64 MiB, rounded up to bs (6713344 = sector 13112).
    ("rw=read\nbs=4k\nsize=8k\noffset=10%\n", [2], [13112, 13120]),
    # offset_increment=25% per subjob (16 MiB = sector 32768), offset in bytes, rounded up to bs.
    ("rw=read\nbs=4k\nsize=4k\noffset=1k\noffset_increment=25%\nnumjobs=3\nthread=1\n",
     [1, 1, 1], [8, 32776, 65544]),
    # size= given and offset past the device's end: fio runs the job, no I/O (get_next_offset).
    ("rw=read\nbs=4k\nsize=64k\noffset=100m\n", [0], []),
])
def test_offset_percentages_and_past_the_end_as_fio(tmp_path, engine, mdsplit_module, body, ios,
                                                     sectors):
    """offset=N% and offset_increment=N% of the device (were refused), and an
    offset past the device's end with size= (was refused, exit 1): the same
    I/Os and sectors as a real fio run with the engine."""
    job = engine_job(tmp_path, engine, "[j]\nmdsplit_trace=tr\n" + body)
    for run in ("sim", "real"):
        res = run_simulated(job) if run == "sim" else run_fio(job, timeout=60)
        assert [j["read"]["total_ios"] for j in res.jobs] == ios, run
        assert queued_sectors(mdsplit_module, tmp_path / "tr/md0.blktrace.0") == sectors, run
        shutil.rmtree(tmp_path / "tr")


@pytest.mark.parametrize("body, ios", [
    # setup_files(): 10% of 64 MiB (6710886), less its remainder of bs.
    ("rw=read\nbs=4k\nsize=10%\n", 1638),
    # io_size=N% of the region: 6710886 bytes, the last I/O whole.
    ("rw=read\nbs=4k\nio_size=10%\n", 1639),
    # size=75% past offset=48m: at most the rest of the device.
    ("rw=read\nbs=64k\noffset=48m\nsize=75%\n", 256),
    ("rw=randread\nbs=4k\nsize=50%\nio_size=1%\n", 82),
    # str_to_decimal(): base 10 unless "0x" appears (no octal), the unit after the digits.
    ("rw=read\nbs=4k\nsize=01m\n", 256),
    ("rw=read\nbs=512\nsize=0x1000\n", 8),
    ("rw=read\nbs=512\nsize=0x1000k\n", 8),
])
def test_size_percentages_and_strtoll_numbers_as_fio(tmp_path, engine, mdsplit_module, body, ios):
    """size=N% and io_size=N% (were refused), size=01m (was a traceback: int('01', 0))
    and size=0x1000k (was 4 MiB; fio reads 4096): the I/O counts of a real fio run."""
    job = engine_job(tmp_path, engine, "[j]\n" + body)
    assert run_fio(job, timeout=60).job("j")["read"]["total_ios"] == ios
    assert run_simulated(job).job("j")["read"]["total_ios"] == ios


def test_no_percentiles_for_a_direction_without_io_as_fio(tmp_path, engine, mdsplit_module):
    """rw=write: fio's JSON has no "percentile" in read/trim clat_ns (stat.c
    add_ddir_lat_json: only with samples); simulate gave 17 zeros."""
    job = engine_job(tmp_path, engine, "[j]\nrw=write\nbs=4k\nsize=64k\n")
    for res in (run_fio(job, timeout=60), run_simulated(job)):
        j = res.job("j")
        assert "percentile" not in j["read"]["clat_ns"] and "percentile" not in j["trim"]["clat_ns"]
        assert list(j["write"]["clat_ns"]["percentile"]) == [f"{p:f}" for p in PERCENTILES]
    p = run_cli([str(job), "--output-format", "normal"])
    assert p.returncode == 0 and p.stdout.count("clat (nsec)") == 1, p.stdout


@pytest.mark.parametrize("direct", [1, 0])
@pytest.mark.parametrize("body, syncs", [("end_fsync=1\n", 0), ("fsync=4\nend_fsync=1\n", 3)])
def test_end_fsync_is_not_counted_in_sync_total_ios_as_fio(tmp_path, engine, mdsplit_module,
                                                           direct, body, syncs):
    """fio queues end_fsync's sync while TD_FSYNCING, which td_io_queue() does not
    count in total_io_u[DDIR_SYNC]; simulate counted it (1 and 4)."""
    job = engine_job(tmp_path, engine, "[j]\nrw=write\nbs=4k\nsize=64k\n" + body, direct=direct)
    assert run_fio(job, timeout=60).job("j")["sync"]["total_ios"] == syncs
    assert run_simulated(job).job("j")["sync"]["total_ios"] == syncs


@pytest.mark.parametrize("thread", [0, 1])
def test_numjobs_subjobs_are_reported_in_fios_order(tmp_path, engine, mdsplit_module, thread):
    """fio's init.c add_job() adds subjobs N-1 down to 1 after the job itself:
    its JSON lists subjobs 0, 3, 2, 1 (told apart here by offset_increment);
    simulate listed 0, 1, 2, 3."""
    job = engine_job(tmp_path, engine, f"[j]\nrw=read\nbs=4k\nsize=64m\nthread={thread}\n"
                     "offset_increment=16m\nnumjobs=4\nmdsplit_stats=stats/s.json\n")
    # simulate first: it does not replace the sidecars of fio's run.
    for res in (run_simulated(job), run_fio(job, timeout=60)):
        assert [j["read"]["total_ios"] for j in res.jobs] == [16384, 4096, 8192, 12288]


@pytest.mark.parametrize("body, ios, sectors", [
    # A sequential pass runs while the position is inside the region (get_next_offset:
    # offset < f->io_size); a fixed-size block may pass the region's end: 0, 4k, 8k
    # (simulate wrapped to 0 for the third block).
    ("rw=read\nbs=4k\nsize=10k\n", 3, [0, 8, 16]),
    ("rw=read\nbs=4k\nsize=10k\nloops=3\n", 8, [0, 0, 0, 8, 8, 8, 16, 16]),
    ("rw=read\nbs=4k\nsize=10k\nio_size=20k\n", 5, [0, 0, 8, 8, 16]),
    # A random pass ends with its map full; keep_running() stops with less than
    # one block left of size= (simulate started a second pass: 3 reads).
    ("rw=randread\nbs=4k\nsize=10k\n", 2, [0, 8]),
    # A block that would pass the device's end ends the pass (fill_io_u): no I/O
    # (simulate refused the job: region smaller than one block).
    ("rw=read\nbs=8k\noffset=65532k\nsize=64k\n", 0, []),
])
def test_pass_ends_where_fio_ends_it(tmp_path, engine, mdsplit_module, body, ios, sectors):
    """io_u.c get_next_offset / fill_io_u and backend.c keep_running: the same
    I/Os and sectors as a real fio run with the engine."""
    job = engine_job(tmp_path, engine, "[j]\nmdsplit_trace=tr\n" + body)
    for run in ("sim", "real"):
        res = run_simulated(job) if run == "sim" else run_fio(job, timeout=60)
        assert res.job("j")["read"]["total_ios"] == ios, run
        assert queued_sectors(mdsplit_module, tmp_path / "tr/md0.blktrace.0") == sectors, run
        shutil.rmtree(tmp_path / "tr")


def test_random_pass_past_the_devices_end_stops_there(tmp_path, mdsplit_module):
    """randread over a region (offset + size) past the device's end: fio's
    last_block() draws over size= (up to the device's size), and a block at or
    past the end ends the pass (get_next_offset: offset >= real_file_size), so
    no read passes the end and the job ends early (simulate read 6 blocks
    from a region cut at the end, as many as size= allowed there)."""
    write_stack(tmp_path)
    (tmp_path / "r.fio").write_text(job_text(
        "[j]\nrw=randread\nbs=4k\noffset=65512k\nsize=64k\nnorandommap=1\nmdsplit_trace=tr\n"))
    j = simulate_job(tmp_path / "r.fio")["jobs"][0]
    sectors = queued_sectors(mdsplit_module, tmp_path / "tr/md0.blktrace.0")
    assert j["read"]["total_ios"] == len(sectors) < 6
    assert all(s * 512 + 4096 <= 64 << 20 for s in sectors)
