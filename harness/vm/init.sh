#!/bin/sh
# /init of the VM reference's initramfs (harness/vm/prepare.sh packs it):
# mounts the kernel's file systems and the 9p share "mdsplit" (the run's
# directory on the host), runs its run.sh with output to run.log, and powers
# the machine off with `reboot -f` (QEMU runs with -no-reboot, so a reboot
# ends it; the tiny kernel has no ACPI power-off path that busybox poweroff
# would wait for).
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
# A modular kernel (Debian's): load what the reference needs, from the
# initramfs's /lib/modules (null_blk's devices come from configfs).
if [ -d /lib/modules ]; then
    modprobe -a configfs null_blk raid456 9pnet_virtio 9p bfq
fi
mount -t tracefs tracefs /sys/kernel/tracing
mount -t configfs configfs /sys/kernel/config
mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 mdsplit /share; then
    sh /share/run.sh >/share/run.log 2>&1
    echo "$?" >/share/run.rc
    sync
else
    echo "mdsplit guest: cannot mount the 9p share" >/dev/console
fi
reboot -f
