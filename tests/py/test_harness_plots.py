"""Plot helpers write valid PNGs with labelled axes. No fio."""
import matplotlib.image as mpimg

from harness import plots

PNG = b"\x89PNG\r\n\x1a\n"


def valid_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG), path
    img = mpimg.imread(path)
    assert img.shape[0] > 100 and img.shape[1] > 100
    return img


def test_bar_chart(tmp_path):
    p = plots.bar_chart(tmp_path / "sub" / "bw.png", {"legacy": 3300, "fixed": 5200},
                        ylabel="md0 throughput (MB/s)",
                        reference={"legacy": 3276.87, "fixed": 5271.88}, title="RAID5")
    valid_png(p)
    valid_png(plots.bar_chart(tmp_path / "plain.png", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5},
                              ylabel="MiB/s"))


def test_seek_histograms(tmp_path):
    legacy = plots.seek_buckets([25079, 0, 0, 0, 0, 0, 12540, 2508, 0, 10032, 5016, 0])
    fixed = plots.seek_buckets([21483, 0, 0, 0, 0, 0, 7161, 0, 0, 0, 0, 0])
    assert list(legacy)[0] == "0..1" and list(legacy)[-1] == ">=1024"
    valid_png(plots.histogram_compare(tmp_path / "seek.png", {"legacy": legacy, "fixed": fixed},
                                      title="member seeks"))
    valid_png(plots.histogram_compare(tmp_path / "seek-n.png", {"a": {1: 3, 2: 5}, "b": {4: 1}},
                                      normalize=False))


def test_size_distribution(tmp_path):
    d = {"original": {1024: 60, 512: 3, 3584: 1}, "max_sectors": {1024: 64}}
    valid_png(plots.size_distribution(tmp_path / "sizes.png", d, title="request sizes"))
    valid_png(plots.size_distribution(tmp_path / "sizes2.png", {"x": {4096: 2, 9000: 1}},
                                      unit="bytes", bins="log2"))


def test_line_plot(tmp_path):
    ours = {"forced-ra rasync on": {1: 10, 2: 20, 4: 40, 128: 180},
            "c8d317aa rasync off": [(1, 10), (2, 21), (128, 310)]}
    thread = {"forced-ra rasync on": {1: 10.8, 2: 21.2, 128: 187}}
    valid_png(plots.line_plot(tmp_path / "iops.png", ours, xlabel="iodepth",
                              ylabel="IOPS (thousands)", logx=True, reference=thread))


def test_time_series_from_fio_bw_logs(tmp_path):
    log = tmp_path / "test1_bw.1.log"
    log.write_text("100, 2048, 1, 4096, 0\n100, 1024, 0, 4096, 0\n200, 4096, 1, 4096, 0, 0\n"
                   "bad line\n")
    rows = plots.read_fio_log(log)
    assert rows == [(100, 2048.0, 1, 4096), (100, 1024.0, 0, 4096), (200, 4096.0, 1, 4096)]
    assert plots.bw_log_series(log) == [(0.1, 3.0), (0.2, 4.0)]
    assert plots.bw_log_series(log, ddir=1) == [(0.1, 2.0), (0.2, 4.0)]
    p = plots.time_series(tmp_path / "ts.png", {"test1": plots.bw_log_series(log),
                                                "test2": [(0.1, 1.0), (0.2, 1.5)]},
                          title="per-job bandwidth")
    valid_png(p)
    valid_png(plots.time_series(tmp_path / "empty.png", {}))


def test_axis_labels_carry_units(tmp_path, monkeypatch):
    """Every helper labels both axes; the defaults name a unit."""
    import matplotlib.pyplot as plt
    seen = []
    real_save = plots._save

    def spy(fig, path, caption=""):
        ax = fig.axes[0]
        seen.append((ax.get_xlabel(), ax.get_ylabel()))
        return real_save(fig, path, caption)
    monkeypatch.setattr(plots, "_save", spy)
    plots.histogram_compare(tmp_path / "a.png", {"x": {"0..1": 1}})
    plots.size_distribution(tmp_path / "b.png", {"x": {8: 1}})
    plots.time_series(tmp_path / "c.png", {"x": [(0, 1)]})
    for x, y in seen:
        assert "(" in x and "(" in y, (x, y)
    assert plt.get_fignums() == []           # figures are closed


def test_data_first_spellings(tmp_path):
    p = plots.histogram_comparison({"legacy": {"0..1": 5, "1..2": 3}, "fixed": {"0..1": 8}},
                                   tmp_path / "h.png", title="seeks", xlabel="seek distance (KiB)",
                                   ylabel="count")
    valid_png(p)
    p = plots.size_distributions({"original": {"1024": 60, "512": 3}, "align": {"512": 2}},
                                 tmp_path / "s.png", title="bios", xlabel="size (sectors)",
                                 ylabel="count")
    valid_png(p)


# --- the reports' figures, read back from what was drawn (plots.drawn) ----------

