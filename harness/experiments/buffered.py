"""Seed 003: io_uring async buffered 4k random reads with readahead off, QD
sweep, per variant x rasync.

The sweep runs the core on the virtual clock, charging each step of the
read path (engine/core/buffered_io.h) what it was measured to cost on this
machine just before (mdsplit.measure_buffered_costs: the real page cache,
copies, stack submission to io_uring, hand-offs to a sleeping thread; fio's
own per-I/O cost from its null engine), on a modelled machine whose io-wq
workers have CPUs of their own. The real-clock job jobs/uring-buffered-ra.fio
is also run at a few depths: on a 2-CPU machine the workers share the
submitter's two CPUs, which is not what the thread measured."""
import json
import subprocess
from pathlib import Path

from harness.experiment import ExperimentResult
from harness.fio_runner import FioError, fio_environment, run_fio
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
# The real-clock points run with fio (2 s each).
REAL_VARIANTS = ["c8d317aa", "forced-ra"]
REAL_DEPTHS = [1, 32, 128]


def kernel_qd1_note(db=None) -> str:
    """The kernel's own QD1 gap on this machine, from the newest `reference
    buffered` run in the history that has io-wq figures: its io-wq path
    (force_async=1) against its inline / page-wait path."""
    how = "`python3 -m harness reference buffered` measures it"
    try:
        from harness.history import History, db_path, machine_info
        if not db_path(db).exists():
            return f"The kernel's own QD1 gap on this machine: not measured yet ({how})."
        me = machine_info()
        with History(db) as h:
            for run in h.runs("kernel-buffered", source="kernel", hostname=me["hostname"]):
                k, kw = run.metrics.get("kernel.qd1_iops"), run.metrics.get("kernel_iowq.qd1_iops")
                if k and kw and run.kernel == me["kernel"]:
                    return (f"The kernel itself on this machine (reference run {run.run_id}, "
                            f"{run.time}): io-wq / inline+page-wait at QD1 = {kw / k:.2f} "
                            f"({kw / 1000:.1f} vs {k / 1000:.1f} kIOPS).")
    except Exception as e:  # the history is context here, never a reason to fail
        return f"The kernel's own QD1 gap: history unreadable ({e})."
    return f"The kernel's own QD1 gap on this machine: not measured yet ({how})."


