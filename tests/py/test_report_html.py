"""report.html beside summary.md: self-contained (figures embedded, no
external asset), the same tables, figures and captions. Read back with an
HTML parser. No fio."""
import base64
from html.parser import HTMLParser

from harness import plots, reproduce
from harness.experiment import ExperimentResult

MACHINE = {"hostname": "h", "cpu_model": "cpu", "cpus": 2, "kernel": "6.1"}


class Page(HTMLParser):
    """The tags, their attributes and the figure captions of a page."""

    def __init__(self):
        super().__init__()
        self.tags, self.captions, self.headings, self._in = [], [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("figcaption", "h2"):
            self._in, self.buf = tag, ""

    def handle_endtag(self, tag):
        if tag == self._in:
            (self.captions if tag == "figcaption" else self.headings).append(self.buf)
            self._in = None

    def handle_data(self, data):
        if self._in:
            self.buf += data


def a_report(tmp_path):
    report = tmp_path / "report"
    out = report / "buffered"
    out.mkdir(parents=True)
    plots.line_plot(out / "iops.png", {"a": {1: 1, 2: 2}}, xlabel="iodepth", ylabel="kIOPS",
                    caption="Look at QD 2: the line doubles.")
    result = ExperimentResult("buffered", tables=["col1  col2\n1     2"], figures=["iops.png"],
                              metrics={"x.kIOPS": 1.0})
    o = reproduce.Outcome("buffered", title="t", result=result, out_dir=out,
                          checks=[("x.kIOPS within 15 %", True, "1 vs 1")])
    reproduce.write_summary(report, [o], commit="c", machine=MACHINE, started="now",
                            command="cmd")
    return report


def test_summary_md_carries_each_figures_caption(tmp_path):
    """summary.md has the caption, in italics, under its figure."""
    text = (a_report(tmp_path) / "summary.md").read_text()
    assert "![iops](buffered/iops.png)\n\n*Look at QD 2: the line doubles.*" in text


def test_report_html_is_self_contained(tmp_path):
    """report.html: every image a data: PNG, no stylesheet, script or remote URL."""
    page = Page()
    page.feed((a_report(tmp_path) / "report.html").read_text())
    imgs = [a for t, a in page.tags if t == "img"]
    assert len(imgs) == 1
    src = imgs[0]["src"]
    assert src.startswith("data:image/png;base64,")
    assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    assert not [t for t, a in page.tags if t in ("link", "script", "iframe")]
    for t, a in page.tags:
        for k in ("src", "href"):
            assert not a.get(k, "").startswith(("http:", "https:", "//")), (t, a)


def test_report_html_shows_tables_figures_and_captions(tmp_path):
    """report.html has the summary's tables, the experiment's heading and the figure's caption."""
    page = Page()
    page.feed((a_report(tmp_path) / "report.html").read_text())
    tags = [t for t, _ in page.tags]
    assert tags.count("table") >= 1 and "pre" in tags and "figure" in tags
    assert page.captions == ["Look at QD 2: the line doubles."]
    assert any(h.startswith("buffered") for h in page.headings)
