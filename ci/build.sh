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
# Where ccache is installed it keeps compiled objects across builds and
# clones (paths taken relative to the clone); without it, plain compiles.
if command -v ccache >/dev/null 2>&1; then
    export CCACHE_BASEDIR="$root"
    export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
fi
# The compiler's step count is shown as progress (ci/build-progress.awk): one
# updating line on a terminal, a plain line per 10 % elsewhere.
tty=0; [ -t 2 ] && tty=1
rc_file="$build/.build-rc"
{ { cmake -S "$root" -B "$build" -DFIO_SOURCE_DIR="$fio_src" "$@" &&
    cmake --build "$build" -j"$(nproc)"; } 2>&1; echo $? >"$rc_file"; } |
    awk -v LOG="$log" -v TTY="$tty" -f "$root/ci/build-progress.awk"
rc=$(cat "$rc_file" 2>/dev/null || echo 1); rm -f "$rc_file"
if [ "$rc" != 0 ]; then
    tail -n 40 "$log" >&2
    echo "mdsplit: the build failed; its whole output is in $log" >&2
    exit 1
fi
# The plain build's engine is installed to PREFIX/lib/mdsplit/libmdsplit.so:
# PREFIX is $MDSPLIT_PREFIX (./mdsplit --prefix DIR), else /usr/local when
# run as root (the path the shipped job files load); sanitizer builds (extra
# cmake args) never. See docs/harness.md, "What is installed where".
if [ $# -eq 0 ]; then
    if [ -n "${MDSPLIT_PREFIX:-}" ]; then
        cmake --install "$build" --prefix "$MDSPLIT_PREFIX" >/dev/null
    elif [ "$(id -u)" = 0 ]; then
        cmake --install "$build" >/dev/null
    fi
fi
echo "$build"
