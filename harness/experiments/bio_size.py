"""Seed 001: direct-I/O bio size against the device's max_sectors; a 64 MiB
direct read and write (dd bs=64m), five rounds, on a UFS member with
max_sectors 512 KiB, for the original / align / max_sectors bio policies.

The checked figures come from the virtual clock (`virtual_run`: `harness
simulate` of the shipped jobs/bio-align.fio, the ufs-seed001 model, the
same on every machine); the real-clock fio run of the same job file runs
beside them as "this machine" (machine.* metrics, not checked)."""
import os
from pathlib import Path

import json
from collections import Counter
import math
import shutil
from contextlib import ExitStack
from dataclasses import dataclass, field

from harness.device_time import DeviceTime
from harness.blktrace import read_trace_dir
from harness.experiment import (ExperimentResult, clock_agreement_table, engine_under_test,
                                find_report, simulate_copy, use_engine_under_test)
from harness.kernel_fixtures import (MiB, Distributions, ReferenceUnavailable, cleanup_stale,
                                     distributions, format_counts, hugepages, kernel_release,
                                     loop_device, mean_size, parse_trace, plug_note,
                                     require_fio, require_losetup, sigterm_as_interrupt,
                                     trace_block_events, tracefs, workdir, wrap, LoopDevice,
                                     _meminfo)
from harness.fio_runner import FioError, run_fio

NAME = "bio-size"
EXPECTATIONS = "bio-size"  # its section of jobs/expectations.toml
JOB = "bio-align.fio"  # in jobs/
TITLE = "Direct-I/O bio sizing vs max_sectors (dd bs=64m x5, ufs, max_sectors 512 KiB)"
SEEDS = ["001_514a3f5c1dbaada1.txt"]
ORDER = 20  # `reproduce all` runs the experiments by ORDER, then name
DURATION = (40.0, 10)  # (s, steps) when the history has no run (2-core VM)
# `reference bio-size`: its options (dest: default) and --emulator's words
REFERENCE_OPTIONS = {"no_hugepages": False}
EMULATOR_WORDS = ("run", "none")
POLICIES = ["original", "max_sectors", "align"]
LABELS = {"original": "Original", "max_sectors": "Limited to max_sectors", "align": "Aligned 256KB"}
# The thread's table (seed 001): "Sequential Read/Write (average of 5 rounds)".
THREAD = {
    "read": {"original": 3033.7, "max_sectors": 3520.9, "align": 3471.5},
    "write": {"original": 2225.4, "max_sectors": 2800.3, "align": 2618.1},
}
IO = 64 << 20
ROUNDS = 5
FULL = 1024  # sectors: max_sectors 512 KiB


def distribution(counts: dict, top: int = 6) -> str:
    """'1024 x 640, 128 x 300, ...' (sectors x count), largest counts first."""
    items = sorted(((int(k), v) for k, v in counts.items()), key=lambda kv: -kv[1])
    shown = ", ".join(f"{k} x {v}" for k, v in items[:top])
    more = len(items) - top
    return shown + (f", ... ({more} more sizes)" if more > 0 else "")


def split_per_bio(bios: list, requests: list) -> list:
    """For each bio (sector, sectors): the sizes of the device requests that
    lie in it, in sector order."""
    out = []
    for start, n in bios:
        out.append(tuple(q for s, q in sorted(requests) if start <= s < start + n))
    return out


def virtual_run(jobs_dir: Path, out_dir: Path = None) -> tuple:
    """The checked figures, on the virtual clock: `harness simulate` of the
    shipped bio-align.fio (bs=64m, size=64m, loops=5, iodepth=1), run from a
    copy under out_dir/virtual-jobs (a scratch directory when None). For
    each policy: MB/s in device time (harness/device_time.py), and the
    first 64 MiB read's bios (md0 Q), requests (m0 D) and per-bio splits
    from the job's blktrace files. Returns (figures, the simulate run)."""
    import tempfile
    if out_dir is None:
        with tempfile.TemporaryDirectory(prefix="mdsplit-bio-size-") as tmp:
            return virtual_run(jobs_dir, Path(tmp))
    fio = simulate_copy(jobs_dir, JOB, out_dir)
    traces = Path(fio.job_file).parent / "traces"
    out = {}
    for p in POLICIES:
        figures = {}
        for rw in ("read", "write"):
            sidecar = fio.sidecars[f"stats/bio-{rw}-{p}.json"]
            figures[f"{rw}_MBps"] = DeviceTime.of(sidecar).rate(
                fio.job(f"{rw}-{p}")[rw]["bw_bytes"]) / 1e6
        records = read_trace_dir(traces / f"bio-read-{p}")
        bios = first_read(records["md0"], "Q")
        reqs = first_read(records["m0"], "D")
        figures["bios"] = dict(Counter(n for _, n in bios))
        figures["requests"] = dict(Counter(n for _, n in reqs))
        figures["splits"] = split_per_bio(bios, reqs)
        starts = [s for s, _ in reqs]
        figures["out_of_order"] = sum(1 for a, b in zip(starts, starts[1:]) if b < a)
        out[p] = figures
    return out, fio


