"""A job written for the engine, translated to the real kernel in the VM.

For one job (a section of the job file and its stack file):
  members      each [[members]] -> a null_blk device named m0, m1, ... made
               through configfs (drivers/block/null_blk/main.c: the disk is
               named after its configfs directory): size (rounded up to
               MiB, null_blk's unit), blocksize = logical_block_size,
               max_sectors (set explicitly: null_blk's own default of 255
               sectors would stop two chunks from merging), hw_queue_depth
               = queue_depth; memory backed (md reads its superblock
               back; pages are allocated as they are written)
  raid5        mdadm --create /dev/md0 --level=5 --chunk --layout
               --assume-clean over m0.. in the stack's order (no resync
               I/O); device.max_sectors -> md0's max_sectors_kb,
               stripe_cache_size -> md/stripe_cache_size
  scheduler    the members' elevator (queue/scheduler)
  the job      its options unchanged except ioengine (psync at iodepth 1,
               libaio above: stated in the report), filename (/dev/md0)
               and the engine's own mdsplit_* options (dropped)

The kernel: split_order "legacy" -> Debian's 6.12.118 (the stock code),
"fixed" -> the patched tinyconfig build (machine.KERNELS). What has no counterpart here is refused
with one line naming it (Untranslatable): passthrough stacks (no
dm-linear in the reference kernel), BFQ groups, [page_cache] (the
buffered variants model 5.9-era code), fault injection, failed members.
"""
from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from harness.jobfile import parse_job_file, parse_int, parse_size

MiB = 1 << 20
SECTOR = 512


class Untranslatable(ValueError):
    """The job has something the VM cannot reproduce; str(e) names it."""


def stack_size(key: str, value) -> int:
    """A size as the stack file writes it: an integer (bytes) or a string
    with k/m/g/t (powers of 1024)."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)(i?b)?\s*", str(value).lower())
    if not m:
        raise Untranslatable(f"{key} = {value!r}: not a size the VM reference reads "
                             "(allowed: bytes or a number with k/m/g/t)")
    return int(m[1]) << (10 * " kmgt".index(m[2] or " "))


@dataclass
class Member:
    name: str
    size_mb: int
    logical_block_size: int
    max_sectors: int          # sectors
    queue_depth: int


@dataclass
class GuestJob:
    section: str
    kernel: str               # machine.KERNELS key
    kernel_why: str           # which stack key chose it
    members: list
    chunk_kb: int
    layout: str
    md_max_sectors_kb: int
    stripe_cache_size: int
    scheduler: str
    plug_order: str
    ioengine: str
    fio_options: dict         # the guest's job options, in order
    warmup_bs: int            # bytes of the warm-up read
    max_bs: int               # bytes of one io_u buffer (fio's td_max_bs())
    notes: list = field(default_factory=list)
    iosched: dict = field(default_factory=dict)   # queue/iosched/<file> -> value
    pattern: list = None      # the guest's buffer layout (buffer_pattern), after the run
    thp: str = "always"       # the guest's transparent_hugepage/enabled for the job


_ENGINE_OPTIONS = ("mdsplit_config", "mdsplit_stats", "mdsplit_trace")
_REFUSED_OPTIONS = {
    "mdsplit_group": "BFQ groups (cgroup v2 io.bfq.weight) are not translated to the VM yet",
    "mdsplit_group_weight": "BFQ groups (cgroup v2 io.bfq.weight) are not translated to the VM yet",
    "cgroup": "fio's cgroup= is not translated to the VM",
    "exec_prerun": "the guest runs its own exec_postrun (mdsplit-pagemap); a job's commands "
                   "are not run in the VM",
    "exec_postrun": "the guest runs its own exec_postrun (mdsplit-pagemap); a job's commands "
                    "are not run in the VM",
}


def _stack(config_path: Path) -> dict:
    try:
        return tomllib.loads(config_path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise Untranslatable(f"mdsplit_config={config_path}: cannot read it ({e})") from None


def choose_kernel(device: dict, override: str = None) -> tuple:
    """(kernel, why) for a stack's device table."""
    order = device.get("split_order", "fixed")
    if override:
        return override, f"--kernel {override}"
    # Legacy: Debian's build of 6.12.118, the stock code as the distribution
    # ships it (its fio buffer is physically contiguous in every boot here,
    # so the thread's request sizes come out); --kernel stock takes the
    # tinyconfig build. Either way the emulator takes the guest's buffer
    # layout from its pagemap.
    kernel = {"legacy": "debian-6.12", "fixed": "fixed"}.get(order)
    if kernel is None:
        raise Untranslatable(f"device.split_order = {order!r}: allowed: \"legacy\" or \"fixed\"")
    return kernel, f"device.split_order = \"{order}\""


