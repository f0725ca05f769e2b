"""Seeds 000/002: md RAID5 recursive split order, `dd bs=4480k iflag=direct`
on 8 SATA SSDs with 64 KiB chunks, legacy vs fixed."""
from pathlib import Path

from harness.experiment import (ExperimentResult, clock_agreement_table, engine_under_test,
                                simulate_copy, use_engine_under_test)
from harness.device_time import DeviceTime
from harness.fio_runner import run_fio

NAME = "raid5"
EXPECTATIONS = "raid5"  # its section of jobs/expectations.toml
JOB = "raid5-split-order.fio"  # in jobs/
TITLE = ("md RAID5 recursive split order (dd bs=4480k, 64 KiB chunks, 8 x sas-ssd-seed000 fitted on "
         "the fixed column, dd's CPU from the thread's trace)")
SEEDS = ["000_fa5278d1f568ad45.txt", "002_8e50d1a4837276ef.txt"]
ORDER = 10  # `reproduce all` runs the experiments by ORDER, then name
DURATION = (14.0, 2)  # (s, steps) when the history has no run (2-core VM)
VARIANTS = ["legacy", "fixed"]

# The thread's figures (seed 000, "Test results"): iostat lines and the seek
# histogram of one member.
THREAD = {
    "legacy": {"md0": {"r_s": 52430.00, "rMB_s": 3276.87, "r_await_ms": 0.62, "rareq_sz_kb": 64.00,
                       "aqu_sz": 32.60, "pct_util": 80.10},
               "sd": {"r_s": 4487.00, "rMB_s": 409.00, "rrqm_s": 2054.00, "pct_rrqm": 31.40,
                      "r_await_ms": 0.82, "rareq_sz_kb": 93.34, "aqu_sz": 3.68, "pct_util": 71.20},
               "seek_zero_pct": 45.5},
    "fixed": {"md0": {"r_s": 87965.00, "rMB_s": 5271.88, "r_await_ms": 0.16, "rareq_sz_kb": 61.37,
                      "aqu_sz": 14.03, "pct_util": 90.60},
              "sd": {"r_s": 6020.00, "rMB_s": 658.44, "rrqm_s": 5117.00, "pct_rrqm": 45.95,
                     "r_await_ms": 0.44, "rareq_sz_kb": 112.00, "aqu_sz": 2.68, "pct_util": 86.50},
              "seek_zero_pct": 75.0},
}
# The thread's member seek histograms (seed 000 lines 86-97 and 116-123), in
# its tool's convention: rows (lo, hi] KiB, a 64 KiB distance in "32 .. 64".
THREAD_SEEKS = {
    "legacy": {"count": 55175, "zero": 25079,
               "buckets": [25079, 0, 0, 0, 0, 0, 12540, 2508, 0, 10032, 5016, 0]},
    "fixed": {"count": 28644, "zero": 21483,
              "buckets": [21483, 0, 0, 0, 0, 0, 7161, 0, 0, 0, 0, 0]},
}
# The thread's histogram is one disk's ("io seek for sdx"); its blktrace G
# lines (seed 000 lines 73-79, on sda) show which: rows 9, 7, 8 ending one
# read and 5, 3, 0, 2 starting the next, with parity at rows 1 and 9 of that
# read, the pattern of md's even members (left-symmetric: the parity rotation
# gives even and odd members two different patterns). The checked rows
# compare that member's histogram with it (docs/reproductions/raid5.md).
TRACED_MEMBER = 0
# The thread's iostat "sd*" line is one disk too, and not the traced one.
# iostat -x prints no aggregate of several devices, and the line's per-second
# counts are whole numbers in both columns (4487.00 r/s, 2054.00 rrqm/s;
# 6020.00, 5117.00), as one disk's one-second interval gives them (a mean of 8
# disks is a multiple of 1/8). Its bios per request, (4487 + 2054) / 4487 =
# 1.458 = 35/24, say 24 requests per parity period (4 reads, 35 chunk bios a
# member), where the traced disk's histogram has 22 seeks a period (2508
# periods of 10 + 5 + 1 + 4 + 2). Our members fall in the same two classes
# by their place in the rotation: the even ones make 23 requests a period,
# the odd ones 24. Which class the line's disk is in is read off the fit
# column: the fixed line's %rrqm 45.95 is an odd member's (47.37; even 42.86);
# the legacy column, a prediction, agrees (31.40 against odd 31.43, even
# 34.29). So the member figures are checked on the odd members (identical on
# the virtual clock); every member's rMB/s is the same (each reads 560 KiB a
# read), so the fit does not depend on it. The all-member mean and the even
# members are printed beside (docs/reproductions/raid5.md).
IOSTAT_MEMBERS = slice(1, None, 2)
SEEK_LABELS = ["0 .. 1", "1 .. 2", "2 .. 4", "4 .. 8", "8 .. 16", "16 .. 32", "32 .. 64",
               "64 .. 128", "128 .. 256", "256 .. 512", "512 .. 1024", ">= 1024"]
