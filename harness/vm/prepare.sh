#!/bin/sh
# Prepares the VM reference (`harness reference --vm`, docs/vm-reference.md)
# once per machine and caches it under ${MDSPLIT_VM_CACHE:-~/.cache/mdsplit/vm}:
#   1. the host packages: qemu-system-x86 (TCG), busybox-static, cpio and the
#      kernel's build tools (flex, bison, bc, libelf-dev, libssl-dev)
#   2. Debian's kernel source and mdadm, fetched with `apt-get download`
#      (versions pinned in harness/vm/pins.env) and unpacked with dpkg-deb
#   3. initramfs.cpio.gz: busybox, kmod, mdadm, fio and their libraries, /init,
#      mdsplit-pagemap (harness/vm/pagemap.c, linked statically)
#   4. kernels/debian-6.12/: Debian's packaged kernel of the same release
#      (vmlinuz, and modules.cpio.gz with the modules the reference loads)
#   5. kernels/stock/bzImage: tinyconfig + harness/vm/kernel.config
#   6. kernels/fixed/bzImage: the same tree with seed 000's patch
#      (harness/vm/seed-000-submit-bio-chain-head.patch): one object differs
# Each step prints one progress line with its time, and is skipped when its
# stamp (the pins, the config fragment, the patch) is unchanged.
# Usage: harness/vm/prepare.sh [--check] [KERNEL ...]
#   KERNEL   stock, fixed, debian-6.12 (default: all three); only these are
#            prepared (stock and fixed share one build tree)
#   --check  exit 1 if anything the kernels need is missing, prepare nothing
# Runs are serialized by a lock in the cache (a second one waits).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pins.env"
cache=${MDSPLIT_VM_CACHE:-${HOME:-/root}/.cache/mdsplit/vm}
mkdir -p "$cache/debs" "$cache/src" "$cache/kernels"
log_dir=$cache/logs
mkdir -p "$log_dir"
t0=$(date +%s)

say() { echo "mdsplit vm: $*" >&2; }
die() { echo "mdsplit vm: $*" >&2; exit 1; }
stamp_of() { cat "$here/pins.env" "$@" | sha256sum | cut -c1-16; }
step_done() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }

kstamp=$(stamp_of "$here/kernel.config")
fstamp=$(stamp_of "$here/kernel.config" "$here/seed-000-submit-bio-chain-head.patch")
istamp=$(stamp_of "$here/init.sh" "$here/pagemap.c" "$0")
# The modules the guest loads on a modular (Debian) kernel; built in on ours.
GUEST_MODULES="configfs null_blk raid456 9pnet_virtio 9p bfq"
check=0
[ "${1:-}" = "--check" ] && { check=1; shift; }
wanted=" ${*:-stock fixed debian-6.12} "
for k in $wanted; do
    case $k in stock|fixed|debian-6.12) ;; *) die "kernel $k: allowed: stock, fixed, debian-6.12" ;; esac
