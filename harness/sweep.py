"""`python3 -m harness sweep [raid5]`: the parameters a reproduction's fit
does not pin, drawn over stated ranges (each with its source), each draw one
virtual-clock run (`--no-data`) in parallel over the cores; every thread
figure is then printed as a band (median, 10-90 %) with its verdict
(harness/bands.py: PASS / MISS against the band's median within the
figure's tolerance, "not determined by the evidence" past +-25 %).

The draws are seeded (SEED): the same table on every machine.
"""
from __future__ import annotations

import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import bands
from harness.paths import ROOT

SEED = 39


@dataclass
class Param:
    name: str          # what the table calls it
    lo: float
    hi: float
    unit: str
    source: str
    keys: callable     # value -> {stack file: {dotted key: TOML text}}


# RAID5 (seeds 000/002): both stack files get the same draw.
def _both(key, text):
    return {f"raid5-{v}.toml": {key: text} for v in ("legacy", "fixed")}


G_SCALE_US = 131.65    # 28 x submit_bio + 8 x dispatch, the fixed column's G lines


def _cpu(ratio):
    submit = G_SCALE_US / (28 + 8 * ratio)
    return {f"raid5-{v}.toml": {"cpu.submit_bio": f'"{submit:.3f}us"',
                                "cpu.dispatch": f'"{submit * ratio:.3f}us"'}
            for v in ("legacy", "fixed")}


RAID5 = [
    Param("random_penalty", 60, 140, "us",
          "a TLC page read the drive's prefetch did not hide: tR 50-100 us (TLC NAND "
          "datasheets) plus transfer; issue 39's 60-140 us",
          lambda x: _both("models.sas-ssd-seed000.random_penalty", f'"{x:.1f}us"')),
    Param("command", 10, 40, "us", "SAS SSD command overhead (SCSI + FTL lookup), 10-40 us class",
          lambda x: _both("models.sas-ssd-seed000.command", f'"{x:.1f}us"')),
    Param("prefetch_threshold", 32, 128, "KiB",
          "the request size after which a drive keeps a stream prefetched: 32-128 KiB "
          "(unknown for the thread's drive)",
          lambda x: _both("models.sas-ssd-seed000.prefetch_threshold",
                          f'"{int(round(x / 4) * 4)}k"')),
    Param("dispatch/submit_bio", 1, 5, "x",
          "the CPU ratio the fixed G lines do not pin (one equation, 28 calls + 8 "
          "dispatches = 131.65 us); a driver dispatch costs 1-5 submit_bio calls",
          _cpu),
    Param("layout seed", 1, 9, "", "the dd buffer's allocator model (jobs/raid5-*.toml)",
          lambda x: _both("bio.contiguity.seed", str(int(round(x))))),
]


# Seed 001: the buffer layout, the elevator and the cost of a broken
# stream, none pinned by the max_sectors column (the fit).
def _bio_all(keys):
    return {f"bio-{v}.toml": dict(keys) for v in ("original", "align", "max_sectors")}


BIO = [
    Param("layout seed", 1, 9, "", "the 64 MiB buffer's allocator model (jobs/bio-*.toml)",
          lambda x: _bio_all({"bio.contiguity.seed": str(int(round(x)))})),
    Param("random_penalty", 0.5, 2, "x command",
          "a request that breaks the stream costs the device half to two commands' work "
          "(the stack's own command time; read and write alike)",
          lambda x: _bio_all({"models.ufs-seed001.random_penalty": f'"{36.49 * x:.2f}us"',
                              "models.ufs-seed001.write_random_penalty":
                                  f'"{74.81 * x:.2f}us"'})),
    Param("elevator", 0, 1, "", "none (UFS 4.0 with MCQ: several hardware queues) below 0.5, "
          "mq-deadline (one queue, the single-queue default) above",
          lambda x: _bio_all({"device.scheduler": '"none"' if x < 0.5 else '"mq-deadline"'})),
]