COLUMNS = [("r/s", "r_s"), ("rMB/s", "rMB_s"), ("rrqm/s", "rrqm_s"), ("%rrqm", "pct_rrqm"),
           ("r_await", "r_await_ms"), ("rareq-sz", "rareq_sz_kb"), ("aqu-sz", "aqu_sz"),
           ("%util", "pct_util")]


def iostat_row(d: dict, dt: DeviceTime = DeviceTime()) -> dict:
    """iostat's fields in device time (harness/device_time.py)."""
    row = dict(d)
    for k in ("r_s", "rkB_s", "rrqm_s"):
        row[k] = dt.rate(d[k])
    row["r_await_ms"] = dt.duration(d["r_await_ms"])
    row["rMB_s"] = row["rkB_s"] / 1024  # iostat's rMB/s is MiB/s (sectors / 2048)
    return row


def member_mean(members: list, dt: DeviceTime) -> dict:
    keys = ["r_s", "rkB_s", "rrqm_s", "pct_rrqm", "r_await_ms", "rareq_sz_kb", "aqu_sz", "pct_util"]
    mean = {k: sum(m[k] for m in members) / len(members) for k in keys}
    return iostat_row(mean, dt)


def seek_totals(members: list, key: str = "buckets_kb") -> tuple:
    """Seek buckets summed over the members: key "buckets_kb" is ours ([lo, hi)
    KiB), "buckets_kb_thread" the thread's tool's convention ((lo, hi] KiB).
    One member: seek_totals([members[i]], key)."""
    buckets = [sum(m["seek"][key][i] for m in members) for i in range(len(SEEK_LABELS))]
    count = sum(m["seek"]["count"] for m in members)
    zero = sum(m["seek"]["zero_count"] for m in members)
    return buckets, count, zero


def iostat_table(variant: str, md0: dict, sd: dict, members: list, dt: DeviceTime,
                 clock: str = "virtual clock") -> str:
    """md0 and the thread's one sd* disk against ours (`sd`: the odd members,
    IOSTAT_MEMBERS), then our even members and all members for information."""
    head = f"{'Device':<16}" + "".join(f"{c:>10}" for c, _ in COLUMNS)
    lines = [f"{variant}: iostat (ours on the {clock}, then the thread's; sd* odd: the class of "
             "the thread's one sd* disk, checked)", head]

    def row(label, d):
        lines.append(f"{label:<16}" + "".join(f"{d.get(k, 0):>10.2f}" for _, k in COLUMNS))

    for label, ours, theirs in (("md0", md0, THREAD[variant]["md0"]),
                                ("sd* odd", sd, THREAD[variant]["sd"])):
        row(label, ours)
        lines.append(f"{'  thread':<16}" + "".join(
            f"{theirs[k]:>10.2f}" if k in theirs else f"{'-':>10}" for _, k in COLUMNS))
    row("sd* even (info)", member_mean(members[0::2], dt))
    row("sd* all (info)", member_mean(members, dt))
    return "\n".join(lines)


