"""Command line: python3 -m harness {run,reproduce,history,check,compare} ...

  run JOB.fio [--hosts H ...]           one job file, fio JSON + sidecars summarised
  simulate JOB.fio [--section S ...]    the job file on the virtual clock (fio's JSON shape)
  reference EXPERIMENT                  kernel reference runs with fio's own engines
  reproduce [EXPERIMENT|all]            the reproductions, their tables and a report
  history [EXPERIMENT] [--metric M]     recorded runs (--mark-baseline RUN ...)
  check [EXPERIMENT ...] [--repeat N]   newest run vs baseline; exit 1 on a regression
  compare A B                           two result sets side by side (dirs, run ids, batches)
"""
import argparse
import json
import os
import shutil
import sys

from harness import paths
from harness.fio_runner import FioError, run_fio


def cmd_run(args) -> int:
    from harness.jobfile import JobFileError, read_input_text
    try:            # as simulate: no device, FIFO, binary or huge file (fio would hang on one)
        read_input_text(args.job, prog="run")
    except JobFileError as e:
        print(e, file=sys.stderr)
        return 2
    bad = _run_args_error(args)
    if bad:
        print(f"run: {bad}", file=sys.stderr)
        return 2
    paths.ensure_built()
    if args.hosts is not None:
        return cmd_run_hosts(args)
    try:
        if args.simulate:
            from harness.fio_runner import run_simulated
            from harness.simulate import SimulateError
            try:
                result = run_simulated(args.job, sections=args.section or None)
            except SimulateError as e:
                print(e, file=sys.stderr)
                return e.exit_code
        else:
            if not _need_fio("run"):
                return 1
            result = run_fio(args.job, timeout=args.timeout,
                             args=[f"--section={n}" for n in args.section or []] + args.fio_args)
    except FioError as e:       # one line: fio's first error line (the engine's, if first)
        print(f"run: {e}", file=sys.stderr)
        return 1
    summary = {
        "job_file": result.job_file,
        "jobs": [{"name": j["jobname"], "read_iops": j["read"]["iops"],
                  "write_iops": j["write"]["iops"], "read_bw_kib": j["read"]["bw"],
                  "write_bw_kib": j["write"]["bw"], "errors": j["error"]} for j in result.jobs],
        "sidecars": {p: {d["name"]: {"r_s": d["r_s"], "w_s": d["w_s"], "pct_util": d["pct_util"]}
                         for d in s.devices} for p, s in result.sidecars.items()},
    }
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


def _run_args_error(args) -> str:
    """What is wrong with run's options ('' when nothing): each applies to
    the modes where it means something, and is refused elsewhere."""
    import math
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        return f"--timeout {args.timeout:g}: allowed: a number of seconds > 0"
    if any(not n or n != n.strip() for n in args.section or []):
        return f"--section {args.section!r}: allowed: a job (section) name of the job file"
    if args.simulate and args.hosts is not None:
        return "--simulate with --hosts: allowed: one of them"
    if args.simulate and args.timeout is not None:
        return "--timeout with --simulate: allowed: --timeout with a fio run (local or --hosts)"
    if args.simulate and args.fio_args:
        return (f"fio arguments with --simulate ({' '.join(args.fio_args)}): allowed: none "
                "(simulate runs the job file as it is; --section selects jobs)")
    if args.results_dir is not None and args.hosts is None:
        return ("--results-dir without --hosts: allowed: --results-dir with --hosts (a local "
                "run writes sidecars where the job file names them)")
    return ""


