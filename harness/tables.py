"""Tables the reproductions print: fio's jobs, a sidecar's devices as
`iostat -x` rows, and the thread's published figures beside ours (from
jobs/expectations.toml). Used by harness/experiments/* and by the report
(harness/reproduce.py)."""
from harness import expectations as exp_mod
from harness.expectations import fmt
from harness.sidecar import Sidecar

IOSTAT_COLUMNS = ["r_s", "rkB_s", "rrqm_s", "pct_rrqm", "r_await_ms", "rareq_sz_kb",
                  "w_s", "wkB_s", "w_await_ms", "aqu_sz", "pct_util"]


def iostat_table(sidecar: Sidecar) -> str:
    """The sidecar's devices as `iostat -x` rows."""
    head = f"{'Device':<8}" + "".join(f"{c:>12}" for c in IOSTAT_COLUMNS)
    rows = [head]
    for d in sidecar.devices:
        rows.append(f"{d['name']:<8}" + "".join(f"{d[c]:>12.2f}" for c in IOSTAT_COLUMNS))
    return "\n".join(rows)


def job_table(result) -> str:
    """One row per fio job: IOPS, MiB/s, mean completion latency, errors."""
    rows = [f"{'job':<32}{'read IOPS':>12}{'read MiB/s':>12}{'write IOPS':>12}"
            f"{'write MiB/s':>12}{'clat mean us':>14}{'errors':>8}"]
    for j in result.jobs:
        clat = max(j["read"]["clat_ns"]["mean"], j["write"]["clat_ns"]["mean"]) / 1000
        rows.append(f"{j['jobname']:<32}{j['read']['iops']:>12.0f}{j['read']['bw'] / 1024:>12.1f}"
                    f"{j['write']['iops']:>12.0f}{j['write']['bw'] / 1024:>12.1f}{clat:>14.1f}"
                    f"{j['error']:>8}")
    return "\n".join(rows)


def thread_table(name: str, metrics: dict, expectations=None) -> str:
    """The thread's published figures beside ours ('' when the thread has none)."""
    expectations = expectations if expectations is not None else exp_mod.load()
    e = expectations.get(name)
    if e is None:
        return ""
    figs = [(n, m) for n, m in e.metrics.items() if m.thread is not None]
    if not figs:
        return ""
    w = max(len(n) for n, _ in figs) + 2
    rows = [f"{'metric':<{w}}{'unit':<8}{'thread':>12}{'mdsplit':>12}{'mdsplit/thread':>16}"]
    for n, m in figs:
        ours = metrics.get(n)
        ratio = f"{ours / m.thread:.3f}" if ours is not None and m.thread else "-"
        rows.append(f"{n:<{w}}{m.unit:<8}{fmt(m.thread):>12}"
                    f"{fmt(ours) if ours is not None else '-':>12}{ratio:>16}")
    return "\n".join(rows)
