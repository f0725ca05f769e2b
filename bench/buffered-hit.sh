#!/usr/bin/env bash
# What a buffered read costs when the page is cached (the hit path): 4k
# random reads, iodepth 32, one job, direct=0, over a file that is entirely
# in the page cache, measured in one run:
#   (a) fio's own io_uring engine on the file, warmed into the kernel's page
#       cache by a sequential read pass just before (fincore is printed)
#   (b) libmdsplit, passthrough device over an io_uring member on that file,
#       with a [page_cache] big enough for the whole file; one fio run of
#       two jobs sharing the stack (thread=1): a sequential 1 MiB read pass
#       fills the engine's page cache, then (stonewall) the measured random
#       reads. Both jobs run with invalidate=0 (fio's invalidate=1 would
#       drop the cache), and the measured job's sidecar minus the warm-up
#       job's must show only hits: no misses, no page reads, every read
#       completed inline by the submitter (io_uring's NOWAIT attempt).
# The runs alternate in rounds (a b, then b a, ...) so that drift (other load
# on a shared machine) hits both sides alike. Each side's median is
# reported, and the ratio b/a (target >= 0.5) as the median of the per-round
# ratios.
#
# Usage: bench/buffered-hit.sh [ENGINE.so] [RUNTIME_SECONDS]
#   ENGINE.so       default $MDSPLIT_ENGINE, then /usr/local/lib/mdsplit/libmdsplit.so
#   RUNTIME_SECONDS default $MDSPLIT_BENCH_RUNTIME, then 10 (each measured run)
# Environment:
#   MDSPLIT_BENCH_REPEATS  rounds of the two runs (default 3; the median is reported)
#   MDSPLIT_BENCH_SIZE     size of the test file (default 256m)
#   MDSPLIT_BENCH_DIR      where the temporary directory goes (default /var/tmp)
#   FIO                    the fio binary (default fio on PATH)
set -euo pipefail

engine=${1:-${MDSPLIT_ENGINE:-/usr/local/lib/mdsplit/libmdsplit.so}}
runtime=${2:-${MDSPLIT_BENCH_RUNTIME:-10}}
repeats=${MDSPLIT_BENCH_REPEATS:-3}
size=${MDSPLIT_BENCH_SIZE:-256m}
base_dir=${MDSPLIT_BENCH_DIR:-/var/tmp}
fio_bin=${FIO:-fio}
python=/usr/bin/python3

die() {
    echo "buffered-hit.sh: $*" >&2
    exit 1
}

[[ $runtime =~ ^[0-9]+$ && $runtime -gt 0 ]] \
    || die "runtime must be a whole number of seconds, got '$runtime'"
[[ $repeats =~ ^[0-9]+$ && $repeats -gt 0 ]] \
    || die "MDSPLIT_BENCH_REPEATS must be >= 1, got '$repeats'"
command -v "$fio_bin" >/dev/null || die "fio not found (set FIO=/path/to/fio)"
[[ -x $python ]] || die "$python not found"
# fio's external: prefix needs a path with a slash; make it absolute.
[[ -f $engine ]] \
    || die "engine not found: $engine (pass it as the first argument or set MDSPLIT_ENGINE)"
engine=$(cd "$(dirname "$engine")" && pwd)/$(basename "$engine")

work=$(mktemp -d "$base_dir/mdsplit-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
data="$work/data.img"

# Options of the io_uring run (the mdsplit job file below has the same).
common=(--rw=randread --bs=4k --iodepth=32 --numjobs=1 --direct=0 --invalidate=0
        --size="$size" --time_based=1 --runtime="$runtime" --norandommap=1
        --randrepeat=0 --output-format=json)

echo "# buffered-hit bench: 4k randread, iodepth 32, 1 job, direct=0, fully cached file $size," \
     "${runtime}s per run, $repeats round(s)"
echo "# fio: $("$fio_bin" --version)  engine: $engine"

# A file whose every block was written once, so reads hit real extents.
echo "# writing $size to $data ..."
"$fio_bin" --name=fill --filename="$data" --size="$size" --rw=write --bs=1m --direct=1 \
    --ioengine=io_uring --iodepth=8 --output-format=terse >/dev/null \
    || die "could not write the test file $data"
sync

# The engine's page cache holds the whole file with room to spare (twice its
# size); readahead stays at its default (the warm-up pass uses it; the hits
# never reach it).
[[ $size =~ ^([0-9]+)([A-Za-z]*)$ ]] \
    || die "MDSPLIT_BENCH_SIZE must be a number with an optional suffix, got '$size'"
cache_size="$((2 * BASH_REMATCH[1]))${BASH_REMATCH[2]}"
cat >"$work/stack.toml" <<EOF
# (b) one io_uring member on the test file behind a passthrough device,
# with a page cache larger than the file
[device]
kind = "passthrough"

[[members]]
path = "$data"
backend = "io_uring"

[page_cache]
size = "$cache_size"
EOF

cat >"$work/mdsplit.fio" <<EOF
; (b) warm the engine's page cache, then measure the hits (one stack: thread=1)
[global]
ioengine=external:$engine
mdsplit_config=$work/stack.toml
filename=md0
thread=1
direct=0
invalidate=0
size=$size

[warm]
rw=read
bs=1m
iodepth=8
mdsplit_stats=$work/warm.stats.json

[hit]
stonewall
rw=randread
bs=4k
iodepth=32
time_based=1
runtime=$runtime
norandommap=1
randrepeat=0
mdsplit_stats=$work/hit.stats.json
EOF

# IOPS of the measured job of a finished run from fio's JSON (anything fio
# printed before the JSON object is skipped).
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
        sys.exit("fio job %s failed with error %d" % (job["jobname"], job["error"]))
print("%.0f" % [j for j in jobs if j["jobname"] == sys.argv[2]][0]["read"]["iops"])
' "$1" "$2"
}

