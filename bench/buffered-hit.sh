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
# shellcheck source=bench_lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

bench_parse_env "$@"
size=${MDSPLIT_BENCH_SIZE:-256m}
bench_make_work
data="$work/data.img"

# Options of the io_uring run (the mdsplit job file below has the same).
common=(--rw=randread --bs=4k --iodepth=32 --numjobs=1 --direct=0 --invalidate=0
        --size="$size" --time_based=1 --runtime="$runtime" --norandommap=1
        --randrepeat=0)

echo "# buffered-hit bench: 4k randread, iodepth 32, 1 job, direct=0, fully cached file $size," \
     "${runtime}s per run, $repeats round(s)"
print_fio_line

write_test_file "$data" "$size"

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

# Runs one measured case by its letter; prints the measured job's IOPS.
run_case() {
    case $1 in
    a)
        # Warm the kernel's page cache with a buffered read pass.
        "$fio_bin" --name=warm --filename="$data" --size="$size" --rw=read --bs=1m \
            --ioengine=psync --direct=0 --invalidate=0 --output-format=terse >/dev/null \
            || die "warm-up read of $data failed"
        run_fio_metric io_uring io_uring iops --name=io_uring --ioengine=io_uring \
            --filename="$data" "${common[@]}"
        ;;
    b)
        rm -f "$work/warm.stats.json" "$work/hit.stats.json"
        run_fio_metric mdsplit hit iops "$work/mdsplit.fio"
        ;;
    esac
}

print_round() {
    printf '# round %d (%s): io_uring %s  mdsplit %s   (%s)\n' "$1" "${order[*]}" \
        "${result[a]}" "${result[b]}" "$(check_hits)"
}

run_rounds a b
echo "# kernel page cache for the file after the runs: $(fincore --noheadings --output=RES,SIZE "$data" 2>/dev/null || echo 'fincore unavailable')"

print_samples 18 "(a) fio io_uring" "${samples[a]}"
print_samples 18 "(b) mdsplit" "${samples[b]}"
echo "# per-round ratios: $(round_ratios "${samples[a]}" "${samples[b]}")"
echo "# ratio of medians: $(medians_ratio "${samples[a]}" "${samples[b]}")"
print_ratio "buffered hit" "${samples[a]}" "${samples[b]}" 0.5
bench_exit
