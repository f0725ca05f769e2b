"""`reproduce raid5`'s VM rows: the thread's dd job (jobs/raid5-split-order.fio,
both variants) on the real kernels (legacy -> Debian's 6.12.118, fixed
-> the tinyconfig build with seed 000's patch) beside the emulator on the same null_blk-like
members, as reference.compare_jobs runs them: member request order and
sizes, merges and zero-distance seeks, with the thread's figures.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from harness.vm import diff, machine, reference

THREAD = {"legacy": (93.34, 45.5), "fixed": (112.00, 75.0)}   # rareq-sz KiB, 0-distance %
KERNELS = ("debian-6.12", "fixed")


def figures(devices: list) -> dict:
    """Kernel and emulator figures over the members (m0..) of one job."""
    out = {}
    members = [d for d in devices if d.name.startswith("m") and d.name[1:].isdigit()]
    for side in ("kernel", "emulator"):
        sizes = sum((getattr(d, f"{side}_sizes") for d in members), Counter())
        seeks = sum((getattr(d, f"{side}_seeks") for d in members), Counter())
        n = sum(seeks.values())
        out[side] = {"rareq_kib": diff.mean_kib(sizes),
                     "zero_seek_pct": 100.0 * seeks.get("0", 0) / n if n else 0.0,
                     "merges": sum(getattr(d, f"{side}_merges") for d in members),
                     "requests": sum(sizes.values())}
    out["q_identical"] = all(d.q.identical for d in devices)
    out["d_identical"] = all(d.d.identical for d in members)
    return out


def table(jobs_dir: Path, out_dir: Path, progress) -> tuple:
    """(text, metrics) of the VM rows; text says why when the VM is not
    prepared here (reproduce never builds kernels: harness/vm/prepare.sh)."""
    if why := machine.can_run_qemu():
        return f"VM reference: not run ({why})", {}
    if not machine.prepared(KERNELS):
        return ("VM reference: not run (the kernels are not prepared: harness/vm/prepare.sh, "
                "or ./mdsplit reference --vm jobs/raid5-split-order.fio)"), {}
    progress("VM reference: raid5-split-order.fio on Debian's 6.12 and the patched 6.12")
    out = reference.compare_jobs(jobs_dir / "raid5-split-order.fio", out_dir / "vm-reference",
                                 progress=progress)
    if out.rc not in (0, 1) or not out.devices:
        return "VM reference: the run failed (see the lines above)", {}
    lines = ["VM reference (real kernel code under QEMU TCG, null_blk members; per member "
             "request, all members):",
             "| variant | kernel | rareq-sz KiB kernel / emulator / thread | 0-distance seeks % "
             "kernel / emulator / thread | merges kernel / emulator | Q order | D order |",
             "|---|---|---|---|---|---|---|"]
    metrics = {}
    for v, kernel in (("legacy", "debian-6.12"), ("fixed", "fixed")):
        f = figures(out.devices[v])
        k, e = f["kernel"], f["emulator"]
        lines.append(
            f"| {v} | {kernel} | {k['rareq_kib']:.2f} / {e['rareq_kib']:.2f} / "
            f"{THREAD[v][0]:.2f} | {k['zero_seek_pct']:.1f} / {e['zero_seek_pct']:.1f} / "
            f"{THREAD[v][1]:.1f} | {k['merges']} / {e['merges']} | "
            f"{'identical' if f['q_identical'] else 'differs'} | "
            f"{'identical' if f['d_identical'] else 'differs'} |")
        metrics.update({f"vm.{v}.kernel_rareq_kib": k["rareq_kib"],
                        f"vm.{v}.kernel_zero_seek_pct": k["zero_seek_pct"]})
    lines.append(f"(diff.md: {out_dir / 'vm-reference' / 'diff.md'})")
    return "\n".join(lines), metrics
