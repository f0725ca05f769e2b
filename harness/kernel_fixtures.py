"""The machine the kernel references run on (harness/experiments/<name>.py,
`python3 -m harness reference NAME`): what each needs, set up and undone.

  the machine     kernel release and version, root, fio, losetup; the plug
                  order of this kernel (plug_note)
  loop devices    loop_device(): a loop device over a sparse file, with
                  queue limits (max_sectors_kb, read_ahead_kb), detached at
                  the end; every queue attribute written through
                  LoopDevice.set_queue (these, require_bfq's scheduler, the
                  bfq reference's rotational and iosched/*) is written back
                  first: they outlive `losetup --detach`, and the next user
                  of /dev/loopN would inherit them
  tracefs         trace_block_events(): a private tracefs instance with the
                  block tracepoints of one device; parse_trace() and
                  distributions() turn its text into bio / split / request
                  size counts
  huge pages      hugepages(): nr_hugepages raised for the run, restored
  cgroups         io_cgroups(), child_cgroup(): the blkio (v1) or io (v2)
                  hierarchy and a child cgroup; in_cgroup() the command
                  prefix that runs fio inside one
  bfq             require_bfq(): a device switched to the kernel's bfq

Everything is checked first; what is missing raises ReferenceUnavailable
with a one-line reason. What a run sets up (loop device, its queue
settings, backing file, tracefs instance, huge pages, cgroup) is undone in
`finally` blocks, also on errors, ^C and SIGTERM; leftovers of a killed
run (all named mdsplit-ref-<pid>-*) are removed by the next run once that
pid is gone (cleanup_stale). So are a killed run's kernel settings (queue
attributes, nr_hugepages): each change is journalled before it is made
(SettingsJournal, in mdsplit-ref-<pid>-settings in the temporary
directory), and the next run writes back each one still as the killed run
left it, before it detaches that run's loop devices. tracefs itself, when a
run had to mount it, stays mounted (see tracefs()).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import textwrap
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1 << 20
SECTOR = 512
TRACEFS_MOUNTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
EVENTS = ("block_bio_queue", "block_split", "block_rq_issue")
PREFIX = "mdsplit-ref-"           # backing directories, tracefs instances, cgroups
SYS_BLOCK = Path("/sys/block")    # tests point it at a fake tree
NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")


class ReferenceUnavailable(RuntimeError):
    """The reference cannot run on this machine; str(e) is the one-line reason."""



# --- the machine ----------------------------------------------------------------

def _write(path, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def _read(path) -> str:
    with open(path) as f:
        return f.read().strip()


def _selected(text: str) -> str:
    """The value a sysfs attribute holds, as it can be written back: the
    bracketed entry of a choice list ("none [mq-deadline] kyber" ->
    "mq-deadline"), else the text itself."""
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text


def _losetup(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["losetup", *args], capture_output=True, text=True)


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
    """The tracefs mount, mounting it at /sys/kernel/tracing when needed.
    A mount made here is left in place on purpose: that mount point is the
    machine's, and whoever finds it mounted relies on it staying so:
    another reference run (its trace instance is written by path until it
    ends; an unmount under it breaks its capture and leaves its instance
    tracing where nobody sees it), cleanup_stale (it finds a killed run's
    instances through a mount only) and the tests' leftover checks."""
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


