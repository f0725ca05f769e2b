#!/usr/bin/env bash
# How much faster than its simulated time `harness simulate` runs the RAID5
# (jobs/raid5-split-order.fio, both variants) and BFQ (jobs/bfq-groups.fio,
# four runs of 8 writers) reproductions, from a fresh copy of jobs/ in a
# temporary directory:
#   simulated time = the virtual clock at the end of the run (loop time, the
#                    time fio would report, slow motion included)
#   wall time      = the run inside Python (the module already imported)
# Each job file runs with its members' data on files (what the engine does:
# the host's storage is read and written, and the virtual clock waits for it
# before it passes a request's modelled completion) and with --no-data
# (members go nowhere: the same figures, checked here, without the host's
# I/O). Prints `ratio simulate <job> <data|no-data>: X (target >= Y)`.
#
# Usage: bench/simulate.sh
# Environment:
#   MDSPLIT_BUILD_DIR   the build with the Python module (default build/)
#   MDSPLIT_BENCH_DIR   where the temporary directory goes (default /var/tmp)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/bench_lib.sh"
bench_copy_jobs "$root"
cd "$root"
/usr/bin/python3 - "$work/jobs" <<'EOF'
import sys, time
from pathlib import Path
from harness.simulate import simulate_job

jobs = Path(sys.argv[1])
missed = []
for name, target in (("raid5-split-order.fio", 10), ("bfq-groups.fio", 3)):
    figures = {}
    for data in (True, False):
        t0 = time.perf_counter()
        r = simulate_job(jobs / name, data=data)
        wall = time.perf_counter() - t0
        sim = r["simulated_ns"] / 1e9
        ios = sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in r["jobs"])
        figures[data] = [(j["read"], j["write"]) for j in r["jobs"]]
        label = "data" if data else "no-data"
        print(f"simulate {name} ({label}): {ios} I/Os, simulated {sim:.2f} s, "
              f"wall {wall:.2f} s")
        met = round(sim / wall, 1) >= target
        print(f"ratio simulate {name} {label}: {sim / wall:.1f} (target >= {target})"
              + ("" if met else "  below the target"))
        if not met:
            missed.append(f"{name} {label}")
    if figures[True] != figures[False]:
        print(f"simulate {name}: --no-data changed the figures", file=sys.stderr)
        sys.exit(1)
if missed:
    print("simulate.sh: below the target: " + ", ".join(missed), file=sys.stderr)
    sys.exit(1)
EOF
