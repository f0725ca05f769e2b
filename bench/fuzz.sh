#!/bin/sh
# bench/fuzz.sh SECONDS [TARGET...]
# MDSPLIT_FUZZ_PARALLEL=1 bench/fuzz.sh SECONDS: the targets run side by side
# (CI: SECONDS of wall time for all of them instead of one after the other).
#
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan, in
# build-fuzz/ or $MDSPLIT_FUZZ_BUILD_DIR) and runs each for SECONDS, starting
# from a copy of its committed seed corpus (tests/fuzz/corpus/<target>/; what
# a run finds stays in a temporary directory). Prints executions per second
# per target. Exits non-zero when a target crashes or an invariant fails; the
# input that did it is kept under <build>/fuzz-artifacts/.
#   targets: fuzz_config (TOML loader), fuzz_bio_split (bio builder + splits +
#   RAID5 mapping), fuzz_blktrace (blktrace writer/reader round trip)
set -eu
secs=${1:?usage: bench/fuzz.sh SECONDS [TARGET...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MDSPLIT_FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=${*:-fuzz_config fuzz_bio_split fuzz_blktrace}

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DMDSPLIT_BUILD_FUZZERS=ON -DMDSPLIT_BUILD_ENGINE=OFF -DMDSPLIT_BUILD_PYTHON=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j2 --target $targets >/dev/null

work=$(mktemp -d /tmp/mdsplit-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$build/fuzz-artifacts"
# run TARGET: fuzzes it for $secs; its exit status goes to $work/TARGET.rc.
run() {
    mkdir -p "$work/$1"
    cp "$root/tests/fuzz/corpus/$1/"* "$work/$1/" 2>/dev/null || true
    rc=0
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/fuzz/$1" -max_total_time="$secs" -timeout=60 -rss_limit_mb=4096 \
        -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$1-" "$work/$1" \
        >"$work/$1.log" 2>&1 || rc=$?
    echo $rc >"$work/$1.rc"
}
if [ "${MDSPLIT_FUZZ_PARALLEL:-0}" = 1 ]; then
    for t in $targets; do run "$t" & done
    wait
else
    for t in $targets; do run "$t"; done
fi

status=0
for t in $targets; do
    log=$work/$t.log
    if [ "$(cat "$work/$t.rc")" = 0 ]; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
        rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
        echo "$t: ok, $runs runs in ${took:-$secs} s = $(( runs / ${took:-$secs} )) exec/s, peak RSS ${rss} MB, corpus $(ls "$work/$t" | wc -l)"
    else
        status=1
        echo "$t: FAILED" >&2
        grep -E "ERROR|invariant|SUMMARY|Test unit written|differs|wrote .* read" "$log" | head -20 >&2
        tail -40 "$log" >&2
    fi
done
exit $status
