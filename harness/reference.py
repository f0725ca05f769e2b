"""Kernel reference runs: the same workloads as the emulator's reproductions,
run with fio's own engines on this machine's kernel.

  bio-size (seed 001, issue 4 item 5): a 64 MiB direct read and write with
  bs=64m (the thread's `dd bs=64m count=1 iflag=direct`) on a loop device
  whose max_sectors_kb is 512, with fio's psync and io_uring engines, and
  with fio's mem=mmaphuge where huge pages can be reserved. The tracepoints
  block_bio_queue, block_split and block_rq_issue of that device only are
  captured in a private tracefs instance and turned into bio and request
  size distributions (sectors -> count).

  buffered (seed 003, issue 6 item 6): fio's io_uring engine, buffered 4k
  random reads with readahead off, iodepth 1, 2, 4 ... 128: IOPS per depth
  (kernel_buffered_sweep).

  bfq (seed 004): the job of jobs/bfq-groups.fio (8 psync 4k random writers,
  startdelay steps, offset_increment) with fio's psync engine on a loop
  device under the kernel's bfq, once with fio in the root cgroup and once
  in a child cgroup (cgroup v1 blkio or v2 io): the kernel's non-root/root
  ratio (bfq_reference), beside the emulator's fixed ratio.

Everything that needs the machine (root, losetup, a free loop device,
tracefs, bfq, a blkio / io cgroup hierarchy) is checked first; what is missing raises ReferenceUnavailable with
a one-line reason. What a run sets up (loop device, backing file, tracefs
instance, huge pages) is undone in `finally` blocks, also on errors, ^C and
SIGTERM; leftovers of a killed run (loop devices, tracefs instances, child
cgroups, all named after its pid) are removed by the next run once that pid
is gone.
"""
from __future__ import annotations

import json
import math
import re
import shutil
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from harness.fio_runner import run_fio
from harness.kernel_fixtures import (MiB, ReferenceUnavailable, LoopDevice, cleanup_stale, distributions, format_counts, hugepages, io_cgroups, child_cgroup, cgroup_written_bytes, in_cgroup, kernel_release, loop_device, mean_size, parse_trace, plug_note, require_bfq, require_fio, require_losetup, sigterm_as_interrupt, trace_block_events, tracefs, workdir, wrap, _meminfo, _read, Distributions)

DEPTHS = (1, 2, 4, 8, 16, 32, 64, 128)


def _run_fio_job(job: Path, fio: str, timeout: float, prefix=()) -> dict:
    """fio's JSON for a job file of fio's own engines (FioError, a
    RuntimeError, when fio fails); prefix = a command that execs fio."""
    return run_fio(job, fio=fio, timeout=timeout, prefix=prefix, sidecars=False).fio


# --- seed 001: bio sizes --------------------------------------------------------

@dataclass
class BioRow:
    engine: str               # psync | io_uring
    mem: str                  # malloc | mmaphuge
    rw: str                   # read | write
    dist: Distributions | None = None
    MBps: float = 0.0
    skipped: str = ""         # reason, when the row did not run
    warning: str = ""

    @property
    def label(self) -> str:
        return f"{self.engine}/{self.mem}"


@dataclass
class BioSizeReference:
    kernel: str
    device: str
    max_sectors_kb: int
    dio: bool
    io_bytes: int
    bs: int
    rows: list = field(default_factory=list)
    note: str = ""

    def row(self, engine="psync", mem="malloc", rw="read") -> BioRow | None:
        for r in self.rows:
            if (r.engine, r.mem, r.rw) == (engine, mem, rw) and r.dist is not None:
                return r
        return None

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "device": self.device, "max_sectors_kb": self.max_sectors_kb,
                "dio": self.dio, "io_bytes": self.io_bytes, "bs": self.bs, "note": self.note,
                "rows": [{"engine": r.engine, "mem": r.mem, "rw": r.rw, "MBps": r.MBps,
                          "skipped": r.skipped, "warning": r.warning,
                          **(r.dist.as_dict() if r.dist else {})} for r in self.rows]}

    def metrics(self, prefix: str = "kernel.") -> dict:
        """Direction-free numbers (sizes, shares, counts), so that `check`
        does not judge the kernel's run-to-run layout of fio's buffer."""
        out = {}
        full = self.max_sectors_kb * 2
        for r in self.rows:
            if r.dist is None:
                continue
            k = f"{prefix}{r.rw}.{r.engine}_{r.mem}"
            reqs = r.dist.requests
            n = sum(reqs.values())
            out[f"{k}_bios_count"] = sum(r.dist.bios.values())
            out[f"{k}_bio_mean_sectors"] = mean_size(r.dist.bios)
            out[f"{k}_splits_count"] = sum(r.dist.splits.values())
            out[f"{k}_requests_count"] = n
            out[f"{k}_request_mean_sectors"] = mean_size(reqs)
            out[f"{k}_full_requests_pct"] = 100.0 * reqs.get(full, 0) / n if n else 0.0
            out[f"{k}_sequential_issues_pct"] = r.dist.sequential_pct
        return out


