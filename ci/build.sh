#!/bin/sh
# Configures and builds mdsplit into BUILD_DIR (default: build), fetching
# fio's source for the installed fio on first use.
# Usage: ci/build.sh [BUILD_DIR] [extra cmake args...]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
"$root/ci/install-deps.sh"
fio_src=${FIO_SOURCE_DIR:-}
if [ -z "$fio_src" ]; then
    fio_src=$("$root/ci/fetch-fio-source.sh" "$root/build-fio-source")
fi
# cmake's and the compiler's output go to a log; on failure its end is shown.
mkdir -p "$build"
log="$build/build.log"
if [ ! -f "$build/CMakeCache.txt" ] || [ -n "${MDSPLIT_VERBOSE_BUILD:-}" ]; then
    echo "mdsplit: building into $build (log: $log)" >&2
fi
{ cmake -S "$root" -B "$build" -DFIO_SOURCE_DIR="$fio_src" "$@" &&
  cmake --build "$build" -j"$(nproc)"; } >"$log" 2>&1 || {
    tail -n 40 "$log" >&2
    echo "mdsplit: the build failed; its whole output is in $log" >&2
    exit 1
}
# Job files load /usr/local/lib/mdsplit/libmdsplit.so (see README): the
# plain build is installed there; sanitizer builds (extra cmake args) never.
if [ "$(id -u)" = 0 ] && [ $# -eq 0 ]; then cmake --install "$build" >/dev/null; fi
echo "$build"
