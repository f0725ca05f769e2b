"""What one reproduction returns, so that `reproduce`, `history`, `check`,
the report and pytest all read the same thing.

An experiment is a plug-in: a module (or a package) in harness/experiments/
named after its CLI name with - as _, found there by `reproduce`,
`reference`, `check` and the tests; no list elsewhere names it. It defines
    NAME = "raid5"                      # the CLI name
    EXPECTATIONS = "raid5"              # its section of jobs/expectations.toml
    JOB = "raid5-split-order.fio"       # its job file in jobs/
    TITLE = "md RAID5 split order"       # one line
    SEEDS = ["000_fa5278d1f568ad45.txt", "002_8e50d1a4837276ef.txt"]
    ORDER = 10                          # `reproduce all` runs by ORDER, then NAME
    DURATION = (14.0, 2)                # seconds, steps: the estimate before a run
    def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult
where jobs_dir is a fresh copy of jobs/ to run from, out_dir the report
directory for this experiment, and progress(step_text) is called before each
fio run. A kernel reference (`python3 -m harness reference NAME`) adds
    REFERENCE_OPTIONS = {"runtime": None}   # reference's options it takes: default
    EMULATOR_WORDS = ("run", "none")        # --emulator's words besides a report
    def reference(args, progress) -> ExperimentResult
"""
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ExperimentResult:
    name: str
    # Printed tables, in the thread's layout, ours beside the thread's figures.
    tables: list = field(default_factory=list)          # [str, ...]
    # Flat metrics keyed "variant.metric" (e.g. "fixed.md0_MBps"): what
    # history records and check compares. Numbers only.
    metrics: dict = field(default_factory=dict)
    # Figures written into out_dir: [relative path, ...]
    figures: list = field(default_factory=list)
    # Raw material kept in the report: fio JSON, sidecars (paths relative to out_dir).
    raw: dict = field(default_factory=dict)
    # The experiment's own verdicts on expectations: [(description, passed: bool, detail)]
    checks: list = field(default_factory=list)
    # The virtual-clock run the checked figures come from: its seed and the
    # engine's version (recorded in the history row).
    seed: int | None = None
    engine_version: str | None = None
    # Each machine.* metric: whether the host kept up with the model in the
    # real-clock run it comes from, from that run's sidecars
    # (docs/sidecar-lag.md): "host-bound (...)" or "keeps up (...)".
    machine_notes: dict = field(default_factory=dict)
    # An experiment that sweeps its own range: "predictions over the sweep's
    # bands: ..." (harness/sweep.py prediction_verdicts); reproduce prints it
    # under the check counts, as it does a thread sweep's.
    band_verdicts: str = ""

    def from_simulation(self, fio) -> None:
        """Takes the seed and engine version of a `harness simulate` run."""
        self.seed = fio.fio.get("seed")
        self.engine_version = fio.fio.get("mdsplit-version")


def _ignore_factory(src: Path):
    transient = {"stats", "traces", "work"}

    def ignore(directory, names):
        rel = Path(directory).resolve().relative_to(src)
        if rel.parts and rel.parts[0] in transient:
            return [n for n in names if not (Path(directory) / n).is_dir()]
        return [n for n in names if n.endswith((".img", ".state")) or n == "__pycache__"]
    return ignore


def prepare_jobs(out_dir: Path, src: Path = None) -> Path:
    """A fresh copy of jobs/ in out_dir/jobs, without member images, verify
    state or earlier stats and traces. out_dir/jobs must not exist yet
    (FileExistsError): nothing already there is replaced or deleted."""
    from harness.paths import ROOT
    src = (src or ROOT / "jobs").resolve()
    dest = out_dir / "jobs"
    shutil.copytree(src, dest, ignore=_ignore_factory(src), symlinks=True)
    return dest


