#!/bin/sh
# bench/fuzz.sh SECONDS [TARGET...]
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
    -DMDSPLIT_BUILD_FUZZERS=ON -DMDSPLIT_BUILD_ENGINE=OFF -DMDSPLIT_BUILD_PYTHON=OFF \
    -DMDSPLIT_BUILD_TESTS=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j2 --target $targets >/dev/null

work=$(mktemp -d /tmp/mdsplit-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$build/fuzz-artifacts"
status=0
for t in $targets; do
    mkdir -p "$work/$t"
    cp "$root/tests/fuzz/corpus/$t/"* "$work/$t/" 2>/dev/null || true
    log=$work/$t.log
    if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/fuzz/$t" -max_total_time="$secs" -timeout=60 -rss_limit_mb=4096 \
        -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" "$work/$t" >"$log" 2>&1
    then
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
