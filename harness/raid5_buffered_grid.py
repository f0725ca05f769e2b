"""`python3 -m harness.raid5_buffered_grid`: seed 000's buffered dd
(`dd if=./on-fs-file of=/dev/null bs=6400K`, Coly Li's Tested-by) on the
virtual clock, legacy vs fixed split order, over the array the mail does not
state: members x chunk x device class (docs/reproductions/raid5-buffered.md).

Each point is a pair of stacks that differ only in `split_order`, built from
jobs/raid5-fixed.toml's header (time_scale, [cpu], mq-deadline members)
with the read-ahead md sets in the thread's kernel: ra_kb = 2 x io_opt =
2 x chunk x data disks (raid5_set_limits() -> blk_apply_bdi_limits()),
md0 max_sectors 1 MiB (RAID5_MAX_REQ_STRIPES << RAID5_STRIPE_SHIFT), and
large folios (`folio_kb`), so read-ahead bios reach md larger than 1 MiB.
The page cache holds the whole file (no reclaim). Prints one line per point
with md0's GiB/s (x time_scale) for both orders and their ratio.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.paths import BUILD, ROOT, engine_path

MEMBERS = (4, 8, 12)
CHUNKS_KB = (64, 256, 512, 1024)
MODELS = ("sas-ssd-seed000", "nvme", "sata-ssd", "hdd")
FILE_MB = 1600     # 256 reads of 6400 KiB


def stack(order: str, chunk_kb: int, model: str, members: int, folio_kb: int) -> str:
    head = (ROOT / "jobs" / "raid5-fixed.toml").read_text().split("[[members]]")[0]
    head = re.sub(r"\[bio\]\ncontiguity = .*\n", "", head)  # dd's user buffer: not used
    head = head.replace('split_order = "fixed"', f'split_order = "{order}"')
    head = head.replace('chunk = "64k"', f'chunk = "{chunk_kb}k"')
    ra_kb = max(2 * chunk_kb * (members - 1), 128)  # max(2 x io_opt, VM_READAHEAD_PAGES)
    text = head + f'\n[page_cache]\nsize = "4g"\nra_kb = {ra_kb}\nfolio_kb = {folio_kb}\n'
    for i in range(members):
        text += (f'\n[[members]]\npath = "m{i}.img"\nsize = "1g"\nmodel = "{model}"\n'
                 f'max_sectors = "512k"\nqueue_depth = 32\n')
    return text


def md0_gib_s(work: Path, name: str, text: str) -> float:
    (work / f"{name}.toml").write_text(text)
    (work / f"{name}.fio").write_text(
        f"[{name}]\nioengine=external:{engine_path()}\nfilename=md0\ndirect=0\nrw=read\n"
        f"bs=6400k\niodepth=1\nsize={FILE_MB}m\nmdsplit_config={name}.toml\n"
        f"mdsplit_stats={name}.json\n")
    env = dict(os.environ, MDSPLIT_BUILD_DIR=str(BUILD), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "harness", "simulate", "--no-data", f"{name}.fio"],
                       cwd=work, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{name}: {r.stderr.strip()[-400:]}")
    d = json.loads((work / f"{name}.json").read_text())
    return d["devices"][0]["rkB_s"] * d.get("time_scale", 1) / 2**20


def point(work: Path, folio_kb: int, p) -> tuple:
    chunk_kb, model, members = p
    bw = {o: md0_gib_s(work, f"{o}-{model}-{members}-{chunk_kb}", stack(o, chunk_kb, model,
                                                                        members, folio_kb))
          for o in ("legacy", "fixed")}
    return chunk_kb, model, members, bw["legacy"], bw["fixed"], bw["fixed"] / bw["legacy"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m harness.raid5_buffered_grid")
    ap.add_argument("--folio-kb", type=int, default=64,
                    help="[page_cache] folio_kb (4 = single pages: bios of at most 1 MiB)")
    ap.add_argument("--members", type=int, nargs="*", default=MEMBERS)
    ap.add_argument("--chunk-kb", type=int, nargs="*", default=CHUNKS_KB)
    ap.add_argument("--model", nargs="*", default=MODELS)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    grid = list(itertools.product(a.chunk_kb, a.model, a.members))
    with tempfile.TemporaryDirectory(prefix="raid5-buffered-") as tmp:
        with ThreadPoolExecutor(a.jobs) as ex:
            for res in ex.map(lambda p: point(Path(tmp), a.folio_kb, p), grid):
                print("chunk=%5dk model=%-15s members=%2d legacy=%6.2f GiB/s "
                      "fixed=%6.2f GiB/s ratio=%.2f" % res, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