class SettingsJournal:
    """The kernel settings this process has changed and not yet written
    back, in a file a later run finds if this one is killed (SIGKILL, the
    machine's OOM killer): journal.json in a private directory (mode 0700)
    tempdir/mdsplit-ref-<pid>-settings, a list of {"path", "before", "set"}
    in the order of the first changes. An entry is recorded before the
    write it covers and forgotten once the value is back; `replay` writes
    back a dead run's, of a directory this user owns only and of queue
    attributes and nr_hugepages only (the temporary directory is everyone's)."""

    _lock = threading.Lock()

    @staticmethod
    def directory(pid: int = None) -> Path:
        return Path(tempfile.gettempdir()) / f"{PREFIX}{pid or os.getpid()}-settings"

    @staticmethod
    def _private(d: Path) -> bool:
        """d is a directory (not a link) of this user that no one else may write."""
        try:
            st = d.lstat()
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077

    @classmethod
    def file(cls) -> Path:
        d = cls.directory()
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            pass
        if not cls._private(d):
            raise RuntimeError(f"{d} exists and is not a private directory of this user: "
                               "the settings journal cannot be kept there; remove it")
        return d / "journal.json"

    @staticmethod
    def _load(path: Path) -> list:
        try:
            entries = json.loads(path.read_text())
        except (OSError, ValueError):
            return []
        return entries if isinstance(entries, list) else []

    @classmethod
    def _store(cls, entries: list) -> None:
        if not entries:    # nothing left to write back: no journal
            if cls._private(cls.directory()):
                shutil.rmtree(cls.directory(), ignore_errors=True)
            return
        path = cls.file()
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, path)

    @classmethod
    def record(cls, setting: Path, before: str, value: str):
        """Journals that `setting` (holding `before`) is about to hold
        `value`; a setting already journalled keeps its first `before`.
        Returns the value journalled until now, None when it was not."""
        with cls._lock:
            entries = cls._load(cls.file())
            for e in entries:
                if e.get("path") == str(setting):
                    was, e["set"] = e.get("set"), value
                    break
            else:
                was = None
                entries.append({"path": str(setting), "before": before, "set": value})
            cls._store(entries)
            return was

    @classmethod
    def forget(cls, setting: Path) -> None:
        """`setting` is back to its value before (or no longer ours)."""
        with cls._lock:
            if cls._private(cls.directory()):
                entries = cls._load(cls.directory() / "journal.json")
                cls._store([e for e in entries if e.get("path") != str(setting)])

    @staticmethod
    def _restorable(setting: Path) -> bool:
        """A setting a journal may name: nr_hugepages, a block queue attribute."""
        if setting == NR_HUGEPAGES:
            return True
        try:
            parts = setting.relative_to(SYS_BLOCK).parts
        except ValueError:
            return False
        return len(parts) >= 3 and parts[1] == "queue" and ".." not in parts

    @classmethod
    def replay(cls, directory: Path) -> list:
        """Writes back, last change first, each setting of a dead run's
        journal that still holds what that run set (one changed since by
        someone else is theirs now); removes the journal. Returns
        'setting=value' for each one written back."""
        restored = []
        if not cls._private(directory):
            return restored
        path = directory / "journal.json"
        for e in reversed(cls._load(path)):
            try:
                setting, before, value = Path(e["path"]), str(e["before"]), str(e["set"])
                if (cls._restorable(setting) and value != before
                        and _selected(_read(setting)) == value):
                    _write(setting, before)
                    restored.append(f"{setting}={before}")
            except (KeyError, TypeError, OSError):
                continue
        shutil.rmtree(directory, ignore_errors=True)
        return restored


