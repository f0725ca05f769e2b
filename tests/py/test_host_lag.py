"""Host lag on the real clock (engine/stack/host_lag.h, docs/sidecar-lag.md):
a host-bound run says so (stderr and sidecar), time_scale = "auto" brings
fio's figures within 10 % of `simulate` of the same job file, also with a
second fio competing for the CPU, and a run that keeps up says nothing.
Each fio run lasts a few seconds; the machine may be shared."""
import contextlib
import json
import subprocess
from pathlib import Path

import pytest

from harness.fio_runner import run_fio
from harness.simulate import simulate_job

ROOT = Path(__file__).resolve().parents[2]
VERDICT = "host-bound:"
# The BFQ jobs: psync writers of one non-root group (seed 004), started
# together, each thinking THINKTIME (loop time, as every fio time), so that
# the host's own 5-40 us per cycle is small against the stated think time.
# The non-root comparison runs NONROOT_RUNTIME. Why, measured with plain fio
# on this 2-core host (docs/sidecar-lag.md, "The BFQ non-root comparison"):
# - Under the legacy counting bfq idles for the in-service writer and the
#   others reach the drive only by injection, whose limit stays 0 until the
#   in-service queue's first sample, taken no sooner than 10 ms of device
#   time after its first request (bfq_add_request()). From then on a single
#   blk-mq tick re-run (BLK_MQ_BUDGET_DELAY) that lands in the writer's
#   think gap starts injection for good. 500 ms is at most 8.4 ms of device
#   time at the factors "auto" picked here (64-1000): the comparison is
#   idling against parallel dispatch, with no injection on either clock.
#   The real clock keeps the tick out of the gap when the loop runs late
#   (engine/stack/response_order.h): the 4 s run at a fixed 64 below.
# - fio starts writers whose startdelay has not passed in batches at least
#   200 ms apart (backend.c, run_threads()), and under legacy the drive
#   serves the writers one after another, so startdelay steps lengthen the
#   legacy run by fio's batching: with 20 ms steps the 1 s ratio came out
#   11-35 % above simulate's. Started together, every writer starts in
#   fio's one batch, as on the virtual clock.
THINKTIME = 64  # us
NONROOT_RUNTIME = "500ms"


def bfq_stack(counting, time_scale, model="nvme", bfq_extra=""):
    ts = f'"{time_scale}"' if time_scale == "auto" else time_scale
    return f"""
[device]
kind = "passthrough"
scheduler = "bfq"
time_scale = {ts}

[bfq]
group_counting = "{counting}"
{bfq_extra}

[[members]]
path = "m0"
size = "8g"
backend = "null"
model = "{model}"
queue_depth = 1023
"""


def writers_global(engine, runtime) -> str:
    """The [global] section of psync 4k random writers sharing one device (thread=1)."""
    return f"""[global]
ioengine=external:{engine}
thread=1
direct=1
iodepth=1
rw=randwrite
bs=4k
size=256m
offset_increment=256m
time_based=1
runtime={runtime}
"""


def bfq_job(engine, runtime, variants=("legacy", "fixed"), writers=8):
    """8 psync 4k random writers in one non-root group (seed 004), each variant a run,
    started together, each thinking THINKTIME."""
    text = writers_global(engine, runtime) + f"mdsplit_group=test\nthinktime={THINKTIME}\n"
    for v in variants:
        for i in range(writers):
            text += f"\n[nonroot-{v}-{i}]\nfilename=nonroot-{v}\nmdsplit_config=bfq-{v}.toml\n"
            if i == 0:
                text += f"stonewall\nmdsplit_stats=stats/bfq-{v}.json\n"
    return text


def weights_job(engine, runtime):
    """Three groups of weight 100/200/400, one psync writer each, one bfq device."""
    text = writers_global(engine, runtime) + """filename=w
mdsplit_config=bfq-fixed.toml
mdsplit_stats=stats/weights.json
"""
    for w in (100, 200, 400):
        text += f"\n[g{w}]\nmdsplit_group=g{w}\nmdsplit_group_weight={w}\n"
    return text


