"""A Simulation or BufferedSimulation dropped with I/O in flight or dirty
pages: the I/O completes into buffers that still exist, and what was written
reaches the member file, as at the end of an engine job. (The buffers used
to be freed first: the kernel then wrote heap garbage to the member file or
corrupted the heap; a BufferedSimulation's dirty pages were lost.)

The crash cases run in a child process, so that a corrupted heap fails the
test instead of pytest."""
import gc
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STACK = '[device]\nkind = "passthrough"\n[[members]]\npath = "m.img"\nsize = "8m"\n'


def test_a_pending_write_reaches_the_file_when_the_simulation_is_dropped(tmp_path, mdsplit_module):
    """submit('write') without run(), then del: the file holds the write (zeros), not garbage."""
    (tmp_path / "m.img").write_bytes(b"\xaa" * (8 << 20))
    s = mdsplit_module.Simulation(STACK, base_dir=str(tmp_path))
    s.submit("write", 0, 4096)
    del s
    gc.collect()
    assert (tmp_path / "m.img").read_bytes()[:4096] == bytes(4096)


def test_dropping_simulations_with_pending_reads_does_not_crash(tmp_path):
    """300 times: 64 reads of 64 KiB submitted, never run, the Simulation dropped."""
    script = textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from harness import paths
        m = paths.import_mdsplit()
        for _ in range(300):
            s = m.Simulation({STACK!r}, base_dir={str(tmp_path)!r})
            s.submit_batch([("read", k << 16, 1 << 16) for k in range(64)])
            del s
        print("survived")
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300)
    assert (r.returncode, r.stdout.strip()) == (0, "survived"), r.stderr[-2000:]


def test_dirty_pages_are_written_back_when_a_buffered_simulation_is_dropped(tmp_path,
                                                                            mdsplit_module):
    """write() leaves two dirty pages; del writes them back to the member file."""
    (tmp_path / "m.img").write_bytes(b"\xaa" * (8 << 20))
    b = mdsplit_module.BufferedSimulation(STACK, base_dir=str(tmp_path))
    b.write(0, b"\x55" * 8192)
    assert b.cache_state()["dirty"] == 2
    del b
    gc.collect()
    assert (tmp_path / "m.img").read_bytes()[:8192] == b"\x55" * 8192


def test_a_pending_buffered_write_reaches_the_file_when_dropped(tmp_path, mdsplit_module):
    """submit('write') without run(), then del: its data is on the member file."""
    (tmp_path / "m.img").write_bytes(b"\xaa" * (8 << 20))
    b = mdsplit_module.BufferedSimulation(STACK, base_dir=str(tmp_path))
    b.submit("write", 4096, 4096, b"\x66" * 4096)
    del b
    gc.collect()
    assert (tmp_path / "m.img").read_bytes()[4096:8192] == b"\x66" * 4096