def _set_setting(setting: Path, value) -> str:
    """Writes a kernel setting (OSError when the kernel refuses it), journalled
    for a killed run's successor; returns the value it held before."""
    before = _selected(_read(setting))
    was = SettingsJournal.record(setting, before, _selected(str(value)))
    try:
        _write(setting, value)
    except OSError:
        if was is None:
            SettingsJournal.forget(setting)
        else:
            SettingsJournal.record(setting, before, was)
        raise
    if (now := _selected(_read(setting))) != _selected(str(value)):
        SettingsJournal.record(setting, before, now)   # as the kernel took it
    return before


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
    # Settings first: a killed run's queue attributes go back while its loop
    # device is still attached (they outlive the detach).
    for p in Path(tempfile.gettempdir()).glob(PREFIX + "*-settings"):
        m = re.match(rf"{PREFIX}(\d+)-settings$", p.name)
        if m and not _pid_alive(int(m.group(1))):
            removed += SettingsJournal.replay(p)
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
    for root in _cgroup_roots():
        for p in root.glob(PREFIX + "*"):
            m = re.match(rf"{PREFIX}(\d+)-", p.name)
            if m and p.is_dir() and not _pid_alive(int(m.group(1))):
                if _rmdir_cgroup(p, wait_s=0):
                    removed.append(str(p))
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
    # queue attribute -> its value before set_queue first changed it, in
    # the order of the first changes (restore_queue writes them back)
    originals: dict = field(default_factory=dict, repr=False)

    @property
    def kdev(self) -> int:
        """The kernel's dev_t (MKDEV: major << 20 | minor), as tracepoints hold it."""
        return (self.major << 20) | self.minor

    def queue(self, attr: str) -> str:
        return _read(SYS_BLOCK / self.name / "queue" / attr)

    def set_queue(self, attr: str, value) -> None:
        """Writes queue/<attr> (OSError when the kernel refuses it); the
        first change of an attribute keeps its value before in
        `originals`, for restore_queue(). The only way the harness writes
        a queue attribute."""
        before = _set_setting(SYS_BLOCK / self.name / "queue" / attr, value)
        self.originals.setdefault(attr, before)

    def restore_queue(self) -> list:
        """Writes back what set_queue changed, the last changed first
        (iosched/* before the scheduler they belong to); returns
        'attr: reason' for each one that could not be, and forgets them all."""
        failed = []
        for attr, value in reversed(list(self.originals.items())):
            setting = SYS_BLOCK / self.name / "queue" / attr
            try:
                if _selected(self.queue(attr)) != value:
                    _write(setting, value)
            except OSError as e:
                failed.append(f"{attr}: {e.strerror or e}")
            SettingsJournal.forget(setting)
        self.originals.clear()
        return failed


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
    """A loop device over a new sparse file of `size` bytes. At the end,
    also on errors, ^C and SIGTERM (sigterm_as_interrupt), the queue
    attributes changed through dev.set_queue are written back, then the
    device is detached; on the normal path, RuntimeError names those that
    could not be written back (after the detach)."""
    require_losetup()
    with open(backing, "wb") as f:
        f.truncate(size)
    args = ["--find", "--show"] + (["--direct-io=on"] if direct_io else []) + [str(backing)]
    r = _losetup(*args)
    if r.returncode != 0:
        raise ReferenceUnavailable("no free loop device: "
                                   + (r.stderr.strip() or " ".join(["losetup", *args])))
    path = r.stdout.strip()
    dev, failed = None, []
    try:
        name = Path(path).name
        major, minor = (int(x) for x in _read(SYS_BLOCK / name / "dev").split(":"))
        try:
            dio = _read(SYS_BLOCK / name / "loop" / "dio") == "1"
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
        if dev is not None:
            failed = dev.restore_queue()
        _losetup("--detach", path)
    # Reached on the normal path only: an error in flight is the one to report.
    if failed:
        raise RuntimeError(f"{path}: queue settings not written back: {'; '.join(failed)}")


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
    path = NR_HUGEPAGES
    if os.geteuid() != 0 or not path.exists():
        yield "huge pages need root and /proc/sys/vm/nr_hugepages"
        return
    orig = int(_read(path))
    free = _meminfo("HugePages_Free")
    changed = False
    try:
        if free < n:
            try:
                _set_setting(path, orig + (n - free))
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
                SettingsJournal.forget(path)
            except OSError:
                pass


# --- cgroups --------------------------------------------------------------------

@dataclass
class IoCgroups:
    version: int              # 1 (blkio) or 2 (io)
    root: Path                # the hierarchy's root cgroup

    @property
    def label(self) -> str:
        return f"cgroup v{self.version} {'blkio' if self.version == 1 else 'io'} ({self.root})"

    @property
    def weight_file(self) -> str:
        return "blkio.bfq.weight" if self.version == 1 else "io.bfq.weight"


def _mounts() -> list:
    try:
        return [l.split()[1:4] for l in Path("/proc/mounts").read_text().splitlines()
                if len(l.split()) >= 4]
    except OSError:
        return []


def _cgroup_roots() -> list:
    """The roots of the hierarchies with blkio (v1) or io (v2)."""
    roots = []
    for mp, fs, opts in _mounts():
        p = Path(mp.replace("\\040", " "))
        if fs == "cgroup" and "blkio" in opts.split(","):
            roots.append(p)
        elif fs == "cgroup2":
            try:
                if "io" in _read(p / "cgroup.controllers").split():
                    roots.append(p)
            except OSError:
                pass
    return roots


