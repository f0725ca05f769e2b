"""Seed 003: io_uring async buffered 4k random reads with readahead off, QD
sweep, per variant x rasync.

The checked figures come from `harness simulate` of the shipped job file
jobs/uring-buffered-ra.fio (its 48 sections, one per variant x rasync x
iodepth), which runs the thread's machine as a stated model,
[machines.seed003] in jobs/machines.toml (each step's CPU cost, the io-wq
CPUs, the NVMe drive with its dies) on the virtual clock: the same figures on
every machine and every run. Beside them, labelled "this machine"
(machine.* metrics, never checked against the thread): the same sweep with
each step's cost measured here just before (mdsplit.measure_buffered_costs:
the real page cache, copies, stack submission to io_uring, hand-offs to a
sleeping thread; fio's own per-I/O cost from its null engine), and the
real-clock job jobs/uring-buffered-ra.fio at a few depths: on a 2-CPU VM the
workers share the submitter's two CPUs and a wake-up costs 3-4 x a bare-metal
one, which is not what the thread measured."""
import json
import re
import subprocess
import tomllib
from pathlib import Path

from harness.experiment import (ExperimentResult, clock_agreement_table, engine_under_test,
                                simulate_copy, use_engine_under_test)
from harness.fio_runner import FioError, launch_fio, run_fio
from harness.jobfile import parse_job_file
from harness.paths import import_mdsplit

NAME = "buffered"
EXPECTATIONS = "buffered"  # its section of jobs/expectations.toml
JOB = "uring-buffered-ra.fio"  # in jobs/
TITLE = "io_uring buffered 4k randread, readahead off, QD 1..128 (virtual clock, seed003 machine)"
SEEDS = ["003_9641b861c116c450.txt"]
ORDER = 40  # `reproduce all` runs the experiments by ORDER, then name
DURATION = (115.0, 11)  # (s, steps) when the history has no run (2-core VM)
VARIANTS = ["pre-c8d317aa", "c8d317aa", "forced-ra"]
DEPTHS = [1, 2, 4, 8, 16, 32, 64, 128]
# `reference buffered`: its options (dest: default) and --emulator's words
REFERENCE_OPTIONS = {"depths": DEPTHS, "runtime": None, "size_text": "4g", "target": "auto"}
EMULATOR_WORDS = ("none",)
# The thread's table (seed 003, kIOPS): "with new fix code(force readahead)"
# and "with mainline code(the fix code in commit c8d317aa1887...)".
THREAD = {
    ("forced-ra", True): [10.8, 21.2, 41.1, 76.1, 133, 169, 176, 187],
    ("forced-ra", False): [10.3, 20.1, 39.1, 72.2, 126, 147, 160, 156],
    ("c8d317aa", True): [10.9, 21.6, 41.0, 79.7, 141, 169, 190, 195],
    ("c8d317aa", False): [10.2, 20.2, 39.9, 75.9, 138, 237, 316, 315],
}
# The thread's machine ([machines.seed003] in jobs/machines.toml, where each
# number's origin and the fit are stated): the CPU costs are BufferedCosts'
# defaults, the drive the stack files' timing model (jobs/models.toml).
MACHINE = "seed003"


def thread_machine(jobs_dir: Path) -> dict:
    """[machines.seed003]: its description, its CPU costs (the engine's
    BufferedCosts defaults) and its drive (the preset it names in
    jobs/models.toml), each read from the one place it is stated."""
    with open(jobs_dir / "machines.toml", "rb") as f:
        machine = dict(tomllib.load(f)["machines"][MACHINE])
    with open(jobs_dir / "models.toml", "rb") as f:
        machine["device"] = tomllib.load(f)["models"][machine["model"]]
    machine["costs"] = import_mdsplit().buffered_default_costs()
    return machine


# The real-clock points run with fio (the job file's runtime each).
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
        with History(db, mode="ro") as h:
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
    out = launch_fio(cmd)
    if out.returncode != 0:
        raise FioError(f"fio (null engine, for fio's own cost) exited {out.returncode}: "
                       f"{out.stderr.strip()[-300:]}")
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


