#!/usr/bin/env bash
# What BFQ costs per request: 8 jobs (thread=1, so they share one stack and
# one scheduler) doing 4k random reads, direct=1, on a passthrough device
# over a `null` member (no data, completes on the next loop turn), measured
# in one run with
#   (a) [device] scheduler = "none"
#   (b) [device] scheduler = "bfq"  (default [bfq] settings: slice_idle 8ms,
#       fixed group counting, one sync queue per job, all in the root group)
# The null member makes the scheduler's own work the difference between the
# two: the kernel's documentation puts BFQ at about 1.9 us per request
# against 0.7 us for mq-deadline (Documentation/block/bfq-iosched.rst).
#
# iodepth: 1 per job by default, like the psync jobs of the BFQ experiment
# (seed 004, jobs/bfq-groups.fio): at most 8 requests in flight, one per
# queue, so nearly every request makes its queue busy, gets it selected for
# service, dispatched and expired (no_more_requests) again; that is the path
# with the most scheduler work per request, the case this bench exists for.
# MDSPLIT_BENCH_IODEPTH=8 measures deeper queues (requests dispatched from
# an in-service queue without a new activation).
#
# The two runs alternate in rounds (a b, then b a, ...) so that drift (other
# load on a shared machine) hits both sides of the ratio alike. Each run's
# IOPS is the sum over the 8 jobs (group_reporting); each side's median is
# reported, and the ratio bfq/none (target >= 0.5) as the median of the
# per-round ratios.
#
# Usage: bench/bfq.sh [ENGINE.so] [RUNTIME_SECONDS]
#   ENGINE.so       default $MDSPLIT_ENGINE, then /usr/local/lib/mdsplit/libmdsplit.so
#   RUNTIME_SECONDS default $MDSPLIT_BENCH_RUNTIME, then 10 (each run)
# Environment:
#   MDSPLIT_BENCH_REPEATS  rounds of the two runs (default 3; the median is reported)
#   MDSPLIT_BENCH_IODEPTH  iodepth of each job (default 1)
#   MDSPLIT_BENCH_JOBS     number of jobs (default 8)
#   MDSPLIT_BENCH_DIR      where the temporary directory goes (default /var/tmp)
#   FIO                    the fio binary (default fio on PATH)
set -euo pipefail

engine=${1:-${MDSPLIT_ENGINE:-/usr/local/lib/mdsplit/libmdsplit.so}}
runtime=${2:-${MDSPLIT_BENCH_RUNTIME:-10}}
repeats=${MDSPLIT_BENCH_REPEATS:-3}
iodepth=${MDSPLIT_BENCH_IODEPTH:-1}
jobs=${MDSPLIT_BENCH_JOBS:-8}
base_dir=${MDSPLIT_BENCH_DIR:-/var/tmp}
fio_bin=${FIO:-fio}
python=/usr/bin/python3

die() {
    echo "bfq.sh: $*" >&2
    exit 1
}

[[ $runtime =~ ^[0-9]+$ && $runtime -gt 0 ]] \
    || die "runtime must be a whole number of seconds, got '$runtime'"
[[ $repeats =~ ^[0-9]+$ && $repeats -gt 0 ]] \
    || die "MDSPLIT_BENCH_REPEATS must be >= 1, got '$repeats'"
[[ $iodepth =~ ^[0-9]+$ && $iodepth -gt 0 ]] \
    || die "MDSPLIT_BENCH_IODEPTH must be >= 1, got '$iodepth'"
[[ $jobs =~ ^[0-9]+$ && $jobs -gt 0 ]] \
    || die "MDSPLIT_BENCH_JOBS must be >= 1, got '$jobs'"
command -v "$fio_bin" >/dev/null || die "fio not found (set FIO=/path/to/fio)"
[[ -x $python ]] || die "$python not found"
# fio's external: prefix needs a path with a slash; make it absolute.
[[ -f $engine ]] \
    || die "engine not found: $engine (pass it as the first argument or set MDSPLIT_ENGINE)"
engine=$(cd "$(dirname "$engine")" && pwd)/$(basename "$engine")

