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
cmake -S "$root" -B "$build" -DFIO_SOURCE_DIR="$fio_src" "$@" >&2
cmake --build "$build" -j"$(nproc)" >&2
# Job files load /usr/local/lib/mdsplit/libmdsplit.so (see README): the
# plain build is installed there; sanitizer builds (extra cmake args) never.
if [ "$(id -u)" = 0 ] && [ $# -eq 0 ]; then cmake --install "$build" >/dev/null; fi
echo "$build"
