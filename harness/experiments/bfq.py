"""Seed 004: bfq idling when a non-root group is active; 8 psync 4k random
writers on an NVMe drive, root vs non-root group, legacy vs fixed counting."""
from pathlib import Path

from harness.experiment import ExperimentResult
from harness.fio_runner import run_fio

NAME = "bfq"
TITLE = "BFQ group idling (8 x psync 4k randwrite, nvme), root/non-root x legacy/fixed"
SEEDS = ["004_6558d1061db502df.txt"]
PLACES = [("root", "root cgroup"), ("nonroot", "non-root cgroup")]
VARIANTS = [("legacy", "before", "v5.18-rc1"), ("fixed", "after", "v5.18-rc1-patched")]
# The thread's "test result" (seed 004): MiB/s.
THREAD = {("root", "legacy"): 550, ("root", "fixed"): 550,
          ("nonroot", "legacy"): 349, ("nonroot", "fixed"): 550}


def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult:
    result = ExperimentResult(NAME)
    lines = [f"{'':<26}{'ours MiB/s':>12}{'thread MiB/s':>14}{'idle periods':>14}{'injections':>12}"]
    series = {}
    result.raw["fio"] = {}
    for place, label in PLACES:
        lines.append(f"running fio on {label}")
        for variant, when, kernel in VARIANTS:
            progress(f"fio bfq-groups.fio, the {place}-{variant} run (8 jobs)")
            fio, delays = run_place(jobs_dir, place, variant)
            result.raw["fio"][f"{place}-{variant}"] = fio.fio
            sidecar = fio.sidecars[f"stats/bfq-{place}-{variant}.json"]
            mibps = place_MiBps(fio, place, variant)
            bfq = sidecar.members[0].get("bfq", {})
            idles = bfq.get("idle_periods", 0)
            injections = bfq.get("injected", 0)
            lines.append(f"  {kernel + ':':<24}{mibps:>12.0f}{THREAD[(place, variant)]:>14}"
                         f"{idles:>14}{injections:>12}")
            result.metrics[f"{place}.{when}_MiBps"] = mibps
            result.metrics[f"{place}.{when}_idle_periods"] = idles
            # The run's bandwidth logs, before the next run's fio rewrites them.
            series[f"{place} {when}"] = _bandwidth_over_time(jobs_dir, delays, sidecar.time_scale)
    result.tables.append("\n".join(lines))
    m = result.metrics
    result.tables.append(
        f"non-root after/before: {m['nonroot.after_MiBps'] / m['nonroot.before_MiBps']:.2f} "
        f"(thread: 550/349 = 1.58); root after/before: "
        f"{m['root.after_MiBps'] / m['root.before_MiBps']:.2f} (thread: 1.00). "
        "MiB/s in device time (fio's figure x time_scale). Each run is its own fio "
        "(--section), as the thread ran one fio per kernel.")
    try:
        from harness import plots
        path = out_dir / "bfq-bandwidth.png"
        plots.time_series(path, {k: v for k, v in series.items() if v},
                          title="Total write bandwidth of the 8 jobs over time (device time)")
        result.figures.append(path.name)
        path = out_dir / "bfq-throughput.png"
        plots.bar_chart(path, {f"{p} {w}": m[f"{p}.{w}_MiBps"] for p, _ in PLACES for _, w, _ in VARIANTS},
                        ylabel="MiB/s", title="BFQ: 8 sync writers",
                        reference={f"{p} {w}": THREAD[(p, v)] for p, _ in PLACES for v, w, _ in VARIANTS})
        result.figures.append(path.name)
    except ImportError:
        pass
    return result


def run_place(jobs_dir: Path, place: str, variant: str):
    """Runs one of bfq-groups.fio's four runs (its 8 [place-variant-*]
    sections) as a fio of its own: fio counts startdelay from its own start,
    so every run is staggered as the first one of a whole-file run is.
    Returns (fio result, each job's startdelay in seconds)."""
    from harness.reference import fio_duration_ms, read_fio_job
    job = jobs_dir / "bfq-groups.fio"
    sections = [(n, dict(o)) for n, o in read_fio_job(job.read_text())
                if n.startswith(f"{place}-{variant}-")]
    if not sections:
        raise ValueError(f"{job}: no [{place}-{variant}-*] jobs")
    delays = [fio_duration_ms(o.get("startdelay") or "0") / 1000 for _, o in sections]
    return run_fio(job, args=[f"--section={n}" for n, _ in sections]), delays


def place_MiBps(fio, place: str, variant: str) -> float:
    """The total MiB/s of one run's 8 writers in device time (fio's figure
    x the stack's time_scale)."""
    jobs = [j for j in fio.jobs if j["jobname"].startswith(f"{place}-{variant}-")]
    scale = fio.sidecars[f"stats/bfq-{place}-{variant}.json"].time_scale
    return sum(j["write"]["bw_bytes"] for j in jobs) / 2**20 * scale


def run_variant(variant: str = "fixed", progress=None, rounds: int = 1) -> dict:
    """Only the root and non-root runs of one variant of bfq-groups.fio, in
    a scratch copy of jobs/ removed afterwards, `rounds` times (root first,
    then non-root first, ...): {"root": MiB/s, "nonroot": MiB/s} as run()
    reports them (medians over the rounds), and "rounds": {place: [MiB/s
    per round]}. For the kernel reference's comparison (`python3 -m harness
    reference bfq`)."""
    import shutil
    import statistics
    import tempfile
    from harness.reproduce import prepare_jobs
    per = {p: [] for p, _ in PLACES}
    with tempfile.TemporaryDirectory(prefix="mdsplit-bfq-") as tmp:
        jobs_dir = prepare_jobs(Path(tmp))
        try:
            for r in range(rounds):
                order = [p for p, _ in PLACES]
                if r % 2:
                    order.reverse()
                for p in order:
                    if progress:
                        progress(f"emulator: fio bfq-groups.fio, the {p}-{variant} run (8 jobs)"
                                 + (f", round {r + 1}/{rounds}" if rounds > 1 else ""))
                    fio, _ = run_place(jobs_dir, p, variant)
                    per[p].append(place_MiBps(fio, p, variant))
        finally:
            shutil.rmtree(jobs_dir, ignore_errors=True)
    out = {p: statistics.median(v) for p, v in per.items()}
    out["rounds"] = per
    return out


def _bandwidth_over_time(jobs_dir: Path, delays_s: list, scale: float,
                         interval_s: float = 0.25) -> list:
    """Sum of one run's bandwidth logs (write_bw_log=logs/bfq gives
    logs/bfq_bw.<job number>.log, log_avg_msec=250), in device time: t /
    scale, MiB/s x scale. A job's log times count from its own start, so each
    is shifted by the job's startdelay and binned by the log interval."""
    from harness import plots
    total = {}
    for n, delay in enumerate(delays_s, start=1):
        log = jobs_dir / "logs" / f"bfq_bw.{n}.log"
        if log.exists():
            for t, v in plots.bw_log_series(log, ddir=1):
                key = round((t + delay) / interval_s)
                total[key] = total.get(key, 0.0) + v
    return [(k * interval_s / scale, v * scale) for k, v in sorted(total.items())]
