"""The guest's tracefs text (include/trace/events/block.h formats of 6.12)
as blktrace records per device, named as the emulator names them (m0 ...
in the stack's order, md0), member sectors relative to md's data area
(the member's sector minus md's data offset, /sys/block/md0/md/dev-*/offset),
device numbers as the emulator's traces carry them (member i 8,16*i; md0
9,0), times relative to the first event.

The trace covers the job only: it is switched on after md0 is assembled
and the warm-up read is done, and off when fio ends, so mdadm's probe
reads are outside it.
"""
from __future__ import annotations

import re
from pathlib import Path

from harness.blktrace import TraceRecord, write_blktrace

_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                   r"(?P<ts>\d+\.\d+):\s+(?P<event>block_\w+):\s+(?P<body>.*)$")
# dev rwbs [bytes (cmd)] sector (+ n | / new) rest
_BODY = re.compile(r"^(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+"
                   r"(?:(?P<bytes>\d+)\s+\((?P<cmd>[^)]*)\)\s+|\((?P<cmd2>[^)]*)\)\s+)?"
                   r"(?P<sector>\d+)\s+(?P<sep>[+/])\s+(?P<n>\d+)(?P<rest>.*)$")
_REMAP = re.compile(r"<-\s+\((?P<maj>\d+),(?P<min>\d+)\)\s+(?P<from>\d+)")
_ERROR = re.compile(r"\[(-?\d+)\]\s*$")

LETTERS = {"block_bio_queue": "Q", "block_getrq": "G", "block_rq_insert": "I",
           "block_rq_issue": "D", "block_rq_complete": "C", "block_bio_backmerge": "M",
           "block_bio_frontmerge": "F", "block_rq_merge": "M", "block_split": "X",
           "block_bio_remap": "A"}


def read_members(path: Path) -> dict:
    """(major, minor) -> (name, data offset in sectors) from the guest's
    `members` file (name maj:min offset per line)."""
    out = {}
    for line in path.read_text().split("\n"):
        parts = line.split()
        if len(parts) == 3:
            maj, mnr = parts[1].split(":")
            out[(int(maj), int(mnr))] = (parts[0], int(parts[2]))
    return out


def emulator_device(name: str) -> int:
    """The device number the emulator's traces give a device name."""
    if name.startswith("m") and name[1:].isdigit():
        return 8 << 20 | 16 * int(name[1:])
    return 9 << 20


def parse(text: str, devices: dict, outside: dict = None) -> dict:
    """{name: [TraceRecord]} of the devices in `devices` (read_members).
    A member's I/O before md's data area (md_update_sb()'s superblock
    writes when the first write marks the array dirty, and again when it
    goes clean) is md's metadata, which the emulator does not write: left
    out, and counted per device in `outside` when given."""
    out = {name: [] for name, _ in devices.values()}
    t0 = None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m or m["event"] not in LETTERS:
            continue
        b = _BODY.match(m["body"])
        if not b:
            continue
        dev = (int(b["maj"]), int(b["min"]))
        if dev not in devices:
            continue
        name, offset = devices[dev]
        letter = LETTERS[m["event"]]
        if offset and int(b["sector"]) < offset:
            if outside is not None:
                outside[name] = outside.get(name, 0) + 1
            continue
        ts = int(round(float(m["ts"]) * 1e9))
        t0 = ts if t0 is None else t0
        rwbs = b["rwbs"]
        sector = int(b["sector"])
        rec = TraceRecord(sequence=0, time_ns=ts - t0, device=emulator_device(name),
                          action=letter, op="W" if "W" in rwbs or "D" in rwbs else "R",
                          sector=sector - offset, nr_sectors=0, bytes=0,
                          pid=int(m["pid"]), error=0, sync="S" in rwbs, flush="F" in rwbs,
                          cpu=int(m["cpu"]))
        if b["sep"] == "/":          # block_split: sector / new_sector
            rec.new_sector = int(b["n"]) - offset
            rec.nr_sectors = 0
        else:
            rec.nr_sectors = int(b["n"])
            rec.bytes = rec.nr_sectors * 512
        if letter == "A":
            r = _REMAP.search(b["rest"])
            if r:
                src = devices.get((int(r["maj"]), int(r["min"])))
                rec.from_device = emulator_device(src[0]) if src else 0
                rec.from_sector = int(r["from"])
        if letter == "C":
            e = _ERROR.search(b["rest"])
            rec.error = int(e[1]) if e else 0
        out[name].append(rec)
    return out


def write_dir(records: dict, directory: Path) -> None:
    """One <name>.blktrace.0 per device (blkparse -i DIR/<name>)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, recs in records.items():
        write_blktrace(directory / f"{name}.blktrace.0", recs)
