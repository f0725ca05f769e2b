"""How the RAID5 legacy prediction depends on one property of the thread's
member SSDs that neither column of the thread measures: how far the drive's
read prefetch reaches past a streaming read (`prefetch_window` of the timing
model; 0 in the shipped sas-ssd-seed000, where every forward skip breaks the
stream).

For each reach, the member bandwidth is refitted on the FIXED column's member
rMB/s (658.44 MiB/s), exactly as jobs/models.toml fits the shipped model, and
the legacy column is then predicted. The fixed column's only skips are the
64 KiB parity chunks, so every reach of at least 64 KiB gives it the same
fit; the legacy column's skips are 64 KiB, 128 KiB, 256..512 KiB and
512..1024 KiB (its seek histogram), so its prediction moves with the reach.
Virtual clock (`harness simulate`), deterministic. docs/reproductions/raid5.md, "RAID5 split
order", "The drive's prefetch reach".

Run: MDSPLIT_BUILD_DIR=$PWD/build python3 docs/raid5_prefetch_reach.py
(about 1 minute: a secant fit of the bandwidth per reach).
"""
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.experiment import simulate_copy  # noqa: E402
from harness.experiments.raid5 import variant_figures  # noqa: E402

FIXED_MEMBER_MIBPS = 658.44  # the thread's fixed sd* rMB/s: the one fitted figure
THREAD_LEGACY = {"md0_MBps": 3276.87, "member_r_s": 4487.0, "member_rrqm_s": 2054.0}
REACHES = ["0", "64k", "request", "128k", "256k", "512k", "1m"]


def run(reach: str, bandwidth: int, work: Path) -> dict:
    """Both variants on the virtual clock with the member model's bandwidth
    and prefetch_window replaced; returns {variant: metrics}."""
    jobs = work / "jobs"
    if jobs.exists():
        shutil.rmtree(jobs)
    shutil.copytree(ROOT / "jobs", jobs, ignore=shutil.ignore_patterns("logs"))
    window = f'"{reach}"' if not reach.isdigit() else reach
    for v in ("legacy", "fixed"):
        stack = jobs / f"raid5-{v}.toml"
        text = stack.read_text()
        text, n = re.subn(r"(?ms)^(\[models\.sas-ssd-seed000\]\n.*?)^bandwidth = \S+$",
                          rf"\g<1>bandwidth = {bandwidth}\nprefetch_window = {window}", text)
        assert n == 1, stack
        stack.write_text(text)
    out = work / "out"
    if out.exists():
        shutil.rmtree(out)
    fio = simulate_copy(jobs, "raid5-split-order.fio", out, data=False)
    return {v: variant_figures(fio, v)[3] for v in ("legacy", "fixed")}


def fit(reach: str, work: Path) -> tuple:
    """The bandwidth (bytes/s, to 1 MB/s) at which the fixed member rMB/s is
    the thread's, by the secant method from 0.8 and 1.2 GB/s."""
    b0, b1 = 800_000_000, 1_200_000_000
    f0 = run(reach, b0, work)["fixed"]["member_MBps"] - FIXED_MEMBER_MIBPS
    f1 = run(reach, b1, work)["fixed"]["member_MBps"] - FIXED_MEMBER_MIBPS
    for _ in range(6):
        if abs(f1) < 0.5 or f1 == f0:
            break
        b0, b1, f0 = b1, int(round(b1 - f1 * (b1 - b0) / (f1 - f0), -6)), f1
        f1 = run(reach, b1, work)["fixed"]["member_MBps"] - FIXED_MEMBER_MIBPS
    return b1, run(reach, b1, work)


def main() -> None:
    print("reach    bandwidth  fixed sd rMB/s | legacy md0 MiB/s   sd r/s        sd rrqm/s")
    with tempfile.TemporaryDirectory() as tmp:
        for reach in REACHES:
            bw, m = fit(reach, Path(tmp))
            leg = m["legacy"]
            cells = [f"{leg[k]:8.1f} ({100 * (leg[k] / t - 1):+5.1f} %)" for k, t in THREAD_LEGACY.items()]
            print(f"{reach:8} {bw / 1e9:5.3f} GB/s  {m['fixed']['member_MBps']:7.2f}      | "
                  + "  ".join(cells), flush=True)
    print("thread: legacy md0 3276.87 MiB/s, sd 4487 r/s, rrqm/s 2054; fixed sd rMB/s 658.44")


if __name__ == "__main__":
    main()