def section(v: str, rasync: bool, qd: int) -> str:
    """The job file's section for one point of the table."""
    return f"{v}-{'rasync' if rasync else 'norasync'}-qd{qd}"


def costs_toml(costs: dict) -> str:
    """BufferedCosts (a dict as mdsplit.buffered_default_costs() gives it:
    STEP_ns and cpus) as a stack file's [cpu.buffered] table."""
    lines = ["[cpu.buffered]"]
    for k, v in costs.items():
        lines.append(f'{k[:-3]} = "{int(v)}ns"' if k.endswith("_ns") else f"{k} = {int(v)}")
    return "\n".join(lines) + "\n"


def stack_files(jobs_dir: Path) -> list:
    """The stack files the job file names (mdsplit_config), in order."""
    jobs = parse_job_file(Path(jobs_dir) / JOB).jobs
    return list(dict.fromkeys(j.options["mdsplit_config"] for j in jobs))


def simulated(jobs_dir: Path, out_dir: Path, progress, costs: dict = None, depths=DEPTHS,
              runtime: str = None):
    """`harness simulate` of the job file's sections at `depths` (members as
    null devices of their size: the virtual clock never waits on the host's
    storage, so the figures are the same), from a copy under out_dir; with
    `costs`, each stack file of the copy gets them as its [cpu.buffered]
    table; with `runtime`, the copy's [global] runtime= is that. Returns
    ({(variant, rasync, qd): kIOPS}, the FioResult)."""
    names = [section(v, r, qd) for v in VARIANTS for r in (True, False) for qd in depths]
    progress(f"simulate {JOB}, {len(names)} of its sections (virtual clock"
             + (", this machine's costs)" if costs else ": the checked figures)"))
    append = {name: costs_toml(costs) for name in stack_files(jobs_dir)} if costs else None
    fio = simulate_copy(jobs_dir, JOB, out_dir, sections=names, data=False, append=append,
                        options={"global.runtime": runtime} if runtime else None)
    ours = {(v, r, qd): fio.job(section(v, r, qd))["read"]["iops"] / 1000
            for v in VARIANTS for r in (True, False) for qd in depths}
    return ours, fio


