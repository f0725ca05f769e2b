#!/usr/bin/env bash
# What md RAID5 emulation costs, on members that store nothing (backend
# "null"), 8 members, 64 KiB chunks, left-symmetric, split_order fixed:
#   (a) fio's null engine: 4k randread, iodepth 32, 1 job, direct=1
#   (b) libmdsplit, raid5 over 8 null members, the same parameters
#   (c) libmdsplit, raid5 over 8 null members, sequential bs=4480k direct
#       reads (dd bs=4480k iflag=direct, seeds 000/002), iodepth 1
#   (d) the same as (c) at iodepth 4
# The 4480k reads use the reproduction's bios (jobs/raid5-fixed.toml): two
# bios per read that md splits to 1 MiB and then per chunk.
# Runs are interleaved in rounds, in alternating order (a b c d, then
# b a d c, ...); each run's median is reported, the ratio b/a (target >= 0.4)
# as the median of the per-round ratios, and the md throughput of (c) and (d)
# in GB/s (10^9 bytes/s, target >= 20).
#
# Usage: bench/raid5.sh [ENGINE.so] [RUNTIME_SECONDS]
#   ENGINE.so       default $MDSPLIT_ENGINE, then /usr/local/lib/mdsplit/libmdsplit.so
#   RUNTIME_SECONDS default $MDSPLIT_BENCH_RUNTIME, then 10 (each run)
# Environment:
#   MDSPLIT_BENCH_REPEATS  rounds of the four runs (default 3; the median is reported)
#   MDSPLIT_BENCH_DIR      where the temporary directory goes (default /var/tmp)
#   FIO                    the fio binary (default fio on PATH)
set -euo pipefail
# shellcheck source=bench_lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

bench_parse_env "$@"
members=8
member_size=640m   # 7 x 640 MiB = 4480 MiB usable, a whole number of 4480 KiB reads
bench_make_work

# Options shared by every measured run.
common=(--numjobs=1 --direct=1 --time_based=1 --runtime="$runtime" --ramp_time=1
        --group_reporting=1)
random=(--rw=randread --bs=4k --iodepth=32 --norandommap=1 --randrepeat=0)
seq=(--rw=read --bs=4480k)

echo "# raid5 bench: $members null members, 64 KiB chunks; 4k randread iodepth 32 and" \
     "4480k sequential reads, 1 job, direct=1, ${runtime}s per run, $repeats round(s)"
print_fio_line

{
    cat <<EOF2
# md RAID5 over $members null members (they store nothing)
[device]
kind = "raid5"
chunk = "64k"
layout = "left-symmetric"
max_sectors = "1m"
split_order = "fixed"

# dd's 4480 KiB buffer as the fixed run's (jobs/raid5-fixed.toml): two bios
# per read, 511 + 609 pages; 4k reads are one page either way.
[bio]
contiguity = { pattern = [[2, 256], 512, [2, 48]] }
EOF2
    for ((i = 0; i < members; i++)); do
        printf '\n[[members]]\nbackend = "null"\nsize = "%s"\nmax_sectors = "512k"\nqueue_depth = 32\n' \
            "$member_size"
    done
} >"$work/raid5.toml"

# run NAME METRIC fio-options... : one measured run (job NAME); prints its
# IOPS (METRIC iops) or bytes/s (bw_bytes).
run() { run_fio_metric "$1" "$1" "$2" --name="$1" "${common[@]}" "${@:3}"; }

mdsplit=(--ioengine="external:$engine" --filename=md0 --mdsplit_config="$work/raid5.toml")

# Runs one measured case by its letter; prints IOPS (a, b) or bytes/s (c, d).
run_case() {
    case $1 in
    a) run null iops "${random[@]}" --ioengine=null --filename=nullfile --size=4480m ;;
    b) run raid5_null iops "${random[@]}" "${mdsplit[@]}" ;;
    c) run raid5_seq_qd1 bw_bytes "${seq[@]}" --iodepth=1 "${mdsplit[@]}" ;;
    d) run raid5_seq_qd4 bw_bytes "${seq[@]}" --iodepth=4 "${mdsplit[@]}" ;;
    esac
}

print_round() {
    printf '# round %d (%s): null %s IOPS  raid5/null %s IOPS  seq qd1 %s B/s  seq qd4 %s B/s\n' \
        "$1" "${order[*]}" "${result[a]}" "${result[b]}" "${result[c]}" "${result[d]}"
}

run_rounds a b c d

print_samples 26 "(a) fio null" "${samples[a]}"
print_samples 26 "(b) mdsplit raid5/null" "${samples[b]}"
print_samples 26 "(c) raid5 seq 4480k qd1" "${samples[c]}" GB/s
print_samples 26 "(d) raid5 seq 4480k qd4" "${samples[d]}" GB/s
echo "# per-round ratios: $(round_ratios "${samples[a]}" "${samples[b]}")" \
     " ratio of medians: $(medians_ratio "${samples[a]}" "${samples[b]}")"
print_ratio "raid5 null" "${samples[a]}" "${samples[b]}" 0.4
seq_gbs=$(median "${samples[c]}" %.2f 1e9)
echo "raid5 seq 4480k: $seq_gbs GB/s (target >= 20)" \
     " [iodepth 1; iodepth 4: $(median "${samples[d]}" %.2f 1e9) GB/s]"
check_at_least "raid5 seq 4480k" "$seq_gbs" 20
bench_exit