def _bio_job(dev: LoopDevice, engine: str, mem: str, rw: str, size: int, bs: int,
             hugepage_kb: int = 2048) -> str:
    # fio's hugepage-size defaults to 4 MiB; the mapping must be sized in the
    # machine's huge pages or fio faults past its end.
    huge = [f"hugepage-size={hugepage_kb}k"] if mem.endswith("huge") else []
    return "\n".join([
        f"; kernel reference for seed 001: {size >> 20} MiB direct {rw}, bs={bs >> 20}m "
        f"(dd bs=64m count=1 iflag=direct), fio's {engine} engine, mem={mem}",
        f"[{rw}-{engine}-{mem}]",
        f"filename={dev.path}", f"ioengine={engine}", f"rw={rw}", "direct=1",
        f"bs={bs}", f"size={size}", "iodepth=1", f"mem={mem}", *huge, "invalidate=0", ""])


def bio_size_reference(*, size: int = 64 * MiB, bs: int = 64 * MiB, max_sectors_kb: int = 512,
                       engines=("psync", "io_uring"), mems=("malloc", "mmaphuge"),
                       rws=("read", "write"), fio: str = "fio", keep_dir: Path = None,
                       timeout: float = 120, progress=None) -> BioSizeReference:
    """Seed 001's dd on this kernel: per (engine, mem, rw) a direct I/O of
    `size` bytes with `bs`, on a loop device (direct-io=on, max_sectors_kb
    512), traced. Raises ReferenceUnavailable when the machine cannot; rows
    that cannot run (no huge pages) carry `skipped`. keep_dir receives the
    job files, fio's JSON and the raw traces."""
    require_fio(fio)
    require_losetup()
    tracefs()
    cleanup_stale()
    hp_kb = _meminfo("Hugepagesize") or 2048
    # fio maps bs + a page for alignment, rounded up to hugepage-size twice.
    hp_need = math.ceil(bs / (hp_kb * 1024)) + 4
    ref = None
    with ExitStack() as stack:
        stack.enter_context(sigterm_as_interrupt())
        wd = stack.enter_context(workdir())
        dev = stack.enter_context(loop_device(wd / "backing.img", max(size, bs) + 16 * MiB,
                                              max_sectors_kb=max_sectors_kb))
        cap = stack.enter_context(trace_block_events(dev))
        ref = BioSizeReference(kernel=kernel_release(), device=dev.path,
                               max_sectors_kb=max_sectors_kb, dio=dev.direct_io,
                               io_bytes=size, bs=bs)
        hp_reason = None
        for mem in mems:
            if mem == "mmaphuge" and hp_reason is None:
                hp_reason = stack.enter_context(hugepages(hp_need))
            for engine in engines:
                for rw in rws:
                    row = BioRow(engine, mem, rw)
                    ref.rows.append(row)
                    if mem == "mmaphuge" and hp_reason:
                        row.skipped = hp_reason
                        continue
                    if progress:
                        progress(f"kernel reference: {size >> 20} MiB direct {rw}, {engine}, mem={mem}")
                    job = wd / f"bio-{rw}-{engine}-{mem}.fio"
                    job.write_text(_bio_job(dev, engine, mem, rw, size, bs, hp_kb))
                    cap.start()
                    try:
                        data = _run_fio_job(job, fio, timeout)
                    except RuntimeError as e:
                        cap.stop()
                        row.skipped = str(e)
                        continue
                    text = cap.stop()
                    lost = cap.overruns()
                    if lost:
                        row.warning = f"{lost} trace events lost (buffer overrun)"
                    events = parse_trace(text, (dev.major, dev.minor))
                    row.dist = distributions(events, rw)
                    j = (data.get("jobs") or [{}])[0]
                    row.MBps = j.get(rw, {}).get("bw_bytes", 0) / 1e6
                    if keep_dir is not None:
                        keep = Path(keep_dir)
                        keep.mkdir(parents=True, exist_ok=True)
                        shutil.copy(job, keep / job.name)
                        (keep / (job.stem + ".json")).write_text(json.dumps(data, indent=1))
                        (keep / (job.stem + ".trace")).write_text(text)
        ref.note = (f"Kernel reference: fio's own engines on Linux {ref.kernel}, {dev.path} "
                    f"(loop, direct-io={'on' if dev.direct_io else 'OFF'}, sparse backing file, "
                    f"max_sectors_kb {max_sectors_kb}, max_segments {dev.queue('max_segments')}), "
                    f"{size >> 20} MiB direct I/O with bs={bs >> 20}m, one round; tracepoints "
                    f"block_bio_queue / block_split / block_rq_issue of that device only. "
                    f"Bio sizes follow the physical contiguity of fio's buffer (256 bvecs per bio, "
                    f"physically contiguous pages share one): with malloc, whatever pages the "
                    f"kernel gave, which changes from run to run with the layout of free memory; "
                    f"with mmaphuge, 2 MiB huge pages. Note: {plug_note()}. "
                    f"MB/s are a loop device on a sparse file, not UFS.")
    return ref