def seek_pcts(buckets: list, count: int) -> list:
    return [100.0 * n / count if count else 0.0 for n in buckets]


def seek_compare_table(variant: str, members: list, traced: list) -> str:
    """The thread's one disk against the same member of ours (TRACED_MEMBER;
    `traced`: its % per row, the checked figures), in the thread's convention
    ((lo, hi] KiB), with our even and odd members' histograms and their mean
    beside it for information."""
    key = "buckets_kb_thread"
    even = seek_pcts(*seek_totals(members[0::2], key)[:2])
    odd = seek_pcts(*seek_totals(members[1::2], key)[:2])
    mean = seek_pcts(*seek_totals(members, key)[:2])
    t = THREAD_SEEKS[variant]
    theirs = seek_pcts(t["buckets"], t["count"])
    lines = [f"{variant}: seek histogram in the thread's convention ((lo, hi] KiB: 64 KiB is "
             f"\"32 .. 64\"), % of seeks: member {TRACED_MEMBER} (the thread's traced disk, "
             "checked) vs the thread's sdx; even/odd members and all members for information",
             f"{'(lo, hi] KiB':>15}   {'m' + str(TRACED_MEMBER):>7} {'thread':>7} {'diff':>7}"
             f"   {'even':>7} {'odd':>7} {'all':>7}"]
    for i, label in enumerate(SEEK_LABELS):
        lab = "> 1024" if label == ">= 1024" else label
        lines.append(f"{lab:>15}   {traced[i]:7.1f} {theirs[i]:7.1f} {traced[i] - theirs[i]:+7.1f}"
                     f"   {even[i]:7.1f} {odd[i]:7.1f} {mean[i]:7.1f}")
    return "\n".join(lines)


def seek_table(variant: str, buckets: list, count: int, zero: int,
               convention: str = "ours: [lo, hi) KiB, 64 KiB is \"64 .. 128\"") -> str:
    lines = [f"{variant}: io seek for sd* (D events, all members; {convention})",
             "Read|Write seek", f"cnt {count}, zero cnt {zero}",
             ">=(KB) .. <(KB)     : count      ratio |distribution                            |"]
    top = max(buckets) or 1
    for label, n in zip(SEEK_LABELS, buckets):
        ratio = 100.0 * n / count if count else 0.0
        bar = "#" * round(40 * n / top)
        lines.append(f"{label:>15}     : {n:<10} {ratio:5.1f}% |{bar:<40}|")
    return "\n".join(lines)


def variant_figures(fio, v: str) -> tuple:
    """One variant's iostat rows, seek buckets and metrics from a run's fio
    JSON and sidecar (the virtual-clock run and the real one alike)."""
    job = fio.job(v)
    sidecar = fio.sidecars[f"stats/raid5-{v}.json"]
    dt = DeviceTime.of(sidecar)
    md0 = iostat_row(sidecar.virtual, dt)
    sd = member_mean(sidecar.members[IOSTAT_MEMBERS], dt)
    buckets, count, zero = seek_totals(sidecar.members)
    metrics = {
        # MiB/s, as iostat's rMB/s (the thread: 52430 r/s x 64 KiB = 3276.87)
        "md0_MBps": dt.rate(job["read"]["bw_bytes"]) / 2**20,
        "md0_r_s": md0["r_s"],
        "md0_rMB_s": md0["rMB_s"],
        "member_r_s": sd["r_s"],
        "member_rrqm_s": sd["rrqm_s"],
        "member_pct_rrqm": sd["pct_rrqm"],
        "seek_zero_pct": 100.0 * zero / count if count else 0.0,
        "sd_rareq_kb": sd["rareq_sz_kb"],
        "sd_pct_rrqm": sd["pct_rrqm"],
        "sd_r_await_ms": sd["r_await_ms"],
        "md0_r_await_ms": md0["r_await_ms"],
        "member_MBps": sd["rMB_s"],
        "member_rareq_sz_kb": sd["rareq_sz_kb"],
    }
    return md0, sd, (buckets, count, zero), metrics, sidecar


