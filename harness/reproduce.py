"""`python3 -m harness reproduce [EXPERIMENT|all]`: runs the reproductions and
writes a report.

Each experiment is a module in harness/experiments/ (see experiment.py for
the interface). It runs from a fresh copy of jobs/ inside its part of the
report directory (plain `fio <job>.fio` with relative paths, as a user would
run it), and leaves there its fio JSON, sidecars, traces and figures. The
report directory (default reports/<timestamp>, with reports/latest pointing
at it) gets summary.md (tables, the thread's figures beside ours, figures,
checks with PASS/FAIL, the commit and the machine), metrics.json and each
experiment's result.json; every run is recorded in the history database.
--report-dir must be new or empty (claim_report_dir): an earlier report or a
directory with anything in it is refused, and nothing in a report directory
is ever replaced or deleted.
"""
from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness import expectations as exp_mod
from harness.experiment import ExperimentResult, prepare_jobs
from harness.fio_runner import FioError
from harness.history import History, HistoryError, expected_duration, git_commit, machine_info
from harness.paths import ROOT
from harness.progress import Progress, fmt_duration
from harness.tables import thread_table

PACKAGE = "harness.experiments"
LAST = 1 << 30      # the ORDER of an experiment that states none
REPORTS = ROOT / "reports"

# --- discovery ------------------------------------------------------------------

def module_name(name: str) -> str:
    return name.replace("-", "_")


def load_experiment(name: str, package: str = PACKAGE):
    """The experiment's module, or None when there is none of that name.
    Errors inside an existing module propagate."""
    full = f"{package}.{module_name(name)}"
    try:
        mod = importlib.import_module(full)
    except ModuleNotFoundError as e:
        if e.name in (full, package):
            return None
        raise
    for attr in ("NAME", "run"):
        if not hasattr(mod, attr):
            raise AttributeError(f"{full} has no {attr} (see harness/experiment.py)")
    return mod


def available(package: str = PACKAGE) -> list:
    """The experiments found in the package (a module or a directory each,
    named after its CLI name with - as _), in the order `all` runs them:
    by their ORDER (harness/experiment.py), then by name. A module that
    does not load sorts last (reproduce reports it)."""
    try:
        pkg = importlib.import_module(package)
    except ModuleNotFoundError:
        return []
    found = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        name = info.name.replace("_", "-")
        try:
            order = getattr(load_experiment(name, package), "ORDER", LAST)
        except Exception:           # reported when it is run
            order = LAST
        found.append((order, name))
    return [n for _, n in sorted(found)]


def expectations_section(module, name: str) -> str:
    """The jobs/expectations.toml section an experiment's figures are
    checked against: its EXPECTATIONS, by default its name."""
    return getattr(module, "EXPECTATIONS", name) if module else name


# --- running --------------------------------------------------------------------

def _remove_images(directory: Path) -> None:
    for p in directory.rglob("*.img"):
        if p.is_file() and not p.is_symlink():
            p.unlink()


@dataclass
class Outcome:
    name: str
    title: str = ""
    seeds: list = field(default_factory=list)
    status: str = "ok"                  # ok | failed
    result: ExperimentResult | None = None
    checks: list = field(default_factory=list)   # [(description, passed, detail)]
    duration: float = 0.0
    error: str = ""
    run_id: int | None = None
    out_dir: Path | None = None
    history_error: str = ""             # why the run could not be recorded
    section: str = ""                   # its jobs/expectations.toml section
    band_verdicts: str = ""             # its sweep's verdicts on the predictions (sweep_text)

    @property
    def failed_checks(self) -> int:
        return sum(1 for _, ok, _ in self.checks if not ok)


def _validate(name: str, result) -> ExperimentResult:
    if not isinstance(result, ExperimentResult):
        raise TypeError(f"{name}.run() returned {type(result).__name__}, not ExperimentResult")
    for k, v in result.metrics.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name}: metric {k!r} = {v!r} is not a number")
    for c in result.checks:
        if len(c) != 3:
            raise TypeError(f"{name}: check {c!r} is not (description, passed, detail)")
    return result


