#!/usr/bin/env bash
# What md RAID5 emulation costs, on members that store nothing (backend
# "null"), 8 members, 64 KiB chunks, left-symmetric, split_order fixed:
#   (a) fio's null engine: 4k randread, iodepth 32, 1 job, direct=1
#   (b) libmdsplit, raid5 over 8 null members, the same parameters
#   (c) libmdsplit, raid5 over 8 null members, sequential bs=4480k direct
#       reads (dd bs=4480k iflag=direct, seeds 000/002), iodepth 1
#   (d) the same as (c) at iodepth 4
# The 4480k reads use the reproduction's bios (jobs/raid5-*.toml): dd's buffer
# as THP, one 4480 KiB bio that md splits to 1 MiB and then per chunk.
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

engine=${1:-${MDSPLIT_ENGINE:-/usr/local/lib/mdsplit/libmdsplit.so}}
runtime=${2:-${MDSPLIT_BENCH_RUNTIME:-10}}
repeats=${MDSPLIT_BENCH_REPEATS:-3}
base_dir=${MDSPLIT_BENCH_DIR:-/var/tmp}
fio_bin=${FIO:-fio}
python=/usr/bin/python3
members=8
member_size=640m   # 7 x 640 MiB = 4480 MiB usable, a whole number of 4480 KiB reads

die() {
    echo "raid5.sh: $*" >&2
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

# Options shared by every measured run.
common=(--numjobs=1 --direct=1 --time_based=1 --runtime="$runtime" --ramp_time=1
        --group_reporting=1 --output-format=json)
random=(--rw=randread --bs=4k --iodepth=32 --norandommap=1 --randrepeat=0)
seq=(--rw=read --bs=4480k)

echo "# raid5 bench: $members null members, 64 KiB chunks; 4k randread iodepth 32 and" \
     "4480k sequential reads, 1 job, direct=1, ${runtime}s per run, $repeats round(s)"
echo "# fio: $("$fio_bin" --version)  engine: $engine"

{
    cat <<EOF2
# md RAID5 over $members null members (they store nothing)
[device]
kind = "raid5"
chunk = "64k"
layout = "left-symmetric"
max_sectors = "1m"
split_order = "fixed"

# dd's 4480 KiB buffer as transparent huge pages: one bio per read (as
# jobs/raid5-fixed.toml); 4k reads are one page either way.
[bio]
contiguity = { pattern = [512] }
EOF2
    for ((i = 0; i < members; i++)); do
        printf '\n[[members]]\nbackend = "null"\nsize = "%s"\nmax_sectors = "512k"\nqueue_depth = 32\n' \
            "$member_size"
    done
} >"$work/raid5.toml"

# "IOPS BYTES_PER_SECOND" of a finished run from fio's JSON (anything fio
# printed before the JSON object is skipped).
rate_of() {
    "$python" -c '
import json, sys
text = open(sys.argv[1]).read()
start = text.find("{")
if start < 0:
    sys.exit("no JSON in " + sys.argv[1])
job = json.loads(text[start:])["jobs"][0]
if job.get("error"):
    sys.exit("fio job failed with error %d" % job["error"])
print("%.0f %.0f" % (job["read"]["iops"], job["read"]["bw_bytes"]))
' "$1"
}

# run NAME fio-options... : one measured run; prints "IOPS BYTES/S".
run() {
    local name=$1 out="$work/$1.json"
    shift
    # The engine's label (md0) is not a file: run where nothing is called so.
    if ! (cd "$work" && "$fio_bin" --name="$name" "${common[@]}" "$@" \
              >"$out" 2>"$work/$name.err"); then
        cat "$work/$name.err" >&2
        die "run $name failed"
    fi
    rate_of "$out"
}

mdsplit=(--ioengine="external:$engine" --filename=md0 --mdsplit_config="$work/raid5.toml")

# Runs one measured case by its letter; prints "IOPS BYTES/S".
run_case() {
    case $1 in
    a) run null "${random[@]}" --ioengine=null --filename=nullfile --size=4480m ;;
    b) run raid5_null "${random[@]}" "${mdsplit[@]}" ;;
    c) run raid5_seq_qd1 "${seq[@]}" --iodepth=1 "${mdsplit[@]}" ;;
    d) run raid5_seq_qd4 "${seq[@]}" --iodepth=4 "${mdsplit[@]}" ;;
    esac
}

declare -A samples=([a]="" [b]="" [c]="" [d]="")
for ((round = 1; round <= repeats; round++)); do
    if ((round % 2)); then order=(a b c d); else order=(b a d c); fi
    declare -A iops=() bw=()
    for letter in "${order[@]}"; do
        read -r iops[$letter] bw[$letter] < <(run_case "$letter")
        [[ -n ${iops[$letter]} ]] || die "run $letter gave no result"
        if [[ $letter == [ab] ]]; then samples[$letter]+=" ${iops[$letter]}"
        else samples[$letter]+=" ${bw[$letter]}"; fi
    done
    printf '# round %d (%s): null %s IOPS  raid5/null %s IOPS  seq qd1 %s B/s  seq qd4 %s B/s\n' \
        "$round" "${order[*]}" "${iops[a]}" "${iops[b]}" "${bw[c]}" "${bw[d]}"
done

"$python" - "${samples[a]}" "${samples[b]}" "${samples[c]}" "${samples[d]}" <<'EOF2'
import statistics, sys
a, b, c, d = ([float(x) for x in arg.split()] for arg in sys.argv[1:5])
med = statistics.median
for label, values in (("(a) fio null", a), ("(b) mdsplit raid5/null", b)):
    print("%-26s median %10.0f IOPS   runs: %s" % (label, med(values),
          " ".join("%.0f" % v for v in values)))
for label, values in (("(c) raid5 seq 4480k qd1", c), ("(d) raid5 seq 4480k qd4", d)):
    print("%-26s median %8.2f GB/s   runs: %s" % (label, med(values) / 1e9,
          " ".join("%.2f" % (v / 1e9) for v in values)))
# Each round's pair ran back to back: its ratio is the least noisy figure.
ratios = [y / x for x, y in zip(a, b)]
print("# per-round ratios: %s  ratio of medians: %.2f" % (
    " ".join("%.2f" % r for r in ratios), med(b) / med(a)))
print("ratio raid5 null: %.2f (target >= 0.4)" % med(ratios))
print("raid5 seq 4480k: %.2f GB/s (target >= 20)  [iodepth 1; iodepth 4: %.2f GB/s]" % (
    med(c) / 1e9, med(d) / 1e9))
EOF2
