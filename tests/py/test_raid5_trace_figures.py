"""harness/experiments/raid5.py trace_figures: the thread's iostat and seek
figures read off blktrace files (a VM reference's kernel traces or the
emulator's) agree with the emulator's own sidecar counters."""
import re
import shutil

from harness.experiments import raid5 as R
from harness.fio_runner import run_simulated
from harness.paths import ROOT


def test_trace_figures_equal_the_sidecar_on_the_emulators_trace(tmp_path):
    """Member 0's seek rows and %rrqm from simulate's trace equal its sidecar's (legacy, contiguous buffer)."""
    for f in ("raid5-split-order.fio", "raid5-legacy.toml", "raid5-fixed.toml"):
        shutil.copy(ROOT / "jobs" / f, tmp_path / f)
    job = tmp_path / "raid5-split-order.fio"
    job.write_text(job.read_text().replace("size=2240m", "size=140m"))
    stack = tmp_path / "raid5-legacy.toml"
    stack.write_text(re.sub(r"contiguity = .*", "contiguity = { pattern = [1120] }",
                            stack.read_text()))
    res = run_simulated(job, sections="legacy", data=False)
    member = res.sidecars["stats/raid5-legacy.json"].members[0]
    got = R.trace_figures(tmp_path / "traces" / "legacy", 0)
    buckets = member["seek"]["buckets_kb_thread"]
    assert [round(x, 6) for x in got["seek_rows_pct"]] == \
        [round(100.0 * b / member["seek"]["count"], 6) for b in buckets]
    assert abs(got["pct_rrqm"] - member["pct_rrqm"]) < 0.01
    assert got["requests"] > 0 and got["merges"] > 0
