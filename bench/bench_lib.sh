# shellcheck shell=bash
# Shared scaffolding of the ratio benchmarks (bench/passthrough.sh, raid5.sh,
# bfq.sh, buffered-hit.sh); not a script of its own. A bench sources it after
# `set -euo pipefail`:
#   source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
# then calls bench_parse_env "$@" and bench_make_work, defines run_case (and
# print_round), and runs run_rounds. Error messages name the sourcing script.
# Every figure is computed and formatted by Python (%.0f, %.2f of doubles) so
# that the printed numbers are those the scripts have always printed.

bench_name=${0##*/}
python=/usr/bin/python3

# die MESSAGE...: print "SCRIPT.sh: MESSAGE" on stderr and exit 1.
die() {
    echo "$bench_name: $*" >&2
    exit 1
}

# require_positive VALUE MESSAGE: die with MESSAGE unless VALUE is a whole
# number >= 1.
require_positive() {
    [[ $1 =~ ^[0-9]+$ && $1 -gt 0 ]] || die "$2"
}

# bench_parse_env [ENGINE.so] [RUNTIME_SECONDS]: the arguments and environment
# every bench shares. Sets engine (made absolute: fio's external: prefix needs
# a path with a slash), runtime, repeats, base_dir and fio_bin, and dies on a
# bad value or a missing fio, python or engine.
bench_parse_env() {
    engine=${1:-${MDSPLIT_ENGINE:-/usr/local/lib/mdsplit/libmdsplit.so}}
    runtime=${2:-${MDSPLIT_BENCH_RUNTIME:-10}}
    repeats=${MDSPLIT_BENCH_REPEATS:-3}
    base_dir=${MDSPLIT_BENCH_DIR:-/var/tmp}
    fio_bin=${FIO:-fio}
    require_positive "$runtime" "runtime must be a whole number of seconds, got '$runtime'"
    require_positive "$repeats" "MDSPLIT_BENCH_REPEATS must be >= 1, got '$repeats'"
    command -v "$fio_bin" >/dev/null || die "fio not found (set FIO=/path/to/fio)"
    [[ -x $python ]] || die "$python not found"
    [[ -f $engine ]] \
        || die "engine not found: $engine (pass it as the first argument or set MDSPLIT_ENGINE)"
    engine=$(cd "$(dirname "$engine")" && pwd)/$(basename "$engine")
}

# bench_make_work: create the temporary directory work under base_dir,
# removed on exit. Call it in the main shell (not in $(...)).
bench_make_work() {
    work=$(mktemp -d "$base_dir/mdsplit-bench.XXXXXX")
    trap 'rm -rf "$work"' EXIT
}

# bench_copy_jobs ROOT: $work, a temporary directory removed on exit, with a
# copy of ROOT/jobs/*.fio and *.toml in $work/jobs (simulate.sh, agreement.sh:
# their runs write sidecars and member files beside the job files).
bench_copy_jobs() {
    work=$(mktemp -d "${MDSPLIT_BENCH_DIR:-/var/tmp}/mdsplit-${bench_name%.sh}.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    mkdir "$work/jobs"
    cp "$1"/jobs/*.fio "$1"/jobs/*.toml "$work/jobs/"
}

# print_fio_line: the "# fio: VERSION  engine: PATH" header line.
print_fio_line() {
    echo "# fio: $("$fio_bin" --version)  engine: $engine"
}

# write_test_file PATH SIZE: write every block of a SIZE file once (direct,
# sequential), so that reads hit real extents, and sync.
write_test_file() {
    echo "# writing $2 to $1 ..."
    "$fio_bin" --name=fill --filename="$1" --size="$2" --rw=write --bs=1m --direct=1 \
        --ioengine=io_uring --iodepth=8 --output-format=terse >/dev/null \
        || die "could not write the test file $1"
    sync
}

# fio_metric JSON JOBNAME METRIC: a read figure of a finished run from fio's
# JSON output (anything fio printed before the JSON object is skipped),
# summed over the job entries named JOBNAME (one entry with group_reporting):
# METRIC iops (IOPS) or bw_bytes (bytes/s), printed as %.0f. Fails if any job
# of the run reports an error.
fio_metric() {
    "$python" -c '
import json, sys
path, name, metric = sys.argv[1:4]
text = open(path).read()
start = text.find("{")
if start < 0:
    sys.exit("no JSON in " + path)
jobs = json.loads(text[start:])["jobs"]
for job in jobs:
    if job.get("error"):
        sys.exit("fio job %s failed with error %d" % (job["jobname"], job["error"]))
mine = [job for job in jobs if job["jobname"] == name]
if not mine:
    sys.exit("no job %s in %s" % (name, path))
print("%.0f" % sum(job["read"][metric] for job in mine))
' "$1" "$2" "$3"
}

# run_fio_metric RUN JOBNAME METRIC FIO_ARGS...: one measured fio run (fio
# --output-format=json FIO_ARGS..., options or a job file) in the work
# directory, where nothing is called like the engine's label (md0); output in
# $work/RUN.json and RUN.err (shown if fio fails, then "run RUN failed").
# Prints fio_metric of job JOBNAME.
run_fio_metric() {
    local run=$1 job=$2 metric=$3 out="$work/$1.json"
    shift 3
    if ! (cd "$work" && "$fio_bin" --output-format=json "$@" \
              >"$out" 2>"$work/$run.err"); then
        cat "$work/$run.err" >&2
        die "run $run failed"
    fi
    fio_metric "$out" "$job" "$metric"
}

# alternate_order ROUND CASES...: the order of CASES in round ROUND: as given
# in odd rounds, each adjacent pair swapped in even ones (a b c d, b a d c).
alternate_order() {
    local round=$1
    shift
    if ((round % 2)); then
        echo "$*"
    else
        while (($# >= 2)); do printf '%s %s ' "$2" "$1"; shift 2; done
        echo "$*"
    fi
}

# run_rounds CASES...: repeats rounds, each running every case once through
# the bench's run_case CASE (prints one figure), in alternate_order. Sets
# order (this round's), result[CASE] (this round's figure) and appends it to
# samples[CASE] (space-separated), then calls print_round ROUND.
run_rounds() {
    local round c
    declare -gA samples=() result=()
    for c in "$@"; do samples[$c]=""; done
    for ((round = 1; round <= repeats; round++)); do
        read -r -a order <<<"$(alternate_order "$round" "$@")"
        result=()
        for c in "${order[@]}"; do
            result[$c]=$(run_case "$c")
            samples[$c]+=" ${result[$c]}"
        done
        print_round "$round"
    done
}

# median SAMPLES [FORMAT [DIVISOR]]: the median of the space-separated
# SAMPLES divided by DIVISOR (default 1), printed with FORMAT (default %.0f).
median() {
    "$python" -c '
import statistics, sys
print(sys.argv[2] % (statistics.median(float(x) for x in sys.argv[1].split()) / float(sys.argv[3])))
' "$1" "${2:-%.0f}" "${3:-1}"
}

# round_ratios A B: the per-round ratios B/A of two sample lists (each
# round's pair ran back to back: the least noisy figure), %.2f each.
round_ratios() {
    "$python" -c '
import sys
a, b = ([float(x) for x in arg.split()] for arg in sys.argv[1:3])
print(" ".join("%.2f" % (y / x) for x, y in zip(a, b)))
' "$1" "$2"
}

# medians_ratio A B: median(B) / median(A), %.2f.
medians_ratio() {
    "$python" -c '
import statistics, sys
a, b = ([float(x) for x in arg.split()] for arg in sys.argv[1:3])
print("%.2f" % (statistics.median(b) / statistics.median(a)))
' "$1" "$2"
}

# print_ratio NAME A B TARGET: the line "ratio NAME: X (target >= TARGET)",
# X the median of the per-round ratios B/A (%.2f), with "  below the target"
# after it when X < TARGET (then NAME joins bench_missed, for bench_exit).
# People grep these lines: keep their format.
print_ratio() {
    local rc=0
    "$python" -c '
import statistics, sys
name, target = sys.argv[1], sys.argv[4]
a, b = ([float(x) for x in arg.split()] for arg in sys.argv[2:4])
ratio = statistics.median([y / x for x, y in zip(a, b)])
met = round(ratio, 2) >= float(target)
print("ratio %s: %.2f (target >= %s)%s" % (name, ratio, target, "" if met else "  below the target"))
sys.exit(0 if met else 3)
' "$1" "$2" "$3" "$4" || rc=$?
    note_target "$1" "$rc"
}

# note_target NAME STATUS: STATUS 3 (a figure below its target) adds NAME to
# bench_missed; any other non-zero STATUS is an error and exits with it.
bench_missed=()
note_target() {
    case $2 in
    0) ;;
    3) bench_missed+=("$1") ;;
    *) exit "$2" ;;
    esac
}

# check_at_least NAME VALUE TARGET: NAME joins bench_missed when VALUE < TARGET.
check_at_least() {
    local rc=0
    "$python" -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 3)' \
        "$2" "$3" || rc=$?
    note_target "$1" "$rc"
}

# bench_exit: the end of a ratio benchmark: status 1, with one line on stderr
# naming them, when any figure was below its target; 0 otherwise.
bench_exit() {
    if ((${#bench_missed[@]})); then
        echo "$bench_name: below the target: ${bench_missed[*]}" >&2
        exit 1
    fi
    exit 0
}

# print_samples WIDTH LABEL SAMPLES [UNIT]: one side's line, LABEL padded to
# WIDTH, its median and every run: UNIT IOPS (default, %.0f) or GB/s (bytes/s
# samples shown in 10^9 bytes/s, %.2f).
print_samples() {
    "$python" -c '
import statistics, sys
width, label, unit = int(sys.argv[1]), sys.argv[2], sys.argv[4]
values = [float(x) for x in sys.argv[3].split()]
med = statistics.median(values)
if unit == "GB/s":
    print("%-*s median %8.2f GB/s   runs: %s" % (width, label, med / 1e9,
          " ".join("%.2f" % (v / 1e9) for v in values)))
else:
    print("%-*s median %10.0f IOPS   runs: %s" % (width, label, med,
          " ".join("%.0f" % v for v in values)))
' "$1" "$2" "$3" "${4:-IOPS}"
}
