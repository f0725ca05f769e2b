#!/bin/sh
# Everything CI runs: build, the formatting check, GoogleTest under ctest, pytest on a real fio;
# the C++ tests again under ASan + UBSan (clang, the build that also holds the
# libFuzzer targets), each fuzzer for 60 s beside a 2-minute soak; and the
# multi-job tests (threads sharing one stack) under TSan, in ctest and in fio.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
stage() { echo "== $1 (at $(( $(date +%s) - start )) s)" >&2; }
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
cd "$root" && MDSPLIT_BUILD_DIR="$root/build" /usr/bin/python3 -m pytest -q tests/py

stage "ASan + UBSan"
"$root/ci/build.sh" "$root/build-asan" -DCMAKE_CXX_COMPILER=clang++ -DMDSPLIT_SANITIZE=address \
    -DMDSPLIT_BUILD_FUZZERS=ON -DMDSPLIT_BUILD_ENGINE=OFF -DMDSPLIT_BUILD_PYTHON=OFF >/dev/null
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j2

stage "soak 2 min, fuzzing 60 s per target"
soak_log=$(mktemp /tmp/mdsplit-ci-soak.XXXXXX)
MDSPLIT_ENGINE="$root/build/libmdsplit.so" "$root/bench/soak.sh" 120 >"$soak_log" 2>&1 &
soak=$!
fuzz_rc=0
MDSPLIT_FUZZ_BUILD_DIR="$root/build-asan" MDSPLIT_FUZZ_PARALLEL=1 "$root/bench/fuzz.sh" 60 || fuzz_rc=$?
soak_rc=0
wait $soak || soak_rc=$?
cat "$soak_log"
rm -f "$soak_log"
[ $fuzz_rc -eq 0 ] && [ $soak_rc -eq 0 ] || { echo "fuzz exit $fuzz_rc, soak exit $soak_rc" >&2; exit 1; }

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
    /usr/bin/python3 -m pytest -q tests/py/test_shared_stack.py \
    "tests/py/test_engine_passthrough.py::test_randwrite_then_verify_passes[thread]"
stage "all tests passed"
