"""PNG figures for the reports (matplotlib, Agg backend: no display needed).

One figure per question; every axis says its unit. Each helper takes plain
dicts/lists and a path, writes the PNG (creating its directory) and returns
the path.

    bar_chart("bw.png", {"legacy": 3300, "fixed": 5200}, ylabel="md0 throughput (MB/s)",
              reference={"legacy": 3276.87, "fixed": 5271.88})
    histogram_compare("seek.png", {"legacy": seek_buckets(m0["seek"]["buckets_kb"]), ...})
    size_distribution("sizes.png", {"original": {1024: 60, 512: 3}, ...})
    line_plot("iops.png", {"forced-ra rasync on": {1: 10.8, 2: 21.2}}, xlabel="iodepth", ...)
    time_series("bw.png", {"test1": bw_log_series("test1_bw.1.log")}, ylabel="MiB/s")
"""
from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["SEEK_BUCKET_LABELS", "seek_buckets", "bar_chart", "histogram_compare",
           "seek_histogram_vs_thread", "drawn", "caption_of",
           "size_distribution", "line_plot", "time_series", "read_fio_log", "bw_log_series",
           "histogram_comparison", "size_distributions"]

# The sidecar's seek histogram (buckets_kb): |next - (prev + len)| in KiB,
# as in the thread's table (seed 000 lines 86-97).
SEEK_BUCKET_LABELS = ["0..1", "1..2", "2..4", "4..8", "8..16", "16..32", "32..64", "64..128",
                      "128..256", "256..512", "512..1024", ">=1024"]

_DPI = 110


def _pyplot():
    """matplotlib.pyplot on the Agg backend, imported when a figure is drawn:
    the commands that draw nothing (simulate, run, the helpers below that
    read fio's logs) work where matplotlib is not installed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def seek_buckets(buckets_kb) -> dict:
    """{label: count} from a sidecar's seek['buckets_kb'] list."""
    return {SEEK_BUCKET_LABELS[i] if i < len(SEEK_BUCKET_LABELS) else str(i): c
            for i, c in enumerate(buckets_kb)}


# Distinct line styles and markers, so that no series hides another: two
# series with the same values stay told apart by their marker and dash.
_STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1)), "v"),
           ((0, (1, 1)), "P"), ((0, (3, 1, 1, 1)), "X"), ((0, (5, 3)), "*")]


def _style(i: int) -> dict:
    ls, marker = _STYLES[i % len(_STYLES)]
    return {"linestyle": ls, "marker": marker}


