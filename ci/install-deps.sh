#!/bin/sh
# Installs what a fresh Debian 12 machine lacks to build and test mdsplit.
# Idempotent: does nothing when everything is present.
set -eu
PKGS="fio liburing-dev libtomlplusplus-dev pybind11-dev python3-pybind11 python3-dev
      python3-pytest python3-numpy python3-matplotlib libgtest-dev googletest cmake g++
      pkg-config make dpkg-dev blktrace clang clang-format libclang-rt-14-dev util-linux
      libblkid-dev e2fsprogs strace"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "mdsplit: missing packages:$missing (run as root, or: sudo apt-get install$missing)" >&2
        exit 1
    fi
    log=${MDSPLIT_SETUP_LOG:-$(cd "$(dirname "$0")/.." && pwd)/build/setup.log}
    mkdir -p "$(dirname "$log")"
    n=$(echo $missing | wc -w)
    echo "mdsplit: installing $n Debian packages (apt-get's output: $log)" >&2
    { apt-get update && DEBIAN_FRONTEND=noninteractive \
          apt-get install -y --no-install-recommends $missing; } >>"$log" 2>&1 || {
        echo "mdsplit: apt-get failed installing$missing; its output is in $log" >&2; exit 1; }
fi