def bio_figures(fio) -> dict:
    """MB/s per direction and policy (the experiment's metric names) of one
    run of bio-align.fio, in device time."""
    from harness.device_time import DeviceTime
    from harness.experiments.bio_size import POLICIES
    out = {}
    for p in POLICIES:
        for rw in ("read", "write"):
            sidecar = fio.sidecars[f"stats/bio-{rw}-{p}.json"]
            out[f"{rw}.{p}_MBps"] = DeviceTime.of(sidecar).rate(
                fio.job(f"{rw}-{p}")[rw]["bw_bytes"]) / 1e6
    return out


def _run_bio(jobs_dir, params, values, workers):
    with tempfile.TemporaryDirectory(prefix="mdsplit-sweep-bio-") as tmp:
        return bands.run_settings(jobs_dir, Path(tmp), "bio-align.fio",
                                  [setting(params, v) for v in values],
                                  "harness.sweep:bio_figures", workers=workers)


# Seed 004: the two parameters the non-root legacy figure turns on, which
# the root columns (the fit) do not pin.
BFQ_TIME_SCALE = 32          # jobs/bfq-*.toml [device] time_scale
# The jitter's upper end: the Micron 9200's datasheet QD1 write latency, 21 us,
# less the model's 17.1 us without jitter (docs/reproductions/bfq.md).
BFQ_JITTER_HI_US = 3.9


def _bfq_both(key, text):
    return {f"bfq-{v}.toml": {key: text} for v in ("legacy", "fixed")}


BFQ = [
    Param("jitter", 0, BFQ_JITTER_HI_US, "us",
          "mean of the exponential extra on the drive's 4k write command (10 us + 7.1 us "
          "transfer at 577 MB/s, so a QD1 write takes 17.1 us + jitter on average). Datasheet "
          "typical QD1 4k write latencies of 2018-2020 NVMe drives: Samsung 970 EVO Plus 17 us, "
          "Intel DC P4500 20 us, Micron 9200 21 us, so jitter = 0..3.9 us; AnandTech's QD1 4k "
          "QoS of datacenter NVMe (p99.99 <= 2.5 x the mean, worst drive Intel P4510, reads) "
          "gives jitter <= 3.8 us (docs/reproductions/bfq.md, 'The drive's latency spread')",
          lambda x: _bfq_both("models.thread-nvme.jitter", f'"{x:.2f}us"')),
    Param("think time", 1.5, 5, "us",
          "the writers' cycle from a completion to the next request reaching bfq, measured on "
          "this machine (docs/reproductions/bfq.md): fio 3.33 psync 4k randwrite on /dev/null "
          "1.25-1.75 us per request (floor: fio's loop and the syscall), plus a sleeping "
          "writer's wake-up, half of perf bench sched pipe's 6.1-6.7 us round trip (ceiling; "
          "a loaded VM, slower than the thread's bare metal)",
          lambda x: {"bfq-groups.fio": {"global.thinktime": str(int(round(x * BFQ_TIME_SCALE)))}}),
]


def bfq_figures(fio) -> dict:
    """The four runs' MiB/s (the experiment's metric names) of one copy of
    bfq-groups.fio."""
    from harness.experiments import bfq as B
    names = {("root", "legacy"): "root.before_MiBps", ("root", "fixed"): "root.after_MiBps",
             ("nonroot", "legacy"): "nonroot.before_MiBps",
             ("nonroot", "fixed"): "nonroot.after_MiBps"}
    out = {}
    for (place, variant), name in names.items():
        try:
            out[name] = B.place_MiBps(fio, place, variant)
        except KeyError:          # a run of the file not in this call's sections
            pass
    return out


def _run_bfq(jobs_dir, params, values, workers):
    """Each draw: the four runs of bfq-groups.fio, each on its own (as the
    experiment runs them), figures merged per draw."""
    from harness.experiments import bfq as B
    runs = [(place, variant) for place in ("root", "nonroot") for variant in ("legacy", "fixed")]
    with tempfile.TemporaryDirectory(prefix="mdsplit-sweep-bfq-") as tmp:
        copies, args = [], []
        for i, v in enumerate(values):
            for j, (place, variant) in enumerate(runs):
                copy = Path(tmp) / f"{i:03d}-{j}"
                bands.prepare_copy(jobs_dir, copy, setting(params, v))
                args.append((str(copy), "bfq-groups.fio",
                             B.place_sections(jobs_dir, place, variant)[0],
                             "harness.sweep:bfq_figures"))
        figs = bands.run_pool("harness.bands:simulate_figures", args, workers)
    out = []
    for i in range(len(values)):
        merged = {}
        for f in figs[i * len(runs):(i + 1) * len(runs)]:
            merged.update(f)
        out.append(merged)
    return out