def _jsonable(obj):
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return repr(obj)


def print_outcome(o: Outcome, out, expectations) -> None:
    r = o.result
    print(f"== {o.name}: {o.title}" if o.title else f"== {o.name}", file=out)
    if o.checks:
        print("  " + exp_mod.basis_line(exp_mod.basis_counts(o.section, o.checks, expectations)),
              file=out)
    if o.band_verdicts:
        print("  " + o.band_verdicts, file=out)
    tt = thread_table(o.section, r.metrics, expectations)
    if tt:
        print("the thread's figures beside ours:", file=out)
        print(tt, file=out)
    for t in r.tables:
        print(file=out)
        print(t, file=out)
    bound = sorted(n for n, note in r.machine_notes.items() if note.startswith("host-bound"))
    if bound:  # docs/sidecar-lag.md
        print(f"\nhost-bound on this machine (the figure is the host's, not the model's): "
              f"{', '.join(bound)}: {r.machine_notes[bound[0]]}", file=out)
    if o.checks:
        print(file=out)
        for desc, ok, detail in o.checks:
            print(f"  {'PASS' if ok else 'FAIL'}  {desc}: {detail}", file=out)
    if r.figures:
        print(f"figures: {', '.join(str(o.out_dir / f) for f in r.figures)}", file=out)
    print(file=out)
    out.flush()


def sweep_text(section: str, progress) -> tuple:
    """(text, verdict line) of the thread's sweep (harness/sweep.py SWEEPS,
    by its expectations section): the parameters its fit does not pin with
    their sources, each thread figure as a band with its verdict, and the
    sensitivity table; ("", "") when the thread has none (an experiment
    that sweeps in its own run, as raid5-buffered, prints its band itself)."""
    import io
    from harness import sweep
    if section not in sweep.SWEEPS:
        return "", ""
    progress(f"sweep {section}: the parameters the fit does not pin, as bands "
             "(virtual clock, --no-data)")
    buf = io.StringIO()
    _, rows = sweep.sweep(section, out=buf)
    return buf.getvalue().rstrip("\n"), sweep.prediction_verdicts(rows)


def run_one(name: str, module, report: Path, progress: Progress, label: str = None,
            history: History = None, batch: str = None, keep_images=False,
            expectations=None, sweeps: bool = True) -> Outcome:
    """Runs one experiment into report/<name>/ and records it; with sweeps,
    its thread's sweep too (sweep_text), printed after its tables."""
    expectations = expectations if expectations is not None else exp_mod.load()
    o = Outcome(name, title=getattr(module, "TITLE", ""), seeds=list(getattr(module, "SEEDS", [])),
                section=expectations_section(module, name))
    out_dir = report / name
    out_dir.mkdir()          # the report directory is new or was empty: nothing is replaced
    o.out_dir = out_dir
    jobs_dir = prepare_jobs(out_dir)
    progress.start(label or name)
    t0 = time.monotonic()
    try:
        result = _validate(name, module.run(jobs_dir, out_dir, progress))
        o.band_verdicts = result.band_verdicts
        if sweeps:
            text, verdicts = sweep_text(o.section, progress)
            if text:
                result.tables.append(text)
                o.band_verdicts = verdicts
    except FioError as e:
        o.status, o.error = "failed", str(e)
        mds = [l for l in (e.stderr or "").splitlines() if l.startswith("mdsplit:")]
        if mds:
            o.error += f" ({mds[0]})"
        (out_dir / "error.txt").write_text(f"{e}\n\n{e.stderr}")
    except Exception as e:  # an experiment's bug must not lose the other experiments
        o.status, o.error = "failed", f"{type(e).__name__}: {e}"
        (out_dir / "error.txt").write_text(traceback.format_exc())
    else:
        o.result = result
    finally:
        # Also when ^C or SIGTERM (KeyboardInterrupt) stops the run: no
        # member image (1 GiB sparse) of the real or the virtual-clock run
        # is left in the report.
        if not keep_images:
            _remove_images(out_dir)
    o.duration = time.monotonic() - t0
    steps = progress.step_no
    progress.finish("done" if o.status == "ok" else "FAILED")
    if o.status != "ok":
        return o
    r = o.result
    checks = exp_mod.evaluate_checks(o.section, r.metrics, expectations)
    seen = {c[0] for c in checks}
    o.checks = checks + [tuple(c) for c in r.checks if c[0] not in seen]
    doc = {"name": name, "title": o.title, "seeds": o.seeds, "duration_s": round(o.duration, 3),
           "seed": r.seed, "engine_version": r.engine_version,
           "metrics": r.metrics, "machine_notes": r.machine_notes,
           "checks": [list(c) for c in o.checks], "tables": r.tables,
           "figures": r.figures, "raw": r.raw}
    (out_dir / "result.json").write_text(json.dumps(doc, indent=1, default=_jsonable))
    if history is not None:
        try:
            o.run_id = history.record(name, r.metrics, batch=batch, duration_s=o.duration,
                                      steps=steps or None, report_dir=out_dir,
                                      seed=r.seed, engine_version=r.engine_version)
        except HistoryError as e:           # e.g. locked by another process past the timeout
            o.history_error = str(e)
    return o