# The measured phase's page-cache counters: hit job's sidecar minus the
# warm-up job's (both describe the one shared stack). Fails unless every
# page looked up was a hit. Prints one summary line.
check_hits() {
    "$python" - "$work/warm.stats.json" "$work/hit.stats.json" <<'EOF'
import json, sys
def page_cache(path):
    stats = json.load(open(path))
    pc = stats.get("page_cache")
    if pc is None:
        pc = [d["page_cache"] for d in stats["devices"] if "page_cache" in d][0]
    return pc
warm, hit = page_cache(sys.argv[1]), page_cache(sys.argv[2])
keys = ("reads", "hits", "misses", "read_bios", "pages_read", "inline_completions",
        "task_work_completions", "worker_completions", "punts", "callbacks_armed", "evictions")
d = {k: hit[k] - warm[k] for k in keys}
if d["reads"] <= 0 or d["hits"] < d["reads"] or d["misses"] or d["read_bios"] or d["pages_read"] \
        or d["inline_completions"] != d["reads"] or d["evictions"]:
    sys.exit("buffered-hit.sh: the measured phase was not all hits: %s" % d)
print("reads %d hits %d misses %d read_bios %d inline %d" %
      (d["reads"], d["hits"], d["misses"], d["read_bios"], d["inline_completions"]))
EOF
}

# Runs one measured case by its letter; prints its IOPS.
run_case() {
    local out="$work/$1.json"
    case $1 in
    a)
        # Warm the kernel's page cache with a buffered read pass.
        "$fio_bin" --name=warm --filename="$data" --size="$size" --rw=read --bs=1m \
            --ioengine=psync --direct=0 --invalidate=0 --output-format=terse >/dev/null \
            || die "warm-up read of $data failed"
        if ! "$fio_bin" --name=io_uring --ioengine=io_uring --filename="$data" "${common[@]}" \
                >"$out" 2>"$work/a.err"; then
            cat "$work/a.err" >&2
            die "run io_uring failed"
        fi
        iops_of "$out" io_uring
        ;;
    b)
        rm -f "$work/warm.stats.json" "$work/hit.stats.json"
        # The engine's label (md0) is not a file: run where nothing is called so.
        if ! (cd "$work" && "$fio_bin" --output-format=json "$work/mdsplit.fio" \
                  >"$out" 2>"$work/b.err"); then
            cat "$work/b.err" >&2
            die "run mdsplit failed"
        fi
        iops_of "$out" hit
        ;;
    esac
}

samples_a=""
samples_b=""
for ((round = 1; round <= repeats; round++)); do
    if ((round % 2)); then order=(a b); else order=(b a); fi
    declare -A iops=()
    for letter in "${order[@]}"; do
        iops[$letter]=$(run_case "$letter")
    done
    samples_a+=" ${iops[a]}"
    samples_b+=" ${iops[b]}"
    printf '# round %d (%s): io_uring %s  mdsplit %s   (%s)\n' "$round" "${order[*]}" \
        "${iops[a]}" "${iops[b]}" "$(check_hits)"
done
echo "# kernel page cache for the file after the runs: $(fincore --noheadings --output=RES,SIZE "$data" 2>/dev/null || echo 'fincore unavailable')"

"$python" - "$samples_a" "$samples_b" <<'EOF'
import statistics, sys
a, b = ([float(x) for x in arg.split()] for arg in sys.argv[1:3])
med = statistics.median
for label, values in (("(a) fio io_uring", a), ("(b) mdsplit", b)):
    print("%-18s median %10.0f IOPS   runs: %s" % (label, med(values),
          " ".join("%.0f" % v for v in values)))
# Each round's pair ran back to back: its ratio is the least noisy figure.
ratios = [y / x for x, y in zip(a, b)]
print("# per-round ratios: %s" % " ".join("%.2f" % r for r in ratios))
print("# ratio of medians: %.2f" % (med(b) / med(a)))
print("ratio buffered hit: %.2f (target >= 0.5)" % med(ratios))
EOF
