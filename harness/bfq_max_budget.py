"""`python3 -m harness.bfq_max_budget [--runtime S] VALUE...`: seed 004's
non-root runs on the virtual clock with `[bfq] max_budget` set to each VALUE
(0: autotuned from the peak rate, as shipped; any other: held there, as a
user would set it), the median and range over jitter_seed 1-9 of each
figure (harness.sweep.bfq_runs, --no-data, over both cores). --runtime sets
the job file's runtime (loop seconds; device seconds are runtime / 32):
the shipped 30 s is 0.94 s of device time, less than the first peak-rate
interval (1 s, BFQ_RATE_REF_INTERVAL). A study of the mechanism in
docs/reproductions/bfq.md, not a checked figure."""
from __future__ import annotations

import argparse
import statistics

from harness import sweep
from harness.paths import ROOT

SEEDS = range(1, 10)


def settings(max_budget: int, runtime: int | None) -> list:
    """One setting per jitter seed: both stack files' max_budget and seed."""
    out = []
    for k in SEEDS:
        s = {f"bfq-{v}.toml": {"models.thread-nvme.jitter_seed": str(k),
                               "bfq.max_budget": str(max_budget)} for v in ("legacy", "fixed")}
        if runtime:
            s["bfq-groups.fio"] = {"global.runtime": str(runtime)}
        out.append(s)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m harness.bfq_max_budget")
    ap.add_argument("values", type=int, nargs="+", help="max_budget values (0: autotuned)")
    ap.add_argument("--runtime", type=int, help="the job file's runtime, loop seconds")
    args = ap.parse_args(argv)
    draws = [s for v in args.values for s in settings(v, args.runtime)]
    figs = sweep.bfq_runs(ROOT / "jobs", draws)
    n = len(SEEDS)
    print("max_budget  non-root legacy MiB/s median [min, max]  non-root fixed median")
    for i, v in enumerate(args.values):
        legacy = sorted(f["nonroot.before_MiBps"] for f in figs[i * n:(i + 1) * n])
        fixed = statistics.median(f["nonroot.after_MiBps"] for f in figs[i * n:(i + 1) * n])
        print(f"{v if v else 'auto':>10}  {statistics.median(legacy):8.2f} "
              f"[{legacy[0]:.1f}, {legacy[-1]:.1f}]  {fixed:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