def seek_row(distance_kib: float) -> int:
    """The thread's tool's row of a seek distance: "0 .. 1" for less than
    1 KiB, else (lo, hi] KiB rows doubling from "1 .. 2" to "> 1024"."""
    if distance_kib < 1:
        return 0
    row, hi = 1, 2
    while distance_kib > hi and row < len(SEEK_LABELS) - 1:
        row, hi = row + 1, hi * 2
    return row


def trace_figures(trace_dir: Path, member: int = TRACED_MEMBER) -> dict:
    """From one job's blktrace files (a `reference --vm` report's
    kernel/<job>/ or emulator/<job>/, or simulate's traces/<job>): one
    member's requests (D), merges (M/F), %rrqm as iostat computes it,
    rareq-sz and its seek rows in the thread's convention (% of seeks)."""
    from harness.blktrace import read_trace_dir
    recs = read_trace_dir(trace_dir)[f"m{member}"]
    d = [r for r in recs if r.action == "D"]
    merges = sum(1 for r in recs if r.action in ("M", "F"))
    rows = [0] * len(SEEK_LABELS)
    for prev, r in zip(d, d[1:]):
        rows[seek_row(abs(r.sector - (prev.sector + prev.nr_sectors)) / 2)] += 1
    n = max(len(d) - 1, 1)
    return {"requests": len(d), "merges": merges,
            "pct_rrqm": 100.0 * merges / (merges + len(d)) if d else 0.0,
            "rareq_sz_kb": sum(r.nr_sectors for r in d) / 2 / len(d) if d else 0.0,
            "seek_rows_pct": [100.0 * x / n for x in rows]}


# The layout distribution's seeds (jobs/raid5-*.toml [bio] contiguity): each
# seed is one dd process's buffer, the same seeds for both variants. The
# checked figures are the medians over them; the 10-90 % band is printed
# beside (harness/bands.py).
LAYOUT_SEEDS = list(range(1, 10))


def run_figures(fio) -> dict:
    """The checked figures of one run of raid5-split-order.fio (both
    variants): iostat figures of md0 and the odd members, the traced
    member's seek rows in the thread's convention."""
    out = {}
    for v in VARIANTS:
        _, _, _, metrics, sidecar = variant_figures(fio, v)
        out.update({f"{v}.{k}": x for k, x in metrics.items()})
        traced = seek_pcts(*seek_totals([sidecar.members[TRACED_MEMBER]], "buckets_kb_thread")[:2])
        for label, pct in zip(SEEK_LABELS, traced):
            key = label.replace(" .. ", "_").replace(">= ", "gt")
            out[f"{v}.seek_thread_pct_{key}"] = pct
    return out


def layout_settings(seeds=None) -> list:
    """One setting per layout seed, applied to both variants' stack files."""
    return [{f"raid5-{v}.toml": {"bio.contiguity.seed": str(k)} for v in VARIANTS}
            for k in (seeds or LAYOUT_SEEDS)]


def layout_band_table(b: dict) -> str:
    """The thread's figures against the band over the layout seeds."""
    from harness import bands
    from harness import expectations as E
    metrics = E.load().get(EXPECTATIONS).metrics
    rows = []
    for name, (med, lo, hi) in b.items():
        m = metrics.get(name)
        if m is None or m.thread is None:
            continue
        rows.append((name, m.thread, (med, lo, hi),
                     bands.verdict((med, lo, hi), m.thread, m.tolerance, m.abs_tolerance)))
    return bands.band_table(
        f"over {len(LAYOUT_SEEDS)} dd buffer layouts (one allocator model for both variants, "
        "jobs/raid5-*.toml [bio] contiguity seeds "
        f"{LAYOUT_SEEDS[0]}..{LAYOUT_SEEDS[-1]}): median and 10-90 % band; the checked figure is "
        "the median", rows)