def first_read(records: list, action: str) -> list:
    """[(sector, sectors)] of one device's `action` events of the first of
    the job's loops: in trace order, until they cover the 64 MiB read."""
    out, covered = [], 0
    for r in records:
        if r.action == action and covered < IO // 512:
            out.append((r.sector, r.nr_sectors))
            covered += r.nr_sectors
    return out


def pagemap_layout(jobs_dir: Path) -> dict:
    """What this machine's allocator gives a fresh 64 MiB buffer: `harness
    simulate` of the job file's reads, once each (loops=1), from a scratch
    copy whose stack files say [bio] contiguity = "pagemap" (needs root).
    {policy: {"bios", "requests"}}, or {"skipped": reason}."""
    import tempfile
    from harness import bands
    from harness.fio_runner import run_simulated
    from harness.simulate import SimulateError
    setting = {JOB: {"global.loops": "1"},
               **{f"bio-{p}.toml": {"bio.contiguity": '"pagemap"'} for p in POLICIES}}
    with tempfile.TemporaryDirectory(prefix="mdsplit-bio-pagemap-") as tmp:
        bands.prepare_copy(jobs_dir, Path(tmp), setting)
        try:
            fio = run_simulated(Path(tmp) / JOB, sections=[f"read-{p}" for p in POLICIES],
                                data=False)
        except (FioError, SimulateError, RuntimeError) as e:
            return {"skipped": str(e).splitlines()[0]}
        out = {}
        for p in POLICIES:
            sidecar = fio.sidecars[f"stats/bio-read-{p}.json"]
            out[p] = {"bios": {int(k): v for k, v in sidecar.virtual["bio_sizes"].items()},
                      "requests": {int(k): v for k, v in
                                   sidecar.members[0]["request_sizes"].items()}}
    return out


def add_checked_metrics(result: ExperimentResult, virt: dict) -> None:
    """Metrics from the virtual run (what jobs/expectations.toml checks)."""
    for p in POLICIES:
        for rw in ("read", "write"):
            result.metrics[f"{rw}.{p}_MBps"] = virt[p][f"{rw}_MBps"]
    align = virt["align"]
    n = sum(align["bios"].values())
    result.metrics["read.align_bio3584_share"] = align["bios"].get(3584, 0) / n
    split_3584 = [s for s in align["splits"] if sum(s) == 3584]
    result.metrics["read.align_3584_split_ok_share"] = (
        sum(1 for s in split_3584 if s == (FULL, FULL, FULL, 512)) / len(split_3584)
        if split_3584 else 0.0)


def figures_table(rw: str, virt: dict, machine: dict) -> str:
    lines = [f"Sequential {rw.capitalize()} (average of {ROUNDS} rounds), MB/s: ours (simulate bio-align.fio, virtual "
             f"clock, checked) vs the thread; this machine (real clock) for information",
             f"{'':<26}{'ours':>9}{'thread':>9}{'ours/orig':>11}{'thread/orig':>13}"
             f"{'this machine':>14}"]
    o = virt["original"][f"{rw}_MBps"]
    for p in POLICIES:
        v = virt[p][f"{rw}_MBps"]
        m = machine.get(p)
        lines.append(f"{LABELS[p] + ':':<26}{v:>9.1f}{THREAD[rw][p]:>9.1f}{v / o:>11.3f}"
                     f"{THREAD[rw][p] / THREAD[rw]['original']:>13.3f}"
                     f"{(f'{m:.1f}' if m is not None else '-'):>14}")
    order = sorted(POLICIES, key=lambda p: -virt[p][f"{rw}_MBps"])
    lines.append(f"ordering: ours {' > '.join(order)}; thread max_sectors > align > original")
    return "\n".join(lines)