def engine_under_test():
    """The engine every experiment's real-clock fio run loads instead of the
    one the shipped job files name (/usr/local/lib/mdsplit/libmdsplit.so,
    which any clone may have installed): $MDSPLIT_ENGINE when set, else
    this clone's build (paths.BUILD / libmdsplit.so). Raises FioError with
    one line when it is not a readable ELF shared object, so that an
    experiment fails at once rather than after its virtual-clock run, or
    running another engine instead."""
    from harness import paths
    from harness.fio_runner import FioError
    env = os.environ.get("MDSPLIT_ENGINE")
    path, source = (Path(env), "MDSPLIT_ENGINE") if env else \
        (paths.BUILD / "libmdsplit.so", "this clone's build")
    try:
        if not path.is_file():
            why = "no such file" if not path.exists() else "not a regular file"
        else:
            with open(path, "rb") as f:
                head = f.read(18)
            why = "" if head[:4] == b"\x7fELF" and head[16] == 3 else \
                "not an ELF shared object"
    except OSError as e:
        why = e.strerror or str(e)
    if why:
        raise FioError(f"engine {path} ({source}) not loadable: {why}; allowed: a built "
                       "libmdsplit.so (e.g. build/libmdsplit.so) in MDSPLIT_ENGINE, or "
                       f"MDSPLIT_ENGINE unset for {paths.BUILD / 'libmdsplit.so'}", 1, "")
    return path


def use_engine_under_test(job: Path) -> Path:
    """The job file (an experiment's copy) with its ioengine=external:
    lines naming engine_under_test() ($MDSPLIT_ENGINE, else this clone's
    build); called right before each real-clock fio run (the virtual-clock
    copies keep theirs). Returns job."""
    engine = engine_under_test()
    job = Path(job)
    job.write_text(re.sub(r"(?m)^(\s*)ioengine\s*=\s*external:.*$",
                          lambda m: f"{m.group(1)}ioengine=external:{engine}",
                          job.read_text()))
    return job


def simulate_copy(jobs_dir: Path, job: str, out_dir: Path, sections=None, data=True,
                  append: dict = None, options: dict = None):
    """The job file on the virtual clock (`harness simulate`), run from a
    copy of jobs_dir's job and stack files under out_dir/virtual-jobs, so
    that its sidecars and member files never mix with the real-clock run's.
    Returns a FioResult like run_fio's; sections as fio's --section.
    Deterministic: the figures an experiment checks against a thread come
    from here. data=False: members on files are null devices of their size
    (the same figures; `harness simulate --no-data`). append: {file name:
    text} added to the end of those copies (e.g. a stack file's
    [cpu.buffered] table: a point's parameters as stack-TOML keys); options:
    {"section.option": value} set in the job file's copy
    (bands.set_fio_options)."""
    from harness.fio_runner import run_simulated
    copy = out_dir / "virtual-jobs"
    copy.mkdir(parents=True, exist_ok=True)
    for p in Path(jobs_dir).iterdir():
        if p.is_file() and p.suffix in (".fio", ".toml"):
            shutil.copy(p, copy / p.name)
    for name, text in (append or {}).items():
        if not (copy / name).is_file():
            raise FileNotFoundError(f"{jobs_dir}/{name}: no such job or stack file to add to")
        with open(copy / name, "a") as f:
            f.write("\n" + text)
    if options:
        from harness.bands import set_fio_options
        (copy / job).write_text(set_fio_options((copy / job).read_text(), options))
    return run_simulated(copy / job, sections=sections, data=data)


def lag_note(fio, job: dict = None) -> str:
    """What the sidecars of a real-clock fio run say of the host
    (Sidecar.lag_note): the note of the job's own sidecar (its
    mdsplit_stats) when it is known, else the run's host-bound ones (or,
    when none is, the first); "" without lag figures."""
    sidecars = dict(getattr(fio, "sidecars", {}) or {})
    own = (job or {}).get("job options", {}).get("mdsplit_stats")
    mine = [s for p, s in sidecars.items() if own and str(p).endswith(own)]
    pool = mine or [s for s in sidecars.values() if s.host_bound] or list(sidecars.values())[:1]
    return "; ".join(n for n in dict.fromkeys(s.lag_note() for s in pool) if n)