def format_bio_size(ref: BioSizeReference, emulator: dict = None,
                    emulator_label: str = "emulator") -> list:
    """Printed tables: the kernel's distributions per row, then (when given
    the emulator's {policy: {"bios": ..., "requests": ...}}) the kernel's
    psync/malloc read beside each emulator policy."""
    full = ref.max_sectors_kb * 2
    lines = [f"Kernel reference ({ref.kernel}, {ref.device}, max_sectors_kb {ref.max_sectors_kb}): "
             f"bio sizes (block_bio_queue), splits (block_split fronts) and request sizes "
             f"(block_rq_issue), sectors x count"]
    for r in ref.rows:
        head = f"  {r.rw:<6}{r.label:<18}"
        if r.dist is None:
            lines.append(f"{head}skipped: {r.skipped}")
            continue
        d = r.dist
        nreq = sum(d.requests.values())
        lines.append(f"{head}bios: {format_counts(d.bios)}  (mean {mean_size(d.bios):.0f})"
                     + (f"; {d.retried} queued twice (NOWAIT attempt, -EAGAIN, re-issued "
                        f"by io-wq)" if d.retried else ""))
        lines.append(f"  {'':<24}splits: {sum(d.splits.values())}; requests: {format_counts(d.requests)}")
        lines.append(f"  {'':<24}{100.0 * d.requests.get(full, 0) / nreq if nreq else 0:.1f}% full "
                     f"{full}-sector requests, sequential issues {d.sequential_pct:.1f}%, "
                     f"out of order {d.out_of_order}, {r.MBps:.0f} MB/s"
                     + (f"; {r.warning}" if r.warning else ""))
    tables = ["\n".join(lines), "\n".join(wrap(ref.note))]
    if emulator:
        rw = next((r.rw for r in ref.rows if r.dist is not None and r.rw == "read"),
                  next((r.rw for r in ref.rows if r.dist is not None), None))
        kernel_rows = [r for r in ref.rows if r.dist is not None and r.rw == rw]
        if kernel_rows:
            side = [f"{ref.io_bytes >> 20} MiB {rw}, bio and request sizes: kernel {ref.kernel} "
                    f"beside {emulator_label or 'the emulator'}, sectors x count"]
            named = [(f"kernel {r.label}", r.dist.bios, r.dist.requests) for r in kernel_rows] + \
                    [(str(p), v.get("bios", {}), v.get("requests", {})) for p, v in emulator.items()]
            w = max(len(n) for n, _, _ in named) + 2
            for n, b, q in named:
                side.append(f"  {n:<{w}}bios: {format_counts(b, 4)}  (mean {mean_size(b):.0f})")
                side.append(f"  {'':<{w}}requests: {format_counts(q, 4)}  (mean {mean_size(q):.0f})")
            tables.insert(1, "\n".join(side))
    return tables


