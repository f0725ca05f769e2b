"""The kernel's traces beside the emulator's: per device, the Q (queued
bio) and D (issued request) sequences compared event by event, request-size
and seek histograms side by side, merges; written as diff.md.

A sequence is identical when both sides hold the same (direction, sector,
sectors) events in the same order. Otherwise the report gives the first
divergence with both sides' next 10 events and the edit distance
(insertions + deletions, Myers' O((N+M)D) algorithm, stopped at
MAX_DISTANCE).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

MAX_DISTANCE = 200
NEXT_EVENTS = 10
# Seek buckets (sectors from the previous request's end to this one's start).
SEEK_BUCKETS = (("backward", None, -1), ("0", 0, 0), ("1-127", 1, 127),
                ("128-2047", 128, 2047), (">=2048", 2048, None))


def sequence(records, action: str) -> list:
    return [(r.op, r.sector, r.nr_sectors) for r in records if r.action == action]


def edit_distance(a: list, b: list, limit: int = MAX_DISTANCE):
    """Insertions + deletions turning a into b (Myers 1986); None past limit."""
    n, m = len(a), len(b)
    v = {1: 0}
    for d in range(limit + 1):
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[k - 1] < v[k + 1]):
                x = v[k + 1]
            else:
                x = v[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            v[k] = x
            if x >= n and y >= m:
                return d
    return None


@dataclass
class SequenceDiff:
    action: str
    kernel: int
    emulator: int
    first: int = None             # index of the first divergence (None: identical)
    kernel_next: list = field(default_factory=list)
    emulator_next: list = field(default_factory=list)
    distance: int = 0

    @property
    def identical(self) -> bool:
        return self.first is None


def compare(kernel: list, emulator: list, action: str) -> SequenceDiff:
    a, b = sequence(kernel, action), sequence(emulator, action)
    d = SequenceDiff(action, len(a), len(b))
    if a == b:
        return d
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    d.first = i
    d.kernel_next, d.emulator_next = a[i:i + NEXT_EVENTS], b[i:i + NEXT_EVENTS]
    d.distance = edit_distance(a, b)
    return d


def size_histogram(records) -> Counter:
    """Issued request sizes (KiB -> count)."""
    return Counter(r.nr_sectors // 2 for r in records if r.action == "D")


def seek_histogram(records) -> Counter:
    c = Counter()
    prev = None
    for r in records:
        if r.action != "D":
            continue
        if prev is not None:
            gap = r.sector - (prev.sector + prev.nr_sectors)
            for name, lo, hi in SEEK_BUCKETS:
                if (lo is None or gap >= lo) and (hi is None or gap <= hi):
                    c[name] += 1
                    break
        prev = r
    return c


def merges(records) -> int:
    return sum(1 for r in records if r.action in "MF")


@dataclass
class DeviceDiff:
    name: str
    q: SequenceDiff
    d: SequenceDiff
    kernel_sizes: Counter
    emulator_sizes: Counter
    kernel_seeks: Counter
    emulator_seeks: Counter
    kernel_merges: int
    emulator_merges: int


def diff_devices(kernel: dict, emulator: dict) -> list:
    out = []
    for name in sorted(set(kernel) | set(emulator), key=lambda n: (n.startswith("m") and
                                                                   n[1:].isdigit(), n)):
        k, e = kernel.get(name, []), emulator.get(name, [])
        out.append(DeviceDiff(name, compare(k, e, "Q"), compare(k, e, "D"), size_histogram(k),
                              size_histogram(e), seek_histogram(k), seek_histogram(e),
                              merges(k), merges(e)))
    return out


def _event(t) -> str:
    return f"{t[0]} {t[1]} + {t[2]}"


def _sequence_md(s: SequenceDiff) -> list:
    if s.identical:
        return [f"- {s.action}: **identical** ({s.kernel} events)"]
    dist = s.distance if s.distance is not None else f"> {MAX_DISTANCE}"
    lines = [f"- {s.action}: **differs** at event {s.first} (kernel {s.kernel} events, "
             f"emulator {s.emulator}; edit distance {dist})", "",
             "  | # | kernel | emulator |", "  |---|---|---|"]
    for j in range(max(len(s.kernel_next), len(s.emulator_next))):
        k = _event(s.kernel_next[j]) if j < len(s.kernel_next) else ""
        e = _event(s.emulator_next[j]) if j < len(s.emulator_next) else ""
        lines.append(f"  | {s.first + j} | {k} | {e} |")
    lines.append("")
    return lines


def _histogram_md(title: str, k: Counter, e: Counter, keys) -> list:
    lines = [f"  {title}:", "", "  | | kernel | emulator |", "  |---|---|---|"]
    for key in keys:
        if k.get(key) or e.get(key):
            lines.append(f"  | {key} | {k.get(key, 0)} | {e.get(key, 0)} |")
    return lines + [""]


def mean_kib(c: Counter) -> float:
    n = sum(c.values())
    return sum(k * v for k, v in c.items()) / n if n else 0.0


def markdown(title: str, header: list, devices: list) -> str:
    lines = [f"# {title}", ""] + header + [""]
    for dev in devices:
        lines += [f"## {dev.name}", ""]
        lines += _sequence_md(dev.q) + _sequence_md(dev.d)
        lines.append(f"- merges (M/F): kernel {dev.kernel_merges}, emulator "
                     f"{dev.emulator_merges}; mean request: kernel "
                     f"{mean_kib(dev.kernel_sizes):.1f} KiB, emulator "
                     f"{mean_kib(dev.emulator_sizes):.1f} KiB")
        lines.append("")
        sizes = sorted(set(dev.kernel_sizes) | set(dev.emulator_sizes))
        lines += _histogram_md("request sizes (KiB)", dev.kernel_sizes, dev.emulator_sizes,
                               sizes)
        lines += _histogram_md("seeks (sectors from the previous request's end)",
                               dev.kernel_seeks, dev.emulator_seeks,
                               [b[0] for b in SEEK_BUCKETS])
    return "\n".join(lines) + "\n"
