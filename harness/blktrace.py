"""Reader for blktrace binary files (the kernel's format, as mdsplit writes it).

Stdlib only; imports nothing from the harness package, so it can be used as a
plain script module too.

Format (include/uapi/linux/blktrace_api.h): each record is a 48-byte
``struct blk_io_trace`` in the tracing host's byte order (told by the magic,
``BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION`` = 0x65617407), followed by
``pdu_len`` payload bytes that kernel/trace/blktrace.c writes big endian:

- X (split):  ``__be64`` new sector
- A (remap):  ``struct blk_io_trace_remap {__be32 device_from; __be32 device_to;
  __be64 sector_from}``
- U (unplug): ``__be64`` depth

Notify records (``BLK_TC_NOTIFY``: process names, timestamps, messages) are
skipped, as are actions with no letter here (requeue, sleeprq, bounce, abort,
driver data). UT (timer unplug) reads as 'U'.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from typing import Dict, List

__all__ = [
    "TraceRecord",
    "read_blktrace",
    "read_trace_dir",
    "write_blktrace",
    "BLK_IO_TRACE_MAGIC",
    "BLK_IO_TRACE_VERSION",
]

BLK_IO_TRACE_MAGIC = 0x65617400
BLK_IO_TRACE_VERSION = 0x07
BLK_TC_SHIFT = 16

# enum blktrace_cat
BLK_TC_READ = 1 << 0
BLK_TC_WRITE = 1 << 1
BLK_TC_FLUSH = 1 << 2
BLK_TC_SYNC = 1 << 3
BLK_TC_NOTIFY = 1 << 10
BLK_TC_DISCARD = 1 << 13
BLK_TC_FUA = 1 << 15

_BLK_TA_CGROUP = 1 << 8  # a u64 cgroup id leads the payload

# enum blktrace_act -> blkparse's letter
_ACTION_LETTERS = {
    1: "Q",  # __BLK_TA_QUEUE
    2: "M",  # __BLK_TA_BACKMERGE
    3: "F",  # __BLK_TA_FRONTMERGE
    4: "G",  # __BLK_TA_GETRQ
    7: "D",  # __BLK_TA_ISSUE
    8: "C",  # __BLK_TA_COMPLETE
    9: "P",  # __BLK_TA_PLUG
    10: "U",  # __BLK_TA_UNPLUG_IO
    11: "U",  # __BLK_TA_UNPLUG_TIMER
    12: "I",  # __BLK_TA_INSERT
    13: "X",  # __BLK_TA_SPLIT
    15: "A",  # __BLK_TA_REMAP
}

# struct blk_io_trace: magic, sequence, time, sector, bytes, action, pid,
# device, cpu, error, pdu_len.
_HEADER_FORMAT = "IIQQIIIIIHH"
_HEADER_LE = struct.Struct("<" + _HEADER_FORMAT)
_HEADER_BE = struct.Struct(">" + _HEADER_FORMAT)
assert _HEADER_LE.size == 48

_BE64 = struct.Struct(">Q")
_REMAP = struct.Struct(">IIQ")  # struct blk_io_trace_remap

_TRACE_FILE = re.compile(r"^(?P<name>.+)\.blktrace\.(?P<cpu>\d+)$")


@dataclass
class TraceRecord:
    """One block-layer event, as blkparse would print it."""

    sequence: int
    time_ns: int
    device: int  # major << 20 | minor
    action: str  # Q X A G P U M F I D C
    op: str  # 'R' or 'W' (flushes are 'W' with flush=True)
    sector: int
    nr_sectors: int
    bytes: int
    pid: int
    error: int  # negative errno on C, 0 otherwise
    new_sector: int = 0  # X: where the remainder starts
    from_device: int = 0  # A: the device the bio came from
    from_sector: int = 0  # A: its sector there
    depth: int = 0  # U: requests flushed by the unplug
    sync: bool = False
    flush: bool = False
    cpu: int = 0

    @property
    def major(self) -> int:
        return self.device >> 20

    @property
    def minor(self) -> int:
        return self.device & 0xFFFFF

    @property
    def end_sector(self) -> int:
        return self.sector + self.nr_sectors

    @property
    def rwbs(self) -> str:
        """blkparse's RWBS column for the common cases (F, W/R/N, S)."""
        s = "F" if self.flush else ""
        if self.op == "W":
            s += "W"
        elif self.bytes:
            s += "R"
        else:
            s += "N"
        if self.sync:
            s += "S"
        return s


