"""The reference VM: a kernel from the cache (harness/vm/prepare.sh) booted
under QEMU's TCG with the shared initramfs; /init runs the share's run.sh
and the machine ends with `reboot -f` under -no-reboot.

  kernels        KERNELS: stock and fixed (our tinyconfig builds of
                 linux-source-6.12, the second with seed 000's patch) and
                 debian-6.12 (Debian's packaged build of the same release,
                 its modules loaded from the initramfs)
  prepare()      runs prepare.sh (progress lines on stderr) unless --check
                 says everything is cached
  boot()         one run: the share directory in, run.log / run.rc and the
                 script's outputs back, within a wall-clock timeout

Missing QEMU, a missing kernel or a failed download raise
VmUnavailable with one line naming what is missing.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREPARE = HERE / "prepare.sh"
QEMU = "qemu-system-x86_64"

# The kernel of each split order and what each one is (docs/vm-reference.md).
KERNELS = {
    "stock": "linux-source-6.12 (Debian 6.12.118) built from tinyconfig + harness/vm/kernel.config",
    "fixed": "the stock build with seed 000's patch to submit_bio_noacct_nocheck()",
    "debian-6.12": "Debian's linux-image-6.12.118+deb12-amd64 as packaged (modules)",
}


class VmUnavailable(RuntimeError):
    """The VM cannot run here; str(e) is the one-line reason."""


def pins() -> dict:
    """harness/vm/pins.env as a dict (the one place versions are pinned)."""
    out = {}
    for line in (HERE / "pins.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def cache_dir() -> Path:
    return Path(os.environ.get("MDSPLIT_VM_CACHE",
                               Path(os.environ.get("HOME", "/root")) / ".cache/mdsplit/vm"))


def can_run_qemu() -> str:
    """'' when this machine can run the VM (QEMU installed or installable:
    root with apt-get), else why not."""
    if shutil.which(QEMU):
        return ""
    if os.geteuid() != 0:
        return f"{QEMU} is not installed and installing it needs root (apt-get install qemu-system-x86)"
    if not shutil.which("apt-get"):
        return f"{QEMU} is not installed and there is no apt-get to install it"
    return ""


def prepared(kernels=()) -> bool:
    return subprocess.run(["sh", str(PREPARE), "--check", *kernels],
                          capture_output=True).returncode == 0


def prepare(kernels=(), progress=None) -> float:
    """Prepares the cache for these kernels (all when none; prepare.sh's
    progress lines go to stderr); returns the seconds it took (0 when
    everything was cached)."""
    if prepared(kernels):
        return 0.0
    if why := can_run_qemu():
        raise VmUnavailable(why)
    if progress:
        progress("mdsplit vm: preparing the VM reference once (harness/vm/prepare.sh)")
    t0 = time.monotonic()
    r = subprocess.run(["sh", str(PREPARE), *kernels])
    if r.returncode != 0:
        raise VmUnavailable("harness/vm/prepare.sh failed (its last line above names what is "
                            "missing)")
    return time.monotonic() - t0


@dataclass
class Boot:
    rc: int              # run.sh's exit status (None when it did not finish)
    log: str             # run.log
    console: str         # the serial console
    seconds: float       # wall time of the whole boot


def kernel_files(kernel: str) -> tuple:
    """(bzImage, extra initramfs or None) of a cached kernel."""
    if kernel not in KERNELS:
        raise VmUnavailable(f"--kernel {kernel}: allowed: {', '.join(KERNELS)}")
    k = cache_dir() / "kernels" / kernel
    image = k / "bzImage"
    if not image.exists():
        raise VmUnavailable(f"kernel {kernel} is not prepared ({image} missing): run "
                            "harness/vm/prepare.sh")
    modules = k / "modules.cpio.gz"
    return image, (modules if modules.exists() else None)


def _initrd(kernel: str, modules) -> Path:
    base = cache_dir() / "initramfs.cpio.gz"
    if not base.exists():
        raise VmUnavailable(f"{base} missing: run harness/vm/prepare.sh")
    if modules is None:
        return base
    # The kernel unpacks concatenated compressed cpio archives in turn.
    joined = cache_dir() / "kernels" / kernel / "initrd.cpio.gz"
    if not joined.exists() or joined.stat().st_mtime < max(base.stat().st_mtime,
                                                           modules.stat().st_mtime):
        tmp = joined.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            for part in (base, modules):
                out.write(part.read_bytes())
        tmp.replace(joined)
    return joined


def boot(kernel: str, share: Path, *, cpus: int = 1, memory_mb: int = 1024,
         timeout_s: float = 900.0) -> Boot:
    """Boots `kernel` with `share` as the 9p share "mdsplit"; /init runs
    share/run.sh. One virtual CPU by default: the member sequences are the
    same with 1 or 2 (issue 38), and one is cheaper under TCG."""
    if not shutil.which(QEMU):
        raise VmUnavailable(f"{QEMU} is not installed (harness/vm/prepare.sh installs "
                            "qemu-system-x86)")
    image, modules = kernel_files(kernel)
    initrd = _initrd(kernel, modules)
    console = share / "console.log"
    for f in ("run.log", "run.rc", "console.log"):
        (share / f).unlink(missing_ok=True)
    cmd = [QEMU, "-accel", "tcg", "-m", str(memory_mb), "-smp", str(cpus),
           "-kernel", str(image), "-initrd", str(initrd),
           # no_timer_check: under a loaded host TCG can miss the boot's
           # IO-APIC timer check, and the kernel panics ("IO-APIC + timer
           # doesn't work!"; arch/x86/kernel/apic/io_apic.c check_timer()).
           "-append", "console=ttyS0 quiet panic=-1 no_timer_check null_blk.nr_devices=0 "
                      "transparent_hugepage=always",
           "-display", "none", "-monitor", "none", "-serial", f"file:{console}",
           "-no-reboot",
           "-virtfs", f"local,path={share},mount_tag=mdsplit,security_model=none,id=mdsplit"]
    t0 = time.monotonic()
    try:
        subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise VmUnavailable(f"the VM ({kernel}) did not finish within {timeout_s:.0f} s "
                            f"(console: {console})") from None
    seconds = time.monotonic() - t0
    rc_file = share / "run.rc"
    rc = int(rc_file.read_text().strip()) if rc_file.exists() else None
    log = (share / "run.log").read_text(errors="replace") if (share / "run.log").exists() else ""
    text = console.read_text(errors="replace") if console.exists() else ""
    return Boot(rc, log, text, seconds)
