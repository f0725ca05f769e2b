#!/bin/sh
# Everything CI runs: build, the formatting check, GoogleTest under ctest, pytest on a real fio;
# the C++ tests again under ASan + UBSan (clang, the build that also holds the
# libFuzzer targets), each fuzzer for 60 s beside a 2-minute soak; and the
# multi-job tests (threads sharing one stack) under TSan, in ctest and in fio.
# --quick: the build, ctest and the pytest files in ci/quick-tests.txt only
# (the edit-test loop; CI runs the whole). pytest names each skipped test's
# reason (-rs) and shows per-file progress (tests/py/file_progress.py); the
# stage times are printed at the end, also when a stage fails.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0
for a in "$@"; do
    case $a in
    --quick) quick=1 ;;
    *) echo "ci/test.sh: unknown argument '$a'; allowed: --quick" >&2; exit 2 ;;
    esac
done
start=$(date +%s)
times=$(mktemp /tmp/mdsplit-stage-times.XXXXXX)
now() { echo $(( $(date +%s) - start )); }
stage_name=""; stage_t0=0
end_stage() {
    [ -n "$stage_name" ] && printf '%s\t%s\n' "$(( $(now) - stage_t0 ))" "$stage_name" >>"$times"
    stage_name=""
}
stage() { end_stage; stage_name=$1; stage_t0=$(now); echo "== $1 (at $stage_t0 s)" >&2; }
summary() {
    rc=$?
    end_stage
    echo "== stage times ($( [ $rc = 0 ] && echo passed || echo "failed, exit $rc" ))" >&2
    while IFS="$(printf '\t')" read -r secs name; do
        printf '   %4d:%02d  %s\n' $((secs / 60)) $((secs % 60)) "$name" >&2
    done <"$times"
    printf '   %4d:%02d  total\n' $(( $(now) / 60 )) $(( $(now) % 60 )) >&2
    rm -f "$times"
}
trap summary EXIT
trap 'exit 130' INT TERM
stage build
"$root/ci/build.sh" "$root/build" >/dev/null  # installs what is missing first
stage "clang-format (.clang-format at the root)"
cd "$root"
sources=$(git ls-files '*.cpp' '*.h' 2>/dev/null ||
          find engine bindings tests -name '*.cpp' -o -name '*.h')
echo "$sources" | xargs clang-format --dry-run --Werror
stage ctest
ctest --test-dir "$root/build" --output-on-failure -j2
stage "VM reference: prepare once (harness/vm/prepare.sh, cached in ~/.cache/mdsplit/vm)"
# QEMU, Debian's kernel source and packages, two kernel builds (~8 min of 2
# idle cores on a fresh machine, nothing when cached); tests/py/
# test_vm_reference.py runs the held-out matrix on them. Without root the
# matrix test skips (QEMU cannot be installed).
if [ "$(id -u)" = 0 ]; then "$root/harness/vm/prepare.sh"; fi
stage pytest
pytest_files=tests/py
if [ $quick = 1 ]; then
    pytest_files=$(grep -v '^#' "$root/ci/quick-tests.txt" | sed '/^$/d; s|^|tests/py/|')
fi
# shellcheck disable=SC2086
cd "$root" && MDSPLIT_BUILD_DIR="$root/build" PYTHONPATH="$root/tests/py${PYTHONPATH:+:$PYTHONPATH}" \
    /usr/bin/python3 -m pytest -q -rs -p file_progress $pytest_files
if [ $quick = 1 ]; then
    end_stage
    echo "== quick tests passed (./mdsplit test runs the whole suite, as CI does)" >&2
    exit 0
fi

stage "ASan + UBSan"
"$root/ci/build.sh" "$root/build-asan" -DCMAKE_CXX_COMPILER=clang++ -DMDSPLIT_SANITIZE=address \
    -DMDSPLIT_BUILD_FUZZERS=ON -DMDSPLIT_BUILD_ENGINE=OFF -DMDSPLIT_BUILD_PYTHON=OFF >/dev/null
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j2

stage "soak 2 min, fuzzing 60 s per target, stale-member soak 30 s"
soak_log=$(mktemp /tmp/mdsplit-ci-soak.XXXXXX)
MDSPLIT_ENGINE="$root/build/libmdsplit.so" "$root/bench/soak.sh" 120 >"$soak_log" 2>&1 &
soak=$!
fuzz_rc=0
MDSPLIT_FUZZ_BUILD_DIR="$root/build-asan" MDSPLIT_FUZZ_PARALLEL=1 "$root/bench/fuzz.sh" 60 || fuzz_rc=$?
soak_rc=0
wait $soak || soak_rc=$?
cat "$soak_log"
rm -f "$soak_log"
stale_rc=0
MDSPLIT_ENGINE="$root/build/libmdsplit.so" "$root/bench/soak-stale.sh" 30 || stale_rc=$?
[ $fuzz_rc -eq 0 ] && [ $soak_rc -eq 0 ] && [ $stale_rc -eq 0 ] ||
    { echo "fuzz exit $fuzz_rc, soak exit $soak_rc, soak-stale exit $stale_rc" >&2; exit 1; }

stage "TSan: jobs sharing one stack"
"$root/ci/build.sh" "$root/build-tsan" -DMDSPLIT_SANITIZE=thread -DMDSPLIT_BUILD_PYTHON=OFF \
    -DMDSPLIT_TESTS="shared_stack;buffered_io" >/dev/null
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$root/build-tsan" --output-on-failure -j2 \
    -R 'SharedStack|RealWorkerThreads'
# The TSan-built engine inside Debian's (uninstrumented) fio: the runtime is
# preloaded into fio only; fio's own synchronization TSan cannot see is in
# tests/tsan/fio.supp.
MDSPLIT_ENGINE="$root/build-tsan/libmdsplit.so" MDSPLIT_FIO_PRELOAD="$(gcc -print-file-name=libtsan.so)" \
    TSAN_OPTIONS="halt_on_error=1:exitcode=66:suppressions=$root/tests/tsan/fio.supp" \
    /usr/bin/python3 -m pytest -q -rs tests/py/test_shared_stack.py \
    "tests/py/test_engine_passthrough.py::test_randwrite_then_verify_passes[thread]"
end_stage
echo "== all tests passed" >&2