def sweep(jobs_dir: Path, progress, costs: dict = None, depths=DEPTHS,
          runtime: str = None) -> dict:
    """kIOPS per (variant, rasync, iodepth) on the virtual clock, on the
    thread's drive, with `costs` (BufferedCosts' defaults when None): the
    job file's sections (runtime= `runtime` when given), simulated in a
    scratch directory."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="mdsplit-buffered-") as tmp:
        return simulated(jobs_dir, Path(tmp), progress, costs, depths, runtime)[0]


def real_clock(jobs_dir: Path, progress):
    """kIOPS of jobs/uring-buffered-ra.fio's real-clock runs at REAL_DEPTHS,
    and the FioResult."""
    names = [section(v, r, qd) for v in REAL_VARIANTS for r in (True, False)
             for qd in REAL_DEPTHS]
    progress(f"fio uring-buffered-ra.fio, {len(names)} of its runs (real clock)")
    fio = run_fio(use_engine_under_test(jobs_dir / JOB), args=[f"--section={n}" for n in names])
    out = {}
    for v in REAL_VARIANTS:
        for r in (True, False):
            for qd in REAL_DEPTHS:
                out[(v, r, qd)] = fio.job(section(v, r, qd))["read"]["iops"] / 1000
    return out, fio


COLUMNS = [(v, r) for v in VARIANTS for r in (True, False)]


def column_name(v: str, r: bool) -> str:
    return f"{v}.rasync_{'on' if r else 'off'}"


def sweep_table(title: str, ours: dict, with_thread: bool) -> str:
    head = f"{'QD':>4}" + "".join(f"{v + (' ra' if r else ' nora'):>22}" for v, r in COLUMNS)
    lines = [title, head]
    for i, qd in enumerate(DEPTHS):
        row = f"{qd:>4}"
        for v, r in COLUMNS:
            theirs = THREAD.get((v, r)) if with_thread else None
            cell = f"{ours[(v, r, qd)]:.1f}"
            if theirs:
                cell += f" [{theirs[i]:g} {100 * (ours[(v, r, qd)] / theirs[i] - 1):+.0f}%]"
            row += f"{cell:>22}"
        lines.append(row)
    return "\n".join(lines)


def thread_machine_table(machine: dict) -> str:
    costs, dev = machine["costs"], machine["device"]
    steps = ", ".join(f"{k[:-3]} {v}" for k, v in costs.items() if k.endswith("_ns"))
    return ("The thread's machine, modelled ([machines.seed003] in jobs/machines.toml: the "
            "origin of each number and the fit; 7 thread figures fitted, 25 predicted; costs "
            "= BufferedCosts' defaults, drive = jobs/models.toml " + machine["model"] + "): "
            f"{machine['description']}\n  CPU cost per step (ns): {steps}; io-wq on "
            f"{costs['cpus']} CPUs\n  drive: {dev['description']} (command {dev['command']}, "
            f"{dev['parallelism']} dies striped by {dev['die_stripe']})")


def this_machine(jobs_dir: Path, out_dir: Path, progress, result: ExperimentResult,
                 machine: dict) -> dict:
    """The same sweep with the costs measured here, on the thread's drive:
    information (machine.* metrics), never checked against the thread."""
    costs = measured_costs(jobs_dir, progress)
    fitted = machine["costs"]
    lines = ["THIS MACHINE (information, not checked): what each step costs here (ns), "
             "measured now; the thread machine's figure beside it",
             f"{'step':<18}{'here':>10}{'seed003':>10}"]
    for k, v in costs.items():
        if k.endswith("_ns") and k != "dirty_page_ns":
            lines.append(f"{k[:-3]:<18}{v:>10}{fitted.get(k, 0):>10}")
            result.metrics[f"machine.cost.{k}"] = v
    result.tables.append("\n".join(lines))
    ours = sweep(jobs_dir, progress, costs)
    for (v, r, qd), k in ours.items():
        result.metrics[f"machine.measured.{column_name(v, r)}.qd{qd}_kIOPS"] = k
    result.tables.append(sweep_table(
        "THIS MACHINE (information, not checked): kIOPS on the virtual clock with the costs "
        f"measured here ({costs['cpus']} CPUs modelled), on the thread's drive", ours, False))
    extra_us = (costs["punt_ns"] + 2 * costs["wakeup_ns"]) / 1000
    result.tables.append(
        f"Why this machine differs: the worker paths add a punt and two wake-ups per read, "
        f"{extra_us:.1f} us here against {(fitted['punt_ns'] + 2 * fitted['wakeup_ns']) / 1000:.1f}"
        f" us on the thread's bare-metal host (a wake-up costs {costs['wakeup_ns'] / 1000:.1f} us"
        f" here); the submitter's punt rate caps every worker column at ~"
        f"{1e6 / (costs['fio_submit_ns'] + costs['fio_complete_ns'] + costs['punt_ns']):.0f}k. "
        + "The kernel's own io-wq vs inline gap here: the kernel reference below.")
    return costs


def real_clock_table(jobs_dir: Path, progress, result: ExperimentResult, virtual) -> None:
    try:
        real, real_fio = real_clock(jobs_dir, progress)
    except FioError as e:  # the virtual sweep stands without it; the failure is shown
        result.tables.append(f"THIS MACHINE: real-clock runs failed: {e}")
        return
    rcols = [(v, r) for v in REAL_VARIANTS for r in (True, False)]
    lines = ["THIS MACHINE (information, not checked): kIOPS on the real clock (fio "
             f"uring-buffered-ra.fio, {_cpus()} CPUs: the workers share them with the submitter)",
             f"{'QD':>4}" + "".join(f"{v + (' ra' if r else ' nora'):>20}" for v, r in rcols)]
    for qd in REAL_DEPTHS:
        lines.append(f"{qd:>4}" + "".join(f"{real[(v, r, qd)]:>20.1f}" for v, r in rcols))
        for v, r in rcols:
            result.metrics[f"machine.real.{column_name(v, r)}.qd{qd}_kIOPS"] = real[(v, r, qd)]
    result.tables.append("\n".join(lines))
    result.tables.append(clock_agreement_table([("", virtual, real_fio)], result))


def kernel_reference_table(progress, result: ExperimentResult) -> None:
    """The kernel itself on this machine (`harness reference buffered`, in
    small): fio's io_uring engine, buffered 4k randread with readahead off, at
    REAL_DEPTHS, inline / page-wait and with every read punted to io-wq
    (force_async=1). Information (machine.kernel*), never checked."""
    progress(f"kernel reference: fio io_uring buffered randread at QD {REAL_DEPTHS} (real clock)")
    try:
        sweep = buffered_sweep(REAL_DEPTHS, runtime_s=1, size=1 << 30, target="auto",
                                         progress=progress)
    except (ReferenceUnavailable, FioError, OSError) as e:
        result.tables.append(f"THIS MACHINE: kernel reference not run: {e}")
        return
    for d, iops in sweep.iops.items():
        result.metrics[f"machine.kernel.qd{d}_kIOPS"] = iops / 1000
    for d, iops in sweep.iops_iowq.items():
        result.metrics[f"machine.kernel_iowq.qd{d}_kIOPS"] = iops / 1000
    result.tables.append("THIS MACHINE (information, not checked): the kernel's own buffered "
                         "reads here (harness reference buffered)\n"
                         + "\n".join(format_buffered(sweep)))


def plot(out_dir: Path, result: ExperimentResult, ours: dict) -> None:
    try:
        from harness import plots
    except ImportError:
        return
    path = out_dir / "buffered-iops-vs-qd.png"
    series = {f"{v} rasync {'on' if r else 'off'}": [(qd, ours[(v, r, qd)]) for qd in DEPTHS]
              for v, r in COLUMNS}
    thread = {f"{v} rasync {'on' if r else 'off'}": list(zip(DEPTHS, THREAD[(v, r)]))
              for v, r in COLUMNS if (v, r) in THREAD}
    plots.line_plot(path, series, xlabel="iodepth", ylabel="kIOPS", logx=True,
                    reference=thread,
                    title="io_uring buffered 4k randread, readahead off (virtual clock, "
                          "seed003 machine)",
                    caption="kIOPS against iodepth for each variant and rasync setting: ours "
                            "(filled markers) and the thread's (thin, hollow markers, same "
                            "colour). Every series has its own marker and dash, and each is "
                            "drawn larger than the ones after it, so series with equal values "
                            "(pre-c8d317aa and c8d317aa) both stay visible; pre-c8d317aa has no thread line (the thread has no "
                            "figures for it). Look at QD 32 and above, where the variants part: "
                            "c8d317aa without rasync reaches the thread's 315 kIOPS at QD128, "
                            "the other thread columns plateau at 156 to 195.")
    result.figures.append(path.name)


def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult:
    result = ExperimentResult(NAME)
    engine_under_test()                 # a bad MDSPLIT_ENGINE fails at once
    machine = thread_machine(jobs_dir)
    result.tables.append(thread_machine_table(machine))
    ours, virtual = simulated(jobs_dir, out_dir, progress)
    result.raw["simulate"] = virtual.fio
    result.from_simulation(virtual)
    for (v, r, qd), k in ours.items():
        result.metrics[f"{column_name(v, r)}.qd{qd}_kIOPS"] = k
    result.tables.append(sweep_table(
        f"kIOPS: simulate {JOB} (virtual clock, the thread's machine; thread and error in "
        "brackets; the thread has no pre-c8d317aa column)", ours, True))
    plot(out_dir, result, ours)
    this_machine(jobs_dir, out_dir, progress, result, machine)
    real_clock_table(jobs_dir, progress, result, virtual)
    kernel_reference_table(progress, result)
    return result


def _cpus() -> int:
    import os
    return len(os.sched_getaffinity(0))


# --- kernel reference (harness/kernel_fixtures.py; `python3 -m harness reference buffered`) ---
# Moved here from harness/reference.py as it was.
import shutil  # noqa: E402
from contextlib import ExitStack  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

from harness.kernel_fixtures import (ReferenceUnavailable, cleanup_stale,  # noqa: E402
                                     kernel_release, loop_device, require_fio, require_losetup,
                                     sigterm_as_interrupt, workdir, wrap)

@dataclass
class BufferedSweep:
    kernel: str
    target: str                # /dev/loopN or a file
    size: int
    runtime_s: float
    iops: dict = field(default_factory=dict)     # depth -> IOPS
    note: str = ""
    # depth -> IOPS with every read punted to io-wq (fio's force_async=1,
    # IOSQE_ASYNC): the kernel's worker path, the emulator's pre-c8d317aa
    iops_iowq: dict = field(default_factory=dict)


def _fio_seconds(seconds: float) -> str:
    """A duration for fio: fio reads a number with a fraction as whole
    seconds whatever its suffix ("0.5" is 0 s, "1.5" 1 s), so it is written
    in whole milliseconds, else whole microseconds."""
    ms = seconds * 1000
    return f"{int(ms)}ms" if ms == int(ms) else f"{round(ms * 1000)}us"


def _buffered_job(target: str, depths, runtime_s: float, size: int, fadvise: bool,
                  iowq: bool = False) -> str:
    lines = ["; kernel reference for seed 003: fio's io_uring engine, buffered 4k random",
             "; reads with readahead off, one stonewalled job per iodepth"
             + ("; qdN-iowq: every read punted to io-wq (force_async=1 = IOSQE_ASYNC)"
                if iowq else ""),
             "[global]", f"filename={target}", "ioengine=io_uring", "direct=0", "rw=randread",
             "bs=4k", f"size={size}", f"runtime={_fio_seconds(runtime_s)}", "time_based=1",
             "norandommap=1",
             "randrepeat=0", "invalidate=1", "stonewall"]
    if fadvise:
        lines.append("fadvise_hint=random")
    for d in depths:
        lines += [f"[qd{d}]", f"iodepth={d}"]
        if iowq:
            lines += [f"[qd{d}-iowq]", f"iodepth={d}", "force_async=1"]
    return "\n".join(lines) + "\n"


def buffered_sweep(depths=DEPTHS, runtime_s: float = 3, size: int = 4 << 30, *, fio: str = "fio",
                   target: str = "auto", keep_dir: Path = None, progress=None,
                   iowq: bool = True) -> BufferedSweep:
    """Seed 003 on this kernel: IOPS per iodepth of fio's io_uring engine,
    buffered 4k randread, readahead off. target "loop" (a loop device over
    a sparse file, blockdev --setra 0, needs root), "file" (a sparse file
    with fadvise_hint=random), or "auto" (loop where possible, else file).
    iowq: each depth also with every read punted to io-wq (force_async=1),
    the path the thread's rasync-off columns take, on this machine."""
    require_fio(fio)
    depths = [int(d) for d in depths]
    if not depths or any(d < 1 for d in depths):
        raise ValueError(f"iodepths must be >= 1: {depths}")
    if target not in ("auto", "loop", "file"):
        raise ValueError(f"target must be auto, loop or file, not {target!r}")
    use_loop = target == "loop"
    if target == "auto":
        try:
            require_losetup()
            use_loop = True
        except ReferenceUnavailable:
            use_loop = False
    elif use_loop:
        require_losetup()
    cleanup_stale()
    with ExitStack() as stack:
        stack.enter_context(sigterm_as_interrupt())
        wd = stack.enter_context(workdir())
        backing = wd / "buffered.img"
        if use_loop:
            dev = stack.enter_context(loop_device(backing, size, ra_kb=0))
            # The same readahead as ra_kb=0's read_ahead_kb (which loop_device
            # writes back at the end), set again through the ioctl.
            if shutil.which("blockdev"):
                subprocess.run(["blockdev", "--setra", "0", dev.path], capture_output=True)
            ra = dev.queue("read_ahead_kb")
            tgt, how = dev.path, (f"loop device {dev.path} over a sparse file "
                                  f"(direct-io={'on' if dev.direct_io else 'off'}), "
                                  f"blockdev --setra 0 (read_ahead_kb {ra})")
        else:
            with open(backing, "wb") as f:
                f.truncate(size)
            tgt, how = str(backing), "a sparse file with fadvise_hint=random (readahead off for it)"
        job = wd / "buffered-sweep.fio"
        job.write_text(_buffered_job(tgt, depths, runtime_s, size, fadvise=not use_loop,
                                     iowq=iowq))
        runs = len(depths) * (2 if iowq else 1)
        if progress:
            progress(f"kernel reference: io_uring buffered 4k randread, iodepth "
                     f"{depths[0]}..{depths[-1]}{' (and io-wq)' if iowq else ''}, "
                     f"{runtime_s:g} s each")
        try:
            data = run_fio(job, fio=fio, timeout=runs * (runtime_s + 30) + 30, sidecars=False).fio
        except RuntimeError as e:
            raise ReferenceUnavailable(str(e))
        iops, iops_iowq = {}, {}
        for j in data.get("jobs", []):
            m = re.match(r"qd(\d+)(-iowq)?$", j.get("jobname", ""))
            if m:
                (iops_iowq if m.group(2) else iops)[int(m.group(1))] = float(j["read"]["iops"])
        if keep_dir is not None:
            keep = Path(keep_dir)
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(job, keep / job.name)
            (keep / "buffered-sweep.json").write_text(json.dumps(data, indent=1))
    note = (f"Kernel reference: fio's io_uring engine on Linux {kernel_release()}, buffered 4k "
            f"randread of {size >> 20} MiB, readahead off: {how}; {runtime_s:g} s per iodepth, "
            f"page cache dropped before each (invalidate=1). Holes of a sparse file read as "
            f"zeroes without device I/O, so this measures the kernel's buffered-read path "
            f"(page cache, forced 1-page readahead, io_uring's inline / async page-wait / io-wq "
            f"punt), not a disk."
            + (" 'kernel io-wq': the same with force_async=1 (IOSQE_ASYNC), every read punted "
               "to an io-wq worker that blocks in it, as the thread's rasync-off columns and "
               "the emulator's pre-c8d317aa are." if iowq else ""))
    return BufferedSweep(kernel_release(), tgt, size, runtime_s, iops, note, iops_iowq)