# Seed 003: BufferedCosts not fitted on the QD128 plateaus (`harness
# simulate of uring-buffered-ra.fio with the draw as each stack file's
# [cpu.buffered] table, the experiment's own sweep()).
def _cost(name, integer=False):
    return lambda x: {name: int(round(x))}


BUFFERED = [
    Param("readahead_ns", 0, 200, "ns",
          "perf profile (1) of forced-ra: no function of the window's path above the list's "
          "0.65 % of 5.3 us, ~6 functions: <= 0.2 us (engine/core/mm/buffered_path.h)",
          _cost("readahead_ns")),
    Param("wakeup_ns", 1500, 3000, "ns",
          "a futex / wake_up_process round trip on a 2020 bare-metal server, 1.5-3 us "
          "(jobs/machines.toml)", _cost("wakeup_ns")),
    Param("cpus", 8, 32, "", "the thread's server names no CPU: 8-32 cores of a 2020 server "
          "(io-wq workers <= 4 x cpus)", _cost("cpus")),
]


# Each draw simulates uring-buffered-ra.fio with runtime=100ms instead of its
# 500ms: the sections reach their steady state within the first few ms, and at
# the default costs the 48 figures stay within 0.50 % of the checked ones
# (mean 0.15 %), in a fifth of the time.
BUFFERED_RUNTIME = "100ms"


def buffered_figures(costs: dict) -> dict:
    """A worker: the 48 points of seed 003 on the virtual clock with the
    given BufferedCosts changes, as the experiment's metric names."""
    from harness.experiments import buffered as B
    from harness.paths import import_mdsplit
    full = dict(import_mdsplit().buffered_default_costs())
    full.update(costs)
    res = B.sweep(ROOT / "jobs", lambda *a, **k: None, full, runtime=BUFFERED_RUNTIME)
    return {f"{v}.rasync_{'on' if r else 'off'}.qd{qd}_kIOPS": x for (v, r, qd), x in res.items()}


def _run_raid5(jobs_dir, params, values, workers):
    with tempfile.TemporaryDirectory(prefix="mdsplit-sweep-raid5-") as tmp:
        return bands.run_settings(jobs_dir, Path(tmp), "raid5-split-order.fio",
                                  [setting(params, v) for v in values],
                                  "harness.experiments.raid5:run_figures", workers=workers)


def _run_buffered(jobs_dir, params, values, workers):
    costs = []
    for v in values:
        c = {}
        for p, x in zip(params, v):
            c.update(p.keys(x))
        costs.append(c)
    return bands.run_pool("harness.sweep:buffered_figures", costs, workers)


# name: (its parameters, how a list of draws runs, default draws, the
# relative tolerance of figures whose metric states none: the checks')
SWEEPS = {"raid5": (RAID5, _run_raid5, 36, 0.10), "bio-size": (BIO, _run_bio, 24, 0.10),
          "bfq": (BFQ, _run_bfq, 24, 0.10),
          "buffered": (BUFFERED, _run_buffered, 12, 0.15)}


def experiment_sweeps() -> dict:
    """{name: module} of the experiments that sweep their own range in
    their run (a module-level sweep_report(out)): `sweep NAME` and `sweep
    all` run them beside SWEEPS."""
    from harness import reproduce
    out = {}
    for n in reproduce.available():
        mod = reproduce.load_experiment(n)
        if n not in SWEEPS and callable(getattr(mod, "sweep_report", None)):
            out[n] = mod
    return out


def draws(params: list, n: int, seed: int = SEED) -> list:
    """n draws, each a value per parameter, uniform over its range (seeded)."""
    rng = random.Random(seed)
    return [[rng.uniform(p.lo, p.hi) for p in params] for _ in range(n)]


