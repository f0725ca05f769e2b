"""Tests' way to the one virtual-time driver: fio jobs on a stack text,
through mdsplit.run_fio_jobs (what `harness simulate` of a job file runs).
job() writes a job dict from fio-like words; run() writes the stack file
and returns (per-job results, the stack's statistics)."""
import json
from pathlib import Path


def job(rw: str, bs: int = 4096, *, total: int = 0, runtime_ns: int = 0, start_ns: int = 0,
        **keys) -> dict:
    """A run_fio_jobs job dict: rw [rand]read|write|trim, bs bytes
    for every direction, total = io_size (bytes in all), runtime_ns makes it
    time_based, start_ns its startdelay; other keys (iodepth, offset, size,
    group, group_weight, prio, prioclass, think_ns, seed, name, pid, direct,
    ...) as run_fio_jobs takes them."""
    random = rw.startswith("rand")
    op = rw[4:] if random else rw
    if op not in ("read", "write", "trim"):
        raise ValueError(f"rw={rw}: read, write, trim or their rand forms")
    spec = {"random": random, "read_pct": 100 if op == "read" else 0,
            "bs_read": [(bs, 100)], "bs_write": [(bs, 100)], "bs_trim": [(bs, 100)]}
    if op == "trim":
        spec["trim"] = "trim"
    if total:
        spec["io_size"] = total
    if runtime_ns:
        spec.update(runtime_ns=runtime_ns, time_based=True)
    if start_ns:
        spec["start_delay_ns"] = start_ns
    spec.update(keys)
    return spec


def run(mdsplit, directory: Path, stack_text: str, jobs: list, data: bool = False):
    """The jobs on one stack (stack_text written to directory/stack.toml):
    (run_fio_jobs' per-job results, the stack's statistics as a dict)."""
    path = Path(directory) / "stack.toml"
    path.write_text(stack_text)
    out = mdsplit.run_fio_jobs([{"config": str(path)}], jobs, data=data)
    return out["jobs"], json.loads(out["stats"][0])


def member_bfq(stats: dict) -> dict:
    """The member's "bfq" statistics."""
    (member,) = [d for d in stats["devices"] if d["role"] == "member"]
    return member["bfq"]


def closed_loop(mdsplit, stack_text: str, rw: str, bs: int, iodepth: int, total: int) -> dict:
    """One job of `total` bytes at `iodepth` with no fio CPU time between a
    completion and the next submission (the device alone sets the pace),
    random offsets drawn with repeats: {"ios", "bytes", "errors", "elapsed_ns",
    "iops", "bandwidth_bps"} of its direction, and "stats" (the stack's)."""
    import tempfile
    direction = rw[4:] if rw.startswith("rand") else rw
    with tempfile.TemporaryDirectory(prefix="mdsplit-closed-loop-") as tmp:
        (r,), stats = run(mdsplit, tmp, stack_text,
                          [job(rw, bs, iodepth=iodepth, total=total, norandommap=True,
                               fio_submit_ns=0, fio_complete_ns=0)])
    d = r[direction]
    ns = r["runtime_ns"]
    return {"ios": d["ios"], "bytes": d["bytes"], "errors": d["errors"] + (r["error"] != 0),
            "elapsed_ns": ns, "iops": d["ios"] * 1e9 / ns, "bandwidth_bps": d["bytes"] * 1e9 / ns,
            "stats": stats}
