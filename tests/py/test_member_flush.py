"""fio's fsync and fdatasync reach the members' real storage: after the page
cache's write-back (buffered jobs), the engine fdatasyncs every member it may
write, as blkdev_fsync() ends in blkdev_issue_flush(). Counted with strace:
one fdatasync per member per fio sync, and per write under sync=; none for
sync_file_range (not a data integrity operation in the kernel either) or for
a job that never syncs."""
import json
import shutil
import subprocess

import pytest

from conftest import stack_job

MEMBERS = 3


def raid5_stack():
    text = '[device]\nkind = "raid5"\nchunk = "64k"\n'
    for i in range(MEMBERS):
        text += f'\n[[members]]\npath = "r{i}.img"\nsize = "4m"\n'
    return text


def traced_run(tmp_path, engine, lines):
    """(fdatasync calls, fio's sync count) of one job over a 3-member raid5."""
    if not shutil.which("strace"):
        pytest.skip("needs strace (ci/install-deps.sh installs it)")
    job = stack_job(tmp_path, engine, raid5_stack(),
                    f"thread=1\nrw=randwrite\nbs=4k\nsize=1m\n[j]\n{lines}\n")
    log = tmp_path / "strace.txt"
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=fdatasync", "-o", str(log),
                        "fio", "--output-format=json", str(job)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    calls = sum(1 for line in log.read_text().splitlines() if "fdatasync(" in line)
    # lat_ns.N counts fsyncs, fdatasyncs and sync_file_ranges alike
    # (total_ios only fsyncs).
    syncs = json.loads(p.stdout)["jobs"][0]["sync"]["lat_ns"]["N"]
    return calls, syncs


@pytest.mark.parametrize("direct", ["1", "0"])
@pytest.mark.parametrize("option", ["fsync=16", "fdatasync=16"])
def test_each_fio_sync_flushes_every_member(tmp_path, engine, direct, option):
    calls, syncs = traced_run(tmp_path, engine, f"direct={direct}\n{option}")
    assert syncs > 0
    assert calls == syncs * MEMBERS


@pytest.mark.parametrize("direct", ["1", "0"])
def test_each_write_under_sync_flushes_every_member(tmp_path, engine, direct):
    """sync=1 (O_SYNC): a buffered write ends in generic_write_sync(), a direct
    one is REQ_FUA; either is durable on the members when it completes."""
    calls, syncs = traced_run(tmp_path, engine, f"direct={direct}\nsync=1\nsize=128k")
    assert syncs == 0
    assert calls == (128 // 4) * MEMBERS


def test_a_job_without_syncs_flushes_nothing(tmp_path, engine):
    assert traced_run(tmp_path, engine, "direct=1") == (0, 0)


def test_sync_file_range_writes_back_without_a_flush(tmp_path, engine):
    calls, syncs = traced_run(tmp_path, engine,
                              "direct=0\nsync_file_range=wait_before,write,wait_after:16")
    assert syncs > 0 and calls == 0
