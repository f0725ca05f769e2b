"""Plots carry the basis (issue 39): a fitted figure's bar is hatched, a
prediction's is not; the bfq experiment marks its fitted bars."""
from harness import plots


def test_fitted_bars_are_hatched(monkeypatch, tmp_path):
    """bar_chart(fitted={...}) hatches exactly those of our bars and says so in the legend."""
    saved = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path, *a, **k: saved.setdefault("fig", fig) and path)
    plots.bar_chart(tmp_path / "b.png", {"a": 1, "b": 2}, ylabel="x",
                    reference={"a": 1, "b": 2}, fitted={"a"})
    ax = saved["fig"].axes[0]
    ours = ax.containers[0]
    assert [bar.get_hatch() for bar in ours] == ["//", None]
    assert "fitted" in ours.get_label()
    plots._pyplot().close(saved["fig"])      # _save, replaced here, closes it


def test_bfq_metric_bases_mark_the_fitted_columns():
    """The bfq figures that are fits or identities are the ones its plot hatches."""
    from harness import expectations as E
    bases = E.metric_bases(E.load()["bfq"])
    assert bases["root.before_MiBps"] == "fit" and bases["nonroot.before_MiBps"] == "prediction"
    assert bases["nonroot.after_MiBps"] == "identity"