def _parse(data: bytes, path: str) -> List[TraceRecord]:
    records: List[TraceRecord] = []
    size = len(data)
    off = 0
    header = None
    while off < size:
        if size - off < 48:
            raise ValueError(f"{path}: truncated blktrace record at offset {off}")
        if header is None:
            # The first record's magic tells the tracing host's byte order.
            for candidate in (_HEADER_LE, _HEADER_BE):
                if candidate.unpack_from(data, off)[0] & 0xFFFFFF00 == BLK_IO_TRACE_MAGIC:
                    header = candidate
                    break
            else:
                raise ValueError(f"{path}: bad blktrace magic at offset {off}")
        (magic, sequence, time_ns, sector, nbytes, action, pid, device, cpu, error,
         pdu_len) = header.unpack_from(data, off)
        if magic & 0xFFFFFF00 != BLK_IO_TRACE_MAGIC:
            raise ValueError(f"{path}: bad blktrace magic at offset {off}")
        if magic & 0xFF != BLK_IO_TRACE_VERSION:
            raise ValueError(
                f"{path}: unsupported blktrace version {magic & 0xFF} at offset {off}")
        pdu_start = off + 48
        off = pdu_start + pdu_len
        if off > size:
            raise ValueError(f"{path}: truncated blktrace payload at offset {pdu_start - 48}")

        tc = action >> BLK_TC_SHIFT
        if tc & BLK_TC_NOTIFY:
            continue
        letter = _ACTION_LETTERS.get(action & 0xFF)
        if letter is None:
            continue
        if action & _BLK_TA_CGROUP:
            skip = min(pdu_len, 8)
            pdu_start += skip
            pdu_len -= skip

        rec = TraceRecord(
            sequence=sequence,
            time_ns=time_ns,
            device=device,
            action=letter,
            op="W" if tc & (BLK_TC_WRITE | BLK_TC_DISCARD) else "R",
            sector=sector,
            nr_sectors=nbytes >> 9,
            bytes=nbytes,
            pid=pid,
            error=error - 0x10000 if error & 0x8000 else error,  # __u16 of -errno
            sync=bool(tc & BLK_TC_SYNC),
            flush=bool(tc & BLK_TC_FLUSH),
            cpu=cpu,
        )
        if letter == "X" and pdu_len >= 8:
            rec.new_sector = _BE64.unpack_from(data, pdu_start)[0]
        elif letter == "A" and pdu_len >= 16:
            rec.from_device, _device_to, rec.from_sector = _REMAP.unpack_from(data, pdu_start)
        elif letter == "U" and pdu_len >= 8:
            rec.depth = _BE64.unpack_from(data, pdu_start)[0]
        records.append(rec)
    return records


def read_blktrace(path: "str | os.PathLike[str]") -> List[TraceRecord]:
    """Reads one blktrace file (e.g. ``DIR/md0.blktrace.0``) in file order.

    Raises OSError if it cannot be read and ValueError if it is not a
    version-7 blktrace file or ends in the middle of a record.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    return _parse(data, path)


def read_trace_dir(directory: "str | os.PathLike[str]") -> Dict[str, List[TraceRecord]]:
    """Reads every ``<name>.blktrace.<cpu>`` file of a trace directory.

    Returns ``{name: records}`` (``md0``, ``m0``, ...). A device traced on
    several CPUs gets its files merged by (time, cpu, sequence).
    """
    directory = os.fspath(directory)
    by_name: Dict[str, List[str]] = {}
    for entry in sorted(os.listdir(directory)):
        m = _TRACE_FILE.match(entry)
        if m is None:
            continue
        full = os.path.join(directory, entry)
        if os.path.isfile(full):
            by_name.setdefault(m.group("name"), []).append(full)
    result: Dict[str, List[TraceRecord]] = {}
    for name, paths in sorted(by_name.items()):
        if len(paths) == 1:
            result[name] = read_blktrace(paths[0])
        else:
            merged: List[TraceRecord] = []
            for p in paths:
                merged.extend(read_blktrace(p))
            merged.sort(key=lambda r: (r.time_ns, r.cpu, r.sequence))
            result[name] = merged
    return result


# The category each action carries besides the direction (kernel/trace/
# blktrace.c: BLK_TA_QUEUE = __BLK_TA_QUEUE | BLK_TC_ACT(BLK_TC_QUEUE), ...).
_BLK_TC_QUEUE = 1 << 4
_BLK_TC_ISSUE = 1 << 6
_BLK_TC_COMPLETE = 1 << 7
_LETTER_ACTIONS = {letter: act for act, letter in _ACTION_LETTERS.items() if act != 11}
_LETTER_CATEGORY = {"Q": _BLK_TC_QUEUE, "M": _BLK_TC_QUEUE, "F": _BLK_TC_QUEUE,
                    "G": _BLK_TC_QUEUE, "I": _BLK_TC_QUEUE, "A": _BLK_TC_QUEUE,
                    "D": _BLK_TC_ISSUE, "C": _BLK_TC_COMPLETE}


def write_blktrace(path: "str | os.PathLike[str]", records: List[TraceRecord]) -> None:
    """Writes records as one little-endian version-7 blktrace file (what
    blk_add_trace_rq / blk_add_trace_bio would have logged), readable by
    read_blktrace, blkparse and btt. X, A and U carry their payloads."""
    out = bytearray()
    for seq, r in enumerate(records, start=1):
        tc = _LETTER_CATEGORY.get(r.action, 0)
        tc |= BLK_TC_WRITE if r.op == "W" else (BLK_TC_READ if r.bytes or r.nr_sectors else 0)
        tc |= (BLK_TC_SYNC if r.sync else 0) | (BLK_TC_FLUSH if r.flush else 0)
        pdu = b""
        if r.action == "X":
            pdu = _BE64.pack(r.new_sector)
        elif r.action == "A":
            pdu = _REMAP.pack(r.from_device, r.device, r.from_sector)
        elif r.action == "U":
            pdu = _BE64.pack(r.depth)
        nbytes = r.bytes or r.nr_sectors << 9
        out += _HEADER_LE.pack(BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION, seq, r.time_ns,
                               r.sector, nbytes, _LETTER_ACTIONS[r.action] | tc << BLK_TC_SHIFT,
                               r.pid, r.device, r.cpu, r.error & 0xFFFF, len(pdu))
        out += pdu
    with open(path, "wb") as f:
        f.write(out)
