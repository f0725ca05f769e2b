"""The held-out matrix: set-ups nobody fitted the emulator to, each run in
the emulator and on the real kernel (reference.compare_jobs), one boot per
kernel for all cases. A case is identical (every Q and D sequence of every
device), explained (listed in KNOWN with the kernel function that differs
and why it is left; docs/vm-reference.md), or differing.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import paths
from harness.vm import reference

MiB = 1 << 20


@dataclass(frozen=True)
class Case:
    name: str
    members: int
    chunk: str
    layout: str
    order: str          # split_order
    rw: str
    bs: str
    size: str
    offset: str = "0"
    thp: str = "always"     # the guest's transparent_hugepage/enabled
    policy: str = None      # [bio] policy written into the stack (None: the default)
    scheduler: str = "mq-deadline"   # the members' elevator
    queue_depth: int = 32   # the members' (null_blk hw_queue_depth)


# RAID5 reads: 3-8 members, chunks 4k-512k, md's four layouts, aligned and
# unaligned offsets, from 4k to several stripes, sequential and random,
# both split orders.
READ_CASES = [
    Case("r3-c4k-la-4k", 3, "4k", "left-asymmetric", "legacy", "read", "4k", "160k"),
    Case("r4-c64k-ra-12k-unaligned", 4, "64k", "right-asymmetric", "legacy", "read", "12k",
         "240k", "4k"),
    Case("r5-c128k-ls-stripe", 5, "128k", "left-symmetric", "legacy", "read", "512k", "10m"),
    Case("r6-c512k-rs-2stripes", 6, "512k", "right-symmetric", "legacy", "read", "5m", "40m"),
    Case("r7-c32k-la-700k-unaligned", 7, "32k", "left-asymmetric", "legacy", "read", "700k",
         "14m", "20k"),
    Case("r8-c64k-ls-4480k", 8, "64k", "left-symmetric", "legacy", "read", "4480k", "44800k"),
    Case("r3-c256k-rs-randread-16k", 3, "256k", "right-symmetric", "legacy", "randread", "16k",
         "1m"),
    Case("r8-c64k-ls-1m-fixed", 8, "64k", "left-symmetric", "fixed", "read", "1m", "20m"),
    Case("r5-c16k-ra-300k-unaligned-fixed", 5, "16k", "right-asymmetric", "fixed", "read",
         "300k", "6m", "8k"),
]

# RAID5 writes through md's stripe cache: read-modify-write (4k into a
# 64k chunk), reconstruct-write (128k of a 256k stripe), full stripes.
WRITE_CASES = [
    Case("w4-c64k-ls-4k-rmw", 4, "64k", "left-symmetric", "legacy", "write", "4k", "64k"),
    Case("w5-c64k-ls-128k-rcw", 5, "64k", "left-symmetric", "legacy", "write", "128k", "1m"),
    Case("w4-c64k-ls-192k-full", 4, "64k", "left-symmetric", "legacy", "write", "192k",
         "1536k"),
    Case("w4-c64k-ls-192k-full-fixed", 4, "64k", "left-symmetric", "fixed", "write", "192k",
         "1536k"),
]

# The original bio policy (seed 001's "before": 6.12's
# __bio_iov_iter_get_pages()) on large direct reads whose buffer's physical
# layout the guest's pagemap reports: THP never (runs of a few pages, so a
# bio ends at BIO_MAX_VECS bvecs) and always (2 MiB runs). The members'
# queue depth is 128: a 16m read puts more than 32 requests on a member at
# once, and at 32 the driver tags decide the order (null_blk completes a
# request in the submitter's softirq at once, the emulator's members after
# the submitter's step: a timing difference, not the bios').
BIO_CASES = [
    Case("r4-c64k-ls-16m-original-nothp", 4, "64k", "left-symmetric", "legacy", "read", "16m",
         "64m", thp="never", policy="original", queue_depth=128),
    Case("r4-c64k-ls-16m-original-thp", 4, "64k", "left-symmetric", "legacy", "read", "16m",
         "64m", policy="original", queue_depth=128),
    # The patched tinyconfig build hands fio pages in descending frame
    # order (hundreds of runs over a buffer): bios end at BIO_MAX_VECS.
    Case("r4-c64k-ls-16m-original-fixed", 4, "64k", "left-symmetric", "fixed", "read", "16m",
         "64m", policy="original", queue_depth=128),
]

# bfq as the members' elevator (one process, no groups: the order bfq's
# dispatch gives one queue's requests; the tunables as the emulator's,
# translate.bfq_tunables).
BFQ_CASES = [
    Case("r4-c64k-ls-4480k-bfq", 4, "64k", "left-symmetric", "legacy", "read", "4480k",
         "44800k", scheduler="bfq"),
    Case("w4-c64k-ls-192k-full-bfq", 4, "64k", "left-symmetric", "legacy", "write", "192k",
         "1536k", scheduler="bfq"),
]
CASES = READ_CASES + WRITE_CASES + BIO_CASES + BFQ_CASES

# Cases whose sequences differ for a reason the emulator leaves as it is:
# case name -> (the kernel function, why); docs/vm-reference.md lists them.
_NO_PLUG = (
    "block/fops.c blkdev_direct_IO() -> __blkdev_direct_IO_simple()",
    "a direct read of at most BIO_MAX_VECS pages is submitted without a plug (psync: "
    "__blkdev_direct_IO_simple(); io_uring and libaio plug only batches of more than 2: "
    "io_submit_state_start()'s need_plug = max_ios > 2, fs/aio.c AIO_PLUG_THRESHOLD), so "
    "each member bio becomes a request dispatched at once (Q G I D, nothing merges); the "
    "emulator plugs every batch (Stack::begin_batch) and merges a member's adjacent chunks "
    "of one read. Member Q sequences are identical; D differs in merging only. Left: the "
    "fix changes the submission path of every reproduction's figures. Reads over 256 pages "
    "take __blkdev_direct_IO(), which plugs, and are identical")
_BFQ_DISPATCH = (
    "block/bfq-iosched.c bfq_insert_request() -> blk_mq_sched_try_insert_merge(); "
    "block/blk-mq.c blk_mq_dispatch_plug_list() -> blk_mq_run_hw_queue(hctx, false)",
    "the kernel's bfq merges a request entering it with a queued one ending where it "
    "starts (elv_rqhash) and is run at once when a plug flush has inserted its batch, so "
    "it dispatches each flush's requests before the next bios come; the emulator's bfq "
    "keeps no elv_rqhash (IoScheduler::queued_ending_at) and its queue runs deferred "
    "(runs_queue_at_unplug() false; both stated in engine/core/block/bfq_scheduler.h and "
    "io_scheduler.h), so later bios merge into requests still queued: Q identical, D "
    "differs in merging and order. Left: bfq's dispatch timing is what seed 004's "
    "reproduced figures were fitted with; changing it belongs with them")
KNOWN: dict = {
    "r4-c64k-ls-4480k-bfq": _BFQ_DISPATCH,
    "r7-c32k-la-700k-unaligned": _NO_PLUG,           # 175 pages
    "r8-c64k-ls-1m-fixed": _NO_PLUG,                 # 256 pages
    "r5-c16k-ra-300k-unaligned-fixed": _NO_PLUG,     # 75 pages
    "r3-c256k-rs-randread-16k": (
        "none (fio's random offsets, not the kernel)",
        "fio 3.33 in the guest reads 48k, 752k, 848k, 480k, 400k, ... (the host's fio "
        "gives the same with write_iolog, on a 126 MiB or a 128 MiB file): io_u.c "
        "__get_next_rand_offset() scales a tausworthe draw (lib/rand.c, seeded by init.c "
        "setup_random_seeds()) as lastb * (r / (rand_max + 1.0)); simulate's "
        "pick_random_unit() (engine/sim/fio_job_model.cpp) takes std::mt19937_64 modulo the "
        "units and gives 672k, 288k, 1008k, ...: left to harness simulate's owners (issue "
        "42); every member request is still one 16k bio in both"),
}


def raid5_stack(members: int, chunk: str, layout: str, order: str, member_bytes: int,
                policy: str = None, scheduler: str = "mq-deadline",
                queue_depth: int = 32) -> str:
    """A RAID5 stack file over `members` members (mq-deadline by default, as
    the thread's sd* disks)."""
    lines = ["[device]", 'kind = "raid5"', f'chunk = "{chunk}"', f'layout = "{layout}"',
             'max_sectors = "1m"', f'split_order = "{order}"', f'scheduler = "{scheduler}"']
    if policy:
        lines += ["[bio]", f'policy = "{policy}"']
    for i in range(members):
        lines += ["[[members]]", f'path = "m{i}.img"', f"size = {member_bytes}",
                  'max_sectors = "512k"', f"queue_depth = {queue_depth}"]
    return "\n".join(lines) + "\n"


def job_file(cases, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    sections = []
    for c in cases:
        (directory / f"{c.name}.toml").write_text(
            raid5_stack(c.members, c.chunk, c.layout, c.order, 64 * MiB, c.policy,
                        c.scheduler, c.queue_depth))
        sections.append(f"[{c.name}]\nioengine=external:{paths.engine_path()}\nfilename=md0\ndirect=1\nrw={c.rw}\nbs={c.bs}\n"
                        f"size={c.size}\noffset={c.offset}\niodepth=1\nstonewall\n"
                        f"mdsplit_config={c.name}.toml\n")
    path = directory / "matrix.fio"
    path.write_text("\n".join(sections))
    return path


@dataclass
class MatrixResult:
    rc: int
    identical: list = field(default_factory=list)
    explained: list = field(default_factory=list)
    differing: list = field(default_factory=list)
    seconds: float = 0.0
    vm_seconds: dict = field(default_factory=dict)
    case_seconds: dict = field(default_factory=dict)   # case -> seconds in the guest
    report: Path = None

    def summary(self) -> str:
        n = len(self.identical) + len(self.explained) + len(self.differing)
        per = self.seconds / n if n else 0.0
        lines = [f"VM matrix: {len(self.identical)} identical, {len(self.explained)} explained, "
                 f"{len(self.differing)} differing of {n} cases in {self.seconds:.0f} s "
                 f"({per:.1f} s per case; VM boots: " +
                 ", ".join(f"{k} {v:.0f} s" for k, v in self.vm_seconds.items()) +
                 f"); diff.md under {self.report}"]
        lines += [f"  differing: {name}" for name in self.differing]
        lines += [f"  explained: {name}: {KNOWN[name][0]}" for name in self.explained]
        lines += ["  seconds in the guest per case: " + ", ".join(
            f"{name} {t:.1f}" for name, t in self.case_seconds.items())]
        return "\n".join(lines)


# Each case runs on its split order's kernel (translate.choose_kernel); the
# emulator lays fio's buffer out as the guest's pagemap reports it.


def run(cases, directory: Path, kernel: str = None, progress=None) -> MatrixResult:
    t0 = time.monotonic()
    say = progress or (lambda s: print(s, file=sys.stderr))
    devices, seconds, case_seconds, rc = {}, {}, {}, 0
    for order, thp in dict.fromkeys((c.order, c.thp) for c in cases):
        mine = [c for c in cases if (c.order, c.thp) == (order, thp)]
        name = order if thp == "always" else f"{order}-thp-{thp}"
        jf = job_file(mine, directory / name / "jobs")
        out = reference.compare_jobs(jf, directory / name / "report",
                                     kernel=kernel, progress=say, thp=thp)
        devices.update(out.devices)
        seconds.update({(k if thp == "always" else f"{k} thp {thp}"): v
                        for k, v in out.seconds.items()})
        case_seconds.update(out.job_seconds)
        rc = max(rc, out.rc)
    result = MatrixResult(rc, seconds=time.monotonic() - t0, vm_seconds=seconds,
                          case_seconds=case_seconds, report=directory)
    for c in cases:
        if c.name not in devices:
            continue
        if all(d.q.identical and d.d.identical for d in devices[c.name]):
            result.identical.append(c.name)
        elif c.name in KNOWN:
            result.explained.append(c.name)
        else:
            result.differing.append(c.name)
    return result