def setting(params: list, values: list) -> dict:
    out = {}
    for p, x in zip(params, values):
        for f, keys in p.keys(x).items():
            out.setdefault(f, {}).update(keys)
    return out


def sensitivity_table(params: list, values: list, runs: list, metrics: list) -> str:
    """Per figure and parameter: the least-squares slope over the draws
    times the parameter's range, as % of the figure's median (how much of
    the band that parameter moves)."""
    import statistics
    head = f"{'sensitivity: % of the median over each range':<40}" + \
        "".join(f"{p.name[:16]:>18}" for p in params)
    lines = [head]
    for m in metrics:
        ys = [r[m] for r in runs if m in r]
        if len(ys) != len(runs) or len(ys) < 3:
            continue
        med = statistics.median(ys)
        cells = []
        for k, p in enumerate(params):
            xs = [v[k] for v in values]
            mx, my = statistics.fmean(xs), statistics.fmean(ys)
            sxx = sum((x - mx) ** 2 for x in xs)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
            cells.append(100 * slope * (p.hi - p.lo) / med if med else 0.0)
        lines.append(f"{m:<40}" + "".join(f"{c:>+18.1f}" for c in cells))
    return "\n".join(lines)


def verdict_rows(name: str, b: dict, tolerance: float) -> list:
    """[(metric, thread, band, verdict, basis)] for each thread figure of
    the sweep's bands b (jobs/expectations.toml section name)."""
    from harness import expectations as E
    section = E.load()[name]
    basis = E.metric_bases(section)
    rows = []
    for metric, band in b.items():
        m = section.metrics.get(metric)
        if m is None or m.thread is None:
            continue
        rows.append((metric, m.thread, band,
                     bands.verdict(band, m.thread,
                                   m.tolerance or (None if m.abs_tolerance else tolerance),
                                   m.abs_tolerance),
                     basis.get(metric, "prediction")))
    return rows


def basis_band_table(title: str, rows: list) -> str:
    """bands.band_table of verdict_rows, each figure that is not a
    prediction marked with its basis."""
    return bands.band_table(title, [(m + (f" ({basis})" if basis != "prediction" else ""),
                                     t, band, v) for m, t, band, v, basis in rows])


def prediction_verdicts(rows: list) -> str:
    """"predictions over the sweep's bands: P PASS, M MISS, U not
    determined (of N)" for verdict_rows' predictions."""
    v = [r[3] for r in rows if r[4] == "prediction"]
    passed = sum(1 for x in v if x == "PASS")
    missed = sum(1 for x in v if x.startswith("MISS"))
    return (f"predictions over the sweep's bands: {passed} PASS, {missed} MISS, "
            f"{len(v) - passed - missed} not determined (of {len(v)})")


def sweep(name: str, jobs_dir: Path = None, n: int = None, workers: int = None,
          out=sys.stdout) -> tuple:
    """Runs the sweep, prints the parameters, the band table and the
    sensitivities; returns ({metric: (median, p10, p90)}, verdict_rows)."""
    params, runner, default_n, tolerance = SWEEPS[name]
    n = n or default_n
    jobs_dir = Path(jobs_dir or ROOT / "jobs")
    values = draws(params, n)
    t0 = time.monotonic()
    runs = runner(jobs_dir, params, values, workers)
    wall = time.monotonic() - t0
    b = bands.bands(runs)
    print(f"== sweep {name}: {n} draws on the virtual clock (--no-data), {wall:.0f} s wall",
          file=out)
    for p in params:
        print(f"  {p.name}: {p.lo:g}..{p.hi:g} {p.unit} ({p.source})", file=out)
    rows = verdict_rows(name, b, tolerance)
    print(basis_band_table("each thread figure over the draws: median, 10-90 % band (a "
                           "figure that is not a prediction is marked with its basis)", rows),
          file=out)
    print(prediction_verdicts(rows), file=out)
    print(sensitivity_table(params, values, runs, [r[0] for r in rows]), file=out)
    return b, rows
