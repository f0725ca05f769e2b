"""pytest plugin: one progress line per test file, with the time elapsed and
an estimate of the time left (`ci/test.sh` loads it with `-p file_progress`).

The estimate is the sum of the files still to run, each from its duration in
the previous run (kept in $MDSPLIT_BUILD_DIR/test-durations.json, else
build/test-durations.json) or, for a file never timed, DEFAULT_PER_TEST
seconds per test it holds; the line says which ("from the last run",
"partly from the default of 0.36 s per test").
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.progress import fmt_duration

# Mean seconds per test of a whole pytest run on the 2-core development VM:
# about 8 min (issue 43) for the 1341 tests `pytest --collect-only -q tests/py`
# counts.
DEFAULT_PER_TEST = 0.36


def durations_file() -> Path:
    """Where each file's duration of the last run is kept."""
    build = os.environ.get("MDSPLIT_BUILD_DIR") or str(Path(__file__).resolve().parents[2] / "build")
    return Path(build) / "test-durations.json"


def load_durations(path: Path) -> dict:
    """{file: seconds} of the last run; {} when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))} \
        if isinstance(data, dict) else {}


def estimate_left(files: list, counts: dict, known: dict, per_test: float = DEFAULT_PER_TEST):
    """(seconds, all_known): the files' durations from `known`, else
    per_test per test; all_known False when a default was used."""
    left, all_known = 0.0, True
    for f in files:
        if f in known:
            left += known[f]
        else:
            left += counts.get(f, 0) * per_test
            all_known = False
    return left, all_known


class FileProgress:
    def __init__(self, config):
        self.config = config
        self.path = durations_file()
        self.known = load_durations(self.path)
        self.files: list = []
        self.counts: dict = {}
        self.done: dict = {}
        self.current = None
        self.t_file = None
        self.t0 = time.monotonic()

    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            f = item.nodeid.split("::", 1)[0]
            if f not in self.counts:
                self.files.append(f)
                self.counts[f] = 0
            self.counts[f] += 1

    def pytest_runtest_logstart(self, nodeid, location):
        f = nodeid.split("::", 1)[0]
        if f != self.current:
            self._end_file()
            self.current, self.t_file = f, time.monotonic()

    def _end_file(self):
        if self.current is None:
            return
        took = time.monotonic() - self.t_file
        self.done[self.current] = took
        todo = [f for f in self.files if f not in self.done]
        left, all_known = estimate_left(todo, self.counts, self.known)
        basis = "from the last run" if all_known else \
            f"partly from the default of {DEFAULT_PER_TEST} s per test"
        line = (f"[{len(self.done)}/{len(self.files)}] {self.current}: "
                f"{self.counts.get(self.current, 0)} tests in {fmt_duration(took)} "
                f"({fmt_duration(time.monotonic() - self.t0)} elapsed, "
                f"ETA {fmt_duration(left)} {basis})")
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write("\n")                   # after the file's progress dots
            tr.write_line(line)
        self.current = None

    def pytest_sessionfinish(self, session, exitstatus):
        self._end_file()
        if not self.done:
            return
        merged = dict(self.known)
        merged.update({f: round(s, 2) for f, s in self.done.items()})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(merged, indent=0, sort_keys=True) + "\n")
            tmp.replace(self.path)
        except OSError:
            pass                            # progress only: a read-only build is no failure


def pytest_configure(config):
    config.pluginmanager.register(FileProgress(config), "mdsplit-file-progress")
