#!/usr/bin/env bash
# What the engine costs: 4k random reads, iodepth 32, one job, direct=1, on
# the same file, measured in one run:
#   (a) fio's own io_uring engine on the file
#   (b) libmdsplit, passthrough device over an io_uring member on that file
#   (c) fio's null engine
#   (d) libmdsplit, passthrough device over a null member
# The runs are interleaved in rounds, each pair back to back and in
# alternating order (a b c d, then b a d c, ...), so that drift (a cloud
# disk's burst credits, other load) hits both sides of a ratio alike. Each
# run's median is reported, and the ratios b/a (target >= 0.95) and d/c
# (target >= 0.6) as the median of the per-round ratios.
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

engine=${1:-${MDSPLIT_ENGINE:-/usr/local/lib/mdsplit/libmdsplit.so}}
runtime=${2:-${MDSPLIT_BENCH_RUNTIME:-10}}
repeats=${MDSPLIT_BENCH_REPEATS:-3}
size=${MDSPLIT_BENCH_SIZE:-1g}
base_dir=${MDSPLIT_BENCH_DIR:-/var/tmp}
fio_bin=${FIO:-fio}
python=/usr/bin/python3

die() {
    echo "passthrough.sh: $*" >&2
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

# Options shared by every measured run.
common=(--rw=randread --bs=4k --iodepth=32 --numjobs=1 --direct=1 --size="$size"
        --time_based=1 --runtime="$runtime" --ramp_time=1 --norandommap=1
        --randrepeat=0 --group_reporting=1 --output-format=json)

echo "# passthrough bench: 4k randread, iodepth 32, 1 job, direct=1, ${runtime}s per run," \
     "$repeats round(s), file $size"
echo "# fio: $("$fio_bin" --version)  engine: $engine"

# A file whose every block was written once, so reads hit real extents.
echo "# writing $size to $data ..."
"$fio_bin" --name=fill --filename="$data" --size="$size" --rw=write --bs=1m --direct=1 \
    --ioengine=io_uring --iodepth=8 --output-format=terse >/dev/null \
    || die "could not write the test file $data"
sync

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

# IOPS of a finished run from fio's JSON (anything fio printed before the
# JSON object is skipped).
iops_of() {
    "$python" -c '
import json, sys
text = open(sys.argv[1]).read()
start = text.find("{")
if start < 0:
    sys.exit("no JSON in " + sys.argv[1])
job = json.loads(text[start:])["jobs"][0]
if job.get("error"):
    sys.exit("fio job failed with error %d" % job["error"])
print("%.0f" % job["read"]["iops"])
' "$1"
}

# run NAME fio-options... : one measured run; prints its IOPS.
run() {
    local name=$1 out="$work/$1.json"
    shift
    # The engine's label (md0) is not a file: run where nothing is called so.
    if ! (cd "$work" && "$fio_bin" --name="$name" "${common[@]}" "$@" \
              >"$out" 2>"$work/$name.err"); then
        cat "$work/$name.err" >&2
        die "run $name failed"
    fi
    iops_of "$out"
}

# Runs one measured case by its letter; prints its IOPS.
run_case() {
    case $1 in
    a) run io_uring --ioengine=io_uring --filename="$data" ;;
    b) run mdsplit_io_uring --ioengine="external:$engine" --filename=md0 \
           --mdsplit_config="$work/io_uring.toml" ;;
    c) run null --ioengine=null --filename=nullfile ;;
    d) run mdsplit_null --ioengine="external:$engine" --filename=md0 \
           --mdsplit_config="$work/null.toml" ;;
    esac
}

declare -A samples=([a]="" [b]="" [c]="" [d]="")
for ((round = 1; round <= repeats; round++)); do
    if ((round % 2)); then order=(a b c d); else order=(b a d c); fi
    declare -A iops=()
    for letter in "${order[@]}"; do
        iops[$letter]=$(run_case "$letter")
        samples[$letter]+=" ${iops[$letter]}"
    done
    printf '# round %d (%s): io_uring %s  mdsplit/io_uring %s  null %s  mdsplit/null %s\n' \
        "$round" "${order[*]}" "${iops[a]}" "${iops[b]}" "${iops[c]}" "${iops[d]}"
done

"$python" - "${samples[a]}" "${samples[b]}" "${samples[c]}" "${samples[d]}" <<'EOF'
import statistics, sys
a, b, c, d = ([float(x) for x in arg.split()] for arg in sys.argv[1:5])
med = statistics.median
rows = [("(a) fio io_uring", a), ("(b) mdsplit io_uring", b),
        ("(c) fio null", c), ("(d) mdsplit null", d)]
for label, values in rows:
    print("%-22s median %10.0f IOPS   runs: %s" % (label, med(values),
          " ".join("%.0f" % v for v in values)))
# Each round's pair ran back to back: its ratio is the least noisy figure.
uring = [y / x for x, y in zip(a, b)]
null = [y / x for x, y in zip(c, d)]
print("# per-round ratios: io_uring %s  null %s" % (" ".join("%.2f" % r for r in uring),
      " ".join("%.2f" % r for r in null)))
print("# ratio of medians: io_uring %.2f  null %.2f" % (med(b) / med(a), med(d) / med(c)))
print("ratio io_uring: %.2f (target >= 0.95)" % med(uring))
print("ratio null: %.2f (target >= 0.6)" % med(null))
EOF
