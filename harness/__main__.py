"""Command line: python3 -m harness {run,reproduce} ..."""
import argparse
import json
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


def cmd_reproduce(args) -> int:
    from harness import reproduce
    paths.ensure_built()
    return reproduce.main(args.experiment, args.report_dir)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m harness")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one fio job file through the engine")
    r.add_argument("job")
    r.add_argument("--hosts", nargs="*", help="fio servers (fio --server) to run the job on")
    r.add_argument("fio_args", nargs="*", help="extra fio arguments (after --)")
    r.set_defaults(func=cmd_run)
    rp = sub.add_parser("reproduce", help="run the reproductions and print their tables")
    rp.add_argument("experiment", nargs="?", default="all",
                    choices=["all", "passthrough", "raid5", "bio-size", "bfq", "buffered"])
    rp.add_argument("--report-dir", default="reports/latest")
    rp.set_defaults(func=cmd_reproduce)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
