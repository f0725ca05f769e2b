#!/usr/bin/env bash
# What the engine costs: 4k random reads, iodepth 32, one job, direct=1, on
# the same file, measured in one run:
#   (a) fio's own io_uring engine on the file
#   (b) libmdsplit, passthrough device over an io_uring member on that file
#   (c) fio's null engine
#   (d) libmdsplit, passthrough device over a null member
#   (e) fio's own io_uring engine with fixedbufs=1: for information, the
#       peer using the kernel feature libmdsplit uses for direct I/O (its
#       ring registers fio's io_u buffers; IoUringRing::register_buffer)
# The runs are interleaved in rounds, each pair back to back and in
# alternating order (a b c d, then b a d c, ...), so that drift (a cloud
# disk's burst credits, other load) hits both sides of a ratio alike. Each
# run's median is reported, and the ratios b/a (target >= 0.95) and d/c
# (target >= 0.6) as the median of the per-round ratios, and b/e.
#
# Usage: bench/passthrough.sh [ENGINE.so] [RUNTIME_SECONDS]
#   ENGINE.so       default $MDSPLIT_ENGINE, then /usr/local/lib/mdsplit/libmdsplit.so
#   RUNTIME_SECONDS default $MDSPLIT_BENCH_RUNTIME, then 10 (each run)
# Environment:
#   MDSPLIT_BENCH_REPEATS  rounds of the four runs (default 3; the median is reported)
#   MDSPLIT_BENCH_SIZE     size of the test file (default 1g)
#   MDSPLIT_BENCH_DIR      where the temporary directory goes (default /var/tmp)
#   FIO                    the fio binary (default fio on PATH)
set -euo pipefail
# shellcheck source=bench_lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

bench_parse_env "$@"
size=${MDSPLIT_BENCH_SIZE:-1g}
bench_make_work
data="$work/data.img"

# Options shared by every measured run.
common=(--rw=randread --bs=4k --iodepth=32 --numjobs=1 --direct=1 --size="$size"
        --time_based=1 --runtime="$runtime" --ramp_time=1 --norandommap=1
        --randrepeat=0 --group_reporting=1)

echo "# passthrough bench: 4k randread, iodepth 32, 1 job, direct=1, ${runtime}s per run," \
     "$repeats round(s), file $size"
print_fio_line

write_test_file "$data" "$size"

cat >"$work/io_uring.toml" <<EOF
# (b) one io_uring member on the test file behind a passthrough device
[device]
kind = "passthrough"

[[members]]
path = "$data"
backend = "io_uring"
EOF

cat >"$work/null.toml" <<EOF
# (d) one null member (stores nothing) behind a passthrough device
[device]
kind = "passthrough"

[[members]]
backend = "null"
size = "$size"
EOF

# run NAME fio-options... : one measured run (job NAME); prints its IOPS.
run() { run_fio_metric "$1" "$1" iops --name="$1" "${common[@]}" "${@:2}"; }

# Runs one measured case by its letter; prints its IOPS.
run_case() {
    case $1 in
    a) run io_uring --ioengine=io_uring --filename="$data" ;;
    b) run mdsplit_io_uring --ioengine="external:$engine" --filename=md0 \
           --mdsplit_config="$work/io_uring.toml" ;;
    c) run null --ioengine=null --filename=nullfile ;;
    d) run mdsplit_null --ioengine="external:$engine" --filename=md0 \
           --mdsplit_config="$work/null.toml" ;;
    e) run io_uring_fixedbufs --ioengine=io_uring --fixedbufs=1 --filename="$data" ;;
    esac
}

print_round() {
    printf '# round %d (%s): io_uring %s  mdsplit/io_uring %s  null %s  mdsplit/null %s' \
        "$1" "${order[*]}" "${result[a]}" "${result[b]}" "${result[c]}" "${result[d]}"
    printf '  io_uring fixedbufs %s\n' "${result[e]}"
}

run_rounds a b c d e

print_samples 22 "(a) fio io_uring" "${samples[a]}"
print_samples 22 "(b) mdsplit io_uring" "${samples[b]}"
print_samples 22 "(c) fio null" "${samples[c]}"
print_samples 22 "(d) mdsplit null" "${samples[d]}"
print_samples 22 "(e) fio io_uring fixed" "${samples[e]}"
echo "# per-round ratios: io_uring $(round_ratios "${samples[a]}" "${samples[b]}")" \
     " null $(round_ratios "${samples[c]}" "${samples[d]}")"
echo "# ratio of medians: io_uring $(medians_ratio "${samples[a]}" "${samples[b]}")" \
     " null $(medians_ratio "${samples[c]}" "${samples[d]}")"
print_ratio io_uring "${samples[a]}" "${samples[b]}" 0.95
print_ratio null "${samples[c]}" "${samples[d]}" 0.6
fixed_ratios=$(round_ratios "${samples[e]}" "${samples[b]}")
echo "# for information, mdsplit io_uring / fio io_uring fixedbufs=1:" \
     "$fixed_ratios (median of rounds $(median "$fixed_ratios" %.2f))"
bench_exit
