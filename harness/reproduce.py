"""`python3 -m harness reproduce`: runs the experiments' job files on the
default file-backed members and prints their tables.

Each experiment runs from a copy of jobs/ in the report directory, as a user
would run it (plain `fio <job>.fio` with relative paths), and leaves there the
raw fio JSON, the sidecars, the traces and a Markdown summary."""
import json
import shutil
import sys
import time
from pathlib import Path

from harness.fio_runner import FioError, run_fio
from harness.paths import ROOT
from harness.sidecar import Sidecar

IOSTAT_COLUMNS = ["r_s", "rkB_s", "rrqm_s", "pct_rrqm", "r_await_ms", "rareq_sz_kb",
                  "w_s", "wkB_s", "w_await_ms", "aqu_sz", "pct_util"]


def iostat_table(sidecar: Sidecar) -> str:
    head = f"{'Device':<8}" + "".join(f"{c:>12}" for c in IOSTAT_COLUMNS)
    rows = [head]
    for d in sidecar.devices:
        rows.append(f"{d['name']:<8}" + "".join(f"{d[c]:>12.2f}" for c in IOSTAT_COLUMNS))
    return "\n".join(rows)


def job_table(result) -> str:
    rows = [f"{'job':<32}{'read IOPS':>12}{'read MiB/s':>12}{'write IOPS':>12}"
            f"{'write MiB/s':>12}{'clat mean us':>14}{'errors':>8}"]
    for j in result.jobs:
        clat = max(j["read"]["clat_ns"]["mean"], j["write"]["clat_ns"]["mean"]) / 1000
        rows.append(f"{j['jobname']:<32}{j['read']['iops']:>12.0f}{j['read']['bw'] / 1024:>12.1f}"
                    f"{j['write']['iops']:>12.0f}{j['write']['bw'] / 1024:>12.1f}{clat:>14.1f}"
                    f"{j['error']:>8}")
    return "\n".join(rows)


def prepare_jobs(report_dir: Path) -> Path:
    """A fresh copy of jobs/ (without member images) to run from."""
    dest = report_dir / "jobs"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ROOT / "jobs", dest, ignore=shutil.ignore_patterns("*.img", "*.state"))
    return dest


def run_passthrough(jobs: Path, out) -> dict:
    result = run_fio(jobs / "passthrough-demo.fio")
    print("== passthrough: the foundation demo (randwrite + crc32c verify, 4k randread QD32)", file=out)
    print(job_table(result), file=out)
    for path, sidecar in sorted(result.sidecars.items()):
        print(f"\n{path}:", file=out)
        print(iostat_table(sidecar), file=out)
    return {"fio": result.fio, "sidecars": {p: s.devices for p, s in result.sidecars.items()}}


EXPERIMENTS = {
    "passthrough": run_passthrough,
}


def main(which: str, report_dir: str) -> int:
    report = Path(report_dir).resolve()
    report.mkdir(parents=True, exist_ok=True)
    jobs = prepare_jobs(report)
    names = list(EXPERIMENTS) if which == "all" else [which]
    missing = [n for n in names if n not in EXPERIMENTS]
    if missing:
        print(f"reproduce: {', '.join(missing)} is not built yet; available: "
              f"{', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    summary = []
    status = 0
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name} ...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            raw = EXPERIMENTS[name](jobs, sys.stdout)
        except FioError as e:
            print(f"reproduce {name}: {e}\n{e.stderr}", file=sys.stderr)
            status = 1
            continue
        (report / f"{name}.json").write_text(json.dumps(raw, indent=1))
        summary.append(f"- {name}: {time.monotonic() - t0:.1f} s, raw results in {name}.json")
        print(file=sys.stdout)
    (report / "summary.md").write_text("# mdsplit reproduction\n\n" + "\n".join(summary) + "\n")
    print(f"report: {report}", file=sys.stderr)
    return status
