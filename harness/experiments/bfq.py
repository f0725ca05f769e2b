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
    progress("fio bfq-groups.fio (4 runs of 8 jobs)")
    fio = run_fio(jobs_dir / "bfq-groups.fio")
    result.raw["fio"] = fio.fio
    lines = [f"{'':<26}{'ours MiB/s':>12}{'thread MiB/s':>14}{'idle periods':>14}{'injections':>12}"]
    series = {}
    for place, label in PLACES:
        lines.append(f"running fio on {label}")
        for variant, when, kernel in VARIANTS:
            prefix = f"{place}-{variant}-"
            sidecar = fio.sidecars[f"stats/bfq-{place}-{variant}.json"]
            scale = sidecar.time_scale
            mibps = place_MiBps(fio, place, variant)
            bfq = sidecar.members[0].get("bfq", {})
            idles = bfq.get("idle_periods", 0)
            injections = bfq.get("injected", 0)
            lines.append(f"  {kernel + ':':<24}{mibps:>12.0f}{THREAD[(place, variant)]:>14}"
                         f"{idles:>14}{injections:>12}")
            result.metrics[f"{place}.{when}_MiBps"] = mibps
            result.metrics[f"{place}.{when}_idle_periods"] = idles
            numbers = [i + 1 for i, j in enumerate(fio.jobs) if j["jobname"].startswith(prefix)]
            series[f"{place} {when}"] = _bandwidth_over_time(jobs_dir, numbers, scale)
    result.tables.append("\n".join(lines))
    m = result.metrics
    result.tables.append(
        f"non-root after/before: {m['nonroot.after_MiBps'] / m['nonroot.before_MiBps']:.2f} "
        f"(thread: 550/349 = 1.58); root after/before: "
        f"{m['root.after_MiBps'] / m['root.before_MiBps']:.2f} (thread: 1.00). "
        "MiB/s in device time (fio's figure x time_scale).")
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


def place_MiBps(fio, place: str, variant: str) -> float:
    """The total MiB/s of one run's 8 writers in device time (fio's figure
    x the stack's time_scale)."""
    jobs = [j for j in fio.jobs if j["jobname"].startswith(f"{place}-{variant}-")]
    scale = fio.sidecars[f"stats/bfq-{place}-{variant}.json"].time_scale
    return sum(j["write"]["bw_bytes"] for j in jobs) / 2**20 * scale


def run_variant(variant: str = "fixed", progress=None, rounds: int = 1) -> dict:
    """Only the root and non-root runs of one variant of bfq-groups.fio
    (16 jobs instead of 32), in a scratch copy of jobs/ removed afterwards,
    `rounds` times (root first, then non-root first, ...): {"root": MiB/s,
    "nonroot": MiB/s} as run() reports them (medians over the rounds), and
    "rounds": {place: [MiB/s per round]}. For the kernel reference's
    comparison (`python3 -m harness reference bfq`)."""
    import shutil
    import statistics
    import tempfile
    from harness.reference import read_fio_job, write_fio_job
    from harness.reproduce import prepare_jobs
    per = {p: [] for p, _ in PLACES}
    with tempfile.TemporaryDirectory(prefix="mdsplit-bfq-") as tmp:
        jobs_dir = prepare_jobs(Path(tmp))
        sections = read_fio_job((jobs_dir / "bfq-groups.fio").read_text())
        glob = [(n, o) for n, o in sections if n == "global"]
        runs = {p: [(n, o) for n, o in sections if n.startswith(f"{p}-{variant}-")]
                for p, _ in PLACES}
        try:
            for r in range(rounds):
                order = [p for p, _ in PLACES]
                if r % 2:
                    order.reverse()
                job = jobs_dir / f"bfq-groups-{variant}.fio"
                job.write_text(write_fio_job(glob + [s for p in order for s in runs[p]],
                                             f"bfq-groups.fio, the {variant} runs only"))
                if progress:
                    progress(f"emulator: fio {job.name} ({' and '.join(order)} {variant}, 2 runs "
                             f"of 8 jobs)" + (f", round {r + 1}/{rounds}" if rounds > 1 else ""))
                fio = run_fio(job)
                for p in order:
                    per[p].append(place_MiBps(fio, p, variant))
        finally:
            shutil.rmtree(jobs_dir, ignore_errors=True)
    out = {p: statistics.median(v) for p, v in per.items()}
    out["rounds"] = per
    return out


def _bandwidth_over_time(jobs_dir: Path, job_numbers: list, scale: float) -> list:
    """Sum of the jobs' bandwidth logs (write_bw_log=logs/bfq gives
    logs/bfq_bw.<job number>.log), in device time: t / scale, MiB/s x scale."""
    from harness import plots
    total = {}
    for n in job_numbers:
        log = jobs_dir / "logs" / f"bfq_bw.{n}.log"
        if log.exists():
            for t, v in plots.bw_log_series(log, ddir=1):
                key = round(t, 1)
                total[key] = total.get(key, 0.0) + v
    return [(t / scale, v * scale) for t, v in sorted(total.items())]
