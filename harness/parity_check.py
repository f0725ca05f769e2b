"""RAID5 parity checker for the member files of an mdsplit raid5 stack.

    python3 -m harness.parity_check STACK.toml

Reads every member, 4 KiB stripe-unit row by row (md's stripe heads), and
prints each row whose XOR across the members is not zero; exits 1 if there
is one, 0 otherwise. The XOR test does not depend on the layout; the layout
only names the parity member and the data units' virtual offsets in the
report (drivers/md/raid5.c raid5_compute_sector / raid5_compute_blocknr).

    from harness.parity_check import check_parity
    bad = check_parity(["m0.img", "m1.img", "m2.img"], 64 * 1024, "left-symmetric")

Members may be block devices (loop devices, disks): their page cache is
dropped before reading, so the check sees what the device holds after
direct-I/O writes, not pages cached before them.

A failed member is never read: with it missing every row is consistent by
construction (its unit is whatever the others XOR to), so a degraded array
has nothing to check and no stripe is reported.
"""
import argparse
import os
import stat
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from harness.units import parse_size

STRIPE_BYTES = 4096          # RAID5_STRIPE_SIZE: one page per member
READ_ROWS = 256              # rows read per pass (1 MiB per member)

# md's ALGORITHM_* numbers (drivers/md/raid5.h), by the TOML's names.
LAYOUTS = {
    "left-asymmetric": 0,
    "right-asymmetric": 1,
    "left-symmetric": 2,
    "right-symmetric": 3,
}


@dataclass
class BadStripe:
    row: int                  # 4 KiB row index on every member
    member_offset: int        # byte offset of the row on every member
    stripe: int               # chunk-stripe number
    parity_member: int
    data_offsets: dict = field(default_factory=dict)  # member -> virtual byte offset

    def __str__(self):
        data = ", ".join(f"m{m}@{off}" for m, off in sorted(self.data_offsets.items()))
        return (f"bad parity: row {self.row} (member offset {self.member_offset}), "
                f"stripe {self.stripe}, parity on m{self.parity_member}, data {data}")


def layout_number(layout) -> int:
    """A layout given as md's number or the TOML's name."""
    if isinstance(layout, int):
        if layout not in LAYOUTS.values():
            raise ValueError(f"layout {layout}: allowed 0-3")
        return layout
    name = str(layout).strip().lower().replace("_", "-")
    if name.isdigit():
        return layout_number(int(name))
    if name not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: allowed {', '.join(LAYOUTS)}")
    return LAYOUTS[name]


def parity_disk(stripe: int, raid_disks: int, layout: int) -> int:
    """pd_idx of raid5_compute_sector() for a chunk-stripe."""
    r = stripe % raid_disks
    return (raid_disks - 1) - r if layout in (0, 2) else r


def compute_blocknr(stripe: int, chunk_offset: int, disk: int, raid_disks: int,
                    chunk_sectors: int, layout: int):
    """raid5_compute_blocknr(): the virtual sector a member's unit holds,
    None for the parity member."""
    pd = parity_disk(stripe, raid_disks, layout)
    if disk == pd:
        return None
    i = disk
    if layout in (0, 1):
        if i > pd:
            i -= 1
    else:
        if i < pd:
            i += raid_disks
        i -= pd + 1
    return (stripe * (raid_disks - 1) + i) * chunk_sectors + chunk_offset


def _device_size(path) -> int:
    with open(path, "rb") as f:
        return f.seek(0, os.SEEK_END)


def _failed_set(failed, count):
    if failed is None:
        return set()
    if isinstance(failed, int):
        failed = [failed]
    out = set(int(i) for i in failed)
    for i in out:
        if not 0 <= i < count:
            raise ValueError(f"failed member {i}: there are {count} members")
    return out