# --- seed 004: bfq, root vs non-root cgroup --------------------------------------

BFQ_JOB = Path(__file__).resolve().parent.parent / "jobs" / "bfq-groups.fio"
# Options of the emulator's job file that do not carry over to fio's psync
# engine on a loop device (the engine, its device and its sidecars, the logs).
_EMULATOR_ONLY = ("ioengine", "filename", "write_bw_log", "write_lat_log", "write_iops_log",
                  "log_avg_msec")


def read_fio_job(text: str) -> list:
    """A fio job file as [(section, [(key, value or None)])], in file order
    (comments dropped, bare options such as `stonewall` with value None)."""
    sections, cur = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            cur = (line[1:-1].strip(), [])
            sections.append(cur)
            continue
        if cur is None:
            raise ValueError(f"option outside a section: {line!r}")
        key, eq, value = line.partition("=")
        cur[1].append((key.strip(), value.strip() if eq else None))
    return sections


def write_fio_job(sections, header: str = "") -> str:
    lines = [f"; {h}" for h in header.splitlines()] if header else []
    for name, opts in sections:
        lines.append(f"[{name}]")
        lines += [k if v is None else f"{k}={v}" for k, v in opts]
        lines.append("")
    return "\n".join(lines)


def fio_duration_ms(text: str) -> float:
    """fio's time values: a number with us, ms, s, m (default seconds)."""
    m = re.fullmatch(r"\s*([\d.]+)\s*(us|usec|ms|msec|s|sec|m|min)?\s*", text.lower())
    if not m:
        raise ValueError(f"bad fio time {text!r}")
    unit = {"us": 1e-3, "usec": 1e-3, "ms": 1, "msec": 1, "s": 1000, "sec": 1000,
            "m": 60000, "min": 60000}[m.group(2) or "s"]
    return float(m.group(1)) * unit


