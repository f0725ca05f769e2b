"""Command line: python3 -m harness {run,reproduce,history,check,compare} ...

  run JOB.fio [--hosts H ...]           one job file, fio JSON + sidecars summarised
  reproduce [EXPERIMENT|all]            the reproductions, their tables and a report
  history [EXPERIMENT] [--metric M]     recorded runs (--mark-baseline RUN ...)
  check [EXPERIMENT ...] [--repeat N]   newest run vs baseline; exit 1 on a regression
  compare A B                           two result sets side by side (dirs, run ids, batches)
"""
import argparse
import json
import shutil
import sys

from harness import paths
from harness.fio_runner import FioError, run_fio


def cmd_run(args) -> int:
    paths.ensure_built()
    try:
        result = run_fio(args.job, args=args.fio_args, hosts=args.hosts)
    except FioError as e:
        print(e, file=sys.stderr)
        print(e.stderr, file=sys.stderr, end="")
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
    return reproduce.reproduce(args.experiment, args.report_dir, db=args.db,
                               record=not args.no_history, strict=args.strict,
                               keep_images=args.keep_images,
                               command="python3 -m harness " + " ".join(args.argv))


def _open_history(args, must_exist=True):
    from harness.history import History, HistoryError, db_path
    p = db_path(args.db)
    if must_exist and not p.exists():
        print(f"{args.cmd}: no history database at {p} (run `reproduce` first, or give --db)",
              file=sys.stderr)
        return None
    try:
        return History(p)
    except HistoryError as e:
        print(f"{args.cmd}: {e}", file=sys.stderr)
        return None


def cmd_history(args) -> int:
    from harness.history import HistoryError, format_runs
    h = _open_history(args)
    if h is None:
        return 2
    with h:
        try:
            if args.mark_baseline or args.unmark_baseline:
                refs = args.mark_baseline or args.unmark_baseline
                n = h.mark_baseline(refs, on=bool(args.mark_baseline))
                print(f"history: {n} run(s) {'marked as' if args.mark_baseline else 'no longer'} "
                      f"baseline", file=sys.stderr)
                return 0
        except HistoryError as e:
            print(f"history: {e}", file=sys.stderr)
            return 2
        runs = h.runs(args.experiment, limit=args.limit)
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
                                         command="python3 -m harness " + " ".join(args.argv))
            if status:
                print(f"check: reproduce {n} exited {status}; not checking", file=sys.stderr)
                return 2
    h = _open_history(args, must_exist=not args.repeat)
    if h is None:
        return 2
    with h:
        if names:
            known = h.experiments()
            for n in names:
                if n not in known:
                    print(f"check: no runs of {n!r} in {h.path}", file=sys.stderr)
                    return 2
        return check.run_check(h, names, candidates=args.repeat or args.last, window=args.window,
                               k=args.k, floor=args.floor, same_machine=not args.any_machine,
                               with_expectations=args.expectations)


def cmd_compare(args) -> int:
    from harness import compare
    from harness.history import History, db_path
    h = History(db_path(args.db)) if db_path(args.db).exists() else None
    try:
        la, a = compare.load_side(args.a, h)
        lb, b = compare.load_side(args.b, h)
    except (compare.CompareError, OSError, ValueError) as e:
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
    print(compare.format_table(la, lb, rows))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m harness",
                                description="mdsplit harness: reproductions, history, checks")
    sub = p.add_subparsers(dest="cmd", required=True)
    db_help = "history database (default $MDSPLIT_HISTORY or reports/history.sqlite)"

    r = sub.add_parser("run", help="run one fio job file through the engine")
    r.add_argument("job")
    r.add_argument("--hosts", nargs="*", help="fio servers (fio --server) to run the job on")
    r.add_argument("fio_args", nargs="*", help="extra fio arguments (after --)")
    r.set_defaults(func=cmd_run)

    rp = sub.add_parser("reproduce", help="run the reproductions, print their tables, write a report")
    rp.add_argument("experiment", nargs="?", default="all",
                    help="passthrough, raid5, bio-size, bfq, buffered or all (default)")
    rp.add_argument("--report-dir", help="report directory (default reports/<timestamp>, "
                                         "with reports/latest pointing at it)")
    rp.add_argument("--db", help=db_help)
    rp.add_argument("--no-history", action="store_true", help="do not record the runs")
    rp.add_argument("--strict", action="store_true", help="exit 1 when a check fails")
    rp.add_argument("--keep-images", action="store_true",
                    help="keep the member image files in the report (removed by default)")
    rp.set_defaults(func=cmd_reproduce)

    hp = sub.add_parser("history", help="list recorded runs; mark baselines")
    hp.add_argument("experiment", nargs="?")
    hp.add_argument("--metric", help="show metrics matching this glob (e.g. 'fixed.*')")
    hp.add_argument("--limit", type=int, default=50, help="newest N runs (default 50)")
    hp.add_argument("--json", action="store_true", help="runs and metrics as JSON")
    hp.add_argument("--mark-baseline", nargs="+", metavar="RUN",
                    help="mark runs (ids or batch names) as the baseline `check` compares to")
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
    cp.add_argument("--k", type=float, default=3.0, help="spreads allowed (default 3)")
    cp.add_argument("--floor", type=float, default=0.05,
                    help="relative change always allowed (default 0.05 = 5%%)")
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


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    if getattr(args, "repeat", 0) and args.repeat < 0:
        print("check: --repeat must be >= 1", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"{args.cmd}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:                 # `... | head`: the reader went away
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