def check_parity(member_paths, chunk_bytes, layout, failed=None, sizes=None) -> list:
    """Every 4 KiB row (of md's usable area) whose XOR across the members is
    not zero, as BadStripe objects. `sizes[i]`: the bytes of member i the
    array uses (its TOML `size`; None or 0: the whole file or device), as
    the engine sizes a member; what lies past it is not the array's."""
    paths = [Path(p) for p in member_paths]
    n = len(paths)
    if n < 3:
        raise ValueError(f"raid5 needs at least 3 members, got {n}")
    if chunk_bytes < STRIPE_BYTES or chunk_bytes & (chunk_bytes - 1):
        raise ValueError(f"chunk {chunk_bytes}: a power of two of at least 4k")
    algorithm = layout_number(layout)
    if _failed_set(failed, n):
        return []
    sizes = list(sizes or [None] * n)
    if len(sizes) != n:
        raise ValueError(f"{len(sizes)} sizes for {n} members")
    smallest = min(size or _device_size(p) for p, size in zip(paths, sizes))
    usable = smallest - smallest % chunk_bytes
    rows = usable // STRIPE_BYTES
    chunk_sectors = chunk_bytes // 512
    bad = []
    files = [open(p, "rb", buffering=0) for p in paths]
    try:
        for f in files:
            if stat.S_ISBLK(os.fstat(f.fileno()).st_mode):
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        for first in range(0, rows, READ_ROWS):
            count = min(READ_ROWS, rows - first)
            length = count * STRIPE_BYTES
            blocks = []
            for f in files:
                f.seek(first * STRIPE_BYTES)
                data = f.read(length)
                blocks.append(data.ljust(length, b"\0"))
            acc = 0
            for b in blocks:
                acc ^= int.from_bytes(b, "little")
            if not acc:
                continue
            folded = acc.to_bytes(length, "little")
            for k in range(count):
                if not any(folded[k * STRIPE_BYTES:(k + 1) * STRIPE_BYTES]):
                    continue
                row = first + k
                member_sector = row * (STRIPE_BYTES // 512)
                stripe, chunk_offset = divmod(member_sector, chunk_sectors)
                data = {}
                for disk in range(n):
                    v = compute_blocknr(stripe, chunk_offset, disk, n, chunk_sectors, algorithm)
                    if v is not None:
                        data[disk] = v * 512
                bad.append(BadStripe(row, row * STRIPE_BYTES, stripe,
                                     parity_disk(stripe, n, algorithm), data))
    finally:
        for f in files:
            f.close()
    return bad


def load_stack(path):
    """(member paths, chunk bytes, layout number, failed indices, sizes) of a
    raid5 stack file; relative member paths resolve against its directory;
    a member's size is its `size` key, None without one."""
    path = Path(path)
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    device = doc.get("device", {})
    kind = device.get("kind", "passthrough")
    if kind != "raid5":
        raise ValueError(f"{path}: device.kind is {kind!r}, not \"raid5\"")
    chunk = parse_size(device.get("chunk", "64k"))
    layout = layout_number(device.get("layout", "left-symmetric"))
    members, failed, sizes = [], [], []
    for i, m in enumerate(doc.get("members", [])):
        backend = m.get("backend", "io_uring")
        if backend != "io_uring":
            # A ram member's data lives in the run's memory, a null member
            # keeps none: there is nothing on disk to check.
            raise ValueError(f"{path}: members[{i}].backend is {backend!r}: its data is not on "
                             "disk, so there is no parity to check; allowed: a raid5 stack whose "
                             "members are all io_uring (files or block devices)")
        if "path" not in m:
            raise ValueError(f"{path}: members[{i}].path: missing; allowed: a file or block "
                             "device path")
        p = Path(m["path"])
        members.append(p if p.is_absolute() else path.parent / p)
        sizes.append(parse_size(m["size"]) if "size" in m else None)
        if m.get("failed", False):
            failed.append(i)
    return members, chunk, layout, failed, sizes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m harness.parity_check",
                                 description="Checks RAID5 parity of a stack's member files.")
    ap.add_argument("stack", help="the raid5 stack TOML")
    args = ap.parse_args(argv)
    try:
        members, chunk, layout, failed, sizes = load_stack(args.stack)
        if failed:
            print(f"{args.stack}: member(s) {', '.join(map(str, failed))} failed: "
                  "a degraded array has no parity to check", file=sys.stderr)
        bad = check_parity(members, chunk, layout, failed, sizes)
    except (OSError, ValueError, KeyError, tomllib.TOMLDecodeError) as e:
        print(f"parity_check: {e}", file=sys.stderr)
        return 2
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} bad stripe(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