def _size_bytes(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", text.lower())
    if not m:
        raise ValueError(f"bad fio size {text!r}")
    return int(m.group(1)) << (10 * " kmgt".index(m.group(2) or " "))


@dataclass
class BfqKernelJob:
    text: str                 # the job file for fio's psync engine
    jobs: int                 # writers
    span: int                 # bytes the writers cover (offset_increment x jobs)
    runtime_s: float
    delays_ms: list           # startdelay of each writer
    tunables: dict            # bfq iosched tunables from the emulator's TOML


def _fio_duration(ms: float) -> str:
    """A duration as fio parses it: fio takes a number with a fraction as
    seconds whatever its suffix ("62.5ms" is 62.5 s, "62ms" 62 ms), so a
    fractional millisecond count is written in whole microseconds."""
    if ms == int(ms):
        return f"{int(ms)}ms" if ms % 1000 else f"{int(ms) // 1000}"
    return f"{round(ms * 1000)}us"


def bfq_kernel_job(device: str, src: Path = BFQ_JOB, *, variant: str = "fixed",
                   runtime_s: float = None, delay_scale: float = 1.0) -> BfqKernelJob:
    """The kernel's job, generated from the emulator's bfq-groups.fio: its
    [global] and the 8 writers of the root/<variant> run, with fio's psync
    engine on `device` instead of the emulator (mdsplit_* options, the
    engine's filename and the bandwidth logs dropped). runtime_s replaces
    the runtime; delay_scale multiplies each startdelay (for short runs).
    The bfq tunables (slice_idle, low_latency) come from the TOML the
    writers' mdsplit_config names."""
    sections = read_fio_job(Path(src).read_text())
    glob = next((o for n, o in sections if n == "global"), [])
    writers = [(n, o) for n, o in sections if n.startswith(f"root-{variant}-")]
    if not writers:
        raise ValueError(f"{src}: no [root-{variant}-*] jobs")
    configs = {v for _, o in writers for k, v in o if k == "mdsplit_config"}
    g = [(k, v) for k, v in glob if k not in _EMULATOR_ONLY and not k.startswith("mdsplit_")]
    opts = dict(g)
    if runtime_s is not None:
        g = [(k, v) for k, v in g if k != "runtime"] + [("runtime", _fio_duration(runtime_s * 1000))]
    runtime = fio_duration_ms(dict(g).get("runtime", "0")) / 1000
    g = [("ioengine", "psync"), ("filename", device)] + g
    jobs, delays = [], []
    for i, (name, o) in enumerate(writers):
        keep = []
        for k, v in o:
            if k.startswith("mdsplit_") or k in _EMULATOR_ONLY:
                continue
            if k == "startdelay":
                ms = fio_duration_ms(v) * delay_scale
                delays.append(ms)
                v = _fio_duration(ms)
            keep.append((k, v))
        if not any(k == "startdelay" for k, _ in o):
            delays.append(0.0)
        jobs.append((name.split("-")[-1] if name.count("-") >= 2 else name, keep))
    inc = _size_bytes(opts.get("offset_increment", "0"))
    size = _size_bytes(opts.get("size", "0"))
    span = inc * (len(jobs) - 1) + max(size, inc)
    tunables = {}
    for c in sorted(configs):
        cfg = Path(src).parent / c
        try:
            import tomllib
            bfq = tomllib.loads(cfg.read_text()).get("bfq", {})
        except (ImportError, OSError, ValueError):
            continue
        if "slice_idle" in bfq:
            tunables["slice_idle"] = int(round(fio_duration_ms(str(bfq["slice_idle"]))))
        if "low_latency" in bfq:
            tunables["low_latency"] = int(bool(bfq["low_latency"]))
    header = (f"kernel reference for seed 004, generated from {Path(src).name} "
              f"([global] and [root-{variant}-*]):\nfio's psync engine on {device} under "
              f"the kernel's bfq; run once in the root cgroup and once in a child cgroup")
    return BfqKernelJob(write_fio_job([("global", g)] + jobs, header), len(jobs), span,
                        runtime, delays, tunables)


# --- the run ----------------------------------------------------------------------

@dataclass
class BfqPlace:
    place: str                # root | nonroot
    cgroup: str               # the cgroup fio ran in
    MiBps: list = field(default_factory=list)       # per round: sum of the writers' MiB/s
    per_job: list = field(default_factory=list)     # per round: [MiB/s of each writer]
    written: list = field(default_factory=list)     # per round: bytes fio wrote
    charged: list = field(default_factory=list)     # per round: bytes the cgroup was charged

    @property
    def median(self) -> float:
        v = sorted(self.MiBps)
        if not v:
            return 0.0
        n = len(v)
        return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


@dataclass
class BfqReference:
    kernel: str
    device: str
    cgroups: str
    scheduler: str
    job: BfqKernelJob
    root: BfqPlace
    nonroot: BfqPlace
    weight: str = ""
    settings: dict = field(default_factory=dict)     # queue / iosched attributes set
    note: str = ""

    @property
    def ratio(self) -> float:
        """non-root / root MiB/s (medians over the rounds)."""
        return self.nonroot.median / self.root.median if self.root.median else float("nan")

    def metrics(self, prefix: str = "kernel.") -> dict:
        return {f"{prefix}root_MiBps": self.root.median,
                f"{prefix}nonroot_MiBps": self.nonroot.median,
                f"{prefix}nonroot_over_root": self.ratio}

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "device": self.device, "cgroups": self.cgroups,
                "scheduler": self.scheduler, "weight": self.weight, "settings": self.settings,
                "ratio": self.ratio, "job": self.job.text, "note": self.note,
                **{p.place: {"cgroup": p.cgroup, "MiBps": p.MiBps, "per_job": p.per_job,
                             "written": p.written, "charged": p.charged}
                   for p in (self.root, self.nonroot)}}