def _md_table(text: str) -> str:
    return "```text\n" + text.rstrip("\n") + "\n```\n"


def basis_summary(outcomes: list, expectations) -> list:
    """summary.md's first table: per thread, the predictions inside their
    tolerance, then the checks that are fits, identities or constructions
    (jobs/expectations.toml, each check's basis)."""
    lines = ["", "## What is evidence", "",
             "Per thread: checks whose figure nothing was chosen on (predictions), then those "
             "that are fits, identities of fitted figures, or true by construction "
             "(docs/reproductions/basis.md).", "",
             "| experiment | predictions inside tolerance | fits | identities | constructions "
             "| predictions over the sweep's bands |",
             "|---|---|---|---|---|---|"]
    for o in outcomes:
        if o.status != "ok" or not o.checks:
            continue
        c = exp_mod.basis_counts(o.section, o.checks, expectations)
        cell = {b: (f"{c[b][0]}/{c[b][1]}" if b in c else "0") for b in exp_mod.BASES}
        band = o.band_verdicts.removeprefix("predictions over the sweep's bands: ") or "-"
        lines.append(f"| {o.name} | {cell['prediction']} | {cell['fit']} | {cell['identity']} | "
                     f"{cell['construction']} | {band} |")
    return lines


def write_summary(report: Path, outcomes: list, *, commit: str, machine: dict, started: str,
                  command: str, history_path=None, batch=None, expectations=None,
                  history_error: str = "") -> Path:
    expectations = expectations if expectations is not None else exp_mod.load()
    lines = [f"# mdsplit reproduction, {started}", "",
             f"- command: `{command}`",
             f"- commit: `{commit}`",
             f"- machine: {machine['hostname']}: {machine['cpu_model']}, {machine.get('cpus', '?')} CPUs, "
             f"kernel {machine['kernel']}"]
    if history_path:
        ids = [str(o.run_id) for o in outcomes if o.run_id is not None]
        lines.append(f"- history: `{history_path}`, batch `{batch}`"
                     + (f", runs {', '.join(ids)}" if ids else ""))
        missed = [o.name for o in outcomes if o.status == "ok" and o.run_id is None]
        if history_error and missed:
            lines.append(f"- **not recorded** in the history: {', '.join(missed)} "
                         f"({history_error})")
    lines += basis_summary(outcomes, expectations)
    lines += ["", "| experiment | status | checks | time |", "|---|---|---|---|"]
    for o in outcomes:
        if o.status == "ok":
            n = len(o.checks)
            checks = f"{n - o.failed_checks}/{n} PASS" if n else "none"
            if o.failed_checks:
                checks += f", **{o.failed_checks} FAIL**"
        else:
            checks = ""
        status = o.status if o.status != "failed" else f"**failed**: {o.error}"
        lines.append(f"| {o.name} | {status} | {checks} | "
                     f"{fmt_duration(o.duration)} |")
    for o in outcomes:
        lines += ["", f"## {o.name}" + (f": {o.title}" if o.title else ""), ""]
        if o.seeds:
            lines += ["Seeds: " + ", ".join(f"`{s}`" for s in o.seeds), ""]
        if o.status != "ok":
            lines += [f"**Failed** after {fmt_duration(o.duration)}: {o.error}",
                      "", f"Details: [{o.name}/error.txt]({o.name}/error.txt)"]
            continue
        r = o.result
        e = expectations.get(o.section)
        if e and e.note:
            lines += [e.note.strip(), ""]
        if e and e.fitted:
            lines += ["### Fitted parameters", "", "| parameter | value | fitted on |",
                      "|---|---|---|"]
            lines += [f"| {f.parameter} | {f.value} | {f.figure} |" for f in e.fitted]
            lines.append("")
        tt = thread_table(o.section, r.metrics, expectations)
        if tt:
            lines += ["### The thread's figures beside ours", "", _md_table(tt)]
        if r.tables:
            lines += ["### Tables", ""]
            for t in r.tables:
                lines.append(_md_table(t))
        if r.figures:
            lines += ["### Figures", ""]
            for f in r.figures:
                lines += [f"![{Path(f).stem}]({o.name}/{f})", ""]
                caption = plots_caption(o.out_dir / f) if o.out_dir else ""
                if caption:
                    lines += [f"*{caption}*", ""]
        if o.checks:
            lines += ["### Checks", ""]
            bases = exp_mod.basis_of(o.section, expectations)
            for desc, ok, detail in o.checks:
                lines.append(f"- **{'PASS' if ok else 'FAIL'}** `{desc}` "
                             f"[{bases.get(desc) or 'unlabelled'}]: {detail}")
            lines.append("")
        raw = [f"[result.json]({o.name}/result.json)"]
        for key, val in (r.raw or {}).items():
            for v in (val if isinstance(val, (list, tuple)) else [val]):
                if isinstance(v, (str, Path)):
                    raw.append(f"[{key}: {v}]({o.name}/{v})")
        lines += ["### Raw results", "", ", ".join(raw), ""]
    path = report / "summary.md"
    path.write_text("\n".join(lines).rstrip("\n") + "\n")
    from harness.report_html import write_report_html
    write_report_html(report)
    return path


