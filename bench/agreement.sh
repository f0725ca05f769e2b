#!/usr/bin/env bash
# The two clocks side by side: each job's bw and iops from `harness simulate`
# (virtual clock) over the same from a real fio run of the same job file
# (real clock, the installed engine), for the job files whose devices this
# host keeps up with: jobs/raid5-split-order.fio and jobs/bio-align.fio.
# bfq-groups.fio is left out: its slow-motion device (4k writes at ~23 us x
# 32) is faster than a 2-vCPU host's file writes, so the real run measures
# the host; uring-buffered-ra.fio's real run shares two CPUs with its io-wq
# workers (docs/reproductions/buffered.md). A timing comparison, so a benchmark and not a
# unit test: another tenant of the host moves the real-clock side.
# Prints `ratio agreement <job> <dir> <bw|iops>: X (target 0.85..1.15)`.
#
# Usage: bench/agreement.sh
# Environment: MDSPLIT_BUILD_DIR (the build with the Python module, default build/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/bench_lib.sh"
bench_copy_jobs "$root"
cd "$root"
/usr/bin/python3 - "$work/jobs" <<'PY'
import sys
from pathlib import Path
from harness.fio_runner import run_fio
from harness.simulate import simulate_job

jobs, bad = Path(sys.argv[1]), 0
for name in ("raid5-split-order.fio", "bio-align.fio"):
    real = run_fio(jobs / name)
    sim = simulate_job(jobs / name)
    for a, b in zip(real.jobs, sim["jobs"]):
        for ddir in ("read", "write"):
            if not a[ddir]["total_ios"]:
                continue
            for key in ("bw", "iops"):
                ratio = b[ddir][key] / a[ddir][key]
                ok = 0.85 <= ratio <= 1.15
                bad += not ok
                print(f"ratio agreement {name} {a['jobname']} {ddir} {key}: {ratio:.3f} "
                      f"(target 0.85..1.15){'' if ok else '  OUTSIDE'}")
sys.exit(1 if bad else 0)
PY
