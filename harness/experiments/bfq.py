"""Seed 004: bfq idling when a non-root group is active; 8 psync 4k random
writers on an NVMe drive, root vs non-root group, legacy vs fixed counting;
and the thread's null_blk service-guarantee check.

The checked figures come from the virtual clock (simulate(): the mdsplit
module, the thread's job as the thread ran it, the `thread-nvme` model of
jobs/models.toml); the real-clock fio run of jobs/bfq-groups.fio (slow
motion, shortened schedule) is printed beside them as "this machine"."""
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

# --- the virtual-clock run: the thread's job as the thread ran it -----------
# [global] rw=randwrite bs=4k ioengine=psync direct=1 offset_increment=10g,
# eight jobs test1..test8 with startdelay=0..7 (s), no runtime: the thread's
# jobs ran until each had written its size (hours at ~70 MiB/s each), so its
# figure is the rate with all eight running. Ours: the eight start 1 s apart,
# all run until END_S, and the figure is the bytes completed in WINDOW_S
# (all eight running, from 0.5 s after the last start) over its length.
THREAD_MODEL = "thread-nvme"            # jobs/models.toml
STEP_S = 1.0                            # the seed's startdelay steps
WINDOW_S = (7.5, 9.0)
# The writers' think time: from a completion to the same writer's next
# request reaching bfq (return from pwrite, fio's loop, the next pwrite down
# to bfq_insert_request), on the thread's host. A host figure, not the
# drive's, and not given by the thread: 2 us is a bare-metal psync cycle. It
# decides how much bfq injects under the legacy counting (see README "BFQ"):
# the non-root "before" figure is a prediction given this value.
THINK_NS = 2_000
# The thread's second test: null_blk irqmode=2 completion_nsec=100 ms
# hw_queue_depth=1, groups of different weights with one sync writer each,
# plus a writer in the root group (queue weight 40, ioprio 4, scheduled
# beside the groups' entities at the top level).
GUARANTEE_MODEL = "thread-null-blk"     # jobs/models.toml
GUARANTEE_GROUPS = [("g100", 100), ("g200", 200), ("g400", 400)]
GUARANTEE_S = 120.0


def stack_text(counting: str, model: str, queue_depth: int = 1023) -> str:
    """A one-member bfq stack on a null backend with the given model."""
    return f"""
[device]
kind = "passthrough"
scheduler = "bfq"

[bfq]
group_counting = "{counting}"
slice_idle = "8ms"
low_latency = false

[[members]]
path = "m0"
size = "100g"
backend = "null"
model = "{model}"
max_sectors = "128k"
queue_depth = {queue_depth}
"""


def simulate(stack: str, tasks: list):
    """Runs closed-loop tasks on a stack on the virtual clock: (one result
    dict per task, the member's "bfq" statistics). The one place the
    virtual run happens (to be replaced by `harness simulate JOB.fio`)."""
    from harness.paths import import_mdsplit
    sim = import_mdsplit().Simulation(stack)
    results = sim.run_workloads(tasks)
    (member,) = [d for d in sim.stats()["devices"] if d["role"] == "member"]
    return results, member.get("bfq", {})


def thread_job_tasks(place: str, end_s: float, think_ns: int = THINK_NS) -> list:
    """The seed's eight writers, in the root group or all in one group."""
    tasks = []
    for i in range(8):
        start = int(i * STEP_S * 1e9)
        t = {"name": f"test{i + 1}", "rw": "randwrite", "bs": 4096, "iodepth": 1,
             "start_ns": start, "runtime_ns": int(end_s * 1e9) - start,
             "offset": i * (10 << 30), "size": 10 << 30, "think_ns": think_ns}
        if place == "nonroot":
            t["group"] = "fio"
        tasks.append(t)
    return tasks


def virtual_place(place: str, variant: str, think_ns: int = THINK_NS) -> dict:
    """The thread's job on the virtual clock: MiB/s over WINDOW_S (the
    bytes of a run to its end minus those of a run to its start: the two
    runs are identical up to the start), and the bfq statistics."""
    stack = stack_text(variant, THREAD_MODEL)
    t0, t1 = WINDOW_S
    early, _ = simulate(stack, thread_job_tasks(place, t0, think_ns))
    late, bfq = simulate(stack, thread_job_tasks(place, t1, think_ns))
    window = sum(r["bytes"] for r in late) - sum(r["bytes"] for r in early)
    return {"MiBps": window / (t1 - t0) / 2**20, "idle_periods": bfq.get("idle_periods", 0),
            "injected": bfq.get("injected", 0)}


def guarantee_test(variant: str) -> dict:
    """The thread's null_blk check: {group: (service share, weight share)},
    service in sectors over GUARANTEE_S, "/" the root group's writer."""
    tasks = [{"name": "root", "rw": "randwrite", "bs": 4096, "iodepth": 1,
              "runtime_ns": int(GUARANTEE_S * 1e9), "size": 10 << 30, "think_ns": THINK_NS}]
    for k, (group, weight) in enumerate(GUARANTEE_GROUPS, start=1):
        tasks.append({"name": group, "rw": "randwrite", "bs": 4096, "iodepth": 1,
                      "runtime_ns": int(GUARANTEE_S * 1e9), "offset": k * (10 << 30),
                      "size": 10 << 30, "group": group, "group_weight": weight,
                      "think_ns": THINK_NS})
    _, bfq = simulate(stack_text(variant, GUARANTEE_MODEL, queue_depth=1), tasks)
    # Top level of the hierarchy: the root group's queue (weight 40) beside
    # the groups' entities.
    root_weight = next(q["weight"] for q in bfq["queues"] if q["group"] == "/" and q["sync"])
    weights = {"/": root_weight, **{g: w for g, w in GUARANTEE_GROUPS}}
    service = {g["name"]: g["service_sectors"] for g in bfq["groups"]}
    total_s = sum(service.get(g, 0) for g in weights)
    total_w = sum(weights.values())
    return {g: (service.get(g, 0) / total_s, w / total_w) for g, w in weights.items()}