def kernel_buffered_sweep(depths=DEPTHS, runtime_s: float = 3, size: int = 4 << 30) -> dict:
    """IOPS per iodepth ({depth: IOPS}) of fio's io_uring engine, buffered 4k
    randread with readahead off, on this kernel. Raises ReferenceUnavailable
    (str = the reason) where it cannot run. For the note, buffered_sweep()
    returns the same with how it ran."""
    return buffered_sweep(depths, runtime_s, size).iops


def format_buffered(sweep: BufferedSweep, emulator: dict = None) -> list:
    """The sweep as a QD table (kIOPS); emulator = {column: {depth: IOPS}}
    adds columns (e.g. the forced-ra variants). With io-wq runs, a
    'kernel io-wq' column and the QD1 comparison (qd1_comparison)."""
    cols = {"kernel io-wq": sweep.iops_iowq} if sweep.iops_iowq else {}
    cols.update(emulator or {})
    w = max([12] + [len(c) + 2 for c in cols])
    lines = [f"{'iodepth':<9}{'kernel kIOPS':>14}" + "".join(f"{c:>{w}}" for c in cols)]
    for d in sorted(sweep.iops):
        row = f"{d:<9}{sweep.iops[d] / 1000:>14.1f}"
        for c, vals in cols.items():
            v = vals.get(d) if isinstance(vals, dict) else None
            row += f"{v / 1000:>{w}.1f}" if v is not None else f"{'-':>{w}}"
        lines.append(row)
    out = ["\n".join(lines), "\n".join(wrap(sweep.note))]
    qd1 = qd1_comparison(sweep, emulator)
    if qd1:
        out.append("\n".join(wrap(qd1)))
    return out