def plots_caption(png: Path) -> str:
    """The caption the plot helper wrote beside a figure (harness/plots.py)."""
    try:
        from harness.plots import caption_of
    except ImportError:                     # no matplotlib: no figures either
        return ""
    return caption_of(png)


def _stamp() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S")


def new_report_dir(root: Path = None) -> Path:
    """reports/<timestamp> (with -2, -3 ... when that exists)."""
    root = Path(root or REPORTS)
    base = _stamp()
    p, i = root / base, 2
    while p.exists():
        p, i = root / f"{base}-{i}", i + 1
    p.mkdir(parents=True)
    return p


def point_latest(report: Path) -> None:
    """reports/latest -> <timestamp>, replaced atomically. An old real
    directory named latest (earlier harness versions) is moved aside."""
    link = report.parent / "latest"
    if link.exists() and not link.is_symlink():
        aside = report.parent / f"latest-old-{_stamp()}"
        link.rename(aside)
    tmp = report.parent / f".latest-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(report.name)
    os.replace(tmp, link)


class ReportDirError(ValueError):
    """--report-dir cannot take a report: one line, exit 2."""


ALLOWED_REPORT_DIR = ("allowed: a new directory or an empty one (omit --report-dir for a new "
                      "reports/<time>)")


def is_report(path: Path) -> bool:
    """A report this tool made: summary.md and metrics.json at its top."""
    return (path / "summary.md").is_file() and (path / "metrics.json").is_file()


