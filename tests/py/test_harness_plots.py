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

    def spy(fig, path):
        ax = fig.axes[0]
        seen.append((ax.get_xlabel(), ax.get_ylabel()))
        return real_save(fig, path)
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