def run_virtual(result: ExperimentResult, progress) -> None:
    """The checked figures: the thread's table and the guarantee test on
    the virtual clock."""
    m = result.metrics
    lines = [f"{'':<26}{'ours MiB/s':>12}{'thread MiB/s':>14}{'idle periods':>14}{'injections':>12}"]
    for place, label in PLACES:
        lines.append(f"running fio on {label}")
        for variant, when, kernel in VARIANTS:
            progress(f"virtual clock: the thread's job, {place}-{variant}")
            v = virtual_place(place, variant)
            m[f"{place}.{when}_MiBps"] = v["MiBps"]
            m[f"{place}.{when}_idle_periods"] = v["idle_periods"]
            lines.append(f"  {kernel + ':':<24}{v['MiBps']:>12.0f}{THREAD[(place, variant)]:>14}"
                         f"{v['idle_periods']:>14}{v['injected']:>12}")
    lines.append(
        f"non-root after/before: {m['nonroot.after_MiBps'] / m['nonroot.before_MiBps']:.2f} "
        f"(thread 550/349 = 1.58); root before/after: "
        f"{m['root.before_MiBps'] / m['root.after_MiBps']:.2f} (thread 1.00)")
    lines.append(f"Virtual clock, model {THREAD_MODEL} (jobs/models.toml, fitted on the root "
                 f"columns), think time {THINK_NS / 1000:g} us; startdelay steps of "
                 f"{STEP_S:g} s as in the seed, MiB/s over {WINDOW_S[0]:g}..{WINDOW_S[1]:g} s "
                 "(all eight writers running).")
    result.tables.append("\n".join(lines))
    lines = [f"null_blk 100 ms, QD1 ({GUARANTEE_MODEL}): share of service vs share of weight, "
             f"{GUARANTEE_S:g} s",
             f"{'group':<8}{'weight share':>14}" + "".join(f"{v + ' service':>18}" for v, _, _ in VARIANTS)]
    shares = {}
    for variant, when, _ in VARIANTS:
        progress(f"virtual clock: the null_blk guarantee test, {variant}")
        shares[variant] = guarantee_test(variant)
    for group in shares["legacy"]:
        w = shares["legacy"][group][1]
        lines.append(f"{group:<8}{w:>14.3f}" + "".join(f"{shares[v][group][0]:>18.3f}" for v, _, _ in VARIANTS))
        key = "root" if group == "/" else group
        m[f"guarantee.{key}_weight_share"] = w
        for variant, when, _ in VARIANTS:
            m[f"guarantee.{when}.{key}_service_share"] = shares[variant][group][0]
    result.tables.append("\n".join(lines))


def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult:
    result = ExperimentResult(NAME)
    run_virtual(result, progress)
    lines = ["This machine (real clock, fio bfq-groups.fio, slow motion, startdelay steps "
             "of 250 ms, 8 s runs):",
             f"{'':<26}{'ours MiB/s':>12}{'thread MiB/s':>14}{'idle periods':>14}{'injections':>12}"]
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
            result.metrics[f"machine.{place}.{when}_MiBps"] = mibps
            result.metrics[f"machine.{place}.{when}_idle_periods"] = idles
            # The run's bandwidth logs, before the next run's fio rewrites them.
            series[f"{place} {when}"] = _bandwidth_over_time(jobs_dir, delays, sidecar.time_scale)
    result.tables.append("\n".join(lines))
    m = {k[len("machine."):]: v for k, v in result.metrics.items() if k.startswith("machine.")}
    result.tables.append(
        f"this machine: non-root after/before: {m['nonroot.after_MiBps'] / m['nonroot.before_MiBps']:.2f} "
        f"(thread: 550/349 = 1.58); root after/before: "
        f"{m['root.after_MiBps'] / m['root.before_MiBps']:.2f} (thread: 1.00). "
        "MiB/s in device time (fio's figure x time_scale). Each run is its own fio "
        "(--section), as the thread ran one fio per kernel. Information only: the "
        "writers' think time here is the host's real per-I/O cost / time_scale.")
    try:
        from harness import plots
        path = out_dir / "bfq-bandwidth.png"
        plots.time_series(path, {k: v for k, v in series.items() if v},
                          title="Total write bandwidth of the 8 jobs over time (device time)")
        result.figures.append(path.name)
        path = out_dir / "bfq-throughput.png"
        plots.bar_chart(path, {f"{p} {w}": result.metrics[f"{p}.{w}_MiBps"] for p, _ in PLACES for _, w, _ in VARIANTS},
                        ylabel="MiB/s", title="BFQ: 8 sync writers (virtual clock)",
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