def real_clock_run(jobs_dir: Path, progress) -> tuple:
    """fio bio-align.fio with the engine on this machine: ({rw: {policy:
    MB/s}}, sidecar sizes, error line or None)."""
    job = use_engine_under_test(Path(jobs_dir) / JOB)
    progress("fio bio-align.fio (3 policies x read/write, 5 rounds each; real clock)")
    try:
        fio = run_fio(job)
    except FioError as e:
        return {}, {}, str(e), None
    machine = {}
    for rw in ("read", "write"):
        # In device time: the stacks run in slow motion (time_scale in the TOML).
        machine[rw] = {p: DeviceTime.of(fio.sidecars[f"stats/bio-{rw}-{p}.json"]).rate(
            fio.job(f"{rw}-{p}")[rw]["bw_bytes"]) / 1e6 for p in POLICIES}
    sizes = {}
    for p in POLICIES:
        sidecar = fio.sidecars[f"stats/bio-read-{p}.json"]
        sizes[p] = {"bios": sidecar.virtual.get("bio_sizes", {}),
                    "requests": sidecar.members[0].get("request_sizes", {}),
                    "sequential_pct": 100 * sidecar.members[0]["seek"]["zero_ratio"]}
    return machine, sizes, None, fio


def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult:
    result = ExperimentResult(NAME)
    engine_under_test()                 # a bad MDSPLIT_ENGINE fails at once
    progress("simulate bio-align.fio (virtual clock: the checked figures)")
    virt, simulated = virtual_run(jobs_dir, out_dir)
    result.raw["simulate"] = simulated.fio
    add_checked_metrics(result, virt)
    result.from_simulation(simulated)
    machine, machine_sizes, error, fio = real_clock_run(jobs_dir, progress)
    if fio is not None:
        result.raw["fio"] = fio.fio
    for rw in ("read", "write"):
        result.tables.append(figures_table(rw, virt, machine.get(rw, {})))
        for p, v in machine.get(rw, {}).items():
            result.metrics[f"machine.{rw}.{p}_MBps"] = v
    if error:
        result.tables.append(f"This machine (real clock): not run: {error}")
    else:
        result.tables.append(clock_agreement_table([("", simulated, fio)], result))
    sizes = {p: {"bios": virt[p]["bios"], "requests": virt[p]["requests"]} for p in POLICIES}
    dist = ["One 64 MiB read, virtual clock (the thread's layout, jobs/bio-*.toml): bio sizes "
            "(md0 Q) and device requests (m0 D), sectors x count"]
    for p in POLICIES:
        dist.append(f"  {p:<12} bios: {distribution(virt[p]['bios'])}")
        dist.append(f"  {'':<12} requests: {distribution(virt[p]['requests'])}; "
                    f"issued out of order {virt[p]['out_of_order']}")
    splits = [s for s in virt["align"]["splits"] if sum(s) == 3584]
    if splits:
        dist.append(f"  align: {len(splits)} bios of 3584 sectors, split "
                    f"{' + '.join(map(str, splits[0]))} ({sum(s == splits[0] for s in splits)} of "
                    f"{len(splits)})")
    result.tables.append("\n".join(dist))
    if machine_sizes:
        m = ["This machine's fio run (real clock), read jobs: bio and request sizes"]
        for p in POLICIES:
            m.append(f"  {p:<12} bios: {distribution(machine_sizes[p]['bios'])}")
            m.append(f"  {'':<12} requests: {distribution(machine_sizes[p]['requests'])}; "
                     f"sequential issues {machine_sizes[p]['sequential_pct']:.1f}%")
        result.tables.append("\n".join(m))
    real = pagemap_layout(jobs_dir)
    if "skipped" in real:
        result.tables.append(f"This machine's allocator (contiguity = pagemap): skipped: "
                             f"{real['skipped']}")
    else:
        t = ["This machine's allocator for a fresh 64 MiB buffer (contiguity = \"pagemap\", "
             "real PFNs), beside the thread's layout above: bio and request sizes"]
        for p in POLICIES:
            t.append(f"  {p:<12} bios: {distribution(real[p]['bios'])}")
            t.append(f"  {'':<12} requests: {distribution(real[p]['requests'])}")
        result.tables.append("\n".join(t))
        result.raw["pagemap_sizes"] = real
    result.raw["sizes"] = sizes
    result.raw["virtual"] = {p: {k: v for k, v in virt[p].items() if k != "splits"}
                             for p in POLICIES}
    try:
        from harness import plots
        for kind in ("bios", "requests"):
            path = out_dir / f"bio-size-{kind}.png"
            plots.size_distributions({p: sizes[p][kind] for p in POLICIES}, path,
                                     title=f"{'Bio' if kind == 'bios' else 'Device request'} sizes per policy (64 MiB read, virtual clock)",
                                     xlabel="size (sectors)", ylabel="count")
            result.figures.append(path.name)
    except (ImportError, AttributeError, TypeError):
        pass
    kernel_reference(result, sizes, out_dir, progress)
    return result