def claim_report_dir(report_dir, option: str = "--report-dir",
                     allowed: str = ALLOWED_REPORT_DIR) -> tuple:
    """(the report directory, the directories made for it, leaf first) for
    --report-dir: a directory that does not exist yet is made; an existing
    one must be an empty, writable directory. Anything else (a file, a
    directory with something in it, also an earlier report: a report is
    never overwritten, added to or deleted; a path the system refuses)
    raises ReportDirError, and nothing is made or changed. The check of
    every output directory that must be new or empty (`reference --keep`
    too): option and allowed name it in the one-line error."""
    given = str(report_dir)
    made = []

    def refuse(why: str):
        raise ReportDirError(f"{option} {given}: {why}; {allowed}")

    try:
        p = Path(report_dir).absolute()
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                refuse("exists and is not a directory")
            if any(p.iterdir()):
                if is_report(p):
                    refuse("holds an earlier report (summary.md, metrics.json): reports are "
                           "not overwritten or added to")
                refuse("exists and is not empty (nothing in it is replaced or deleted)")
            if not os.access(p, os.W_OK | os.X_OK):
                refuse("is not writable")
            return p, []
        q = p
        while not (q.exists() or q.is_symlink()):
            made.append(q)
            q = q.parent
        p.mkdir(parents=True)
        return p, made
    except OSError as e:
        release_report_dir(made)             # the parents a failed mkdir made
        refuse(f"cannot make or use it ({e.strerror or e})")


def release_report_dir(made: list) -> None:
    """Removes the directories claim_report_dir made (leaf first) that are
    there and empty (rmdir: nothing in them is ever deleted)."""
    for d in made:
        try:
            d.rmdir()
        except OSError:
            pass


def resolve_names(which: str, package: str = PACKAGE):
    """(names to run, explicit): 'all' or one name; ValueError if unknown."""
    names = available(package)
    if which == "all":
        return names, False
    if which not in names:
        raise ValueError(f"unknown experiment {which!r}; known: {', '.join(names)}, all")
    return [which], True