def qd1_comparison(sweep: BufferedSweep, emulator: dict = None) -> str:
    """The thread's QD1 claim (its columns within 10%) on this machine:
    the kernel's io-wq path against its inline / async page-wait path, and
    the emulator's always-punted variant against forced-ra with rasync."""
    k, kw = sweep.iops.get(1), sweep.iops_iowq.get(1)
    if not k or not kw:
        return ""
    text = (f"QD1 on this machine: kernel io-wq / kernel = {kw / k:.2f} ({kw / 1000:.1f} vs "
            f"{k / 1000:.1f} kIOPS; the thread, on bare metal, had its QD1 columns within 10%)")
    emu = emulator or {}
    e, ew = emu.get("emulator ra", {}).get(1), emu.get("emulator io-wq", {}).get(1)
    if e and ew:
        text += (f"; emulator pre-c8d317aa rasync off / forced-ra rasync on = {ew / e:.2f} "
                 f"({ew / 1000:.1f} vs {e / 1000:.1f} kIOPS, virtual clock with this machine's "
                 f"measured step costs)")
    return text + "."


def reference(args, progress) -> ExperimentResult:
    """`python3 -m harness reference buffered`: the kernel's sweep on this
    machine beside the emulator's forced-ra columns (from a report).
    Metrics "kernel.*" and "kernel_iowq.*"."""
    sweep = buffered_sweep(args.depths, args.runtime or 3, args.size, target=args.target,
                           keep_dir=args.keep, progress=progress)
    emu, where = emulator_buffered(args.emulator)
    tables = format_buffered(sweep, emu)
    tables.append(f"emulator columns (forced-ra, the variant merged upstream, and "
                  f"pre-c8d317aa with rasync off as 'io-wq': every read punted): {where}. "
                  "'emulator' = the virtual-clock sweep with this machine's measured "
                  "step costs; 'real-clock' = the engine in fio on this machine.")
    metrics = {f"kernel.qd{d}_iops": v for d, v in sweep.iops.items()}
    metrics.update({f"kernel_iowq.qd{d}_iops": v for d, v in sweep.iops_iowq.items()})
    return ExperimentResult(f"kernel-{NAME}", tables=tables, metrics=metrics)


