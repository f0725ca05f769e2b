"""Seed 001: direct-I/O bio size against the device's max_sectors; a 64 MiB
direct read and write (dd bs=64m), five rounds, on a UFS member with
max_sectors 512 KiB, for the original / align / max_sectors bio policies."""
from pathlib import Path

from harness.experiment import ExperimentResult
from harness.fio_runner import run_fio

NAME = "bio-size"
TITLE = "Direct-I/O bio sizing vs max_sectors (dd bs=64m x5, ufs, max_sectors 512 KiB)"
SEEDS = ["001_514a3f5c1dbaada1.txt"]
POLICIES = ["original", "max_sectors", "align"]
LABELS = {"original": "Original", "max_sectors": "Limited to max_sectors", "align": "Aligned 256KB"}
# The thread's table (seed 001): "Sequential Read/Write (average of 5 rounds)".
THREAD = {
    "read": {"original": 3033.7, "max_sectors": 3520.9, "align": 3471.5},
    "write": {"original": 2225.4, "max_sectors": 2800.3, "align": 2618.1},
}


def distribution(counts: dict, top: int = 6) -> str:
    """'1024 x 640, 128 x 300, ...' (sectors x count), largest counts first."""
    items = sorted(((int(k), v) for k, v in counts.items()), key=lambda kv: -kv[1])
    shown = ", ".join(f"{k} x {v}" for k, v in items[:top])
    more = len(items) - top
    return shown + (f", ... ({more} more sizes)" if more > 0 else "")


def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult:
    result = ExperimentResult(NAME)
    progress("fio bio-align.fio (3 policies x read/write, 5 rounds each)")
    fio = run_fio(jobs_dir / "bio-align.fio")
    result.raw["fio"] = fio.fio
    sizes = {}
    for rw in ("read", "write"):
        lines = [f"Sequential {rw.capitalize()} (average of 5 rounds)", f"{'':<26}{'ours MB/s':>12}"
                 f"{'thread MB/s':>14}{'ours / original':>17}{'thread / original':>19}"]
        # In device time: the stacks run in slow motion (time_scale in the TOML).
        ours = {p: fio.job(f"{rw}-{p}")[rw]["bw_bytes"] / 1e6 *
                fio.sidecars[f"stats/bio-{rw}-{p}.json"].time_scale for p in POLICIES}
        for p in POLICIES:
            lines.append(f"{LABELS[p] + ':':<26}{ours[p]:>12.1f}{THREAD[rw][p]:>14.1f}"
                         f"{ours[p] / ours['original']:>17.3f}"
                         f"{THREAD[rw][p] / THREAD[rw]['original']:>19.3f}")
            result.metrics[f"{rw}.{p}_MBps"] = ours[p]
        result.tables.append("\n".join(lines))
    dist = ["Bio sizes (md0 Q) and device request sizes (m0 D), sectors x count, read jobs"]
    for p in POLICIES:
        sidecar = fio.sidecars[f"stats/bio-read-{p}.json"]
        bios = sidecar.virtual.get("bio_sizes", {})
        reqs = sidecar.members[0].get("request_sizes", {})
        sizes[p] = {"bios": bios, "requests": reqs}
        seq = sidecar.members[0]["seek"]
        dist.append(f"  {p:<12} bios: {distribution(bios)}")
        dist.append(f"  {'':<12} requests: {distribution(reqs)}; sequential issues "
                    f"{100 * seq['zero_ratio']:.1f}%")
        result.metrics[f"read.{p}_sequential_pct"] = 100 * seq["zero_ratio"]
    result.tables.append("\n".join(dist))
    result.raw["sizes"] = sizes
    try:
        from harness import plots
        for kind in ("bios", "requests"):
            path = out_dir / f"bio-size-{kind}.png"
            plots.size_distributions({p: sizes[p][kind] for p in POLICIES}, path,
                                     title=f"{'Bio' if kind == 'bios' else 'Device request'} sizes per policy (64 MiB reads)",
                                     xlabel="size (sectors)", ylabel="count")
            result.figures.append(path.name)
    except (ImportError, AttributeError, TypeError):
        pass
    kernel_reference(result, sizes, out_dir, progress)
    return result


# --- kernel reference (issue 4 item 5; harness/reference.py) ---------------------

def kernel_reference(result: ExperimentResult, sizes: dict, out_dir: Path, progress) -> None:
    """The same 64 MiB direct read and write on this machine's kernel (fio's
    psync and io_uring engines on a loop device with max_sectors_kb 512,
    traced), its bio and request sizes beside ours: a table, "kernel."
    metrics (sizes and shares, no direction: `check` does not judge them),
    a figure, and job files / traces in out_dir/kernel-reference. Where the
    machine cannot (not root, no loop device, no tracefs) or
    MDSPLIT_NO_REFERENCE is set, one line says why."""
    import os
    try:
        from harness import reference
    except ImportError:
        return
    if os.environ.get("MDSPLIT_NO_REFERENCE"):
        result.tables.append("Kernel reference: skipped (MDSPLIT_NO_REFERENCE is set)")
        return
    try:
        ref = reference.bio_size_reference(keep_dir=out_dir / "kernel-reference", progress=progress)
    except reference.ReferenceUnavailable as e:
        result.tables.append(f"Kernel reference: skipped: {e}")
        return
    result.tables.extend(reference.format_bio_size(ref, sizes, "emulator"))
    result.metrics.update(ref.metrics("kernel."))
    result.raw["kernel"] = ref.as_dict()
    result.raw["kernel_reference"] = "kernel-reference"
    base = ref.row("psync", "malloc", "read")
    if base is None or "original" not in sizes:
        return
    try:
        from harness import plots
        for kind in ("bios", "requests"):
            path = out_dir / f"bio-size-kernel-{kind}.png"
            plots.size_distribution(
                path, {f"kernel {ref.kernel} ({base.label})": getattr(base.dist, kind),
                       "emulator (original)": sizes["original"][kind]},
                unit="sectors", bins="log2",
                title=f"{'Bio' if kind == 'bios' else 'Request'} sizes, 64 MiB direct read: "
                      f"kernel vs emulator")
            result.figures.append(path.name)
    except (ImportError, AttributeError, TypeError, ValueError):
        pass
