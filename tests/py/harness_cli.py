"""`python3 -m harness ...` as a user runs it, for the CLI tests."""
import os
import signal
import subprocess
import sys

from harness.paths import ROOT


def harness(*argv, cwd=None, env=None, timeout=60):
    """(exit status, stdout, stderr) of `python3 -m harness ARGV`; exit
    status None when it did not end within timeout (it is then sent
    SIGTERM, on which it kills its fio, then its session is killed)."""
    p = subprocess.Popen([sys.executable, "-m", "harness", *map(str, argv)], cwd=cwd or ROOT,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err
