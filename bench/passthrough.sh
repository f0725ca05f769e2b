#!/usr/bin/env bash
# What the engine costs: 4k random reads, iodepth 32, one job, direct=1, on
# the same file, measured in one run:
#   (a) fio's own io_uring engine on the file
#   (b) libmdsplit, passthrough device over an io_uring member on that file
#   (c) fio's null engine
#   (d) libmdsplit, passthrough device over a null member
# The four runs are interleaved (a b c d, a b c d, ...) so that drift and
# noise hit each one alike, and the median of each is reported with the
# ratios b/a (target >= 0.95) and d/c (target >= 0.6).
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

[[ $runtime =~ ^[0-9]+$ && $runtime -gt 0 ]] || die "runtime must be a whole number of seconds, got '$runtime'"
[[ $repeats =~ ^[0-9]+$ && $repeats -gt 0 ]] || die "MDSPLIT_BENCH_REPEATS must be >= 1, got '$repeats'"
command -v "$fio_bin" >/dev/null || die "fio not found (set FIO=/path/to/fio)"
[[ -x $python ]] || die "$python not found"
# fio's external: prefix needs a path with a slash; make it absolute.
[[ -f $engine ]] || die "engine not found: $engine (pass it as the first argument or set MDSPLIT_ENGINE)"
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
    if ! (cd "$work" && "$fio_bin" --name="$name" "${common[@]}" "$@" >"$out" 2>"$work/$name.err"); then
        cat "$work/$name.err" >&2
        die "run $name failed"
    fi
    iops_of "$out"
}

declare -A samples=([io_uring]="" [mdsplit_io_uring]="" [null]="" [mdsplit_null]="")
for ((round = 1; round <= repeats; round++)); do
    a=$(run io_uring --ioengine=io_uring --filename="$data")
    b=$(run mdsplit_io_uring --ioengine="external:$engine" --filename=md0 \
            --mdsplit_config="$work/io_uring.toml")
    c=$(run null --ioengine=null --filename=nullfile)
    d=$(run mdsplit_null --ioengine="external:$engine" --filename=md0 \
            --mdsplit_config="$work/null.toml")
    samples[io_uring]+=" $a"
    samples[mdsplit_io_uring]+=" $b"
    samples[null]+=" $c"
    samples[mdsplit_null]+=" $d"
    printf '# round %d: io_uring %s  mdsplit/io_uring %s  null %s  mdsplit/null %s\n' \
        "$round" "$a" "$b" "$c" "$d"
done

"$python" - "${samples[io_uring]}" "${samples[mdsplit_io_uring]}" "${samples[null]}" \
    "${samples[mdsplit_null]}" <<'EOF'
import statistics, sys
a, b, c, d = ([float(x) for x in arg.split()] for arg in sys.argv[1:5])
med = statistics.median
rows = [("(a) fio io_uring", a), ("(b) mdsplit io_uring", b),
        ("(c) fio null", c), ("(d) mdsplit null", d)]
for label, values in rows:
    print("%-22s median %10.0f IOPS   runs: %s" % (label, med(values),
          " ".join("%.0f" % v for v in values)))
print("ratio io_uring: %.2f (target >= 0.95)" % (med(b) / med(a)))
print("ratio null: %.2f (target >= 0.6)" % (med(d) / med(c)))
EOF
