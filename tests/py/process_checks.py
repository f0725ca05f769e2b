"""Whether the processes a test started have ended, for the tests that
interrupt fio (or a fake of it) and check that nothing of it is left."""
import os
import signal
import time
from pathlib import Path


def running(pid: int) -> bool:
    """The process exists and is no zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def left_running(pids, wait_s=5.0) -> list:
    """Those of pids still running after up to wait_s (a killed process may
    take a moment to die); they are killed now."""
    deadline = time.monotonic() + wait_s
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if running(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    return left
