"""`python3 -m harness check`: is the newest run worse than the baseline?

The rule (docs/harness.md; `check --explain` prints it):

    For each experiment, the candidate is its newest recorded run (with
    --repeat N: the N runs just made, and the candidate value of a metric is
    their median). The baseline is the runs marked with
    `history --mark-baseline RUN` for that experiment on the same machine
    (hostname), or else the --window previous runs (default 5) on that
    machine. For each metric with a known direction (`better` in
    jobs/expectations.toml, else its unit suffix: _MBps, _MiBps, _IOPS are
    higher-is-better; _us, _ms, errors lower-is-better):

        m      = median(baseline values)
        spread = 1.4826 * median(|b - m|)      (MAD, scaled to a standard deviation)
        limit  = max(k * spread, floor * |m|, abs_floor)     k = 3, floor = 5%

    The metric regressed when the candidate is worse than m by more than
    limit in its bad direction (below m - limit for higher-is-better, above
    m + limit for lower-is-better). The median and MAD ignore one wild
    baseline run; the relative floor keeps deterministic metrics (spread 0)
    and short baselines from flagging run-to-run noise. A metric's own
    `tolerance` / `abs_tolerance` in expectations.toml replaces the floors.
    Metrics named machine.* are real-clock figures of the machine that ran
    them ("this machine": fio's own timing, the clock agreement, measured
    costs) and are never judged; check counts them on the experiment's line.
    check prints one line per metric (OK, REGRESSION, better, or why it was
    not judged) and exits 1 when any metric regressed, 0 otherwise (also when
    there is no baseline yet), 2 on a usage or database error.
"""
from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass

from harness import expectations as exp_mod
from harness.expectations import fmt
from harness.history import History

RULE = textwrap.dedent(
    __doc__.split("The rule (docs/harness.md; `check --explain` prints it):", 1)[1]).strip("\n")

DEFAULT_K = 3.0
DEFAULT_FLOOR = 0.05
DEFAULT_WINDOW = 5
MAD_TO_SIGMA = 1.4826


UNCHECKED_PREFIX = "machine."


def unchecked(metric: str) -> bool:
    """A real-clock figure of the machine that ran it (machine.*): never judged."""
    return metric.startswith(UNCHECKED_PREFIX)


def median(xs) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median of nothing")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def spread(xs) -> float:
    """1.4826 x the median absolute deviation (0 for fewer than 2 values)."""
    if len(xs) < 2:
        return 0.0
    m = median(xs)
    return MAD_TO_SIGMA * median([abs(x - m) for x in xs])


@dataclass
class Verdict:
    experiment: str
    metric: str
    status: str             # OK | REGRESSION | better | no-baseline | missing | new | no-direction
    value: float | None = None
    median: float | None = None
    spread: float | None = None
    limit: float | None = None
    n: int = 0
    better: str | None = None
    basis: str = ""         # which term set the limit: "spread" | "floor"

    @property
    def regressed(self) -> bool:
        return self.status == "REGRESSION"

    def line(self) -> str:
        name = f"{self.experiment}:{self.metric}"
        if self.status in ("OK", "REGRESSION", "better"):
            rel = ((self.value - self.median) / abs(self.median)) if self.median else None
            change = f"{rel:+.1%}" if rel is not None else f"{self.value - self.median:+.4g}"
            sign = "-" if self.better == "higher" else "+"
            lim = (f"{sign}{self.limit / abs(self.median):.1%}" if self.median
                   else f"{sign}{fmt(self.limit)}")
            return (f"{self.status:<10} {name:<48} {fmt(self.value):>10} vs {fmt(self.median):>10} "
                    f"(median of {self.n}, spread {fmt(self.spread)})  {change:>7}  "
                    f"limit {lim} ({self.basis}, {self.better} is better)")
        if self.status == "no-baseline":
            return f"{'-':<10} {name:<48} {fmt(self.value):>10}  no baseline run has it"
        if self.status == "missing":
            return (f"{'MISSING':<10} {name:<48} {'-':>10} vs {fmt(self.median):>10}  "
                    "in the baseline, not in the newest run")
        return f"{'-':<10} {name:<48} {fmt(self.value):>10}  no direction known: not judged"


def judge(values, baseline, better, k=DEFAULT_K, floor=DEFAULT_FLOOR, abs_floor=0.0):
    """(status, value, median, spread, limit, basis) of one metric."""
    value = median(values)
    m = median(baseline)
    s = spread(baseline)
    by_spread, by_floor = k * s, max(floor * abs(m), abs_floor)
    limit = max(by_spread, by_floor)
    basis = "spread" if by_spread >= by_floor and by_spread > 0 else "floor"
    worse = (m - value) if better == "higher" else (value - m)
    if worse > limit:
        status = "REGRESSION"
    elif -worse > limit:
        status = "better"
    else:
        status = "OK"
    return status, value, m, s, limit, basis