def cmd_simulate(args) -> int:
    from harness import simulate
    paths.ensure_built()
    # Ctrl-C: the run stops its jobs, lets what they queued complete (member
    # files are left as the completed I/O made them) and raises
    # KeyboardInterrupt: "simulate: interrupted", exit 130, no report.
    try:
        result = simulate.simulate_job(args.job, sections=args.section or None, seed=args.seed,
                                       data=not args.no_data, report=args.output or "-")
    except simulate.SimulateError as e:
        print(e, file=sys.stderr)
        return e.exit_code
    text = simulate.dumps(result) if args.output_format == "json" else \
        simulate.normal_output(result)
    if args.output:
        try:
            with open(args.output, "w") as f:
                f.write(text)
        except OSError as e:
            print(f"simulate: --output {args.output}: cannot write it ({e.strerror}); "
                  "allowed: a file in a writable directory", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    # As fio: the output is whole, and a job that ended in error makes the
    # exit status non-zero, with one line per such job.
    for line in result["warnings"]:
        print(line, file=sys.stderr)
    failed = [j for j in result["jobs"] if j["jobname"] in result["jobs_in_error"]]
    for j in failed:
        print(f"simulate: job {j['jobname']}: error={j['error']} ({os.strerror(j['error'])})",
              file=sys.stderr)
    return 1 if failed else 0


# --- run --hosts (harness/hosts.py) ---------------------------------------------

def cmd_run_hosts(args) -> int:
    from harness import hosts
    if not args.hosts:
        print("run: --hosts needs at least one fio server (e.g. ip:10.0.0.2,8765)", file=sys.stderr)
        return 2
    if not _need_fio("run"):
        return 1
    try:
        result = hosts.run_hosts(args.job, args.hosts, args=args.fio_args,
                                 results_dir=args.results_dir, timeout=args.timeout,
                                 sections=args.section)
    except FioError as e:
        print(f"run: {e}", file=sys.stderr)
        return 2 if isinstance(e, hosts.HostsUsageError) else 1
    json.dump(hosts.summary(result), sys.stdout, indent=2)
    print()
    for h in result.hosts.values():
        if h.missing_sidecars:
            print(f"run: {h.host}: no sidecar at {', '.join(h.missing_sidecars)} (is "
                  f"{result.results_dir} shared with that host?)", file=sys.stderr)
    return 0


# --- reference (harness/experiments/<name>.py: reference(); kernel_fixtures.py) ---

def reference_modules() -> dict:
    """{name: module} of the experiments with a kernel reference (a
    `reference(args, progress)` in harness/experiments/<name>.py); each
    states the reference options it takes (REFERENCE_OPTIONS, dest:
    default) and --emulator's words besides a report (EMULATOR_WORDS)."""
    from harness import reproduce
    mods = {n: reproduce.load_experiment(n) for n in reproduce.available()}
    return {n: m for n, m in mods.items() if hasattr(m, "reference")}


def _reference_option_error(args, option_flags: dict) -> str:
    """An option given that args.what does not state in its
    REFERENCE_OPTIONS (it would have no effect; '' when none); the options
    not given get args.what's defaults (None: not its option).
    option_flags: dest -> the option as typed."""
    import copy
    mods = reference_modules()
    takes = {d: [n for n, m in mods.items() if d in getattr(m, "REFERENCE_OPTIONS", {})]
             for d in option_flags}
    own = getattr(mods.get(args.what), "REFERENCE_OPTIONS", {})
    for dest, option in option_flags.items():
        if getattr(args, dest) is None:
            setattr(args, dest, copy.copy(own.get(dest)))
        elif dest not in own:
            allowed = sorted(option_flags[d] for d in own)
            return (f"{option} applies to {' and '.join(takes[dest])} only; allowed for "
                    f"{args.what}: {', '.join(allowed) or 'none of these'} (and --emulator, "
                    "--keep, --quiet, --no-history, --db)")
    return ""


def _reference_args_error(args) -> str:
    """What is wrong with reference's arguments ('' when nothing), checked
    before anything runs: one line naming the option and what is allowed
    (they used to end in a ValueError traceback, or in `skipped: ...` with
    exit 0 after fio had failed on them)."""
    import math
    if bad := _reference_option_error(args, args.reference_options):
        return bad
    bad = [d for d in args.depths or [] if d < 1]
    if bad:
        return f"--depths {' '.join(map(str, args.depths))}: allowed: iodepths >= 1 (e.g. 1 2 4 32)"
    if args.depths is not None and len(set(args.depths)) != len(args.depths):
        return f"--depths {' '.join(map(str, args.depths))}: allowed: each iodepth once"
    if args.rounds is not None and args.rounds < 1:
        return f"--rounds {args.rounds}: allowed: a whole number >= 1"
    if args.runtime is not None and not (math.isfinite(args.runtime) and args.runtime >= 0.001):
        return f"--runtime {args.runtime:g}: allowed: a number of seconds >= 0.001 (e.g. 0.5, 3)"
    if args.delay_scale is not None and not (math.isfinite(args.delay_scale)
                                             and args.delay_scale >= 0):
        return f"--delay-scale {args.delay_scale:g}: allowed: a number >= 0 (e.g. 0.1, 1)"
    from harness.units import parse_size
    try:
        args.size = None if args.size_text is None else parse_size(args.size_text)
    except ValueError:
        args.size = 0
    if args.size is not None and (args.size < 4096 or args.size % 4096):
        return (f"--size {args.size_text}: allowed: a multiple of 4k, at least 4k "
                "(e.g. 256m, 4g)")
    words = getattr(reference_modules()[args.what], "EMULATOR_WORDS", ("none",))
    if args.emulator is not None and args.emulator not in words:
        from harness.experiment import find_report
        where, found, _ = find_report(args.emulator, args.what)
        if found is None:
            return (f"--emulator {args.emulator}: no {args.what} report there (no result.json "
                    f"in it, its {args.what}/ or as the file itself); allowed: a report "
                    f"directory, its {args.what}/ directory, a result.json, or "
                    + " or ".join(f"'{w}'" for w in words))
    return ""


def reference_experiments() -> list:
    """The experiments with a kernel reference, in `reproduce all`'s order."""
    return list(reference_modules())


def cmd_reference_vm(args) -> int:
    import time
    from pathlib import Path
    from harness import paths
    from harness.vm import reference
    if args.what is not None:
        print(f"reference: --vm with {args.what}: allowed: one of them", file=sys.stderr)
        return 2
    if not Path(args.vm).is_file():
        print(f"reference --vm {args.vm}: no such job file", file=sys.stderr)
        return 2
    report = Path(args.vm_report or paths.ROOT / "reports" / time.strftime("vm-%Y%m%d-%H%M%S"))
    progress = (lambda text: print(text, file=sys.stderr)) if not args.quiet else None
    return reference.run(Path(args.vm), report, kernel=args.kernel, progress=progress)


def cmd_reference(args) -> int:
    import time
    from harness import reproduce
    if args.vm is not None:
        return cmd_reference_vm(args)
    if args.what is None:
        print("reference: allowed: an experiment (" + ", ".join(reference_experiments()) +
              ") or --vm JOB.fio", file=sys.stderr)
        return 2
    for option, value in (("--kernel", args.kernel), ("--report-dir", args.vm_report)):
        if value is not None:
            print(f"reference {args.what}: {option} applies to --vm only", file=sys.stderr)
            return 2
    from harness.kernel_fixtures import ReferenceUnavailable
    bad = _reference_args_error(args)
    if bad:
        print(f"reference {args.what}: {bad}", file=sys.stderr)
        return 2
    if not _need_fio("reference"):
        return 1
    if not args.no_history:             # a bad --db is refused before the kernel run
        from harness.history import History, HistoryError
        try:
            History(args.db).close()
        except HistoryError as e:
            print(f"reference {args.what}: history database: {e}", file=sys.stderr)
            return 2
    made = []
    if args.keep is not None:           # new or empty, as reproduce --report-dir: nothing replaced
        try:
            _, made = reproduce.claim_report_dir(
                args.keep, "--keep", "allowed: a new directory or an empty one")
        except reproduce.ReportDirError as e:
            print(f"reference {args.what}: {e}", file=sys.stderr)
            return 2
    t0 = time.monotonic()
    progress = (lambda text: print(text, file=sys.stderr)) if not args.quiet else None
    try:
        result = reproduce.load_experiment(args.what).reference(args, progress)
    except ReferenceUnavailable as e:
        print(f"reference {args.what}: skipped: {e}")
        return 0
    finally:
        reproduce.release_report_dir(made)      # the directories made, if nothing was kept
    for t in result.tables:
        print(t)
        print()
    if not args.no_history:
        from harness.history import History, HistoryError
        try:
            with History(args.db) as h:
                run_id = h.record(result.name, result.metrics, source="kernel",
                                  duration_s=time.monotonic() - t0)
            print(f"recorded as run {run_id} (experiment {result.name}, source kernel)",
                  file=sys.stderr)
        except (HistoryError, OSError, ValueError) as e:
            print(f"reference: history database: {e}", file=sys.stderr)
            return 1
    return 0


def _need_fio(what: str) -> bool:
    if shutil.which("fio"):
        return True
    print(f"{what}: fio is not installed (apt-get install fio, or ./mdsplit reproduce)",
          file=sys.stderr)
    return False


def cmd_reproduce(args) -> int:
    from harness import reproduce
    if not _need_fio("reproduce"):
        return 1
    paths.ensure_built()
    from harness.kernel_fixtures import sigterm_as_interrupt
    with sigterm_as_interrupt():        # SIGTERM as ^C: fio killed, images removed, exit 130
        return reproduce.reproduce(args.experiment, args.report_dir, db=args.db,
                                   record=not args.no_history, strict=args.strict,
                                   keep_images=args.keep_images, sweeps=not args.no_sweep,
                                   command="python3 -m harness " + " ".join(args.argv))


def _open_history(args, must_exist=True, mode="ro"):
    """The history database of --db (read-only unless mode says otherwise:
    `history`, `check` and `compare` never create or alter it), or None
    after one line on stderr saying why not."""
    from harness.history import History, HistoryError, db_path
    p = db_path(args.db)
    try:
        missing = not p.exists() and not p.is_symlink()
    except OSError:
        missing = False                     # History names the reason (e.g. too long)
    if must_exist and missing:
        print(f"{args.cmd}: no history database at {p} (run `reproduce` first, or give --db)",
              file=sys.stderr)
        return None
    try:
        return History(p, mode=mode)
    except HistoryError as e:
        print(f"{args.cmd}: --db {e}", file=sys.stderr)
        return None


def cmd_sweep(args) -> int:
    from harness import sweep
    own = sweep.experiment_sweeps()     # experiments sweeping a range of their own
    known = list(sweep.SWEEPS) + list(own)
    names = known if args.which == "all" else [args.which]
    if any(n not in known for n in names):
        print(f"sweep: {args.which}: allowed: {', '.join(known)}, all", file=sys.stderr)
        return 2
    if args.draws is not None and args.draws < 1:
        print(f"sweep: --draws {args.draws}: allowed: an integer >= 1", file=sys.stderr)
        return 2
    for n in names:
        if n in own:
            own[n].sweep_report(sys.stdout)     # a grid of its own: --draws does not apply
        else:
            sweep.sweep(n, n=args.draws)
    return 0


def cmd_history(args) -> int:
    from harness.history import HistoryError, format_runs
    marking = args.mark_baseline or args.unmark_baseline
    h = _open_history(args, mode="rw" if marking else "ro")
    if h is None:
        return 2
    with h:
        try:
            if marking:
                n = h.mark_baseline(marking, on=bool(args.mark_baseline))
                print(f"history: {n} run(s) {'marked as' if args.mark_baseline else 'no longer'} "
                      f"baseline", file=sys.stderr)
                return 0
            runs = h.runs(args.experiment, limit=args.limit)
        except HistoryError as e:
            print(f"history: {e}", file=sys.stderr)
            return 2
        if args.metric:
            import fnmatch
            runs = [r for r in runs if any(fnmatch.fnmatchcase(m, args.metric) for m in r.metrics)]
        if args.json:
            json.dump([{**{k: v for k, v in r.__dict__.items()}} for r in runs], sys.stdout, indent=1)
            print()
            return 0
        if not runs:
            print(f"history: no runs{' of ' + args.experiment if args.experiment else ''} in {h.path}")
            return 0
        print(format_runs(runs, args.metric))
    return 0


def cmd_check(args) -> int:
    from harness import check, reproduce
    from harness.history import HistoryError
    if args.explain:
        print(check.RULE)
        return 0
    names = args.experiment or None
    if args.repeat:
        if not _need_fio("check"):
            return 1
        paths.ensure_built()
        for n in names or ["all"]:
            status = reproduce.reproduce(n, None, db=args.db, quiet=True, repeat=args.repeat,
                                         sweeps=False, command="python3 -m harness " + " ".join(args.argv))
            if status:
                print(f"check: reproduce {n} exited {status}; not checking", file=sys.stderr)
                return 2
    h = _open_history(args, must_exist=not args.repeat)
    if h is None:
        return 2
    with h:
        try:
            if names:
                known = h.experiments()
                for n in names:
                    if n not in known:
                        print(f"check: no runs of {n!r} in {h.path}", file=sys.stderr)
                        return 2
            return check.run_check(h, names, candidates=args.repeat or args.last,
                                   window=args.window, k=args.k, floor=args.floor,
                                   same_machine=not args.any_machine,
                                   with_expectations=args.expectations)
        except HistoryError as e:
            print(f"check: {e}", file=sys.stderr)
            return 2


def cmd_compare(args) -> int:
    from harness import compare
    from harness.history import HistoryError
    h = None
    try:
        # The history is opened (read-only) only when a side names a run,
        # a batch or `latest`: `compare thread DIR` never reads --db.
        if compare.needs_history(args.a) or compare.needs_history(args.b):
            from harness.history import db_path
            try:
                exists = db_path(args.db).exists()
            except OSError:
                exists = True               # History names the reason
            if exists:
                h = _open_history(args)
                if h is None:
                    return 2
        la, a = compare.load_side(args.a, h)
        lb, b = compare.load_side(args.b, h)
    except (compare.CompareError, HistoryError, OSError, ValueError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    finally:
        if h is not None:
            h.close()
    rows = compare.compare(a, b)
    if args.metric:
        import fnmatch
        rows = [r for r in rows if fnmatch.fnmatchcase(r[0], args.metric)
                or fnmatch.fnmatchcase(r[0].split(":", 1)[-1], args.metric)]
    if args.common:
        rows = [r for r in rows if r[1] is not None and r[2] is not None]
    if rows:
        print(compare.format_table(la, lb, rows))
    if not any(r[1] is not None and r[2] is not None for r in rows):
        # Nothing side by side: one line, exit 1 (a script sees that nothing
        # was compared); the table, when there is one, shows what each has.
        what = f" matching --metric {args.metric}" if args.metric else ""
        print(f"compare: nothing to compare: A ({la}) and B ({lb}) have no metric{what} "
              "in common", file=sys.stderr)
        return 1
    return 0


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line, "<prog>: <message>", exit 2 (the
    usage it printed before is what -h shows); subcommands' parsers too."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python3 -m harness",
                      description="mdsplit harness: reproductions, history, checks")
    sub = p.add_subparsers(dest="cmd", required=True)
    db_help = "history database (default $MDSPLIT_HISTORY or reports/history.sqlite)"
    from harness import reproduce

    r = sub.add_parser("run", help="run one fio job file through the engine")
    r.add_argument("job")
    r.add_argument("--hosts", nargs="*", help="fio servers (fio --server) to run the job on, "
                                              "e.g. ip:10.0.0.2,8765 (fio's client/server mode)")
    r.add_argument("--results-dir", help="with --hosts: where each host's sidecars and traces go "
                                         "(RESULTS/<host>/...; a directory the hosts share; "
                                         "default hosts/ beside the job file)")
    r.add_argument("--timeout", type=float, default=None,
                   help="give up on fio after N s (fio and its job processes are killed)")
    r.add_argument("--simulate", action="store_true",
                   help="run on the virtual clock (harness simulate) instead of real fio")
    r.add_argument("--section", action="append", metavar="NAME",
                   help="only this job (repeatable), as fio's --section")
    r.add_argument("fio_args", nargs="*", default=[], help="extra fio arguments (after --)")
    r.set_defaults(func=cmd_run)

    sp = sub.add_parser("simulate", help="run a job file on the virtual clock (deterministic)")
    sp.add_argument("job")
    sp.add_argument("--section", action="append", metavar="NAME",
                    help="only this job (repeatable), as fio's --section")
    sp.add_argument("--output", metavar="FILE", help="write the output here instead of stdout")
    sp.add_argument("--output-format", choices=["normal", "json"], default="normal")
    sp.add_argument("--seed", type=int, default=None,
                    help="base random seed (default 137, fio's randrepeat=1: every run the same)")
    sp.add_argument("--no-data", action="store_true",
                    help="members on files are not read or written (same figures, no host I/O; "
                         "verify reads are timed, not compared)")
    sp.set_defaults(func=cmd_simulate)

    kp = sub.add_parser("reference", help="kernel reference runs with fio's own engines "
                                          "(root, loop device, tracefs; bfq: cgroups)")
    kp.add_argument("what", nargs="?", choices=reference_experiments())
    kp.add_argument("--vm", metavar="JOB.fio",
                    help="run the job file in the emulator and on real kernels in a VM "
                         "(docs/vm-reference.md)")
    kp.add_argument("--kernel", help="--vm: the kernel (stock, fixed, debian-6.12; default "
                                     "from each stack's split_order: legacy debian-6.12, "
                                     "fixed fixed)")
    kp.add_argument("--report-dir", dest="vm_report",
                    help="--vm: where the traces and diff.md go (default reports/vm-<time>)")
    kp.add_argument("--keep", metavar="DIR", help="keep job files, fio JSON and traces in DIR")
    # The experiment-specific options default to None: _reference_option_error
    # refuses one an experiment does not state in its REFERENCE_OPTIONS, then fills in
    # that experiment's defaults.
    kp.add_argument("--no-hugepages", action="store_true", default=None,
                    help="bio-size: skip the mem=mmaphuge rows")
    kp.add_argument("--emulator", metavar="REPORT",
                    help="bio-size: the emulator's distributions from this report, 'run' "
                         "(the virtual-clock run now) or 'none' (default "
                         "reports/latest/bio-size, else run); bfq: the emulator's fixed root/non-root "
                         "MiB/s from this report, 'run' (run those two parts now) or 'none' "
                         "(default reports/latest/bfq, else the newest bfq run in the history, "
                         "else run); buffered: the emulator's forced-ra columns from this "
                         "report or 'none' (default reports/latest/buffered)")
    kp.add_argument("--depths", type=int, nargs="+", default=None,
                    help="buffered: iodepths (default 1 2 4 ... 128)")
    kp.add_argument("--runtime", type=float, default=None,
                    help="buffered: seconds per iodepth (3); bfq: each writer's runtime "
                         "(default the job file's)")
    kp.add_argument("--delay-scale", type=float, default=None,
                    help="bfq: multiply the job file's startdelays (1)")
    kp.add_argument("--rounds", type=int, default=None,
                    help="bfq: root/non-root alternations, medians reported (3)")
    kp.add_argument("--no-warmup", action="store_true", default=None,
                    help="bfq: no unmeasured first run (allocating the sparse file's blocks)")
    kp.add_argument("--size", dest="size_text", default=None,
                    help="buffered: device size, a multiple of 4k (4g)")
    kp.add_argument("--target", choices=["auto", "loop", "file"], default=None,
                    help="buffered: loop device (setra 0) or file (fadvise_hint=random)")
    kp.add_argument("--quiet", action="store_true", help="no progress lines")
    kp.add_argument("--no-history", action="store_true", help="do not record the run")
    kp.add_argument("--db", help=db_help)
    declared = {d for m in reference_modules().values() for d in getattr(m, "REFERENCE_OPTIONS", {})}
    kp.set_defaults(func=cmd_reference, reference_options={
        a.dest: a.option_strings[0] for a in kp._actions if a.dest in declared})

    rp = sub.add_parser("reproduce", help="run the reproductions, print their tables, write a report")
    rp.add_argument("experiment", nargs="?", default="all",
                    help=f"{', '.join(reproduce.available())} or all (default)")
    rp.add_argument("--report-dir", help="report directory (default reports/<timestamp>, "
                                         "with reports/latest pointing at it)")
    rp.add_argument("--db", help=db_help)
    rp.add_argument("--no-history", action="store_true", help="do not record the runs")
    rp.add_argument("--strict", action="store_true", help="exit 1 when a check fails")
    rp.add_argument("--no-sweep", action="store_true",
                    help="skip each thread's sweep (the bands of `harness sweep`)")
    rp.add_argument("--keep-images", action="store_true",
                    help="keep the member image files in the report (removed by default)")
    rp.set_defaults(func=cmd_reproduce)

    wp = sub.add_parser("sweep", help="the parameters a fit does not pin, swept: each thread "
                                      "figure as a band (virtual clock, --no-data, all cores)")
    from harness.sweep import SWEEPS
    wp.add_argument("which", nargs="?", default="all",
                    help=f"{', '.join(SWEEPS)}, an experiment with a range of its own "
                         "(raid5-buffered) or all (default)")
    wp.add_argument("--draws", type=int, default=None, help="draws per sweep (default: its own)")
    wp.set_defaults(func=cmd_sweep)

    hp = sub.add_parser("history", help="list recorded runs; mark baselines")
    hp.add_argument("experiment", nargs="?")
    hp.add_argument("--metric", help="show metrics matching this glob (e.g. 'fixed.*')")
    hp.add_argument("--limit", type=int, default=50, help="newest N runs (default 50; >= 1)")
    hp.add_argument("--json", action="store_true", help="runs and metrics as JSON")
    hp.add_argument("--mark-baseline", nargs="+", metavar="RUN",
                    help="mark runs (ids, batch names or report directories) as the baseline "
                         "`check` compares to")
    hp.add_argument("--unmark-baseline", nargs="+", metavar="RUN")
    hp.add_argument("--db", help=db_help)
    hp.set_defaults(func=cmd_history)

    cp = sub.add_parser("check", help="newest run vs baseline; exit 1 on a regression")
    cp.add_argument("experiment", nargs="*", help="experiments (default: every recorded one)")
    cp.add_argument("--repeat", type=int, default=0, metavar="N",
                    help="run the experiment(s) N times first; their median is the candidate")
    cp.add_argument("--last", type=int, default=1, metavar="N",
                    help="without --repeat: the newest N runs are the candidate (default 1)")
    cp.add_argument("--window", type=int, default=5, metavar="N",
                    help="baseline = the N runs before the candidate, unless runs are marked "
                         "(default 5)")
    cp.add_argument("--k", type=float, default=3.0, help="baseline spreads a metric may move (default 3; >= 0, 0: the floor alone)")
    cp.add_argument("--floor", type=float, default=0.05,
                    help="relative change always allowed (default 0.05 = 5%%; >= 0)")
    cp.add_argument("--any-machine", action="store_true",
                    help="baseline from any machine (default: the newest run's hostname)")
    cp.add_argument("--expectations", action="store_true",
                    help="also evaluate expectations.toml's checks; exit 1 if one fails")
    cp.add_argument("--explain", action="store_true", help="print the rule and exit")
    cp.add_argument("--db", help=db_help)
    cp.set_defaults(func=cmd_check)

    mp = sub.add_parser("compare", help="two result sets side by side")
    mp.add_argument("a", help="report dir, run id, batch, 'thread[:EXP]' or 'latest[:EXP]'")
    mp.add_argument("b")
    mp.add_argument("--metric", help="only metrics matching this glob")
    mp.add_argument("--common", action="store_true", help="only metrics both sides have")
    mp.add_argument("--db", help=db_help)
    mp.set_defaults(func=cmd_compare)
    return p


def parse_args(argv: list):
    """build_parser's parse, except that `run`'s fio arguments are all that
    follows its first `--`: argparse matches the fio_args positional together
    with the job, so after an option (`run JOB --section a -- --runtime=1`)
    it left them "unrecognized"."""
    if argv[:1] == ["run"] and "--" in argv:
        i = argv.index("--")
        args = build_parser().parse_args(argv[:i])
        args.fio_args = args.fio_args + argv[i + 1:]
        return args
    return build_parser().parse_args(argv)


def bad_value(args) -> str | None:
    """The one-line error for an option value the parser accepts but the
    command cannot use (None when all are fine)."""
    import math
    cmd = args.cmd
    counts = {"history": ("limit",), "check": ("last", "window")}.get(cmd, ())
    for name in counts:
        v = getattr(args, name)
        if v < 1:
            return f"{cmd}: --{name} {v}: allowed: an integer >= 1"
    if cmd == "check":
        if args.repeat < 0:
            return f"check: --repeat {args.repeat}: allowed: an integer >= 1 (0 or none: no runs)"
        if not (math.isfinite(args.k) and args.k >= 0):
            return (f"check: --k {args.k}: allowed: a finite number >= 0 (how many baseline "
                    "spreads a metric may move; 0: the floor alone)")
        if not (math.isfinite(args.floor) and args.floor >= 0):
            return (f"check: --floor {args.floor}: allowed: a finite number >= 0 (relative "
                    "change always allowed, 0.05 = 5%)")
    if cmd == "history" and args.mark_baseline and args.unmark_baseline:
        return ("history: --mark-baseline and --unmark-baseline together: allowed: one of "
                "them per command")
    return None


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    args.argv = argv
    error = bad_value(args)
    if error:
        print(error, file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except paths.BuildMissing as e:         # one line; the harness never builds by itself
        print(f"{args.cmd}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{args.cmd}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:                 # `... | head`: the reader went away
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
