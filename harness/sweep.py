"""`python3 -m harness sweep [raid5]`: the parameters a reproduction's fit
does not pin, drawn over stated ranges (each with its source), each draw one
virtual-clock run (`--no-data`) in parallel over the cores; every thread
figure is then printed as a band (median, 10-90 %) with its verdict
(harness/bands.py: PASS / MISS against the band's median within the
figure's tolerance, "not determined by the evidence" past +-25 %).

The draws are seeded (SEED): the same table on every machine.
"""
from __future__ import annotations

import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import bands
from harness.paths import ROOT

SEED = 39


@dataclass
class Param:
    name: str          # what the table calls it
    lo: float
    hi: float
    unit: str
    source: str
    keys: callable     # value -> {stack file: {dotted key: TOML text}}


# RAID5 (seeds 000/002): both stack files get the same draw.
def _both(key, text):
    return {f"raid5-{v}.toml": {key: text} for v in ("legacy", "fixed")}


G_SCALE_US = 131.65    # 28 x submit_bio + 8 x dispatch, the fixed column's G lines


def _cpu(ratio):
    submit = G_SCALE_US / (28 + 8 * ratio)
    return {f"raid5-{v}.toml": {"cpu.submit_bio": f'"{submit:.3f}us"',
                                "cpu.dispatch": f'"{submit * ratio:.3f}us"'}
            for v in ("legacy", "fixed")}


RAID5 = [
    Param("random_penalty", 60, 140, "us",
          "a TLC page read the drive's prefetch did not hide: tR 50-100 us (TLC NAND "
          "datasheets) plus transfer; issue 39's 60-140 us",
          lambda x: _both("models.sas-ssd-seed000.random_penalty", f'"{x:.1f}us"')),
    Param("command", 10, 40, "us", "SAS SSD command overhead (SCSI + FTL lookup), 10-40 us class",
          lambda x: _both("models.sas-ssd-seed000.command", f'"{x:.1f}us"')),
    Param("prefetch_threshold", 32, 128, "KiB",
          "the request size after which a drive keeps a stream prefetched: 32-128 KiB "
          "(unknown for the thread's drive)",
          lambda x: _both("models.sas-ssd-seed000.prefetch_threshold",
                          f'"{int(round(x / 4) * 4)}k"')),
    Param("dispatch/submit_bio", 1, 5, "x",
          "the CPU ratio the fixed G lines do not pin (one equation, 28 calls + 8 "
          "dispatches = 131.65 us); a driver dispatch costs 1-5 submit_bio calls",
          _cpu),
    Param("layout seed", 1, 9, "", "the dd buffer's allocator model (jobs/raid5-*.toml)",
          lambda x: _both("bio.contiguity.seed", str(int(round(x))))),
]

SWEEPS = {"raid5": ("raid5-split-order.fio", "harness.experiments.raid5:run_figures", RAID5, 36)}


def draws(params: list, n: int, seed: int = SEED) -> list:
    """n draws, each a value per parameter, uniform over its range (seeded)."""
    rng = random.Random(seed)
    return [[rng.uniform(p.lo, p.hi) for p in params] for _ in range(n)]


def setting(params: list, values: list) -> dict:
    out = {}
    for p, x in zip(params, values):
        for f, keys in p.keys(x).items():
            out.setdefault(f, {}).update(keys)
    return out


def sweep(name: str, jobs_dir: Path = None, n: int = None, workers: int = None,
          out=sys.stdout) -> dict:
    """Runs the sweep, prints the parameters and the band table; returns
    {metric: (median, p10, p90)}."""
    from harness import expectations as E
    job, figures, params, default_n = SWEEPS[name]
    n = n or default_n
    jobs_dir = Path(jobs_dir or ROOT / "jobs")
    values = draws(params, n)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"mdsplit-sweep-{name}-") as tmp:
        runs = bands.run_settings(jobs_dir, Path(tmp), job, [setting(params, v) for v in values],
                                  figures, workers=workers)
    wall = time.monotonic() - t0
    b = bands.bands(runs)
    print(f"== sweep {name}: {n} draws on the virtual clock (--no-data), {wall:.0f} s wall",
          file=out)
    for p in params:
        print(f"  {p.name}: {p.lo:g}..{p.hi:g} {p.unit} ({p.source})", file=out)
    metrics = E.load()[name].metrics
    rows = []
    for metric, band in b.items():
        m = metrics.get(metric)
        if m is None or m.thread is None:
            continue
        rows.append((metric, m.thread, band,
                     bands.verdict(band, m.thread, m.tolerance, m.abs_tolerance)))
    print(bands.band_table("each thread figure over the draws: median, 10-90 % band", rows),
          file=out)
    return b