work=$(mktemp -d "$base_dir/mdsplit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Options shared by every measured run. thread=1: the jobs share one stack
# (a BFQ stack refuses to be named by several processes).
common=(--ioengine="external:$engine" --filename=md0 --rw=randread --bs=4k
        --iodepth="$iodepth" --numjobs="$jobs" --thread=1 --direct=1 --size=1g
        --time_based=1 --runtime="$runtime" --ramp_time=1 --norandommap=1
        --randrepeat=0 --group_reporting=1 --output-format=json)

echo "# bfq bench: 4k randread, $jobs jobs (thread=1, one stack), iodepth $iodepth each," \
     "direct=1, null member, ${runtime}s per run, $repeats round(s)"
echo "# fio: $("$fio_bin" --version)  engine: $engine"

for sched in none bfq; do
    cat >"$work/$sched.toml" <<EOF
# one null member (stores nothing) behind a passthrough device, scheduler $sched
[device]
kind = "passthrough"
scheduler = "$sched"

[[members]]
backend = "null"
size = "1g"
EOF
done

# IOPS of a finished run from fio's JSON (anything fio printed before the
# JSON object is skipped); with group_reporting the one entry is the sum
# over the jobs.
iops_of() {
    "$python" -c '
import json, sys
text = open(sys.argv[1]).read()
start = text.find("{")
if start < 0:
    sys.exit("no JSON in " + sys.argv[1])
jobs = json.loads(text[start:])["jobs"]
for job in jobs:
    if job.get("error"):
        sys.exit("fio job failed with error %d" % job["error"])
print("%.0f" % sum(job["read"]["iops"] for job in jobs))
' "$1"
}

# run SCHED : one measured run; prints its IOPS. The sidecar of the first
# job is kept to check that the scheduler really was in use.
run() {
    local sched=$1 out="$work/$1.json"
    # The engine's label (md0) is not a file: run where nothing is called so.
    if ! (cd "$work" && "$fio_bin" --name="$sched" "${common[@]}" \
              --mdsplit_config="$work/$sched.toml" --mdsplit_stats="$work/$sched.stats.json" \
              >"$out" 2>"$work/$sched.err"); then
        cat "$work/$sched.err" >&2
        die "run $sched failed"
    fi
    iops_of "$out"
}

samples_none=""
samples_bfq=""
for ((round = 1; round <= repeats; round++)); do
    if ((round % 2)); then order=(none bfq); else order=(bfq none); fi
    declare -A iops=()
    for sched in "${order[@]}"; do
        iops[$sched]=$(run "$sched")
    done
    samples_none+=" ${iops[none]}"
    samples_bfq+=" ${iops[bfq]}"
    printf '# round %d (%s): none %s  bfq %s\n' "$round" "${order[*]}" "${iops[none]}" "${iops[bfq]}"
done

# The bfq runs must have gone through BFQ: its sidecar counts dispatches.
"$python" - "$work/bfq.stats.json" <<'EOF'
import json, sys
stats = json.load(open(sys.argv[1]))
bfq = [d["bfq"] for d in stats["devices"] if d.get("bfq")]
if not bfq or bfq[0].get("dispatches", 0) == 0:
    sys.exit("bfq.sh: the bfq run's sidecar shows no BFQ dispatches")
b = bfq[0]
print("# last bfq run: %d dispatches, %d slices, %d idle periods, %d injected, hw_tag %d"
      % (b["dispatches"], b["slices"], b["idle_periods"], b["injected"], b["hw_tag"]))
EOF

"$python" - "$samples_none" "$samples_bfq" <<'EOF'
import statistics, sys
none, bfq = ([float(x) for x in arg.split()] for arg in sys.argv[1:3])
med = statistics.median
for label, values in (("(a) scheduler none", none), ("(b) scheduler bfq", bfq)):
    print("%-20s median %10.0f IOPS   runs: %s" % (label, med(values),
          " ".join("%.0f" % v for v in values)))
# Each round's pair ran back to back: its ratio is the least noisy figure.
ratios = [b / a for a, b in zip(none, bfq)]
print("# per-round ratios: %s" % " ".join("%.2f" % r for r in ratios))
print("# ratio of medians: %.2f" % (med(bfq) / med(none)))
print("ratio bfq/none: %.2f (target >= 0.5)" % med(ratios))
EOF