def fit_table(m: dict) -> str:
    """The fit (one number, the member bandwidth, on the fixed column's member
    rMB/s; dd's CPU read off the thread's blktrace) and what it predicts
    (jobs/models.toml, [models.sas-ssd-seed000]; the stack files' [cpu])."""
    rows = [("fitted", "fixed", "member_MBps", "sd", "rMB_s"),
            ("fit check", "fixed", "member_r_s", "sd", "r_s"),
            ("fit check", "fixed", "sd_r_await_ms", "sd", "r_await_ms"),
            ("fit check", "fixed", "md0_r_await_ms", "md0", "r_await_ms"),
            ("prediction", "fixed", "md0_MBps", "md0", "rMB_s"),
            ("prediction", "legacy", "md0_MBps", "md0", "rMB_s"),
            ("prediction", "legacy", "md0_r_await_ms", "md0", "r_await_ms"),
            ("prediction", "legacy", "member_MBps", "sd", "rMB_s"),
            ("prediction", "legacy", "member_r_s", "sd", "r_s"),
            ("prediction", "legacy", "sd_r_await_ms", "sd", "r_await_ms")]
    lines = ["fit on the fixed column only: the sas-ssd-seed000 bandwidth on the member rMB/s "
             "(jobs/models.toml); dd's CPU ([cpu] submit_bio, dispatch) from the fixed column's "
             "blktrace G timestamps; medians over the layout seeds",
             f"{'role':<11} {'figure':<28} {'ours':>9} {'thread':>9} {'ours/thread':>11}"]
    for role, v, key, dev, tkey in rows:
        ours, theirs = m[f"{v}.{key}"], THREAD[v][dev][tkey]
        lines.append(f"{role:<11} {v + '.' + key:<28} {ours:>9.2f} {theirs:>9.2f} {ours / theirs:>11.3f}")
    return "\n".join(lines)


# The thread's G lines on its traced disk (seed 000): per variant, the reads
# they fall in (as `read % 4`, the parity phase: md's rotation repeats every
# 4 reads of 10 stripes), the member rows and the timestamps (s). Legacy, lines
# 73-79: the end of one read, then the start of the next (docs/reproductions/
# raid5.md); fixed, lines 105-112: every second row of one read, then of
# the next.
THREAD_G = {
    "legacy": {"phase": 2, "rows": ([9, 7, 8], [5, 3, 0, 2]),
               "times": [11.357392936, 11.357466360, 11.357515868, 11.357968099,
                         11.358031320, 11.358096298, 11.358303858]},
    "fixed": {"phase": 1, "rows": ([0, 2, 4, 6, 8], [0, 2, 4]),
              "times": [5.354894072, 5.355018179, 5.355204438, 5.355241048,
                        5.355500923, 5.355837806, 5.355960395, 5.356020772]},
}


