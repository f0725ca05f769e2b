"""What a piece of Python does in a child process, for the tests of the
Python boundary: a crash, a hang or a runaway allocation fails its test
instead of pytest (test_bindings_input.py, test_bindings_args.py,
test_simulate_args.py)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RAM = '[[members]]\nbackend = "ram"\nsize = "1m"\n'
RAM16 = '[[members]]\nbackend = "ram"\nsize = "16m"\n'


def outcome(code: str, limit: int = 0, timeout: float = 120) -> str:
    """Runs `code` in a child (`m` is the mdsplit module; RAM and RAM16 are
    stacks), its address space limited to `limit` bytes more than it has (0:
    none); what happened: "OK" (or "OK <repr>" of what the code put in
    `result`), "<ErrorType>: <message>", "signal <n>" or "timeout"."""
    script = (f"import sys, resource; sys.path.insert(0, {str(ROOT)!r})\n"
              "from harness import paths; m = paths.import_mdsplit()\n"
              f"RAM = {RAM!r}; RAM16 = {RAM16!r}\n"
              f"if {limit}:\n"
              "    vm = int(next(l for l in open('/proc/self/status') if l.startswith('VmSize'))"
              ".split()[1]) << 10\n"
              f"    resource.setrlimit(resource.RLIMIT_AS, (vm + {limit}, vm + {limit}))\n"
              "result = None\n"
              "try:\n" + textwrap.indent(textwrap.dedent(code), "    ") + "\n"
              "    print('OK' if result is None else f'OK {result!r}')\n"
              "except Exception as e:\n"
              "    print(f'{type(e).__name__}: {e}')\n")
    try:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=timeout, env=os.environ.copy())
    except subprocess.TimeoutExpired:
        return "timeout"
    if r.returncode < 0:
        return f"signal {-r.returncode}"
    lines = r.stdout.strip().splitlines()
    return lines[-1] if lines else r.stderr.strip()[-500:]


@pytest.fixture
def stack_file(tmp_path):
    """A function writing a stack file (RAM unless given) and returning its path."""
    def make(text=RAM, name="stack.toml"):
        p = tmp_path / name
        p.write_text(text)
        return str(p)
    return make