def io_cgroups() -> IoCgroups:
    """The blkio (v1) or io (v2) cgroup hierarchy; ReferenceUnavailable
    without one."""
    require_root()
    for mp, fs, opts in _mounts():
        p = Path(mp.replace("\\040", " "))
        if fs == "cgroup" and "blkio" in opts.split(",") and (p / "cgroup.procs").exists():
            return IoCgroups(1, p)
    for mp, fs, opts in _mounts():
        p = Path(mp.replace("\\040", " "))
        if fs == "cgroup2":
            try:
                if "io" in _read(p / "cgroup.controllers").split():
                    return IoCgroups(2, p)
            except OSError:
                pass
    raise ReferenceUnavailable("no blkio (cgroup v1) or io (cgroup v2) cgroup controller mounted")


def _rmdir_cgroup(path: Path, wait_s: float = 5.0) -> bool:
    """rmdir of a cgroup, retried while its last tasks exit (EBUSY)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)


_cgroups_made = 0


@contextmanager
def child_cgroup(cg: IoCgroups, name: str = "bfq"):
    """A child cgroup <root>/mdsplit-ref-<pid>-<name>-N (v2: with +io in the
    root's cgroup.subtree_control); removed at the end, also on errors."""
    global _cgroups_made
    _cgroups_made += 1
    path = cg.root / f"{PREFIX}{os.getpid()}-{name}-{_cgroups_made}"
    enabled = False
    if cg.version == 2:
        ctl = cg.root / "cgroup.subtree_control"
        if "io" not in _read(ctl).split():
            try:
                _write(ctl, "+io")
                enabled = True
            except OSError as e:
                raise ReferenceUnavailable(f"cannot enable +io in {ctl}: {e}")
    try:
        try:
            path.mkdir()
        except OSError as e:
            raise ReferenceUnavailable(f"cannot create a cgroup in {cg.root}: {e}")
        try:
            yield path
        except BaseException:
            _rmdir_cgroup(path)          # the error in flight is the one to report
            raise
        if not _rmdir_cgroup(path):
            raise RuntimeError(f"could not remove the cgroup {path} (tasks still in it?)")
    finally:
        if enabled:
            try:
                _write(cg.root / "cgroup.subtree_control", "-io")
            except OSError:
                pass


def cgroup_written_bytes(cg: IoCgroups, path: Path, dev: LoopDevice) -> int:
    """Bytes the cgroup wrote to dev: v1 blkio.bfq.io_service_bytes (or the
    throttle layer's), v2 io.stat wbytes; -1 when the files are missing."""
    key = f"{dev.major}:{dev.minor}"
    if cg.version == 2:
        try:
            for line in _read(path / "io.stat").splitlines():
                if line.startswith(key + " "):
                    m = re.search(r"\bwbytes=(\d+)", line)
                    return int(m.group(1)) if m else 0
            return 0
        except OSError:
            return -1
    for f in ("blkio.bfq.io_service_bytes", "blkio.throttle.io_service_bytes"):
        try:
            text = _read(path / f)
        except OSError:
            continue
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == key and parts[1] == "Write":
                return int(parts[2])
        return 0
    return -1


def in_cgroup(procs: Path) -> list:
    """A command prefix that puts the command into a cgroup, then execs it."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs)]




# --- bfq -----------------------------------------------------------------------

def require_bfq(dev: LoopDevice) -> str:
    """Switches dev to bfq; ReferenceUnavailable when the kernel has none."""
    line = dev.queue("scheduler")
    if "bfq" not in line.replace("[", " ").replace("]", " ").split():
        raise ReferenceUnavailable(f"no bfq scheduler for {dev.name} "
                                   f"(queue/scheduler lists: {line}; modprobe bfq?)")
    try:
        dev.set_queue("scheduler", "bfq")
    except OSError as e:
        raise ReferenceUnavailable(f"cannot set {dev.name}'s scheduler to bfq: {e}")
    line = dev.queue("scheduler")
    if "[bfq]" not in line:
        raise ReferenceUnavailable(f"{dev.name}'s scheduler is not bfq after setting it: {line}")
    return line


def wrap(text: str, width: int = 100) -> list:
    """A reference's note as lines of the report's width."""
    return textwrap.wrap(text, width)