def translate(job, config_path: Path, kernel_override: str = None) -> GuestJob:
    """The GuestJob of one parsed job (harness.jobfile.Job)."""
    doc = _stack(config_path)
    device = doc.get("device", {})
    kind = device.get("kind", "passthrough")
    if kind != "raid5":
        raise Untranslatable(f"device.kind = \"{kind}\": the VM reference translates kind = "
                             "\"raid5\" only (the reference kernel has no dm-linear for a "
                             "passthrough stack)")
    if "page_cache" in doc:
        raise Untranslatable("[page_cache]: the buffered variants model 5.9-era code; no kernel "
                             "of that era is prepared for the VM")
    if device.get("scheduler") == "bfq" and doc.get("bfq", {}).get("group_counting") == "legacy":
        raise Untranslatable("bfq.group_counting = \"legacy\": seed 004's series is in every "
                             "prepared kernel (6.12); no kernel without it")
    for key, why in _REFUSED_OPTIONS.items():
        if job.get(key) is not None:
            raise Untranslatable(f"{key}={job.get(key)}: {why}")
    policy = doc.get("bio", {}).get("policy", "original")
    if policy != "original":
        raise Untranslatable(f"bio.policy = \"{policy}\": seed 001's patches are in no "
                             "prepared kernel; 6.12's __bio_iov_iter_get_pages() (block/bio.c) "
                             "is the \"original\" policy (allowed: \"original\")")
    kernel, why = choose_kernel(device, kernel_override)
    members = []
    for i, m in enumerate(doc.get("members", [])):
        for key in ("faults", "failed"):
            if m.get(key):
                raise Untranslatable(f"members[{i}].{key}: fault injection and failed members "
                                     "are not translated to null_blk")
        size = stack_size(f"members[{i}].size", m.get("size", 0))
        if size <= 0:
            raise Untranslatable(f"members[{i}].size: required by the VM reference (a null_blk "
                                 "member has no file to take its size from)")
        max_sectors = stack_size(f"members[{i}].max_sectors", m.get("max_sectors", "512k"))
        members.append(Member(f"m{i}", -(-size // MiB),
                              stack_size(f"members[{i}].logical_block_size",
                                         m.get("logical_block_size", 512)),
                              max_sectors // SECTOR, int(m.get("queue_depth", 64))))
    chunk = stack_size("device.chunk", device.get("chunk", "64k"))
    depth = parse_int("iodepth", job.get("iodepth", "1"))
    ioengine = "psync" if depth <= 1 else "libaio"
    options = {}
    for key, value in job.options.items():
        if key in _ENGINE_OPTIONS or key in ("ioengine", "filename"):
            continue
        options[key] = value
    options["ioengine"] = ioengine
    options["filename"] = "/dev/md0"
    bs = job.get("bs") or job.get("rw_min_bs") or "4k"
    sizes = [parse_size("bs", x) for x in re.split(r"[,:-]", bs) if x]
    g = GuestJob(
        section=job.section, kernel=kernel, kernel_why=why, members=members,
        chunk_kb=chunk // 1024, layout=device.get("layout", "left-symmetric"),
        md_max_sectors_kb=stack_size("device.max_sectors", device.get("max_sectors", "1m")) // 1024,
        stripe_cache_size=int(device.get("stripe_cache_size", 256)),
        scheduler=device.get("scheduler", "none"),
        plug_order=device.get("plug_order", "fifo"),
        ioengine=ioengine, fio_options=options,
        warmup_bs=sizes[0], max_bs=max(sizes))
    if g.scheduler == "bfq":
        g.iosched = bfq_tunables(doc.get("bfq", {}))
        g.notes.append("bfq tunables (queue/iosched): " +
                       ", ".join(f"{k}={v}" for k, v in g.iosched.items()))
    g.notes.append(f"ioengine={ioengine} (the job's iodepth={depth}); filename=/dev/md0")
    if "cpu" in doc or "models" in doc or "time_scale" in device:
        g.notes.append("[cpu], models and time_scale: timing only; the VM compares order and "
                       "sizes, not times (TCG)")
    return g


def bfq_tunables(bfq: dict) -> dict:
    """queue/iosched/ files of the kernel's bfq (block/bfq-iosched.c
    bfq_attrs) for a stack's [bfq] table, the emulator's defaults
    (engine/config/stack_config.h BfqConfig) where it is silent: the
    kernel's own default differs for low_latency (1); max_budget 0 autotunes
    from the peak rate in both)."""
    from harness.units import parse_duration_ns

    def ms(key, default):
        return parse_duration_ns(bfq.get(key, default)) // 1_000_000
    return {"low_latency": int(bool(bfq.get("low_latency", False))),
            "slice_idle_us": parse_duration_ns(bfq.get("slice_idle", "8ms")) // 1000,
            "strict_guarantees": int(bool(bfq.get("strict_guarantees", False))),
            "max_budget": int(bfq.get("max_budget", 0)),
            "timeout_sync": ms("timeout_sync", "125ms")}


def jobs_of(job_file: Path, sections=None) -> list:
    """(job, stack path) of each job of the file (subjob 0 of each section)."""
    jf = parse_job_file(job_file, sections=sections)
    base = Path(job_file).resolve().parent
    out = []
    for job in jf.jobs:
        if job.subjob:
            continue
        config = job.get("mdsplit_config")
        if not config:
            raise Untranslatable(f"job {job.name}: no mdsplit_config (the stack file the VM "
                                 "translates)")
        path = Path(config)
        out.append((job, path if path.is_absolute() else base / path))
    return out


def guest_job_file(g: GuestJob, root: str) -> str:
    """The job as the guest's fio runs it; exec_postrun records its
    buffers' physical layout (harness/vm/pagemap.c) before fio frees them."""
    lines = [f"[{g.section}]"]
    lines += [f"{k}={v}" for k, v in g.fio_options.items()]
    lines.append(f"exec_postrun=/bin/mdsplit-pagemap {root}/out/pagemap {g.max_bs}")
    return "\n".join(lines) + "\n"


_BUFFER = re.compile(r"^mem\s+\d+\s+io_u 0x[0-9a-f]+, mem 0x(?P<addr>[0-9a-f]+)$", re.M)


def split_fio_output(text: str) -> tuple:
    """(fio's JSON text, [io_u buffer addresses]) of the guest fio's
    stdout under --debug=mem (fio 3.33 backend.c init_io_u_buffers()
    prints each io_u's buffer; log lines around the JSON are dropped)."""
    addrs = list(dict.fromkeys(int(m["addr"], 16) for m in _BUFFER.finditer(text)))
    lines = text.splitlines()
    try:
        first = lines.index("{")
        last = len(lines) - 1 - lines[::-1].index("}")
    except ValueError:
        return "", addrs
    return "\n".join(lines[first:last + 1]) + "\n", addrs


def buffer_runs(pagemap_text: str, addr: int, length: int) -> list:
    """Run lengths (pages) of physically contiguous pages over the buffer
    [addr, addr + length) from mdsplit-pagemap's `run VADDR PAGES PFN`
    lines; an absent page (PFN 0) is a run of its own."""
    pages = -(-length // 4096)
    first = addr // 4096
    pfn = [0] * pages
    for line in pagemap_text.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[0] != "run":
            continue
        start, n, base = int(parts[1], 16) // 4096, int(parts[2]), int(parts[3])
        for i in range(max(start, first), min(start + n, first + pages)):
            pfn[i - first] = base + (i - start) if base else 0
    runs = []
    for i, p in enumerate(pfn):
        if runs and p and pfn[i - 1] and p == pfn[i - 1] + 1:
            runs[-1] += 1
        else:
            runs.append(1)
    return runs


def runs_pattern(runs: list) -> list:
    """The stack's [bio] contiguity pattern of `runs`: equal neighbours as
    [pages, times] pairs."""
    out = []
    for r in runs:
        if out and (out[-1] == r or (isinstance(out[-1], list) and out[-1][0] == r)):
            out[-1] = [r, out[-1][1] + 1] if isinstance(out[-1], list) else [r, 2]
        else:
            out.append(r)
    return out


def guest_script(g: GuestJob, root: str) -> str:
    """The guest's script of one job (its files under `root` in the
    share): members, md0, warm-up read, traced job, teardown (md0 stopped,
    the null_blk devices removed, so the next job starts afresh)."""
    q = shlex.quote
    s = ["set -e", "T=/sys/kernel/tracing", "C=/sys/kernel/config/nullb", f"O={root}/out",
         "mkdir -p $O", "trap 'dmesg > $O/dmesg' EXIT"]
    for m in g.members:
        s += [f"mkdir $C/{m.name}",
              f"echo {m.size_mb} > $C/{m.name}/size",
              f"echo {m.logical_block_size} > $C/{m.name}/blocksize",
              f"echo {m.max_sectors} > $C/{m.name}/max_sectors",
              f"echo {m.queue_depth} > $C/{m.name}/hw_queue_depth",
              f"echo 1 > $C/{m.name}/memory_backed",
              f"echo 1 > $C/{m.name}/power",
              f"echo {q(g.scheduler)} > /sys/block/{m.name}/queue/scheduler"]
    devs = " ".join(f"/dev/{m.name}" for m in g.members)
    s += [f"mdadm --create /dev/md0 --run --quiet --metadata=1.2 --level=5 "
          f"--raid-devices={len(g.members)} --chunk={g.chunk_kb} --layout={q(g.layout)} "
          f"--assume-clean {devs}",
          f"echo {g.stripe_cache_size} > /sys/block/md0/md/stripe_cache_size",
          f"echo {g.md_max_sectors_kb} > /sys/block/md0/queue/max_sectors_kb || true",
          "cat /sys/block/md0/queue/max_sectors_kb > $O/md0.max_sectors_kb"]
    for m in g.members:
        s.append(f"echo {m.name} $(cat /sys/block/{m.name}/dev) "
                 f"$(cat /sys/block/md0/md/dev-{m.name}/offset) >> $O/members")
    s += ["echo md0 $(cat /sys/block/md0/dev) 0 >> $O/members",
          # The first O_DIRECT read after boot splits oddly (issue 38): one
          # untraced read of the job's block size first.
          f"dd if=/dev/md0 of=/dev/null bs={g.warmup_bs} count=2 iflag=direct 2>/dev/null",
          ]
    # The warm-up leaves the elevators' state behind (mq-deadline's
    # latest_pos: the next dispatch would start past the job's sectors and
    # fall back to FIFO order); switching the elevator off and on again
    # gives the job a fresh one, as the emulator's.
    for m in g.members:
        s += [f"echo none > /sys/block/{m.name}/queue/scheduler",
              f"echo {q(g.scheduler)} > /sys/block/{m.name}/queue/scheduler"]
        s += [f"echo {v} > /sys/block/{m.name}/queue/iosched/{k}" for k, v in g.iosched.items()]
    # fio's buffer takes whatever free pages the allocator hands out
    # (compacted free memory gives it longer physically contiguous runs);
    # mdsplit-pagemap reports the layout it got, which the emulator takes.
    s += [f"echo {q(g.thp)} > /sys/kernel/mm/transparent_hugepage/enabled",
          "echo 3 > /proc/sys/vm/drop_caches", "echo 1 > /proc/sys/vm/compact_memory"]
    s += ["echo 0 > $T/tracing_on", "echo > $T/trace", "echo 65536 > $T/buffer_size_kb"]
    for ev in ("block_bio_queue", "block_getrq", "block_rq_insert", "block_rq_issue",
               "block_rq_complete", "block_bio_backmerge", "block_bio_frontmerge",
               "block_rq_merge", "block_split", "block_bio_remap"):
        s.append(f"echo 1 > $T/events/block/{ev}/enable")
    # --debug=mem prints each io_u's buffer address (split_fio_output);
    # exec_postrun's output file lands in fio's working directory.
    s += ["cd /tmp", "echo 1 > $T/tracing_on",
          f"fio --output-format=json --debug=mem {root}/job.fio > $O/fio.out 2> $O/fio.err",
          "echo 0 > $T/tracing_on",
          "cat $T/per_cpu/cpu*/stats > $O/trace.stats",
          "cat $T/trace > $O/trace.txt",
          "mdadm --stop /dev/md0 >/dev/null"]
    for m in g.members:
        s += [f"echo 0 > $C/{m.name}/power", f"rmdir $C/{m.name}"]
    s.append("trap - EXIT")
    return "\n".join(s) + "\n"
