#!/bin/sh
# Fetch Debian's source of the *installed* fio and configure it once, so that
# the engine is compiled against exactly the struct layouts of /usr/bin/fio.
# Usage: ci/fetch-fio-source.sh DEST_DIR   (prints the source directory)
set -eu
dest=${1:?usage: fetch-fio-source.sh DEST_DIR}
ver=$(dpkg-query -W -f='${Version}' fio 2>/dev/null) || {
    echo "fetch-fio-source: fio is not installed (apt-get install fio)" >&2; exit 1; }
upstream=${ver%-*}; upstream=${upstream#*:}
src="$dest/fio-$upstream"
if [ -f "$src/config-host.h" ] && [ -f "$src/.debian-version" ] &&
   [ "$(cat "$src/.debian-version")" = "$ver" ]; then
    echo "$src"; exit 0
fi
log=${MDSPLIT_SETUP_LOG:-$(cd "$(dirname "$0")/.." && pwd)/build/setup.log}
mkdir -p "$(dirname "$log")"
echo "mdsplit: fetching Debian's source of fio $ver for its headers (log: $log)" >&2
fail() { echo "mdsplit: $1 failed; its output is in $log" >&2; exit 1; }
need_src() { ! apt-get source --print-uris "fio=$ver" >/dev/null 2>&1; }
if need_src; then
    # Add deb-src for the same suites the machine's deb entries name.
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
            > /etc/apt/sources.list.d/mdsplit-deb-src.sources
    else
        grep -h '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
            > /etc/apt/sources.list.d/mdsplit-deb-src.list
    fi
    apt-get update >>"$log" 2>&1 || fail "apt-get update"
fi
command -v dpkg-source >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y dpkg-dev >>"$log" 2>&1 ||
    fail "installing dpkg-dev"
mkdir -p "$dest"
( cd "$dest" && rm -rf "fio-$upstream" && apt-get source --download-only "fio=$ver" &&
  dpkg-source --no-check -x fio_*.dsc "fio-$upstream" ) >>"$log" 2>&1 || fail "apt-get source fio"
( cd "$src" && ./configure ) >>"$log" 2>&1 || fail "fio's ./configure"
echo "$ver" > "$src/.debian-version"
echo "$src"
