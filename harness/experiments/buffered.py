"""Seed 003: io_uring async buffered 4k random reads with readahead off, QD
sweep, per variant x rasync. The table comes from the core on the virtual
clock (deterministic: the per-step costs of engine/core/buffered_io.h); the
job file jobs/uring-buffered-ra.fio runs the same sweep in real fio."""
from pathlib import Path

from harness.experiment import ExperimentResult
from harness.paths import import_mdsplit

NAME = "buffered"
TITLE = "io_uring buffered 4k randread, readahead off, QD 1..128 (virtual clock, nvme)"
SEEDS = ["003_9641b861c116c450.txt"]
VARIANTS = ["pre-c8d317aa", "c8d317aa", "forced-ra"]
DEPTHS = [1, 2, 4, 8, 16, 32, 64, 128]
# The thread's table (seed 003, kIOPS): "with new fix code(force readahead)"
# and "with mainline code(the fix code in commit c8d317aa1887...)".
THREAD = {
    ("forced-ra", True): [10.8, 21.2, 41.1, 76.1, 133, 169, 176, 187],
    ("forced-ra", False): [10.3, 20.1, 39.1, 72.2, 126, 147, 160, 156],
    ("c8d317aa", True): [10.8, 21.4, 41.3, 76.6, 134, 170, 178, 195],
    ("c8d317aa", False): [10.4, 20.2, 39.8, 74.2, 131, 181, 246, 315],
}
IOS_PER_POINT = 20000


def sweep(jobs_dir: Path, progress) -> dict:
    mdsplit = import_mdsplit()
    results = {}
    for v in VARIANTS:
        text = (jobs_dir / f"buffered-{v}.toml").read_text().replace(
            'model = "nvme"', 'model = "nvme"\nbackend = "null"')
        for rasync in (True, False):
            progress(f"{v} rasync={'on' if rasync else 'off'}")
            for qd in DEPTHS:
                sim = mdsplit.BufferedSimulation(text, base_dir=str(jobs_dir), variant=v,
                                                 rasync=rasync, ra_kb=0)
                r = sim.run_workload("randread", 4096, iodepth=qd, total=IOS_PER_POINT * 4096)
                results[(v, rasync, qd)] = r["iops"] / 1000
    return results


def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult:
    result = ExperimentResult(NAME)
    ours = sweep(jobs_dir, progress)
    cols = [(v, r) for v in VARIANTS for r in (True, False)]
    head = f"{'QD':>4}" + "".join(f"{v + (' ra' if r else ' nora'):>20}" for v, r in cols)
    lines = ["kIOPS, ours (thread in brackets; the thread has no pre-c8d317aa column)", head]
    for i, qd in enumerate(DEPTHS):
        row = f"{qd:>4}"
        for v, r in cols:
            theirs = THREAD.get((v, r))
            cell = f"{ours[(v, r, qd)]:.1f}" + (f" [{theirs[i]:g}]" if theirs else "")
            row += f"{cell:>20}"
            result.metrics[f"{v}.rasync_{'on' if r else 'off'}.qd{qd}_kIOPS"] = ours[(v, r, qd)]
        lines.append(row)
    result.tables.append("\n".join(lines))
    result.tables.append(
        "Virtual clock: the submitter and io-wq workers are modelled CPUs with the per-step costs\n"
        "of engine/core/buffered_io.h (fitted to the thread's table, so the shape is by\n"
        "construction); the real-clock fio job is jobs/uring-buffered-ra.fio.")
    try:
        from harness import plots
        path = out_dir / "buffered-iops-vs-qd.png"
        series = {f"{v} rasync {'on' if r else 'off'}": [(qd, ours[(v, r, qd)]) for qd in DEPTHS]
                  for v, r in cols}
        plots.line_plot(path, series, xlabel="iodepth", ylabel="kIOPS",
                        title="io_uring buffered 4k randread, readahead off")
        result.figures.append(path.name)
    except ImportError:
        pass
    return result
