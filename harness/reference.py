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

Everything that needs the machine (root, losetup, a free loop device,
tracefs) is checked first; what is missing raises ReferenceUnavailable with
a one-line reason. What a run sets up (loop device, backing file, tracefs
instance, huge pages) is undone in `finally` blocks, also on errors, ^C and
SIGTERM; leftovers of a killed run (named after its pid) are removed by the
next run once that pid is gone.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1 << 20
SECTOR = 512
TRACEFS_MOUNTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
EVENTS = ("block_bio_queue", "block_split", "block_rq_issue")
PREFIX = "mdsplit-ref-"           # backing directories, tracefs instances
DEPTHS = (1, 2, 4, 8, 16, 32, 64, 128)


class ReferenceUnavailable(RuntimeError):
    """The reference cannot run on this machine; str(e) is the one-line reason."""


# --- the machine ----------------------------------------------------------------

def _write(path, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def _read(path) -> str:
    with open(path) as f:
        return f.read().strip()


def kernel_release() -> str:
    return os.uname().release


def kernel_version() -> tuple:
    m = re.match(r"(\d+)\.(\d+)", kernel_release())
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def plug_note() -> str:
    """What the plug does on this kernel, against the thread's 6.6."""
    fifo = kernel_version() >= (6, 13)
    return (f"this kernel ({kernel_release()}) flushes a plug in "
            f"{'submission (FIFO)' if fifo else 'reverse (LIFO)'} order; the thread ran 6.6, "
            f"whose plug issued newest first, which the emulator's bio-size jobs emulate "
            f"with plug_order = \"lifo\"")


def require_fio(fio: str = "fio") -> str:
    path = shutil.which(fio)
    if not path:
        raise ReferenceUnavailable(f"{fio} is not installed")
    return path


def require_root() -> None:
    if os.geteuid() != 0:
        raise ReferenceUnavailable("not root (loop devices and tracefs need root)")


def require_losetup() -> None:
    require_root()
    if not shutil.which("losetup"):
        raise ReferenceUnavailable("losetup is not installed (util-linux / mount package)")
    r = subprocess.run(["losetup", "--find"], capture_output=True, text=True)
    if r.returncode != 0:
        raise ReferenceUnavailable("no free loop device: " + (r.stderr.strip() or "losetup --find failed"))


def tracefs() -> Path:
    """The tracefs mount, mounting it at /sys/kernel/tracing when needed."""
    for p in TRACEFS_MOUNTS:
        if (p / "events" / "block").is_dir() and (p / "instances").is_dir():
            return p
    require_root()
    mnt = TRACEFS_MOUNTS[0]
    if mnt.is_dir():
        r = subprocess.run(["mount", "-t", "tracefs", "nodev", str(mnt)],
                           capture_output=True, text=True)
        if r.returncode == 0 and (mnt / "events" / "block").is_dir():
            return mnt
        reason = r.stderr.strip() or "no block events"
    else:
        reason = f"{mnt} does not exist"
    raise ReferenceUnavailable(f"no tracefs: cannot mount it at {mnt}: {reason}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale() -> list:
    """Removes what a killed reference run left behind: loop devices backed by
    a file in a mdsplit-ref-<pid>-* directory and tracefs instances named
    mdsplit-ref-<pid>-*, when that pid no longer runs. Returns what it removed."""
    removed = []
    if os.geteuid() != 0:
        return removed
    if shutil.which("losetup"):
        r = subprocess.run(["losetup", "--list", "--json", "--output", "NAME,BACK-FILE"],
                           capture_output=True, text=True)
        try:
            devs = json.loads(r.stdout).get("loopdevices", []) if r.returncode == 0 and r.stdout else []
        except ValueError:
            devs = []
        for d in devs:
            m = re.search(rf"/{PREFIX}(\d+)-", d.get("back-file") or "")
            if m and not _pid_alive(int(m.group(1))):
                subprocess.run(["losetup", "--detach", d["name"]], capture_output=True)
                removed.append(d["name"])
    for base in TRACEFS_MOUNTS:
        inst = base / "instances"
        if not inst.is_dir():
            continue
        for p in inst.glob(PREFIX + "*"):
            m = re.match(rf"{PREFIX}(\d+)-", p.name)
            if m and not _pid_alive(int(m.group(1))):
                _remove_instance(p)
                removed.append(str(p))
        break
    for p in Path(tempfile.gettempdir()).glob(PREFIX + "*"):
        m = re.match(rf"{PREFIX}(\d+)-", p.name)
        if m and p.is_dir() and not _pid_alive(int(m.group(1))):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(str(p))
    return removed


@contextmanager
def sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt for the duration, so that the
    `finally` blocks undo the set-up (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


# --- loop device ----------------------------------------------------------------

@dataclass
class LoopDevice:
    path: str            # /dev/loopN
    name: str            # loopN
    major: int
    minor: int
    backing: Path
    direct_io: bool      # the loop driver really uses O_DIRECT on the backing file

    @property
    def kdev(self) -> int:
        """The kernel's dev_t (MKDEV: major << 20 | minor), as tracepoints hold it."""
        return (self.major << 20) | self.minor

    def queue(self, attr: str) -> str:
        return _read(f"/sys/block/{self.name}/queue/{attr}")

    def set_queue(self, attr: str, value) -> None:
        _write(f"/sys/block/{self.name}/queue/{attr}", value)


@contextmanager
def workdir(parent=None):
    """A private directory (mdsplit-ref-<pid>-XXXX), removed at the end."""
    d = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextmanager
def loop_device(backing: Path, size: int, *, direct_io=True, max_sectors_kb=None, ra_kb=None):
    """A loop device over a new sparse file of `size` bytes; detached at the end."""
    require_losetup()
    with open(backing, "wb") as f:
        f.truncate(size)
    cmd = ["losetup", "--find", "--show"] + (["--direct-io=on"] if direct_io else []) + [str(backing)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ReferenceUnavailable("no free loop device: " + (r.stderr.strip() or " ".join(cmd)))
    path = r.stdout.strip()
    try:
        name = Path(path).name
        major, minor = (int(x) for x in _read(f"/sys/block/{name}/dev").split(":"))
        try:
            dio = _read(f"/sys/block/{name}/loop/dio") == "1"
        except OSError:
            dio = False
        dev = LoopDevice(path, name, major, minor, backing, dio)
        if max_sectors_kb is not None:
            dev.set_queue("max_sectors_kb", max_sectors_kb)
            got = int(dev.queue("max_sectors_kb"))
            if got != max_sectors_kb:
                raise ReferenceUnavailable(f"{path}: max_sectors_kb is {got}, not {max_sectors_kb} "
                                           f"(max_hw_sectors_kb {dev.queue('max_hw_sectors_kb')})")
        if ra_kb is not None:
            dev.set_queue("read_ahead_kb", ra_kb)
        yield dev
    finally:
        subprocess.run(["losetup", "--detach", path], capture_output=True)


# --- tracefs --------------------------------------------------------------------

def _remove_instance(inst: Path) -> None:
    for e in EVENTS:
        d = inst / "events" / "block" / e
        for f, v in (("enable", "0"), ("filter", "0")):
            try:
                _write(d / f, v)
            except OSError:
                pass
    try:
        _write(inst / "tracing_on", "0")
    except OSError:
        pass
    try:
        inst.rmdir()
    except OSError:
        pass


class TraceCapture:
    """A private tracefs instance with the block events of one device."""

    def __init__(self, inst: Path, kdev: int, filtered: bool):
        self.inst, self.kdev, self.filtered = inst, kdev, filtered

    def start(self) -> None:
        _write(self.inst / "tracing_on", "0")
        open(self.inst / "trace", "w").close()         # clears the buffer
        _write(self.inst / "tracing_on", "1")

    def stop(self) -> str:
        """Stops tracing; returns the trace text."""
        _write(self.inst / "tracing_on", "0")
        return (self.inst / "trace").read_text(errors="replace")

    def overruns(self) -> int:
        """Events lost because the buffer was full."""
        n = 0
        for stats in self.inst.glob("per_cpu/cpu*/stats"):
            m = re.search(r"^overrun:\s*(\d+)", stats.read_text(), re.M)
            n += int(m.group(1)) if m else 0
        return n


_instances = 0


@contextmanager
def trace_block_events(dev: LoopDevice, buffer_kb: int = 8192, events=EVENTS):
    """block_bio_queue, block_split and block_rq_issue of `dev` only (event
    filter `dev == MKDEV`; the parser filters by major,minor as well)."""
    global _instances
    base = tracefs()
    for e in events:
        if not (base / "events" / "block" / e).is_dir():
            raise ReferenceUnavailable(f"no tracepoint block/{e} in {base}")
    _instances += 1
    inst = base / "instances" / f"{PREFIX}{os.getpid()}-{_instances}"
    try:
        inst.mkdir()
    except OSError as e:
        raise ReferenceUnavailable(f"cannot create a tracefs instance in {base}: {e}")
    try:
        _write(inst / "tracing_on", "0")
        try:
            _write(inst / "buffer_size_kb", buffer_kb)
        except OSError:
            pass
        filtered = True
        for e in events:
            d = inst / "events" / "block" / e
            try:
                _write(d / "filter", f"dev == {dev.kdev}")
            except OSError:
                filtered = False
            _write(d / "enable", "1")
        yield TraceCapture(inst, dev.kdev, filtered)
    finally:
        _remove_instance(inst)


@dataclass
class TraceEvent:
    event: str
    major: int
    minor: int
    rwbs: str
    sector: int
    nr_sectors: int          # block_split: the front's size (new_sector - sector)
    ts: float = 0.0


_LINE = re.compile(r"\s(?P<ts>\d+\.\d+):\s+(?P<event>block_\w+):\s+(?P<maj>\d+),(?P<min>\d+)\s+"
                   r"(?P<rwbs>\S+)\s+(?P<body>.*)$")
_QUEUE = re.compile(r"^(\d+) \+ (\d+)")
_SPLIT = re.compile(r"^(\d+) / (\d+)")
_ISSUE = re.compile(r"^\d+ \(.*?\) (\d+) \+ (\d+)")


def parse_trace(text: str, dev=None) -> list:
    """TraceEvents of block_bio_queue, block_split and block_rq_issue from
    tracefs text (trace or trace_pipe), in trace order; dev = (major, minor)
    keeps that device only."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _LINE.search(line)
        if not m:
            continue
        major, minor = int(m["maj"]), int(m["min"])
        if dev is not None and (major, minor) != tuple(dev):
            continue
        ev, body = m["event"], m["body"]
        if ev == "block_bio_queue":
            b = _QUEUE.match(body)
            if not b:
                continue
            sector, n = int(b.group(1)), int(b.group(2))
        elif ev == "block_split":
            b = _SPLIT.match(body)
            if not b:
                continue
            sector, n = int(b.group(1)), int(b.group(2)) - int(b.group(1))
        elif ev == "block_rq_issue":
            b = _ISSUE.match(body)
            if not b:
                continue
            sector, n = int(b.group(1)), int(b.group(2))
        else:
            continue
        out.append(TraceEvent(ev, major, minor, m["rwbs"], sector, n, float(m["ts"])))
    return out


def _dir_of(rwbs: str) -> str:
    for c in rwbs:
        if c in "RWD":
            return {"R": "read", "W": "write", "D": "discard"}[c]
    return "other"


@dataclass
class Distributions:
    bios: Counter = field(default_factory=Counter)       # block_bio_queue sizes
    requests: Counter = field(default_factory=Counter)   # block_rq_issue sizes
    splits: Counter = field(default_factory=Counter)     # block_split front sizes
    issue_order: list = field(default_factory=list)      # [(sector, nr)] as issued
    retried: int = 0     # bios queued again later (io_uring's NOWAIT attempt got -EAGAIN)

    @property
    def sequential_pct(self) -> float:
        """Issues starting where the previous one ended, % (the emulator's
        seek histogram zero bucket)."""
        pairs = list(zip(self.issue_order, self.issue_order[1:]))
        if not pairs:
            return 100.0
        return 100.0 * sum(1 for a, b in pairs if b[0] == a[0] + a[1]) / len(pairs)

    @property
    def out_of_order(self) -> int:
        """Issues that start before the previous one (a tail issued late)."""
        return sum(1 for a, b in zip(self.issue_order, self.issue_order[1:]) if b[0] < a[0])

    def as_dict(self) -> dict:
        return {"bios": dict(self.bios), "requests": dict(self.requests),
                "splits": dict(self.splits), "sequential_pct": self.sequential_pct,
                "out_of_order": self.out_of_order, "retried": self.retried}


def distributions(events, direction: str = None) -> Distributions:
    """Bio, split and request size distributions (sectors -> count) from
    parsed events, of one direction ('read' / 'write') or all."""
    d = Distributions()
    events = [e for e in events
              if e.nr_sectors > 0 and not (direction and _dir_of(e.rwbs) != direction)]
    # io_uring first tries a read or write with IOCB_NOWAIT; a bio that then
    # needs splitting fails with -EAGAIN and the whole I/O is issued again
    # from an io-wq worker: the same bio is queued twice. The earlier one
    # is a retried attempt, not a bio of the I/O.
    last_queue = {}
    for i, e in enumerate(events):
        if e.event == "block_bio_queue":
            last_queue[(e.sector, e.nr_sectors, _dir_of(e.rwbs))] = i
    for i, e in enumerate(events):
        if e.event == "block_bio_queue":
            if last_queue[(e.sector, e.nr_sectors, _dir_of(e.rwbs))] != i:
                d.retried += 1
                continue
            d.bios[e.nr_sectors] += 1
        elif e.event == "block_split":
            d.splits[e.nr_sectors] += 1
        elif e.event == "block_rq_issue":
            d.requests[e.nr_sectors] += 1
            d.issue_order.append((e.sector, e.nr_sectors))
    return d


def format_counts(counts: dict, top: int = 6) -> str:
    """'1024 x 640, 128 x 300, ...' (sectors x count), largest counts first."""
    items = sorted(((int(k), v) for k, v in counts.items()), key=lambda kv: (-kv[1], -kv[0]))
    if not items:
        return "(none)"
    shown = ", ".join(f"{k} x {v}" for k, v in items[:top])
    more = len(items) - top
    return shown + (f", ... ({more} more sizes)" if more > 0 else "")


def mean_size(counts: dict) -> float:
    n = sum(counts.values())
    return sum(int(k) * v for k, v in counts.items()) / n if n else 0.0


# --- huge pages -----------------------------------------------------------------

def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        k, _, v = line.partition(":")
        if k == key:
            return int(v.split()[0])
    return 0


@contextmanager
def hugepages(n: int):
    """Reserves n free huge pages (raising /proc/sys/vm/nr_hugepages), yields
    '' or the reason they could not be had; restores nr_hugepages after."""
    path = Path("/proc/sys/vm/nr_hugepages")
    if os.geteuid() != 0 or not path.exists():
        yield "huge pages need root and /proc/sys/vm/nr_hugepages"
        return
    orig = int(_read(path))
    free = _meminfo("HugePages_Free")
    changed = False
    try:
        if free < n:
            try:
                _write(path, orig + (n - free))
                changed = True
            except OSError as e:
                yield f"cannot raise nr_hugepages: {e}"
                return
            free = _meminfo("HugePages_Free")
        yield "" if free >= n else f"only {free} of {n} huge pages could be reserved"
    finally:
        if changed:
            try:
                _write(path, orig)
            except OSError:
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


def _fio_json(text: str) -> dict:
    m = re.search(r"^\{", text, re.M)
    return json.loads(text[m.start():]) if m else {}


def _run_fio_job(job: Path, fio: str, timeout: float) -> dict:
    out = job.with_suffix(".json")
    try:
        proc = subprocess.run([fio, "--output-format=json", f"--output={out}", str(job)],
                              cwd=job.parent, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"fio {job.name}: no result after {timeout:g} s") from None
    if proc.returncode != 0:
        lines = [l for l in (proc.stderr + proc.stdout).splitlines() if l.strip()]
        raise RuntimeError(f"fio {job.name} exited {proc.returncode}: "
                           + (lines[0] if lines else "(no message)"))
    return _fio_json(out.read_text())


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
    tables = ["\n".join(lines), "\n".join(_wrap(ref.note))]
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


def _wrap(text: str, width: int = 100) -> list:
    import textwrap
    return textwrap.wrap(text, width)


# --- seed 003: buffered random reads, readahead off -----------------------------

@dataclass
class BufferedSweep:
    kernel: str
    target: str                # /dev/loopN or a file
    size: int
    runtime_s: float
    iops: dict = field(default_factory=dict)     # depth -> IOPS
    note: str = ""


def _buffered_job(target: str, depths, runtime_s: float, size: int, fadvise: bool) -> str:
    lines = ["; kernel reference for seed 003: fio's io_uring engine, buffered 4k random",
             "; reads with readahead off, one stonewalled job per iodepth",
             "[global]", f"filename={target}", "ioengine=io_uring", "direct=0", "rw=randread",
             "bs=4k", f"size={size}", f"runtime={runtime_s}", "time_based=1", "norandommap=1",
             "randrepeat=0", "invalidate=1", "stonewall"]
    if fadvise:
        lines.append("fadvise_hint=random")
    for d in depths:
        lines += [f"[qd{d}]", f"iodepth={d}"]
    return "\n".join(lines) + "\n"


def buffered_sweep(depths=DEPTHS, runtime_s: float = 3, size: int = 4 << 30, *, fio: str = "fio",
                   target: str = "auto", keep_dir: Path = None, progress=None) -> BufferedSweep:
    """Seed 003 on this kernel: IOPS per iodepth of fio's io_uring engine,
    buffered 4k randread, readahead off. target "loop" (a loop device over
    a sparse file, blockdev --setra 0, needs root), "file" (a sparse file
    with fadvise_hint=random), or "auto" (loop where possible, else file)."""
    require_fio(fio)
    depths = [int(d) for d in depths]
    if not depths or any(d < 1 for d in depths):
        raise ValueError(f"iodepths must be >= 1: {depths}")
    if target not in ("auto", "loop", "file"):
        raise ValueError(f"target must be auto, loop or file, not {target!r}")
    use_loop = target == "loop"
    if target == "auto":
        try:
            require_losetup()
            use_loop = True
        except ReferenceUnavailable:
            use_loop = False
    elif use_loop:
        require_losetup()
    cleanup_stale()
    with ExitStack() as stack:
        stack.enter_context(sigterm_as_interrupt())
        wd = stack.enter_context(workdir())
        backing = wd / "buffered.img"
        if use_loop:
            dev = stack.enter_context(loop_device(backing, size, ra_kb=0))
            if shutil.which("blockdev"):
                subprocess.run(["blockdev", "--setra", "0", dev.path], capture_output=True)
            ra = dev.queue("read_ahead_kb")
            tgt, how = dev.path, (f"loop device {dev.path} over a sparse file "
                                  f"(direct-io={'on' if dev.direct_io else 'off'}), "
                                  f"blockdev --setra 0 (read_ahead_kb {ra})")
        else:
            with open(backing, "wb") as f:
                f.truncate(size)
            tgt, how = str(backing), "a sparse file with fadvise_hint=random (readahead off for it)"
        job = wd / "buffered-sweep.fio"
        job.write_text(_buffered_job(tgt, depths, runtime_s, size, fadvise=not use_loop))
        if progress:
            progress(f"kernel reference: io_uring buffered 4k randread, iodepth "
                     f"{depths[0]}..{depths[-1]}, {runtime_s:g} s each")
        try:
            data = _run_fio_job(job, fio, timeout=len(depths) * (runtime_s + 30) + 30)
        except RuntimeError as e:
            raise ReferenceUnavailable(str(e))
        iops = {}
        for j in data.get("jobs", []):
            m = re.match(r"qd(\d+)$", j.get("jobname", ""))
            if m:
                iops[int(m.group(1))] = float(j["read"]["iops"])
        if keep_dir is not None:
            keep = Path(keep_dir)
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(job, keep / job.name)
            (keep / "buffered-sweep.json").write_text(json.dumps(data, indent=1))
    note = (f"Kernel reference: fio's io_uring engine on Linux {kernel_release()}, buffered 4k "
            f"randread of {size >> 20} MiB, readahead off: {how}; {runtime_s:g} s per iodepth, "
            f"page cache dropped before each (invalidate=1). Holes of a sparse file read as "
            f"zeroes without device I/O, so this measures the kernel's buffered-read path "
            f"(page cache, forced 1-page readahead, io_uring's inline / async page-wait / io-wq "
            f"punt), not a disk.")
    return BufferedSweep(kernel_release(), tgt, size, runtime_s, iops, note)


def kernel_buffered_sweep(depths=DEPTHS, runtime_s: float = 3, size: int = 4 << 30) -> dict:
    """IOPS per iodepth ({depth: IOPS}) of fio's io_uring engine, buffered 4k
    randread with readahead off, on this kernel. Raises ReferenceUnavailable
    (str = the reason) where it cannot run. For the note, buffered_sweep()
    returns the same with how it ran."""
    return buffered_sweep(depths, runtime_s, size).iops


def format_buffered(sweep: BufferedSweep, emulator: dict = None) -> list:
    """The sweep as a QD table (kIOPS); emulator = {column: {depth: IOPS}}
    adds columns (e.g. the forced-ra variants)."""
    cols = dict(emulator or {})
    w = max([12] + [len(c) + 2 for c in cols])
    lines = [f"{'iodepth':<9}{'kernel kIOPS':>14}" + "".join(f"{c:>{w}}" for c in cols)]
    for d in sorted(sweep.iops):
        row = f"{d:<9}{sweep.iops[d] / 1000:>14.1f}"
        for c, vals in cols.items():
            v = vals.get(d) if isinstance(vals, dict) else None
            row += f"{v / 1000:>{w}.1f}" if v is not None else f"{'-':>{w}}"
        lines.append(row)
    return ["\n".join(lines), "\n".join(_wrap(sweep.note))]