def drawn(fig) -> dict:
    """What a figure shows, read back from its artists (not from the data
    given to the helper): per axes its title, axis labels, tick labels, bars
    (label and heights), lines (label, points, style), horizontal lines; and
    the texts that stick out of the figure (clipped)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    fb = fig.bbox
    out = {"axes": [], "clipped": []}
    for ax in fig.axes:
        bars = []
        for c in ax.containers:
            bars.append({"label": c.get_label(),
                         "heights": [float(r.get_height()) for r in c.patches]})
        lines = []
        for ln in ax.get_lines():
            xs, ys = ln.get_xdata(), ln.get_ydata()
            lines.append({"label": ln.get_label(), "x": [float(x) for x in xs],
                          "y": [float(y) for y in ys], "linestyle": str(ln.get_linestyle()),
                          "marker": str(ln.get_marker()), "color": str(ln.get_color()),
                          "markersize": float(ln.get_markersize()),
                          "linewidth": float(ln.get_linewidth())})
        out["axes"].append({
            "title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
            "xticklabels": [tl.get_text() for tl in ax.get_xticklabels()],
            "legend": [tx.get_text() for tx in (ax.get_legend().get_texts()
                                                if ax.get_legend() else [])],
            "bars": bars, "lines": lines})
        lo, hi = sorted(ax.get_xlim())
        shown = [tl for tl, loc in zip(ax.get_xticklabels(), ax.get_xticks()) if lo <= loc <= hi]
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label] + shown
        if ax.get_legend():
            texts += list(ax.get_legend().get_texts())
        for tx in texts:
            if not tx.get_text() or not tx.get_visible():
                continue
            bb = tx.get_window_extent(renderer)
            if bb.x0 < fb.x0 - 1 or bb.x1 > fb.x1 + 1 or bb.y0 < fb.y0 - 1 or bb.y1 > fb.y1 + 1:
                out["clipped"].append(tx.get_text())
    if fig._suptitle is not None:
        out["suptitle"] = fig._suptitle.get_text()
        bb = fig._suptitle.get_window_extent(renderer)
        if bb.x0 < fb.x0 - 1 or bb.x1 > fb.x1 + 1 or bb.y1 > fb.y1 + 1:
            out["clipped"].append(out["suptitle"])
    return out


def _save(fig, path, caption: str = "") -> Path:
    """Writes the PNG and, beside it (same name, .json), what it shows
    (drawn()) with its caption: the report's caption and the tests' data."""
    import json
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI, format="png")
    data = drawn(fig)
    data["caption"] = caption
    path.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    _pyplot().close(fig)
    return path


def caption_of(png) -> str:
    """The caption written beside a figure ('' when there is none)."""
    import json
    try:
        return json.loads(Path(png).with_suffix(".json").read_text()).get("caption", "")
    except (OSError, ValueError):
        return ""


def bar_chart(path, values: dict, *, ylabel: str, title: str = "", reference: dict = None,
              reference_label: str = "thread", ours_label: str = "mdsplit",
              caption: str = "", fitted: set = None) -> Path:
    """One bar per variant; with `reference` (e.g. the thread's figures), a
    second bar beside each. Our bars whose label is in `fitted` (a figure a
    model parameter was chosen on, or one that follows from such) are
    hatched: they are not predictions."""
    labels = list(values)
    fig, ax = _pyplot().subplots(figsize=(max(4.5, 1.2 * len(labels) + 2), 4))
    x = range(len(labels))
    if reference:
        w = 0.38
        bars = ax.bar([i - w / 2 for i in x], [values[k] for k in labels], w, label=ours_label)
        for bar, k in zip(bars, labels):
            if k in (fitted or ()):
                bar.set_hatch("//")
        if fitted:
            ours_label += " (hatched: fitted, not a prediction)"
            bars.set_label(ours_label)
        ax.bar([i + w / 2 for i in x], [reference.get(k, 0) or 0 for k in labels], w,
               label=reference_label, alpha=0.7)
        ax.legend()
    else:
        ax.bar(list(x), [values[k] for k in labels], 0.6)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, rotation=20 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center")
    ax.set_ylabel(ylabel)
    ax.set_xlabel("variant")
    if title:
        ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path, caption)


def _ordered_keys(dicts) -> list:
    keys = []
    for d in dicts:
        for k in d:
            if k not in keys:
                keys.append(k)
    try:
        return sorted(keys, key=float)
    except (TypeError, ValueError):
        return keys          # labels such as "0..1": keep the given order


def histogram_compare(path, hists: dict, *, xlabel: str = "seek distance (KiB)",
                      ylabel: str = None, title: str = "", normalize: bool = True,
                      caption: str = "") -> Path:
    """Grouped bars of several {bucket: count} histograms (e.g. member seek
    histograms legacy vs fixed). normalize=True plots percentages."""
    keys = _ordered_keys(hists.values())
    n = max(len(hists), 1)
    fig, ax = _pyplot().subplots(figsize=(min(max(6, 0.3 * len(keys) * n + 3), 11), 4.2))
    w = 0.8 / n
    for j, (name, h) in enumerate(hists.items()):
        total = sum(h.values()) or 1
        ys = [h.get(k, 0) * (100.0 / total if normalize else 1) for k in keys]
        ax.bar([i - 0.4 + w * (j + 0.5) for i in range(len(keys))], ys, w, label=str(name))
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([str(k) for k in keys], rotation=45, ha="right")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel or ("share of requests (%)" if normalize else "requests (count)"))
    if title:
        ax.set_title(title)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path, caption)


def size_distribution(path, dists: dict, *, unit: str = "sectors", xlabel: str = None,
                      ylabel: str = None, title: str = "", normalize: bool = True,
                      bins: str = "exact", caption: str = "") -> Path:
    """Request or bio size distributions, one series per policy, from
    {size: count} dicts with sizes in 512-byte sectors (unit="sectors"),
    bytes ("bytes") or KiB ("kib"); plotted in KiB. unit="raw" plots the
    sizes as given (then say the unit in xlabel). bins="exact" gives a bar
    per size, bins="log2" groups sizes into power-of-two ranges."""
    div = {"sectors": 2.0, "bytes": 1024.0, "kib": 1.0, "raw": 1.0}[unit.lower()]
    conv = {name: {} for name in dists}
    for name, d in dists.items():
        for size, count in d.items():
            kib = float(size) / div
            if bins == "log2" and kib > 0:
                kib = float(2 ** math.floor(math.log2(kib)))
            conv[name][kib] = conv[name].get(kib, 0) + count
    keys = sorted({k for d in conv.values() for k in d})
    n = max(len(conv), 1)
    fig, ax = _pyplot().subplots(figsize=(min(max(6, 0.3 * len(keys) * n + 3), 11), 4.2))
    w = 0.8 / n
    for j, (name, d) in enumerate(conv.items()):
        total = sum(d.values()) or 1
        ys = [d.get(k, 0) * (100.0 / total if normalize else 1) for k in keys]
        ax.bar([i - 0.4 + w * (j + 0.5) for i in range(len(keys))], ys, w, label=str(name))
    ax.set_xticks(range(len(keys)))
    if bins == "log2":
        ax.set_xticklabels([f"{k:g}..{2 * k:g}" for k in keys], rotation=45, ha="right")
    else:
        ax.set_xticklabels([f"{k:g}" for k in keys], rotation=45, ha="right")
    ax.set_xlabel(xlabel or ("size (KiB, power-of-two ranges)" if bins == "log2" else "size (KiB)"))
    ax.set_ylabel(ylabel or ("share of I/Os (%)" if normalize else "I/Os (count)"))
    if title:
        ax.set_title(title)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path, caption)


def _xy(points):
    if isinstance(points, dict):
        pairs = sorted(points.items(), key=lambda kv: float(kv[0]))
    else:
        pairs = list(points)
    return [float(p[0]) for p in pairs], [float(p[1]) for p in pairs]


def line_plot(path, series: dict, *, xlabel: str, ylabel: str, title: str = "",
              logx: bool = False, reference: dict = None, caption: str = "") -> Path:
    """y against x per series ({name: {x: y}} or {name: [(x, y), ...]}), e.g.
    IOPS against iodepth, each with its own marker and dash (no series hides
    another); `reference` series (the thread's) are drawn thin, in the
    colour of the series of the same name, with hollow markers."""
    fig, ax = _pyplot().subplots(figsize=(8, 5.2))
    colors = {}
    n = len(series)
    for i, (name, pts) in enumerate(series.items()):
        xs, ys = _xy(pts)
        # Each later series drawn thinner and with smaller markers: where two
        # coincide, the earlier one still shows around the later.
        (line,) = ax.plot(xs, ys, label=str(name), linewidth=1.0 + 0.6 * (n - 1 - i),
                          markersize=4 + 2.0 * (n - 1 - i), **_style(i))
        colors[name] = line.get_color()
    for i, (name, pts) in enumerate((reference or {}).items()):
        xs, ys = _xy(pts)
        st = _style(list(series).index(name) if name in series else i)
        ax.plot(xs, ys, linestyle=st["linestyle"], marker=st["marker"], markerfacecolor="none",
                linewidth=0.8, markersize=9, alpha=0.8, label=f"{name} (thread)",
                color=colors.get(name))
    if logx:
        ax.set_xscale("log", base=2)
        from matplotlib.ticker import FuncFormatter
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(_wrap(title), fontsize="medium")
    _legend_below(ax, ncol=2)
    ax.grid(alpha=0.3)
    return _save(fig, path, caption)


def _legend_below(ax, ncol: int) -> None:
    """The legend under the axes, where it covers no line."""
    ax.legend(fontsize="x-small", ncol=ncol, loc="upper center", bbox_to_anchor=(0.5, -0.14))


def _wrap(title: str, width: int = 60) -> str:
    """A long title on several lines, so that it is never clipped."""
    import textwrap
    return "\n".join(textwrap.wrap(title, width))


def time_series(path, series: dict, *, ylabel: str = "bandwidth (MiB/s)",
                xlabel: str = "time (s)", title: str = "", levels: dict = None,
                caption: str = "") -> Path:
    """Per-job (or per-group) values over time: {name: [(t_seconds, value)]};
    `levels` ({label: value}) are drawn as horizontal dashed lines (e.g. the
    thread's steady figures)."""
    fig, ax = _pyplot().subplots(figsize=(8, 5))
    for i, (name, pts) in enumerate(series.items()):
        xs, ys = _xy(pts)
        ax.plot(xs, ys, label=str(name), linewidth=1.2, linestyle=_style(i)["linestyle"])
    for j, (label, value) in enumerate((levels or {}).items()):
        ax.plot([], [])                     # keeps the colours apart from the series'
        ax.axhline(value, linestyle=(0, (4, 2 + j)), linewidth=1.0, color="black",
                   alpha=0.5 + 0.5 * j / max(len(levels), 1), label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(_wrap(title), fontsize="medium")
    if series or levels:
        _legend_below(ax, ncol=2 if len(series) + len(levels or {}) > 4 else 1)
    ax.grid(alpha=0.3)
    return _save(fig, path, caption)


def seek_histogram_vs_thread(path, ours: dict, thread: dict, labels: list, *, member: str,
                             title: str = "", caption: str = "") -> Path:
    """One panel per variant: the checked member's seek histogram (% of
    seeks per (lo, hi] KiB row, the thread's convention) beside the
    thread's one disk. ours/thread: {variant: [pct per row]}."""
    fig, axes = _pyplot().subplots(1, len(ours), figsize=(5.2 * len(ours), 4.6), sharey=True,
                             squeeze=False)
    for ax, (variant, pcts) in zip(axes[0], ours.items()):
        x = range(len(labels))
        w = 0.4
        ax.bar([i - w / 2 for i in x], pcts, w, label=f"{member} (checked)")
        ax.bar([i + w / 2 for i in x], thread[variant], w, label="thread's sdx", alpha=0.7,
               hatch="//")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize="small")
        ax.set_xlabel("seek distance, (lo, hi] KiB (the thread's rows)")
        ax.set_title(variant)
        ax.legend(fontsize="small")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("share of seeks (%)")
    if title:
        fig.suptitle(_wrap(title, 90), fontsize="medium")
    return _save(fig, path, caption)


def read_fio_log(path) -> list:
    """Rows of a fio log (write_bw_log / write_iops_log / write_lat_log):
    [(time_ms, value, ddir, bs)]. ddir: 0 read, 1 write, 2 trim."""
    rows = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 2 or not parts[0]:
                continue
            try:
                t, v = int(parts[0]), float(parts[1])
            except ValueError:
                continue
            ddir = int(parts[2]) if len(parts) > 2 and parts[2].lstrip("-").isdigit() else 0
            bs = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 0
            rows.append((t, v, ddir, bs))
    return rows


def bw_log_series(path, ddir=None, scale: float = 1 / 1024.0) -> list:
    """[(t_seconds, MiB/s)] from a fio bandwidth log (values in KiB/s), one
    direction (0 read, 1 write) or all of them summed per timestamp."""
    acc = {}
    for t, v, d, _ in read_fio_log(path):
        if ddir is None or d == ddir:
            acc[t] = acc.get(t, 0.0) + v
    return [(t / 1000.0, v * scale) for t, v in sorted(acc.items())]


def relpath(path, start) -> str:
    return os.path.relpath(path, start)


# Data-first spellings (hists, path, ...), for callers written that way. A
# ylabel mentioning "count" plots counts, otherwise percentages.

def _counts(ylabel, normalize):
    if normalize is not None:
        return normalize
    return not (ylabel and "count" in ylabel.lower())


def histogram_comparison(hists: dict, path, *, title: str = "", xlabel: str = "seek distance (KiB)",
                         ylabel: str = None, normalize: bool = None, caption: str = "") -> Path:
    """histogram_compare(path, hists, ...) with the data first."""
    normalize = _counts(ylabel, normalize)
    if ylabel and ylabel.strip().lower() == "count":
        ylabel = "requests (count)"
    return histogram_compare(path, hists, xlabel=xlabel, ylabel=ylabel, title=title,
                             normalize=normalize, caption=caption)


def size_distributions(dists: dict, path, *, title: str = "", xlabel: str = None,
                       ylabel: str = None, unit: str = None, bins: str = "exact",
                       normalize: bool = None, caption: str = "") -> Path:
    """size_distribution(path, dists, ...) with the data first; sizes are
    plotted as given when xlabel names their unit (e.g. "size (sectors)")."""
    normalize = _counts(ylabel, normalize)
    if ylabel and ylabel.strip().lower() == "count":
        ylabel = "I/Os (count)"
    if unit is None:
        unit = "raw" if xlabel else "sectors"
    return size_distribution(path, dists, unit=unit, xlabel=xlabel, ylabel=ylabel, title=title,
                             normalize=normalize, bins=bins, caption=caption)