import json  # noqa: E402

from harness.experiment import ExperimentResult  # noqa: E402


def shown(png):
    """What the figure shows, from its artists (written beside it)."""
    valid_png(png)
    return json.loads(png.with_suffix(".json").read_text())


def test_a_clipped_title_is_seen(tmp_path):
    """drawn() reports a title wider than the figure (the check below can fail)."""
    d = shown(plots.bar_chart(tmp_path / "b.png", {"a": 1}, ylabel="x", title="word " * 60))
    assert d["clipped"] == ["word " * 60]


def test_raid5_seek_figure_shows_the_checked_member_in_the_thread_rows(tmp_path):
    """raid5-seek-histogram.png: member 0 beside the thread's disk, in (lo, hi] rows (64 KiB in 32 .. 64)."""
    from harness.experiments import raid5
    seeks = {"legacy": [47.8, 0, 0, 0, 0, 0, 21.8, 4.3, 0, 17.4, 8.7, 0],
             "fixed": [75.0, 0, 0, 0, 0, 0, 25.0, 0, 0, 0, 0, 0]}
    d = shown(raid5.seek_figure(tmp_path, seeks))
    assert d["clipped"] == []
    assert [a["title"] for a in d["axes"]] == ["legacy", "fixed"]
    for ax, v in zip(d["axes"], ["legacy", "fixed"]):
        assert ax["xticklabels"][0] == "0 .. 1" and ax["xticklabels"][6] == "32 .. 64"
        assert ax["xticklabels"][-1] == "> 1024"
        ours, thread = ax["bars"]
        assert ours["label"] == "member 0 (checked)" and thread["label"] == "thread's sdx"
        assert ours["heights"] == seeks[v]
        t = raid5.THREAD_SEEKS[v]
        assert thread["heights"] == [100.0 * n / t["count"] for n in t["buckets"]]
    assert "member 0" in d["caption"] and "47.8 %" in d["caption"]


def test_bfq_bandwidth_figure_is_labelled_this_machines(tmp_path):
    """bfq-bandwidth.png: real-clock lines labelled this machine's, the thread's levels beside, a caption."""
    from harness.experiments import bfq
    series = {"root before": [(0.25, 100.0), (0.5, 520.0)], "nonroot before": [(0.25, 10.0)],
              "nonroot after": []}
    metrics = {f"{p}.{w}_MiBps": 500.0 + i for i, (p, w) in enumerate(
        (p, w) for p, _ in bfq.PLACES for _, w, _ in bfq.VARIANTS)}
    d = shown(bfq.bandwidth_figure(tmp_path, series, metrics))
    assert d["clipped"] == []
    [ax] = d["axes"]
    assert ax["title"].startswith("This machine's real-clock fio runs (not checked)")
    lines = {ln["label"]: ln for ln in ax["lines"] if not ln["label"].startswith("_")}
    assert lines["this machine: root before"]["y"] == [100.0, 520.0]
    assert "this machine: nonroot after" not in lines          # no points, no line
    levels = {ln["label"]: ln["y"] for ln in ax["lines"] if ln["label"].startswith("thread")}
    assert sorted(y[0] for y in levels.values()) == [349.0, 550.0]
    assert "virtual clock" in d["caption"] and "root before 500" in d["caption"]


def test_buffered_figure_hides_no_series_and_clips_nothing(tmp_path):
    """buffered-iops-vs-qd.png: equal series stay apart (own marker and dash), the title fits."""
    from harness.experiments import buffered
    ours = {(v, r, qd): 10.0 * qd ** 0.5 for v, r in buffered.COLUMNS for qd in buffered.DEPTHS}
    result = ExperimentResult("buffered")
    buffered.plot(tmp_path, result, ours)
    d = shown(tmp_path / "buffered-iops-vs-qd.png")
    assert result.figures == ["buffered-iops-vs-qd.png"]
    assert d["clipped"] == []
    [ax] = d["axes"]
    mine = [ln for ln in ax["lines"] if not ln["label"].endswith("(thread)")]
    assert len(mine) == len(buffered.COLUMNS)
    styles = {(ln["linestyle"], ln["marker"]) for ln in mine}
    assert len(styles) == len(mine), "two series drawn alike: one can hide the other"
    pre = next(ln for ln in mine if ln["label"] == "pre-c8d317aa rasync off")
    c8 = next(ln for ln in mine if ln["label"] == "c8d317aa rasync off")
    assert pre["y"] == c8["y"]                               # equal values, both drawn
    # drawn first, so drawn larger: it shows around the later one
    assert pre["markersize"] > c8["markersize"] and pre["linewidth"] > c8["linewidth"]
    thread = {ln["label"] for ln in ax["lines"] if ln["label"].endswith("(thread)")}
    assert thread == {f"{v} rasync {'on' if r else 'off'} (thread)" for v, r in buffered.THREAD}
    assert d["caption"]