def fio_ns_per_io() -> int:
    """fio's own cost per I/O on this machine: fio's null engine, 4k random
    reads at iodepth 1, for one second."""
    cmd = ["fio", "--name=fio-cost", "--ioengine=null", "--rw=randread", "--bs=4k",
           "--size=1g", "--iodepth=1", "--time_based=1", "--runtime=1",
           "--output-format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=fio_environment())
    iops = json.loads(out.stdout[out.stdout.find("{"):])["jobs"][0]["read"]["iops"]
    return int(1e9 / iops)


COST_ROUNDS = 3


def least_costs(runs: list) -> dict:
    """The least of each cost over measurement rounds. bio_submit and
    bio_page are not measured but split out of the times of a 1-page and an
    8-page read (BufferedCostProbe: one = submit + page, eight = submit +
    8 x page): the least of each of those two times is taken, and split again."""
    costs = {k: min(r[k] for r in runs) if k.endswith("_ns") else runs[0][k] for k in runs[0]}
    if "bio_submit_ns" in costs:
        one = min(r["bio_submit_ns"] + r["bio_page_ns"] for r in runs)
        eight = min(r["bio_submit_ns"] + 8 * r["bio_page_ns"] for r in runs)
        costs["bio_page_ns"] = max(0, (eight - one) // 7)
        costs["bio_submit_ns"] = one - costs["bio_page_ns"]
    return costs


def measured_costs(jobs_dir: Path, progress, rounds: int = COST_ROUNDS) -> dict:
    """The buffered read steps' costs measured on this machine (ns), with
    fio's per-I/O cost split between submission and completion as in
    BufferedCosts' defaults (700 : 300). Each step is measured `rounds`
    times (each a median over many calls) and the least is kept: another
    tenant of the host only ever adds to a step's time (seen here: the punt
    measured 2.7 us in one run and 7.1 us in a run ten minutes later), and
    the sweep's shape at high depth turns on differences of a few hundred ns."""
    mdsplit = import_mdsplit()
    progress(f"measuring what each step of the read path costs on this machine "
             f"({rounds} rounds, least of each)")
    runs = [mdsplit.measure_buffered_costs(scratch_dir=str(jobs_dir)) for _ in range(rounds)]
    costs = least_costs(runs)
    fio = fio_ns_per_io()
    costs["fio_submit_ns"] = fio * 7 // 10
    costs["fio_complete_ns"] = fio - costs["fio_submit_ns"]
    return costs


def sweep(jobs_dir: Path, progress, costs: dict = None, depths=DEPTHS) -> dict:
    """kIOPS per (variant, rasync, iodepth) on the virtual clock, with
    `costs` (BufferedCosts' defaults when None)."""
    mdsplit = import_mdsplit()
    results = {}
    for v in VARIANTS:
        text = (jobs_dir / f"buffered-{v}.toml").read_text().replace(
            'model = "nvme"', 'model = "nvme"\nbackend = "null"')
        for rasync in (True, False):
            progress(f"{v} rasync={'on' if rasync else 'off'}")
            for qd in depths:
                sim = mdsplit.BufferedSimulation(text, base_dir=str(jobs_dir), variant=v,
                                                 rasync=rasync, ra_kb=0)
                if costs:
                    sim.set_costs(costs)
                r = sim.run_workload("randread", 4096, iodepth=qd, total=IOS_PER_POINT * 4096)
                results[(v, rasync, qd)] = r["iops"] / 1000
    return results


def real_clock(jobs_dir: Path, progress) -> dict:
    """kIOPS of jobs/uring-buffered-ra.fio's real-clock runs at REAL_DEPTHS."""
    names = [f"{v}-{'rasync' if r else 'norasync'}-qd{qd}"
             for v in REAL_VARIANTS for r in (True, False) for qd in REAL_DEPTHS]
    progress(f"fio uring-buffered-ra.fio, {len(names)} of its runs (real clock)")
    fio = run_fio(jobs_dir / "uring-buffered-ra.fio", args=[f"--section={n}" for n in names])
    out = {}
    for v in REAL_VARIANTS:
        for r in (True, False):
            for qd in REAL_DEPTHS:
                job = fio.job(f"{v}-{'rasync' if r else 'norasync'}-qd{qd}")
                out[(v, r, qd)] = job["read"]["iops"] / 1000
    return out


def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult:
    result = ExperimentResult(NAME)
    costs = measured_costs(jobs_dir, progress)
    fitted = import_mdsplit().buffered_default_costs()
    lines = ["What each step costs on this machine (ns), measured now; the thread-fitted "
             "defaults of BufferedCosts beside them",
             f"{'step':<18}{'measured':>10}{'fitted':>10}"]
    for k, v in costs.items():
        if k.endswith("_ns") and k != "dirty_page_ns":
            lines.append(f"{k[:-3]:<18}{v:>10}{fitted[k]:>10}")
            result.metrics[f"cost.{k}"] = v
    lines.append(f"modelled CPUs: {costs['cpus']} (io-wq workers <= min(iodepth, "
                 f"{4 * costs['cpus']}), each on a CPU of its own)")
    result.tables.append("\n".join(lines))
    ours = sweep(jobs_dir, progress, costs)
    cols = [(v, r) for v in VARIANTS for r in (True, False)]
    head = f"{'QD':>4}" + "".join(f"{v + (' ra' if r else ' nora'):>20}" for v, r in cols)
    lines = ["kIOPS on the virtual clock with the measured costs (thread in brackets; the "
             "thread has no pre-c8d317aa column)", head]
    for i, qd in enumerate(DEPTHS):
        row = f"{qd:>4}"
        for v, r in cols:
            theirs = THREAD.get((v, r))
            cell = f"{ours[(v, r, qd)]:.1f}" + (f" [{theirs[i]:g}]" if theirs else "")
            row += f"{cell:>20}"
            result.metrics[f"{v}.rasync_{'on' if r else 'off'}.qd{qd}_kIOPS"] = ours[(v, r, qd)]
        lines.append(row)
    result.tables.append("\n".join(lines))
    # At depth 1 the worker paths pay a punt and two wake-ups (the worker's
    # for the work, then for the page) that the callback path does not.
    extra_us = (costs["punt_ns"] + 2 * costs["wakeup_ns"]) / 1000
    read_us = 1000 / ours[("c8d317aa", True, 1)]
    result.tables.append(
        f"QD1: the worker paths add a punt and two wake-ups, {extra_us:.1f} us measured here, to a "
        f"{read_us:.0f} us read ({100 * extra_us / read_us:.0f}%); in the thread the columns "
        "differ by 4.5 us (92.6 vs 97.1 us, 5%). A wake-up of a sleeping thread costs "
        f"{costs['wakeup_ns'] / 1000:.1f} us here (fitted default: {fitted['wakeup_ns'] / 1000:.1f}). "
        "Here pre-c8d317aa nora (every read punted) / forced-ra ra = "
        f"{ours[('pre-c8d317aa', False, 1)] / ours[('forced-ra', True, 1)]:.2f}. "
        + kernel_qd1_note())
    # The same QD1 points with the thread-fitted defaults (a bare-metal
    # machine's wake-ups): the check on them says whether the model gives the
    # thread's QD1 on the thread's kind of machine.
    bare = sweep(jobs_dir, progress, None, depths=[1])
    cells = []
    for v, r in [(v, r) for v in VARIANTS for r in (True, False)]:
        key = f"{v}.rasync_{'on' if r else 'off'}.qd1_kIOPS"
        result.metrics["fitted." + key] = bare[(v, r, 1)]
        cells.append(f"{v} {'ra' if r else 'nora'} {bare[(v, r, 1)]:.1f}")
    result.tables.append("QD1 with the thread-fitted costs instead (wake-up "
                         f"{fitted['wakeup_ns'] / 1000:.1f} us), kIOPS: " + ", ".join(cells))
    try:
        real = real_clock(jobs_dir, progress)
    except FioError as e:  # the virtual sweep stands without it; the failure is shown
        real = {}
        result.tables.append(f"real-clock runs failed: {e}")
    if real:
        rcols = [(v, r) for v in REAL_VARIANTS for r in (True, False)]
        lines = ["kIOPS on the real clock (fio uring-buffered-ra.fio on this machine, "
                 f"{_cpus()} CPUs: the workers share them with the submitter)",
                 f"{'QD':>4}" + "".join(f"{v + (' ra' if r else ' nora'):>20}" for v, r in rcols)]
        for qd in REAL_DEPTHS:
            lines.append(f"{qd:>4}" + "".join(f"{real[(v, r, qd)]:>20.1f}" for v, r in rcols))
            for v, r in rcols:
                result.metrics[f"real.{v}.rasync_{'on' if r else 'off'}.qd{qd}_kIOPS"] = \
                    real[(v, r, qd)]
        result.tables.append("\n".join(lines))
    try:
        from harness import plots
        path = out_dir / "buffered-iops-vs-qd.png"
        series = {f"{v} rasync {'on' if r else 'off'}": [(qd, ours[(v, r, qd)]) for qd in DEPTHS]
                  for v, r in cols}
        thread = {f"{v} rasync {'on' if r else 'off'}": list(zip(DEPTHS, THREAD[(v, r)]))
                  for v, r in cols if (v, r) in THREAD}
        plots.line_plot(path, series, xlabel="iodepth", ylabel="kIOPS", logx=True,
                        reference=thread,
                        title="io_uring buffered 4k randread, readahead off (virtual clock, "
                              "measured costs)")
        result.figures.append(path.name)
    except ImportError:
        pass
    return result


def _cpus() -> int:
    import os
    return len(os.sched_getaffinity(0))