# The weights' device: bfq's strict_guarantees and max_budget 8 sectors (both
# sysfs tunables of the kernel's bfq). Without strict_guarantees, bfq injects
# the other groups' writes while the in-service queue waits for its writer's
# next one, once any write arrives in such a wait: the shares are then about
# equal (simulate at 64x, max_budget 256, the writers started 100 us apart:
# 0.31/0.33/0.35), while with every writer starting at the same instant
# simulate never injects (0.15/0.28/0.57): the answer hinges on the start,
# which no real
# run reproduces. strict_guarantees serves one request at a time and always
# idles, so the weights rule either way. With slices of one write each
# (max_budget 8) the shares are WF2Q+'s exactly after a few hundred writes;
# with 32-write slices a few milliseconds of device time hold too few
# slices, and bfq's budget feedback makes each slice's length timing-bound
# (real 0.18-0.21 against simulate's 0.15 for g100 at 128-256x, 3 s).
# bfq_max_budget() gives the default 16384 sectors, not the user's 8, until
# 194 budgets were assigned (bfq_peak_rate.h), so each queue's first slice
# would hold a 10922-sector budget: timeout_sync 1 ms ends it after 1 ms
# of device time, and the budget-timeout feedback brings it down to 8.
WEIGHTS_BFQ = 'strict_guarantees = true\nmax_budget = 8\ntimeout_sync = "1ms"'


def write(dir: Path, files: dict):
    (dir / "stats").mkdir(exist_ok=True)
    for name, text in files.items():
        (dir / name).write_text(text)


def verdicts(result):
    return [l for l in result.stderr.splitlines() if VERDICT in l]


def written(result) -> int:
    return {j["jobname"]: j["write"]["io_bytes"] + j["read"]["io_bytes"] for j in result.jobs}


def group_sum(bytes_by_job: dict, prefix: str) -> int:
    return sum(v for k, v in bytes_by_job.items() if k.startswith(prefix))


