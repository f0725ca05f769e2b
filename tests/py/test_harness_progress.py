"""Progress lines: plain lines off a terminal, one redrawn line on one, and
ETAs from earlier durations. Fake clock; no fio."""
import io

from harness.progress import Progress, fmt_duration


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_fmt_duration():
    assert fmt_duration(0) == "0:00"
    assert fmt_duration(65.4) == "1:05"
    assert fmt_duration(3723) == "1:02:03"
    assert fmt_duration(-3) == "0:00"


def test_plain_lines_with_eta():
    clock, out = Clock(), io.StringIO()
    p = Progress(["raid5", "bfq"], estimates={"raid5": (60.0, 2), "bfq": (120.0, 4)},
                 stream=out, tty=False, clock=clock)
    p.start("raid5")
    p("legacy dd")
    clock.t += 30
    p("fixed dd")
    clock.t += 35
    took = p.finish()
    assert took == 65
    p.start("bfq")
    clock.t += 20
    p("root legacy")
    p.finish()
    p.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert lines == [
        "[1/2] raid5: starting (0:00 elapsed, ETA 3:00)",
        "[1/2] raid5: legacy dd (step 1/2, 0:00 elapsed, ETA 3:00)",
        "[1/2] raid5: fixed dd (step 2/2, 0:30 elapsed, ETA 2:30)",
        "[1/2] raid5: done in 1:05",
        "[2/2] bfq: starting (1:05 elapsed, ETA 2:00)",
        "[2/2] bfq: root legacy (step 1/4, 1:25 elapsed, ETA 1:40)",
        "[2/2] bfq: done in 0:20",
    ]


def test_unknown_and_partial_estimates():
    clock, out = Clock(), io.StringIO()
    p = Progress(["a", "b"], stream=out, tty=False, clock=clock)
    p.start("a")
    p("x")
    assert p.line().endswith("ETA unknown)")
    p = Progress(["a", "b"], estimates={"b": (90.0, None)}, stream=out, tty=False, clock=clock)
    p.start("a")
    p("x")
    assert p.line() == "[1/2] a: x (0:00 elapsed, ETA >1:30)"    # a lower bound
    # an experiment running over its estimate counts as finishing now
    p = Progress(["a"], estimates={"a": (10.0, None)}, stream=out, tty=False, clock=clock)
    p.start("a")
    clock.t += 25
    assert p.eta() == (0.0, True)


def test_skip_line():
    out = io.StringIO()
    p = Progress(["raid5", "bfq"], stream=out, tty=False)
    p.skip("bfq", "not built yet")
    assert out.getvalue() == "[2/2] bfq: not built yet\n"


def test_terminal_mode_redraws_one_line():
    clock, out = Clock(), io.StringIO()
    p = Progress(["raid5"], estimates={"raid5": (10.0, 2)}, stream=out, tty=True, clock=clock,
                 refresh=0)
    p.start("raid5")
    p("legacy")
    p("fixed")
    text = out.getvalue()
    assert "\n" not in text                          # one line, rewritten
    assert text.count("\r") == 3 and text.count("\x1b[K") == 3
    assert text.endswith("\r[1/1] raid5: fixed (step 2/2, 0:00 elapsed, ETA 0:10)\x1b[K")
    p.clear()
    assert out.getvalue().endswith("\r\x1b[K")
    p("again")
    p.finish()
    p.close()
    assert out.getvalue().endswith("\r\x1b[K[1/1] raid5: done in 0:00\n")


def test_terminal_mode_ticks(monkeypatch):
    import time
    out = io.StringIO()
    p = Progress(["a"], stream=out, tty=True, refresh=0.02)
    p.start("a")
    p("working")
    n = out.getvalue().count("\r")
    time.sleep(0.2)
    p.close()
    assert out.getvalue().count("\r") > n            # the timer redrew the line


def test_long_steps_are_shortened_on_a_terminal():
    p = Progress(["raid5"], stream=io.StringIO(), tty=True, refresh=0, clock=Clock())
    p.start("raid5")
    p.step_text = "x" * 200
    line = p.line(60)
    assert len(line) < 60 and line.endswith("(0:00 elapsed, ETA unknown)") and "…" in line


def test_a_stated_default_estimate_is_labelled():
    """An estimate from the stated defaults (no history) shows an ETA marked "(default)"."""
    clock, out = Clock(), io.StringIO()
    p = Progress(["raid5", "bfq"], estimates={"raid5": (60.0, None), "bfq": (120.0, None)},
                 stream=out, tty=False, clock=clock, defaults={"bfq"})
    p.start("raid5")
    clock.t += 10
    p("legacy dd")
    p.finish()
    p.start("bfq")
    p("root legacy")
    p.close()
    lines = out.getvalue().splitlines()
    assert "ETA 2:50 (default)" in lines[1], lines
    assert "ETA 2:00 (default)" in lines[-1], lines
