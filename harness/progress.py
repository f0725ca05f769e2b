"""Progress of a sweep: which run of how many is going, the time elapsed and
an estimate of the time left.

On a terminal it is one line, redrawn in place (and every second by a
timer); elsewhere (CI logs, pipes) each step is one plain line. Estimates
come from earlier durations in the history database (median of the last
runs of each experiment on this machine), else from a stated default (the
line then says "default"); without either the line says "ETA unknown".

    p = Progress(["raid5", "bfq"], estimates={"raid5": (60.0, 4)})
    p.start("raid5"); p("legacy dd"); p("fixed dd"); p.finish()
"""
from __future__ import annotations

import shutil
import sys
import threading
import time


def fmt_duration(seconds: float) -> str:
    """0:07, 1:05, 1:02:03."""
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(self, names, estimates=None, stream=None, tty=None, clock=time.monotonic,
                 refresh=1.0, defaults=()):
        self.names = list(names)
        self.estimates = dict(estimates or {})      # name -> (seconds | None, steps | None)
        self.defaults = set(defaults)               # names whose estimate is a stated default
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.tty = tty
        self.clock = clock
        self.refresh = refresh
        self.t0 = clock()
        self.index = 0
        self.current = None
        self.exp_t0 = None
        self.step_text = ""
        self.step_no = 0
        self.done: dict = {}                        # name -> seconds
        self._lock = threading.RLock()
        self._shown = False
        self._timer = None
        self._stop = threading.Event()

    # --- what experiments call ----------------------------------------------

    def __call__(self, step_text: str) -> None:
        self.step(step_text)

    def step(self, step_text: str) -> None:
        """A new step (one fio run) of the current experiment."""
        with self._lock:
            self.step_no += 1
            self.step_text = step_text
            self._emit()

    # --- what the driver calls ------------------------------------------------

    def start(self, name: str) -> None:
        with self._lock:
            self.index = self.names.index(name) + 1 if name in self.names else self.index + 1
            self.current = name
            self.exp_t0 = self.clock()
            self.step_no = 0
            self.step_text = "starting"
            self._emit()
            if self.tty and self._timer is None and self.refresh:
                self._timer = threading.Thread(target=self._tick, daemon=True)
                self._timer.start()

    def finish(self, status: str = "done") -> float:
        """Ends the current experiment; returns its duration."""
        with self._lock:
            took = self.clock() - (self.exp_t0 if self.exp_t0 is not None else self.t0)
            self.done[self.current] = took
            line = f"[{self.index}/{len(self.names)}] {self.current}: {status} in {fmt_duration(took)}"
            if self.tty:
                self._clear()
            self.stream.write(line + "\n")
            self.stream.flush()
            self.current = None
            return took

    def skip(self, name: str, reason: str) -> None:
        """An experiment that does not run (e.g. not built yet)."""
        with self._lock:
            i = self.names.index(name) + 1 if name in self.names else self.index
            self.index = i
            self.done[name] = 0.0
            if self.tty:
                self._clear()
            self.stream.write(f"[{i}/{len(self.names)}] {name}: {reason}\n")
            self.stream.flush()

    def clear(self) -> None:
        """Removes the progress line so other output can be printed."""
        with self._lock:
            if self.tty:
                self._clear()

    def close(self) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.join(timeout=2)
            self._timer = None
        self.clear()

    # --- estimates ---------------------------------------------------------

    def eta(self):
        """(seconds left, exact): exact is False when some experiment still
        to run has no estimate (the number is then a lower bound), seconds is
        None when nothing at all is known."""
        now = self.clock()
        left, exact, known = 0.0, True, False
        for name in self.names:
            if name in self.done:
                continue
            est = self.estimates.get(name, (None, None))[0]
            if name == self.current:
                if est is None:
                    exact = False
                    continue
                known = True
                left += max(est - (now - self.exp_t0), 0.0)
            else:
                if est is None:
                    exact = False
                    continue
                known = True
                left += est
        return (left if known else None), exact

    def _parts(self):
        now = self.clock()
        total = len(self.names)
        steps = self.estimates.get(self.current, (None, None))[1] if self.current else None
        parts = []
        if steps and self.step_no:
            parts.append(f"step {self.step_no}/{max(steps, self.step_no)}")
        parts.append(f"{fmt_duration(now - self.t0)} elapsed")
        left, exact = self.eta()
        if left is None:
            parts.append("ETA unknown")
        else:
            dflt = any(n in self.defaults for n in self.names if n not in self.done)
            parts.append(f"ETA {'' if exact else '>'}{fmt_duration(left)}"
                         f"{' (default)' if dflt else ''}")
        return f"[{self.index}/{total}] {self.current}: ", self.step_text, f" ({', '.join(parts)})"

    def line(self, width: int = 0) -> str:
        """"[i/n] experiment: step (step j/m, elapsed, ETA)"; with width, the
        step text is shortened so that the line fits."""
        head, step, tail = self._parts()
        if width and len(head) + len(step) + len(tail) >= width:
            room = max(width - 1 - len(head) - len(tail), 4)
            step = step[:room - 1] + "…"
        return head + step + tail

    # --- output --------------------------------------------------------------

    def _emit(self, plain=True):
        if self.current is None:
            return
        if self.tty:
            text = self.line(shutil.get_terminal_size((100, 20)).columns)
            self.stream.write("\r" + text + "\x1b[K")
            self._shown = True
        elif plain:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def _clear(self):
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def _tick(self):
        while not self._stop.wait(self.refresh):
            with self._lock:
                if self.current is not None and self._shown:
                    self._emit()