@contextlib.contextmanager
def competing_fio(seconds):
    """A second fio burning one CPU (cpuio) while the test's fio runs. Its job
    is a thread (--thread): a forked job would outlive the kill and burn on
    through the tests after this one."""
    proc = subprocess.Popen(["fio", "--name=burn", "--ioengine=cpuio", "--cpuload=100", "--thread",
                             "--time_based", f"--runtime={seconds}", "--output=/dev/null"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def sim_bytes(sim) -> dict:
    return {j["jobname"]: j["write"]["io_bytes"] + j["read"]["io_bytes"] for j in sim["jobs"]}


def test_bfq_nonroot_at_time_scale_4_is_host_bound(engine, tmp_path):
    """Seed 004's non-root writers at time_scale 4: the verdict line and the sidecar say host-bound."""
    write(tmp_path, {"bfq-legacy.toml": bfq_stack("legacy", 4), "bfq-fixed.toml": bfq_stack("fixed", 4),
                     "job.fio": bfq_job(engine, "1s", variants=("fixed",))})
    res = run_fio(tmp_path / "job.fio")
    lines = verdicts(res)
    assert len(lines) == 1 and lines[0].startswith("mdsplit: nonroot-fixed: host-bound:"), res.stderr
    side = json.loads((tmp_path / "stats/bfq-fixed.json").read_text())
    assert side["host_lag"]["host_bound"] and side["host_lag"]["suggested_time_scale"] > 4
    lag = side["devices"][0]["lag"]
    assert lag["requests"] > 0 and lag["host_share"] > 0.05
    assert len(side["host_lag"]["jobs"]) == 8


def move_real_sidecars(dir: Path) -> Path:
    """simulate replaces no real run's sidecar: the real run's stats/ moves
    to stats-real/ before simulate of the same job file."""
    real = dir / "stats-real"
    (dir / "stats").rename(real)
    (dir / "stats").mkdir()
    return real


def at_picked_scale(dir: Path, res, stacks: dict):
    """The stack files rewritten with the factor each device's calibration
    picked (its sidecar's time_scale), for simulate of the same job file
    over the same span of device time. stacks: {toml name: sidecar path}."""
    for toml, side in stacks.items():
        k = json.loads((dir / side).read_text())["time_scale"]
        text = (dir / toml).read_text().replace('time_scale = "auto"', f"time_scale = {k}")
        (dir / toml).write_text(text)


@pytest.mark.parametrize("compete", [False, True], ids=["alone", "competing"])
def test_bfq_nonroot_auto_matches_simulate(engine, tmp_path, compete):
    """With time_scale = "auto" the non-root legacy/fixed ratio is within 10 % of simulate's."""
    write(tmp_path, {"bfq-legacy.toml": bfq_stack("legacy", "auto"),
                     "bfq-fixed.toml": bfq_stack("fixed", "auto"),
                     "job.fio": bfq_job(engine, NONROOT_RUNTIME)})
    with competing_fio(60) if compete else contextlib.nullcontext():
        res = run_fio(tmp_path / "job.fio")
    assert sum('time_scale = "auto"' in l for l in res.stderr.splitlines()) == 2, res.stderr
    at_picked_scale(tmp_path, res, {"bfq-legacy.toml": "stats/bfq-legacy.json",
                                    "bfq-fixed.toml": "stats/bfq-fixed.json"})
    real_stats = move_real_sidecars(tmp_path)
    b = sim_bytes(simulate_job(tmp_path / "job.fio", data=False))
    k = {v: json.loads((real_stats / f"bfq-{v}.json").read_text())["time_scale"]
         for v in ("legacy", "fixed")}
    real = written(res)
    ratio = (group_sum(real, "nonroot-legacy") * k["legacy"]) / (group_sum(real, "nonroot-fixed") * k["fixed"])
    sim_ratio = (group_sum(b, "nonroot-legacy") * k["legacy"]) / (group_sum(b, "nonroot-fixed") * k["fixed"])
    inj = {v: json.loads((real_stats / f"bfq-{v}.json").read_text())["devices"][1]["bfq"]["injected"]
           for v in ("legacy", "fixed")}
    figures = f"real {ratio:.3f} simulate {sim_ratio:.3f} time_scale {k} injected {inj}"
    print(figures)
    ok = ratio == pytest.approx(sim_ratio, rel=0.10)
    assert ok, (figures, res.stderr)


def test_bfq_nonroot_late_loop_keeps_the_models_order(engine, tmp_path):
    """Think time 0, 4 s at time_scale 64: no injection simulate lacks; the ratio is simulate's, or the run says host-bound."""
    global THINKTIME
    saved, THINKTIME = THINKTIME, 0
    try:
        write(tmp_path, {"bfq-legacy.toml": bfq_stack("legacy", 64),
                         "bfq-fixed.toml": bfq_stack("fixed", 64),
                         "job.fio": bfq_job(engine, "4s")})
    finally:
        THINKTIME = saved
    res = run_fio(tmp_path / "job.fio")
    real_stats = move_real_sidecars(tmp_path)
    b = sim_bytes(simulate_job(tmp_path / "job.fio", data=False))
    injected = [json.loads((d / "bfq-legacy.json").read_text())["devices"][1]["bfq"]["injected"]
                for d in (real_stats, tmp_path / "stats")]
    real = written(res)
    ratio = group_sum(real, "nonroot-legacy") / group_sum(real, "nonroot-fixed")
    sim_ratio = group_sum(b, "nonroot-legacy") / group_sum(b, "nonroot-fixed")
    figures = (f"legacy/fixed real {ratio:.3f} simulate {sim_ratio:.3f}, "
               f"legacy injected real {injected[0]} simulate {injected[1]}")
    print(figures)
    # At a fixed factor the host may fall behind (a loaded host: 1.08-1.10
    # seen); then the verdict must say so, which is the engine's contract.
    agrees = ratio == pytest.approx(sim_ratio, rel=0.10)
    assert injected[0] == injected[1] and (agrees or verdicts(res)), (figures, res.stderr)


@pytest.mark.parametrize("compete", [False, True], ids=["alone", "competing"])
def test_weights_auto_match_simulate(engine, tmp_path, compete):
    """Three groups of weight 100/200/400 with time_scale = "auto": each share within 10 % of simulate's."""
    write(tmp_path, {"bfq-fixed.toml": bfq_stack("fixed", "auto", bfq_extra=WEIGHTS_BFQ),
                     "job.fio": weights_job(engine, "3s")})
    with competing_fio(60) if compete else contextlib.nullcontext():
        res = run_fio(tmp_path / "job.fio")
    at_picked_scale(tmp_path, res, {"bfq-fixed.toml": "stats/weights.json"})
    move_real_sidecars(tmp_path)
    sim = sim_bytes(simulate_job(tmp_path / "job.fio", data=False))
    real = written(res)
    ok = all(real[g] / sum(real.values()) == pytest.approx(sim[g] / sum(sim.values()), rel=0.10)
             for g in ("g100", "g200", "g400"))
    assert ok, (real, sim, res.stderr)


def test_weights_at_time_scale_1_are_host_bound(engine, tmp_path):
    """The three weighted writers at time_scale 1: the verdict names the device."""
    write(tmp_path, {"bfq-fixed.toml": bfq_stack("fixed", 1, bfq_extra=WEIGHTS_BFQ),
                     "job.fio": weights_job(engine, "1s")})
    res = run_fio(tmp_path / "job.fio")
    assert [l.split(":")[1].strip() for l in verdicts(res)] == ["w"], res.stderr


def test_slow_model_keeps_up_and_says_nothing(engine, tmp_path):
    """Writers on the hdd preset (8 ms seeks): no verdict line, host_bound false."""
    write(tmp_path, {"bfq-fixed.toml": bfq_stack("fixed", 1, model="hdd"),
                     "job.fio": bfq_job(engine, "1s", variants=("fixed",), writers=2)})
    res = run_fio(tmp_path / "job.fio")
    assert verdicts(res) == [], res.stderr
    side = json.loads((tmp_path / "stats/bfq-fixed.json").read_text())
    assert not side["host_lag"]["host_bound"] and side["host_lag"]["time_scale_auto"] is None
    assert side["devices"][0]["lag"]["requests"] > 0


def test_unmodelled_stack_is_not_probed_nor_host_bound(engine, tmp_path):
    """No timing model and no [cpu]: auto is 1 without a probe, and no verdict."""
    stack = bfq_stack("fixed", "auto").replace('model = "nvme"\n', "")
    write(tmp_path, {"bfq-fixed.toml": stack,
                     "job.fio": bfq_job(engine, "1s", variants=("fixed",), writers=2)})
    res = run_fio(tmp_path / "job.fio")
    assert verdicts(res) == [] and "nothing in the stack is modelled" in res.stderr, res.stderr
    side = json.loads((tmp_path / "stats/bfq-fixed.json").read_text())
    assert side["time_scale"] == 1 and side["host_lag"]["time_scale_auto"]["tried"] == []
    assert not side["host_lag"]["host_bound"]


def raid5_jobs(tmp_path, time_scale, ios=6):
    """jobs/raid5-split-order.fio and its stacks, cut to `ios` reads per variant."""
    for name in ("raid5-split-order.fio", "raid5-legacy.toml", "raid5-fixed.toml"):
        text = (ROOT / "jobs" / name).read_text()
        if name.endswith(".toml"):
            ts = f'"{time_scale}"' if time_scale == "auto" else time_scale
            text = text.replace("time_scale = 4", f"time_scale = {ts}")
        else:
            text = text.replace("size=2240m", f"size={ios * 4480}k")
            text = text.replace("/usr/local/lib/mdsplit/libmdsplit.so", str(ROOT / "build/libmdsplit.so"))
        (tmp_path / name).write_text(text)
    (tmp_path / "stats").mkdir(exist_ok=True)
    (tmp_path / "work").mkdir(exist_ok=True)
    return tmp_path / "raid5-split-order.fio"


def raid5_ratio(jobs, dir: Path) -> float:
    """fixed/legacy md0 throughput in device time (fio's x each sidecar's time_scale)."""
    k = {v: json.loads((dir / f"stats/raid5-{v}.json").read_text())["time_scale"]
         for v in ("legacy", "fixed")}
    bw = {j["jobname"]: j["read"]["bw_bytes"] * k[j["jobname"]] for j in jobs}
    return bw["fixed"] / bw["legacy"]


def test_raid5_at_time_scale_1_is_host_bound(engine, tmp_path):
    """The RAID5 dd of seeds 000/002 at time_scale 1: both variants host-bound."""
    job = raid5_jobs(tmp_path, 1)
    job.write_text(job.read_text().replace(str(ROOT / "build/libmdsplit.so"), str(engine)))
    res = run_fio(job)
    assert len(verdicts(res)) == 2, res.stderr


@pytest.mark.parametrize("compete", [False, True], ids=["alone", "competing"])
def test_raid5_auto_matches_simulate(engine, tmp_path, compete):
    """The fixed/legacy md0 throughput ratio with time_scale = "auto" is within 10 % of simulate's."""
    job = raid5_jobs(tmp_path, "auto")
    job.write_text(job.read_text().replace(str(ROOT / "build/libmdsplit.so"), str(engine)))
    with competing_fio(120) if compete else contextlib.nullcontext():
        res = run_fio(job)
    real = raid5_ratio(res.jobs, tmp_path)
    move_real_sidecars(tmp_path)
    sim = raid5_ratio(simulate_job(job, data=False)["jobs"], tmp_path)
    ok = real == pytest.approx(sim, rel=0.10)
    assert ok, (real, sim, res.stderr)


def test_time_scale_string_other_than_auto_is_refused(mdsplit_module):
    """time_scale = "fast": one line naming the key and the allowed values."""
    with pytest.raises(Exception, match=r'device\.time_scale: "fast" is not a time scale; '
                                        r'allowed: a number from 0\.001 to 1000, or "auto"'):
        mdsplit_module.Simulation(bfq_stack("fixed", 1).replace("time_scale = 1",
                                                                'time_scale = "fast"'))


def test_auto_is_one_on_the_virtual_clock(mdsplit_module):
    """The virtual clock always keeps up: "auto" runs at 1 there."""
    assert mdsplit_module.Simulation(bfq_stack("fixed", "auto")).stats()["time_scale"] == 1
