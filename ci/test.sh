#!/bin/sh
# Everything CI runs: build, GoogleTest under ctest, pytest on a real fio,
# then the C++ tests again under ASan + UBSan.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
"$root/ci/build.sh" "$root/build" >/dev/null
echo "== ctest" >&2
ctest --test-dir "$root/build" --output-on-failure -j2
echo "== pytest" >&2
cd "$root" && MDSPLIT_BUILD_DIR="$root/build" /usr/bin/python3 -m pytest -q tests/py
echo "== ASan + UBSan" >&2
"$root/ci/build.sh" "$root/build-asan" -DMDSPLIT_SANITIZE=address -DMDSPLIT_BUILD_ENGINE=OFF \
    -DMDSPLIT_BUILD_PYTHON=OFF >/dev/null
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j2
echo "== all tests passed in $(( $(date +%s) - start )) s" >&2