def member_g_events(trace_dir: Path, member: int = TRACED_MEMBER) -> dict:
    """A member's new requests (blktrace G) of a job's trace, as
    {read: [(row within the read, time_ns), ...]} in trace order (10 rows a
    read, loop time)."""
    from harness.blktrace import read_trace_dir
    events = {}
    for rec in read_trace_dir(trace_dir).get(f"m{member}", []):
        if rec.action == "G":
            stripe = rec.sector // 128  # 64 KiB chunks
            events.setdefault(stripe // 10, []).append((stripe % 10, rec.time_ns))
    return events


def member_g_rows(trace_dir: Path, member: int = TRACED_MEMBER) -> dict:
    """member_g_events' rows alone: {read: [row, ...]}."""
    return {read: [row for row, _ in ev] for read, ev in member_g_events(trace_dir, member).items()}


def g_window(events: dict, variant: str) -> list:
    """Our G events matching the thread's lines: the tail of the read with
    the thread's parity phase among reads 4..7 (past the first reads) and
    the head of the next, as [(row, time_ns)]."""
    first, second = THREAD_G[variant]["rows"]
    read = 4 + THREAD_G[variant]["phase"]
    return events.get(read, [])[-len(first):] + events.get(read + 1, [])[:len(second)]


def _rows_text(rows: list, split: int) -> str:
    return " ".join(map(str, rows[:split])) + " | " + " ".join(map(str, rows[split:]))


def g_table(traces: Path, dts: dict) -> str:
    """The traced member's G lines, ours against the thread's: the order of
    the rows and the time between them (us, device time). The order is
    pinned by tests/py/test_raid5_plug_model.py; the times are information
    (docs/reproductions/raid5.md). dts: each variant's DeviceTime."""
    lines = [f"member {TRACED_MEMBER}'s new requests (blktrace G), ours (virtual clock) vs the "
             "thread's (seed 000 lines 73-79, 105-112): rows within a read | the next read, "
             "then the us between them (device time)"]
    for variant, thread in THREAD_G.items():
        ours = g_window(member_g_events(traces / variant), variant)
        split = len(thread["rows"][0])
        theirs = [1e6 * (b - a) for a, b in zip(thread["times"], thread["times"][1:])]
        mine = [dts[variant].duration(b[1] - a[1]) / 1000 for a, b in zip(ours, ours[1:])]
        lines += [f"{variant:<7} rows  thread {_rows_text(thread['rows'][0] + thread['rows'][1], split)}"
                  f"   ours {_rows_text([r for r, _ in ours], split)}",
                  f"{'':<7} us    thread " + " ".join(f"{x:6.1f}" for x in theirs),
                  f"{'':<7}       ours   " + " ".join(f"{x:6.1f}" for x in mine)]
    return "\n".join(lines)


def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult:
    result = ExperimentResult(NAME)
    engine_under_test()                 # a bad MDSPLIT_ENGINE fails at once
    # The checked figures: the job file on the virtual clock (deterministic).
    progress("simulate raid5-split-order.fio (virtual clock: the checked figures)")
    virtual = simulate_copy(jobs_dir, JOB, out_dir)
    # This machine: the same job file through fio and the engine, real clock.
    progress("fio raid5-split-order.fio (legacy, then fixed; this machine)")
    fio = run_fio(use_engine_under_test(jobs_dir / JOB))
    result.raw["fio"] = fio.fio
    result.raw["simulate"] = virtual.fio
    result.from_simulation(virtual)
    seeks = {}                          # the checked member's % per thread row
    for v in VARIANTS:
        md0, sd, (buckets, count, zero), metrics, sidecar = variant_figures(virtual, v)
        result.raw[f"sidecar_{v}"] = sidecar.devices
        result.tables.append(iostat_table(v, md0, sd, sidecar.members, DeviceTime.of(sidecar)))
        result.tables.append(seek_table(v, buckets, count, zero))
        tbuckets = seek_totals(sidecar.members, "buckets_kb_thread")[0]
        result.tables.append(seek_table(v, tbuckets, count, zero,
                                        "thread's convention: (lo, hi] KiB, 64 KiB is \"32 .. 64\""))
        traced = seek_pcts(*seek_totals([sidecar.members[TRACED_MEMBER]], "buckets_kb_thread")[:2])
        result.tables.append(seek_compare_table(v, sidecar.members, traced))
        seeks[v] = traced
        for label, pct in zip(SEEK_LABELS, traced):
            key = label.replace(" .. ", "_").replace(">= ", "gt")
            result.metrics[f"{v}.seek_thread_pct_{key}"] = pct
        result.metrics.update({f"{v}.{k}": x for k, x in metrics.items()})
        machine = variant_figures(fio, v)[3]
        result.metrics.update({f"machine.{v}.{k}": x for k, x in machine.items()})
    # The checked figures: medians over the layout seeds (one allocator
    # model, both variants), in parallel over the cores, --no-data.
    from harness import bands
    progress(f"simulate raid5-split-order.fio over {len(LAYOUT_SEEDS)} buffer layouts "
             "(virtual clock, --no-data)")
    runs = bands.run_settings(jobs_dir, out_dir / "layouts", JOB,
                              layout_settings(), f"{__name__}:run_figures")
    layout_bands = bands.bands(runs)
    for name, (med, lo, hi) in layout_bands.items():
        result.metrics[name] = med
        result.metrics[f"p10.{name}"] = lo
        result.metrics[f"p90.{name}"] = hi
    result.raw["layout_runs"] = runs
    result.tables.append(layout_band_table(layout_bands))
    m = result.metrics
    ratio = m["fixed.md0_MBps"] / m["legacy.md0_MBps"]
    result.tables.append(
        f"md0 throughput (fio, in device time: x time_scale, MiB/s as iostat): legacy {m['legacy.md0_MBps']:.0f}, fixed "
        f"{m['fixed.md0_MBps']:.0f}, fixed/legacy {ratio:.2f} (thread: 3276.87 -> 5271.88, 1.61)\n"
        f"zero-distance seeks: legacy {m['legacy.seek_zero_pct']:.1f}%, fixed "
        f"{m['fixed.seek_zero_pct']:.1f}% (thread: 45.5% -> 75.0%)\n"
        "Note: the order follows block/blk-core.c's two-list loop, not the thread's FIFO prose "
        "(docs/reproductions/raid5.md).\n"
        f"this machine (real-clock fio, not checked): legacy {m['machine.legacy.md0_MBps']:.0f} "
        f"MiB/s, fixed {m['machine.fixed.md0_MBps']:.0f} MiB/s (virtual / real: the clock "
        "agreement below)")
    result.tables.append(clock_agreement_table([("", virtual, fio)], result))
    result.tables.append(fit_table(m))
    result.tables.append(g_table(out_dir / "virtual-jobs" / "traces",
                                 {v: DeviceTime.of(virtual.sidecars[f"stats/raid5-{v}.json"])
                                  for v in VARIANTS}))
    # The real kernel's rows, when the VM is prepared (harness/vm/thread_raid5.py).
    from harness.vm import thread_raid5
    vm_text, result.raw["vm_reference"] = thread_raid5.table(jobs_dir, out_dir, progress)
    result.tables.append(vm_text)
    try:
        result.figures.append(seek_figure(out_dir, seeks).name)
    except (ImportError, AttributeError, TypeError):
        pass
    return result


def seek_figure(out_dir: Path, seeks: dict) -> Path:
    """raid5-seek-histogram.png: the checked member's seek rows (% per
    thread row, {variant: [pct]}) beside the thread's traced disk."""
    from harness import plots
    path = out_dir / "raid5-seek-histogram.png"
    return plots.seek_histogram_vs_thread(
        path, seeks, {v: seek_pcts(THREAD_SEEKS[v]["buckets"], THREAD_SEEKS[v]["count"])
                      for v in VARIANTS},
        ["> 1024" if s == ">= 1024" else s for s in SEEK_LABELS],
        member=f"member {TRACED_MEMBER}",
        title=f"Seek distance between member {TRACED_MEMBER}'s requests (blktrace D), "
              "ours on the virtual clock beside the thread's traced disk",
        caption=f"Each panel is one variant. Look at the 0 .. 1 row: seeks of zero "
                f"distance, {seeks['legacy'][0]:.1f} % of member {TRACED_MEMBER}'s requests "
                f"under legacy and {seeks['fixed'][0]:.1f} % under fixed (thread: 45.5 % "
                "and 75.0 %). Rows are the thread's (lo, hi] KiB, so a 64 KiB seek is in "
                f"32 .. 64; member {TRACED_MEMBER} is the checked one (the thread traced one "
                "disk); every other member's rows are in the tables above.")