# --- kernel reference (issue 4 item 5; `python3 -m harness reference bio-size`) ---

def kernel_reference(result: ExperimentResult, sizes: dict, out_dir: Path, progress) -> None:
    """The same 64 MiB direct read and write on this machine's kernel (fio's
    psync and io_uring engines on a loop device with max_sectors_kb 512,
    traced), its bio and request sizes beside ours: a table, "kernel."
    metrics (sizes and shares, no direction: `check` does not judge them),
    a figure, and job files / traces in out_dir/kernel-reference. Where the
    machine cannot (not root, no loop device, no tracefs) or
    MDSPLIT_NO_REFERENCE is set, one line says why."""
    if os.environ.get("MDSPLIT_NO_REFERENCE"):
        result.tables.append("Kernel reference: skipped (MDSPLIT_NO_REFERENCE is set)")
        return
    try:
        ref = bio_size_reference(keep_dir=out_dir / "kernel-reference", progress=progress)
    except ReferenceUnavailable as e:
        result.tables.append(f"Kernel reference: skipped: {e}")
        return
    result.tables.extend(format_bio_size(ref, sizes, "emulator"))
    result.metrics.update(ref.metrics("kernel."))
    result.raw["kernel"] = ref.as_dict()
    result.raw["kernel_reference"] = "kernel-reference"
    base = ref.row("psync", "malloc", "read")
    if base is None or "original" not in sizes:
        return
    try:
        from harness import plots
        for kind in ("bios", "requests"):
            path = out_dir / f"bio-size-kernel-{kind}.png"
            plots.size_distribution(
                path, {f"kernel {ref.kernel} ({base.label})": getattr(base.dist, kind),
                       "emulator (original)": sizes["original"][kind]},
                unit="sectors", bins="log2",
                title=f"{'Bio' if kind == 'bios' else 'Request'} sizes, 64 MiB direct read: "
                      f"kernel vs emulator")
            result.figures.append(path.name)
    except (ImportError, AttributeError, TypeError, ValueError):
        pass


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
                        data = run_fio(job, fio=fio, timeout=timeout, sidecars=False).fio
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


def reference(args, progress) -> ExperimentResult:
    """`python3 -m harness reference bio-size`: the kernel's run on this
    machine beside the emulator's distributions (--emulator: a report,
    'run' for the virtual-clock run now, 'none'; default the latest
    report, else the virtual-clock run now). Metrics "kernel.*"."""
    mems = ("malloc",) if args.no_hugepages else ("malloc", "mmaphuge")
    ref = bio_size_reference(mems=mems, keep_dir=args.keep, progress=progress)
    sizes, where = emulator_sizes(args.emulator)
    tables = format_bio_size(ref, sizes, f"emulator ({where})" if sizes else "")
    if not sizes:
        tables.append(f"emulator distributions: {where}.")
    return ExperimentResult(f"kernel-{NAME}", tables=tables, metrics=ref.metrics("kernel."),
                            raw={"kernel": ref.as_dict()})


def emulator_sizes(spec):
    """The emulator's bio-size distributions for `reference bio-size`:
    ({policy: {"bios", "requests"}}, where from) or (None, why not). spec:
    a report (dir or result.json), "run" (the virtual-clock run of
    jobs/bio-*.toml now, about a second), "none"; default
    reports/latest/bio-size, else run. A report named on the command line
    is never replaced by a run (`reference` refuses one that does not
    exist before it starts)."""
    if spec == "none":
        return None, "not asked for (--emulator none)"
    if spec != "run":
        p, f, result = find_report(spec, "bio-size")
        sizes = (result or {}).get("raw", {}).get("sizes")
        if sizes:
            return sizes, str(f)
        if spec:
            return None, (f"{f} has no bio-size distributions (raw.sizes)" if f
                          else f"no report at {p}")
    from harness.paths import ROOT
    virt, _ = virtual_run(ROOT / "jobs")
    return ({p: {"bios": v["bios"], "requests": v["requests"]} for p, v in virt.items()},
            "virtual clock, jobs/bio-*.toml")