def bfq_reference(*, src: Path = BFQ_JOB, variant: str = "fixed", runtime_s: float = None,
                  delay_scale: float = 1.0, rounds: int = 1, warmup: bool = True,
                  rotational: int = 0,
                  fio: str = "fio", keep_dir: Path = None, timeout: float = None,
                  progress=None) -> BfqReference:
    """Seed 004 on this kernel: jobs/bfq-groups.fio's 8 writers with fio's
    psync engine on a loop device (direct-io, sparse backing file) under
    bfq (the TOML's slice_idle and low_latency, rotational 0 like the
    thread's NVMe drive), with fio in the root cgroup, then in a child
    cgroup; `rounds` alternations (root first, then non-root first, ...),
    medians reported. fio writes the same random offsets each run
    (randrepeat); with `warmup`, an unmeasured run first allocates the
    sparse file's blocks, so that the first measured run does not pay for
    the allocation alone. Raises ReferenceUnavailable where the machine
    cannot."""
    require_fio(fio)
    require_losetup()
    cg = io_cgroups()
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1: {rounds}")
    cleanup_stale()
    with ExitStack() as stack:
        stack.enter_context(sigterm_as_interrupt())
        wd = stack.enter_context(workdir())
        probe = bfq_kernel_job("/dev/null", src, variant=variant, runtime_s=runtime_s,
                               delay_scale=delay_scale)
        dev = stack.enter_context(loop_device(wd / "bfq.img", probe.span))
        sched = require_bfq(dev)
        job = bfq_kernel_job(dev.path, src, variant=variant, runtime_s=runtime_s,
                             delay_scale=delay_scale)
        settings = {}
        for attr, value in [("rotational", rotational)] + \
                [(f"iosched/{k}", v) for k, v in job.tunables.items()]:
            if value is None:
                continue
            try:
                dev.set_queue(attr, value)
                settings[attr] = dev.queue(attr)
            except OSError as e:
                settings[attr] = f"not set ({e.strerror})"
        path = wd / "bfq-kernel.fio"
        path.write_text(job.text)
        child = stack.enter_context(child_cgroup(cg))
        weight = ""
        try:
            weight = " ".join(_read(child / cg.weight_file).split())
        except OSError:
            pass
        places = {"root": BfqPlace("root", f"{cg.root} (root)"),
                  "nonroot": BfqPlace("nonroot", str(child))}
        where = {"root": cg.root, "nonroot": child}
        limit = timeout or (job.runtime_s + max(job.delays_ms or [0]) / 1000 + 60)
        if warmup:
            if progress:
                progress(f"kernel reference: warm-up run (allocates the blocks of {dev.path}'s "
                         f"sparse file that the writers touch), not measured")
            try:
                _run_fio_job(path, fio, limit, prefix=in_cgroup(cg.root / "cgroup.procs"))
            except RuntimeError as e:
                raise ReferenceUnavailable(f"fio (warm-up): {e}")
        for rnd in range(rounds):
            for place in ("root", "nonroot") if rnd % 2 == 0 else ("nonroot", "root"):
                p = places[place]
                if progress:
                    progress(f"kernel reference: {job.jobs} psync 4k randwrite jobs on {dev.path} "
                             f"(bfq), fio in the {'root' if place == 'root' else 'child'} cgroup"
                             + (f", round {rnd + 1}/{rounds}" if rounds > 1 else ""))
                before = cgroup_written_bytes(cg, where[place], dev)
                try:
                    data = _run_fio_job(path, fio, limit,
                                        prefix=in_cgroup(where[place] / "cgroup.procs"))
                except RuntimeError as e:
                    raise ReferenceUnavailable(f"fio in the {place} cgroup: {e}")
                after = cgroup_written_bytes(cg, where[place], dev)
                jobs = data.get("jobs", [])
                per = [j["write"]["bw_bytes"] / MiB for j in jobs]
                p.per_job.append(per)
                p.MiBps.append(sum(per))
                p.written.append(sum(j["write"]["io_bytes"] for j in jobs))
                p.charged.append(after - before if before >= 0 and after >= 0 else -1)
                if keep_dir is not None:
                    keep = Path(keep_dir)
                    keep.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, keep / path.name)
                    (keep / f"bfq-{place}-{rnd + 1}.json").write_text(json.dumps(data, indent=1))
        ref = BfqReference(kernel_release(), dev.path, cg.label, sched, job,
                           places["root"], places["nonroot"], weight, settings)
        delays = ", ".join(f"{d:g}" for d in job.delays_ms)
        ref.note = (f"Kernel reference: fio's psync engine on Linux {ref.kernel}, {dev.path} "
                    f"(loop, direct-io={'on' if dev.direct_io else 'OFF'}, sparse backing file "
                    f"of {job.span >> 20} MiB) with bfq; "
                    + ", ".join(f"{k} {v}" for k, v in settings.items())
                    + f". {job.jobs} writers, startdelay {delays} ms, {job.runtime_s:g} s each "
                    f"(from {Path(src).name}); fio in the root cgroup, then in the child cgroup "
                    f"{child.name} of {cg.label}"
                    + (f" (bfq weight {weight})" if weight else "")
                    + (", after an unmeasured warm-up run" if warmup else "")
                    + (f", {rounds} alternations, medians" if rounds > 1 else "")
                    + ". MiB/s = the sum of the writers' averages, as the emulator's table. "
                    "A loop device on a file of this machine's disk, not the thread's NVMe: "
                    "compare ratios, not MiB/s.")
    return ref