from harness.experiment import find_report  # noqa: E402


def emulator_buffered(spec):
    """The emulator's forced-ra columns (what was merged upstream) and its
    always-punted one (pre-c8d317aa, rasync off: beside the kernel's io-wq) for
    `reference buffered`, from a report's buffered metrics: ({column:
    {depth: IOPS}}, where from), or ({}, reason). spec: a report (dir or
    result.json), "none"; default reports/latest/buffered."""
    if spec == "none":
        return {}, "not asked for (--emulator none)"
    p, f, result = find_report(spec, "buffered")
    if not f:
        return {}, f"no report at {p} (run ./mdsplit reproduce buffered)"
    if result is None:
        return {}, f"{f} is not a result.json"
    m = result.get("metrics", {})
    cols = {}
    for label, prefix in (("emulator ra", "forced-ra.rasync_on"),
                          ("emulator nora", "forced-ra.rasync_off"),
                          ("emulator io-wq", "pre-c8d317aa.rasync_off"),
                          ("real-clock ra", "real.forced-ra.rasync_on"),
                          ("real-clock nora", "real.forced-ra.rasync_off")):
        col = {}
        for k, v in m.items():
            if k.startswith(prefix + ".qd") and k.endswith("_kIOPS"):
                col[int(k[len(prefix) + 3:-len("_kIOPS")])] = v * 1000
        if col:
            cols[label] = col
    return (cols, f"report {f}") if cols else ({}, f"{f} has no forced-ra figures")
