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
# shellcheck source=bench_lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

bench_parse_env "$@"
iodepth=${MDSPLIT_BENCH_IODEPTH:-1}
jobs=${MDSPLIT_BENCH_JOBS:-8}
require_positive "$iodepth" "MDSPLIT_BENCH_IODEPTH must be >= 1, got '$iodepth'"
require_positive "$jobs" "MDSPLIT_BENCH_JOBS must be >= 1, got '$jobs'"
bench_make_work

# Options shared by every measured run. thread=1: the jobs share one stack
# (a BFQ stack refuses to be named by several processes).
common=(--ioengine="external:$engine" --filename=md0 --rw=randread --bs=4k
        --iodepth="$iodepth" --numjobs="$jobs" --thread=1 --direct=1 --size=1g
        --time_based=1 --runtime="$runtime" --ramp_time=1 --norandommap=1
        --randrepeat=0 --group_reporting=1)

echo "# bfq bench: 4k randread, $jobs jobs (thread=1, one stack), iodepth $iodepth each," \
     "direct=1, null member, ${runtime}s per run, $repeats round(s)"
print_fio_line

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

# run_case SCHED : one measured run; prints its IOPS (with group_reporting
# the sum over the jobs). The sidecar of the first job is kept to check that
# the scheduler really was in use.
run_case() {
    run_fio_metric "$1" "$1" iops --name="$1" "${common[@]}" \
        --mdsplit_config="$work/$1.toml" --mdsplit_stats="$work/$1.stats.json"
}

print_round() {
    printf '# round %d (%s): none %s  bfq %s\n' "$1" "${order[*]}" "${result[none]}" "${result[bfq]}"
}

run_rounds none bfq

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

print_samples 20 "(a) scheduler none" "${samples[none]}"
print_samples 20 "(b) scheduler bfq" "${samples[bfq]}"
echo "# per-round ratios: $(round_ratios "${samples[none]}" "${samples[bfq]}")"
echo "# ratio of medians: $(medians_ratio "${samples[none]}" "${samples[bfq]}")"
print_ratio bfq/none "${samples[none]}" "${samples[bfq]}" 0.5
bench_exit