def select_runs(history: History, experiment: str, candidates: int = 1,
                window: int = DEFAULT_WINDOW, same_machine: bool = True):
    """(candidate runs, baseline runs, description) of one experiment."""
    newest = history.runs(experiment, source="mdsplit", limit=1)
    if not newest:
        return [], [], "no runs"
    host = newest[0].hostname if same_machine else None
    cands = history.runs(experiment, source="mdsplit", hostname=host, limit=max(1, candidates))
    first = min(r.run_id for r in cands)
    marked = [r for r in history.runs(experiment, source="mdsplit", hostname=host, baseline=True)
              if r.run_id < first]
    if marked:
        base, how = marked, "marked baseline"
    else:
        base = history.runs(experiment, source="mdsplit", hostname=host, before=first,
                            limit=window)
        how = f"previous {len(base)} run(s)"
    ids = lambda rs: ",".join(str(r.run_id) for r in sorted(rs, key=lambda r: r.run_id))  # noqa: E731
    where = f" on {host}" if host else ""
    desc = (f"{experiment}: newest run(s) {ids(cands)} (commit {cands[0].git_commit[:10]}) vs "
            + (f"{how} {ids(base)}{where}" if base else f"no baseline yet{where}"))
    return cands, base, desc


def check_experiment(history: History, experiment: str, *, candidates=1, window=DEFAULT_WINDOW,
                     k=DEFAULT_K, floor=DEFAULT_FLOOR, same_machine=True, expectations=None):
    """(description, [Verdict], candidate metrics as medians)."""
    if expectations is None:
        expectations = exp_mod.load()
    cands, base, desc = select_runs(history, experiment, candidates, window, same_machine)
    if not cands:
        return desc, [], {}
    every = list(dict.fromkeys(m for r in cands for m in r.metrics))
    current = {n: median([r.metrics[n] for r in cands if n in r.metrics]) for n in every}
    names = [n for n in every if not unchecked(n)]
    if len(names) < len(every):
        desc += (f"; {len(every) - len(names)} machine.* metric(s) not judged "
                 "(real clock, this machine)")
    verdicts = []
    section = exp_mod.section_of(experiment)
    e = expectations.get(section)
    for n in names:
        better = exp_mod.direction(section, n, expectations)
        if better is None:
            verdicts.append(Verdict(experiment, n, "no-direction", value=current[n]))
            continue
        bvals = [r.metrics[n] for r in base if n in r.metrics]
        if not bvals:
            verdicts.append(Verdict(experiment, n, "no-baseline", value=current[n], better=better))
            continue
        meta = e.metrics.get(n) if e else None
        f = meta.tolerance if meta and meta.tolerance is not None else floor
        af = meta.abs_tolerance if meta and meta.abs_tolerance is not None else 0.0
        cvals = [r.metrics[n] for r in cands if n in r.metrics]
        status, value, m, s, limit, basis = judge(cvals, bvals, better, k, f, af)
        verdicts.append(Verdict(experiment, n, status, value, m, s, limit, len(bvals), better, basis))
    seen = set(names)
    for n in dict.fromkeys(m for r in base for m in r.metrics):
        if n not in seen and not unchecked(n) and exp_mod.direction(section, n, expectations):
            verdicts.append(Verdict(experiment, n, "missing",
                                    median=median([r.metrics[n] for r in base if n in r.metrics])))
    return desc, verdicts, current


def run_check(history: History, experiments=None, *, candidates=1, window=DEFAULT_WINDOW,
              k=DEFAULT_K, floor=DEFAULT_FLOOR, same_machine=True, with_expectations=False,
              expectations=None, out=None) -> int:
    """Prints the verdicts; returns the exit status (1 on a regression)."""
    out = out or sys.stdout
    if expectations is None:
        expectations = exp_mod.load()
    names = experiments or history.experiments()
    if not names:
        print(f"check: no runs recorded in {history.path}", file=out)
        return 0
    regressions, failed = 0, 0
    for name in names:
        desc, verdicts, current = check_experiment(
            history, name, candidates=candidates, window=window, k=k, floor=floor,
            same_machine=same_machine, expectations=expectations)
        print(desc, file=out)
        for v in verdicts:
            print("  " + v.line(), file=out)
            regressions += v.regressed
        if with_expectations and current:
            for desc_c, passed, detail in exp_mod.evaluate_checks(
                    exp_mod.section_of(name), current, expectations):
                print(f"  {'PASS' if passed else 'FAIL':<10} {desc_c}: {detail}", file=out)
                failed += not passed
    summary = f"check: {regressions} regression(s)"
    if with_expectations:
        summary += f", {failed} failed expectation(s)"
    print(summary, file=out)
    return 1 if regressions or failed else 0