def format_bfq(ref: BfqReference, emulator: dict = None, emulator_label: str = "",
               tolerance: float = 0.15, thread: tuple = (550, 550)) -> list:
    """The kernel's root / non-root MiB/s and ratio beside the emulator's
    fixed figures (emulator = {"root": MiB/s, "nonroot": MiB/s}) and the
    thread's; the verdict: the emulator's ratio within `tolerance` of the
    kernel's."""
    w = 34
    lines = [f"{'':<{w}}{'root MiB/s':>12}{'non-root MiB/s':>16}{'non-root/root':>15}"]

    def row(label, r, n):
        ratio = n / r if r else float("nan")
        lines.append(f"  {label:<{w - 2}}{r:>12.1f}{n:>16.1f}{ratio:>15.3f}")
        return ratio
    k = row(f"kernel {ref.kernel.split('-')[0]} (bfq, loop)", ref.root.median, ref.nonroot.median)
    if len(ref.root.MiBps) > 1:
        lines.append(f"  {'  rounds':<{w - 2}}"
                     f"{'/'.join(f'{v:.0f}' for v in ref.root.MiBps):>12}"
                     f"{'/'.join(f'{v:.0f}' for v in ref.nonroot.MiBps):>16}")
    e = None
    if emulator:
        e = row("emulator fixed", emulator["root"], emulator["nonroot"])
        rounds = emulator.get("rounds") or {}
        if len(rounds.get("root", [])) > 1:
            lines.append(f"  {'  rounds':<{w - 2}}"
                         f"{'/'.join(f'{v:.0f}' for v in rounds['root']):>12}"
                         f"{'/'.join(f'{v:.0f}' for v in rounds['nonroot']):>16}")
    row("thread v5.18-rc1-patched", *thread)
    out = ["\n".join(lines)]
    verdict = []
    if emulator_label:
        verdict.append(f"emulator figures: {emulator_label}.")
    if e is not None and k == k and k > 0:
        dev = e / k - 1
        verdict.append(f"emulator fixed non-root/root {e:.3f} vs kernel {k:.3f}: "
                       f"{dev * 100:+.1f}%, {'within' if abs(dev) <= tolerance else 'NOT within'} "
                       f"{tolerance * 100:.0f}%.")
    elif e is None:
        verdict.append("no emulator figures to compare with.")
    charged = ref.nonroot.charged[-1] if ref.nonroot.charged else -1
    verdict.append(f"child cgroup charged with {charged / MiB:.0f} MiB of writes to {ref.device} "
                   f"(fio wrote {ref.nonroot.written[-1] / MiB:.0f} MiB)" if charged >= 0 else
                   "the child cgroup's I/O statistics were not readable")
    out.append("\n".join(wrap(" ".join(verdict))))
    out.append("\n".join(wrap(ref.note)))
    return out