def note_machine_metrics(result: ExperimentResult, fio_runs) -> None:
    """Marks every machine.* metric of result not marked yet with what the
    real-clock runs' sidecars say of the host (lag_note of each run)."""
    notes = [lag_note(f) for f in fio_runs]
    host_bound = [n for n in notes if n.startswith("host-bound")]
    note = "; ".join(dict.fromkeys(host_bound or [n for n in notes if n]))
    for name in result.metrics:
        if name.startswith("machine.") and name not in result.machine_notes and note:
            result.machine_notes[name] = note


def real_clock_title(title: str, fio_runs) -> str:
    """A plot title for figures of real-clock fio runs: says they are this
    machine's, and whether the host was the bottleneck in any of them."""
    notes = [lag_note(f) for f in fio_runs]
    bound = any(n.startswith("host-bound") for n in notes)
    state = "host-bound" if bound else "host kept up" if any(notes) else "host lag unknown"
    return f"{title}\n(real clock, this machine: {state})"


def clock_agreement_table(runs, result: ExperimentResult = None) -> str:
    """The two clocks side by side, job by job. runs: [(label, virtual,
    real)], each a virtual-clock FioResult (`harness simulate`) and the
    real-clock fio run of the same job file; every job the real run ran and
    the virtual one has too gets a row per direction with I/O: IOPS on both
    clocks and virtual / real. Where the host keeps up with the modelled
    device the ratio is near 1; far from 1, the host (its CPUs, wake-ups,
    storage) is the limit here, not the model. Information: result.metrics
    gets machine.agreement.<label/job>.<direction>_ratio, never checked
    against a thread. Each row says what the real run's sidecar says of the
    host (lag_note: host-bound or keeping up, docs/sidecar-lag.md), and
    every machine.* metric of result gets its note (machine_notes)."""
    rows = []
    for label, virtual, real in runs:
        for job in real.jobs:
            try:
                vjob = virtual.job(job["jobname"])
            except KeyError:
                continue
            name = f"{label}/{job['jobname']}" if label else job["jobname"]
            for d in ("read", "write", "trim"):
                r_iops, v_iops = job[d]["iops"], vjob[d]["iops"]
                if not r_iops and not v_iops:
                    continue
                ratio = v_iops / r_iops if r_iops else float("inf")
                # Why a ratio is far from 1: the real run's own lag figures.
                why = lag_note(real, job)
                rows.append((name, d, v_iops, r_iops, ratio, why))
                if result is not None and r_iops:
                    result.metrics[f"machine.agreement.{name}.{d}_ratio"] = ratio
                    if why:
                        result.machine_notes[f"machine.agreement.{name}.{d}_ratio"] = why
    if result is not None:
        note_machine_metrics(result, [real for _, _, real in runs])
    if not rows:
        return "clock agreement: no job ran on both clocks"
    w = max(len(r[0]) for r in rows) + 2
    lines = ["clock agreement: each job on the virtual clock (checked) and in real fio on this "
             "machine (not checked), IOPS as fio reports them",
             f"{'job':<{w}}{'dir':<7}{'virtual':>12}{'real':>12}{'virtual/real':>14}  the host"]
    lines += [f"{n:<{w}}{d:<7}{v:>12.1f}{r:>12.1f}{x:>14.2f}  {why}".rstrip()
              for n, d, v, r, x, why in rows]
    return "\n".join(lines)


def find_report(spec, experiment):
    """An experiment's result.json in a report: spec is a report directory,
    the experiment's directory in one, or the file itself (default
    reports/latest/<experiment>). Returns (where it was looked for, the file
    or None, its parsed JSON or None when the file is not JSON)."""
    import json
    from harness import paths
    p = Path(spec) if spec else paths.ROOT / "reports" / "latest" / experiment
    for f in (p, p / "result.json", p / experiment / "result.json"):
        if f.is_file():
            try:
                return p, f, json.loads(f.read_text())
            except ValueError:
                return p, f, None
    return p, None, None