def reproduce(which="all", report_dir=None, *, db=None, record=True, strict=False,
              keep_images=False, quiet=False, repeat=1, package=PACKAGE, out=None, err=None,
              command=None, tty=None, sweeps=True) -> int:
    """The `reproduce` command (sweeps: each thread's sweep after its
    experiment, sweep_text); returns the exit status:
    0 every experiment that exists ran (and, with strict, every check passed);
    1 an experiment failed (or, with strict, a check failed);
    2 the experiment asked for by name is unknown."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        names, _ = resolve_names(which, package)
    except ValueError as e:
        print(f"reproduce: {e}", file=err)
        return 2
    try:
        expectations = exp_mod.load()
    except (OSError, ValueError) as e:
        print(f"reproduce: {e}", file=err)
        return 1
    modules, status = {}, 0
    for n in names:
        try:
            modules[n] = load_experiment(n, package)
        except Exception as e:
            print(f"reproduce: {n}: cannot load its module: {type(e).__name__}: {e}", file=err)
            modules[n] = False
            status = 1
    claimed, made = None, []
    try:
        if report_dir and repeat == 1:
            claimed, made = claim_report_dir(report_dir)
        elif report_dir:                        # the parent of the repeats' reports
            parent = Path(report_dir)
            if parent.exists() and not parent.is_dir():
                raise ReportDirError(f"--report-dir {report_dir}: exists and is not a "
                                     f"directory; {ALLOWED_REPORT_DIR}")
    except ReportDirError as e:
        print(f"reproduce: {e}", file=err)
        return 2
    except OSError as e:
        print(f"reproduce: --report-dir {report_dir}: cannot use it ({e.strerror or e}); "
              f"{ALLOWED_REPORT_DIR}", file=err)
        return 2
    history = None
    if record:
        try:
            history = History(db)
        except Exception as e:             # a bad --db is a bad argument: exit 2
            print(f"reproduce: history database: {e}", file=err)
            release_report_dir(made)
            return 2 if isinstance(e, HistoryError) else 1
    machine = machine_info()
    runnable = [n for n in names if modules[n]]
    labels = []
    for i in range(repeat):
        for n in runnable:
            labels.append(n if repeat == 1 else f"{n} #{i + 1}")
    estimates, defaulted = {}, set()
    for n in runnable:
        try:
            est = expected_duration(history, n, machine["hostname"])
        except HistoryError:                # no estimate; recording says what is wrong
            est = (None, None)
        # no recorded run: the experiment's stated DURATION (harness/experiment.py)
        default = est[0] is None and getattr(modules[n], "DURATION", None) is not None
        if default:
            est = tuple(modules[n].DURATION)
        for lbl in labels:
            if lbl == n or lbl.startswith(n + " #"):
                estimates[lbl] = est
                if default:
                    defaulted.add(lbl)
    progress = Progress(labels, estimates=estimates, stream=err, tty=tty, defaults=defaulted)
    commit = git_commit()
    reports = []
    # A history write that fails (another process holds the database past
    # History.LOCK_TIMEOUT, a full disk) stops the recording, not the
    # reproduction: one line names the database and the reason, the rest
    # runs and the report is written (saying what was not recorded), exit 1.
    recorder, history_error = history, ""

    def stop_recording(reason, what) -> str:
        nonlocal recorder, status
        reason = str(reason)
        if recorder is not None:
            print(f"reproduce: history database: {reason}; {what} not recorded (the report "
                  "has them)", file=err)
        recorder = None
        status = max(status, 1)
        return reason
    try:
        for i in range(repeat):
            if claimed is not None:
                report = claimed
            else:
                try:
                    report = new_report_dir(Path(report_dir) if report_dir else None).resolve()
                except OSError as e:
                    where = report_dir or REPORTS
                    print(f"reproduce: cannot make a report directory in {where} "
                          f"({e.strerror or e})", file=err)
                    return max(status, 1)
            batch = report.name
            if recorder is not None:
                try:
                    batch = recorder.new_batch(report.name, report)
                except HistoryError as e:
                    history_error = stop_recording(e, "this report's runs")
            try:
                started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
                outcomes = []
                for n in names:
                    if not modules[n]:
                        continue
                    label = n if repeat == 1 else f"{n} #{i + 1}"
                    o = run_one(n, modules[n], report, progress, label=label, history=recorder,
                                batch=batch, keep_images=keep_images, expectations=expectations,
                                sweeps=sweeps and package == PACKAGE)
                    outcomes.append(o)
                    progress.clear()
                    if o.history_error:
                        history_error = stop_recording(o.history_error,
                                                       f"{label} and the runs after it")
                    if o.status != "ok":
                        print(f"reproduce {n}: {o.error}", file=err)
                        status = max(status, 1)
                    elif not quiet:
                        print_outcome(o, out, expectations)
                    if o.status == "ok" and strict and o.failed_checks:
                        status = max(status, 1)
                if not quiet and len(outcomes) > 1:
                    print("\n".join(basis_summary(outcomes, expectations)[1:]), file=out)
                (report / "metrics.json").write_text(json.dumps(
                    {o.name: o.result.metrics for o in outcomes if o.result is not None}, indent=1))
                write_summary(report, outcomes, commit=commit, machine=machine, started=started,
                              command=command or f"python3 -m harness reproduce {which}",
                              history_path=history.path if history else None, batch=batch,
                              expectations=expectations, history_error=history_error)
                if report_dir is None or report.parent.resolve() == REPORTS.resolve():
                    try:
                        point_latest(report)
                    except OSError as e:
                        print(f"reproduce: could not point {report.parent / 'latest'}: {e}", file=err)
                reports.append(report)
                print(f"report: {report / 'summary.md'}"
                      + (f" (history batch {batch})" if history is not None and not history_error
                         else ""), file=err)
            except OSError as e:          # the report directory cannot be written (full, removed)
                what = e.filename or report
                print(f"reproduce: report {report}: cannot write {what} ({e.strerror or e})",
                      file=err)
                return max(status, 1)
    finally:
        progress.close()
        if history is not None:
            history.close()
    return status


def main(which: str = "all", report_dir: str = None, **kw) -> int:
    """Kept for callers of the old interface."""
    return reproduce(which, report_dir, **kw)