done
want() { case $wanted in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
if [ "$check" = 1 ]; then
    step_done "$cache/initramfs.stamp" "$istamp" || exit 1
    ! want stock || step_done "$cache/kernels/stock/stamp" "$kstamp" || exit 1
    ! want fixed || step_done "$cache/kernels/fixed/stamp" "$fstamp" || exit 1
    ! want debian-6.12 || step_done "$cache/kernels/debian-6.12/stamp" "$(stamp_of)" || exit 1
    exit 0
fi
exec 9>"$cache/.prepare.lock"
flock 9

# 1. host packages
PKGS="qemu-system-x86 busybox-static kmod cpio flex bison bc libelf-dev libssl-dev xz-utils gcc libc6-dev make fio"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    [ "$(id -u)" = 0 ] || die "missing packages:$missing (run as root, or: sudo apt-get install$missing)"
    s=$(date +%s)
    say "[1/6] installing$missing (log: $log_dir/apt.log)"
    { flock /tmp/mdsplit-apt.lock apt-get update && DEBIAN_FRONTEND=noninteractive \
        flock /tmp/mdsplit-apt.lock apt-get install -y --no-install-recommends $missing; } \
        >>"$log_dir/apt.log" 2>&1 || die "apt-get failed installing$missing; its output is in $log_dir/apt.log"
    say "[1/6] packages installed in $(elapsed "$s")"
fi

# 2. kernel source and mdadm from Debian's archive
fetch() { # package version -> the .deb's path
    deb=$(ls "$cache/debs/$1_$(echo "$2" | sed 's/^[0-9]*://')_"*.deb 2>/dev/null | head -1 || true)
    if [ -z "$deb" ]; then
        (cd "$cache/debs" && apt-get download "$1=$2") >>"$log_dir/download.log" 2>&1 ||
            die "cannot download $1=$2 (pinned in harness/vm/pins.env; apt-get's output: $log_dir/download.log)"
        deb=$(ls "$cache/debs/$1_"*.deb | head -1)
    fi
    echo "$deb"
}
tree=$cache/src/$LINUX_SOURCE_TREE
if ! step_done "$cache/src/source.stamp" "$LINUX_SOURCE_VERSION"; then
    s=$(date +%s)
    say "[2/6] fetching $LINUX_SOURCE_PACKAGE=$LINUX_SOURCE_VERSION and unpacking it"
    deb=$(fetch "$LINUX_SOURCE_PACKAGE" "$LINUX_SOURCE_VERSION")
    rm -rf "$tree"
    (cd "$cache/src" && dpkg-deb --fsys-tarfile "$deb" |
        tar -x --wildcards "*$LINUX_SOURCE_TREE.tar.xz" -O | tar -xJ)
    echo "$LINUX_SOURCE_VERSION" > "$cache/src/source.stamp"
    say "[2/6] kernel source unpacked in $(elapsed "$s")"
fi
mdadm_root=$cache/src/mdadm-$MDADM_VERSION
if [ ! -x "$mdadm_root/sbin/mdadm" ]; then
    deb=$(fetch mdadm "$MDADM_VERSION")
    rm -rf "$mdadm_root" && mkdir -p "$mdadm_root" && dpkg-deb -x "$deb" "$mdadm_root"
fi

# 3. the initramfs: busybox, mdadm, fio, their shared libraries, /init
if ! step_done "$cache/initramfs.stamp" "$istamp"; then
    s=$(date +%s)
    say "[3/6] building the initramfs (busybox-static, mdadm $MDADM_VERSION, fio)"
    root=$cache/initramfs-root
    rm -rf "$root" && mkdir -p "$root/bin" "$root/sbin" "$root/lib64" "$root/lib" \
        "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/share" "$root/run"
    cp /bin/busybox "$root/bin/busybox"
    for a in $("$root/bin/busybox" --list); do
        [ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"
    done
    cp "$mdadm_root/sbin/mdadm" "$root/sbin/mdadm"
    cp "$(command -v fio)" "$root/bin/fio.real"
    cp /usr/bin/kmod "$root/sbin/kmod"
    for a in modprobe insmod lsmod depmod; do rm -f "$root/bin/$a"; ln -s kmod "$root/sbin/$a"; done
    for bin in "$root/sbin/mdadm" "$root/bin/fio.real" "$root/sbin/kmod"; do
        ldd "$bin" | awk '/=> \//{print $3} /^\t\/lib64/{print $1}' | while read -r lib; do
            case $lib in
                /lib64/*) cp -L "$lib" "$root/lib64/" ;;
                *) cp -L "$lib" "$root/lib/" ;;
            esac
        done
    done
    printf '#!/bin/sh\nLD_LIBRARY_PATH=/lib exec /bin/fio.real "$@"\n' > "$root/bin/fio"
    chmod +x "$root/bin/fio"
    # fio's buffers' physical layout, read in the guest (harness/vm/pagemap.c)
    gcc -O2 -static -o "$root/bin/mdsplit-pagemap" "$here/pagemap.c" ||
        die "cannot compile harness/vm/pagemap.c statically (gcc and libc6-dev's libc.a)"
    cp "$here/init.sh" "$root/init" && chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$cache/initramfs.cpio.gz"
    echo "$istamp" > "$cache/initramfs.stamp"
    say "[3/6] initramfs built in $(elapsed "$s") ($(du -k "$cache/initramfs.cpio.gz" | cut -f1) KiB)"
fi
# 4. Debian's packaged kernel and the modules the reference loads
dstamp=$(stamp_of)
if want debian-6.12 && ! step_done "$cache/kernels/debian-6.12/stamp" "$dstamp"; then
    s=$(date +%s)
    say "[4/6] fetching $DEBIAN_KERNEL_PACKAGE=$DEBIAN_KERNEL_VERSION"
    deb=$(fetch "$DEBIAN_KERNEL_PACKAGE" "$DEBIAN_KERNEL_VERSION")
    x=$cache/src/debian-kernel && rm -rf "$x" && mkdir -p "$x" && dpkg-deb -x "$deb" "$x"
    k=$cache/kernels/debian-6.12 && rm -rf "$k" && mkdir -p "$k"
    cp "$x/boot/vmlinuz-$DEBIAN_KERNEL_RELEASE" "$k/bzImage"
    cp "$x/boot/config-$DEBIAN_KERNEL_RELEASE" "$k/config"
    m=$cache/src/debian-modules && rm -rf "$m"
    depmod -b "$x" "$DEBIAN_KERNEL_RELEASE"
    for mod in $GUEST_MODULES; do
        modprobe -d "$x" -S "$DEBIAN_KERNEL_RELEASE" --show-depends "$mod"
    done | awk '$1 == "insmod" {print $2}' | sort -u | while read -r f; do
        rel=${f#"$x"/}
        mkdir -p "$m/$(dirname "$rel")" && cp "$f" "$m/$rel"
    done
    for f in modules.order modules.builtin modules.builtin.modinfo; do
        cp "$x/lib/modules/$DEBIAN_KERNEL_RELEASE/$f" "$m/lib/modules/$DEBIAN_KERNEL_RELEASE/"
    done
    depmod -b "$m" "$DEBIAN_KERNEL_RELEASE"
    (cd "$m" && find . | cpio -o -H newc --quiet | gzip -1) > "$k/modules.cpio.gz"
    rm -rf "$x"
    echo "$dstamp" > "$k/stamp"
    say "[4/6] Debian kernel ready in $(elapsed "$s")"
fi
# 5./6. the kernels: one object tree, built stock, then patched and rebuilt
obj=$cache/src/obj-6.12
build_kernel() { # name stamp step
    name=$1 stamp=$2 step=$3
    s=$(date +%s)
    blog=$log_dir/build-$name.log
    say "[$step/6] building the $name kernel: nice -n 10 make -j2 bzImage (log: $blog; ~8 min of 2 idle cores for the first, seconds for the second)"
    nice -n 10 make -C "$tree" O="$obj" -j2 bzImage >"$blog" 2>&1 ||
        die "the $name kernel build failed; its log: $blog"
    mkdir -p "$cache/kernels/$name"
    cp "$obj/arch/x86/boot/bzImage" "$cache/kernels/$name/bzImage"
    cp "$obj/.config" "$cache/kernels/$name/config"
    echo "$stamp" > "$cache/kernels/$name/stamp"
    say "[$step/6] $name kernel built in $(elapsed "$s") ($(du -k "$cache/kernels/$name/bzImage" | cut -f1) KiB)"
}
configure() {
    mkdir -p "$obj"
    make -s -C "$tree" O="$obj" tinyconfig >"$log_dir/config.log" 2>&1
    "$tree/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "$here/kernel.config" >>"$log_dir/config.log" 2>&1
    make -s -C "$tree" O="$obj" olddefconfig >>"$log_dir/config.log" 2>&1
    for o in $(grep -o '^CONFIG_[A-Z0-9_]*=y' "$here/kernel.config" | cut -d= -f1); do
        grep -q "^$o=y" "$obj/.config" || die "kernel config: $o=y did not survive olddefconfig (harness/vm/kernel.config)"
    done
}
patch_file=$here/seed-000-submit-bio-chain-head.patch
unpatch() { # the tree as Debian ships it
    if patch -d "$tree" -p1 -R --dry-run -s -f <"$patch_file" >/dev/null 2>&1; then
        patch -d "$tree" -p1 -R -s -f <"$patch_file"
    fi
}
if want stock && ! step_done "$cache/kernels/stock/stamp" "$kstamp"; then
    unpatch
    configure
    build_kernel stock "$kstamp" 5
fi
if want fixed && ! step_done "$cache/kernels/fixed/stamp" "$fstamp"; then
    [ -f "$obj/.config" ] || configure
    unpatch
    patch -d "$tree" -p1 -s <"$patch_file" || die "seed 000's patch does not apply to $LINUX_SOURCE_TREE"
    build_kernel fixed "$fstamp" 6
    unpatch
    # The next stock build must not reuse the patched object.
    rm -f "$obj/block/blk-core.o"
fi

say "ready in $(elapsed "$t0") (cache: $cache)"
