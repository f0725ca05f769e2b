"""A member a run may write is claimed for the run: a block device with an
O_EXCL open (the kernel's holder claim: mount, mkfs, mdadm or another
program's exclusive open fail with EBUSY until the run is over), a regular
file with flock (another mdsplit run writing it is refused).

Each test states the one behaviour it checks. The block-device tests need
loop devices and skip only when the machine has none (no root, no losetup)."""
import errno
import gc
import os
import subprocess
import threading
import time

import pytest

from conftest import stack_job
from harness import run_fio

MIB = 1 << 20


@pytest.fixture
def loop(loop_devices):
    """A blank 16 MiB loop device."""
    return loop_devices()


def claimed(dev):
    """True when an exclusive open of dev fails with EBUSY now."""
    try:
        fd = os.open(dev, os.O_RDONLY | os.O_EXCL)
    except OSError as e:
        assert e.errno == errno.EBUSY, e
        return True
    os.close(fd)
    return False


def simulation(mdsplit_module, dev, tmp_path):
    return mdsplit_module.Simulation(f'[[members]]\npath = "{dev}"\n', str(tmp_path))


def test_a_writable_stack_claims_its_device_until_it_is_gone(mdsplit_module, loop, tmp_path):
    """While a writable stack on a loop device exists, an exclusive open of
    the device fails with EBUSY; once the stack is gone, it succeeds."""
    sim = simulation(mdsplit_module, loop, tmp_path)
    assert claimed(loop)
    del sim
    gc.collect()
    assert not claimed(loop)


def test_stacks_of_one_process_share_the_claim(mdsplit_module, loop, tmp_path):
    """A second stack of the same process on the claimed device opens (the
    claim is shared, not refused as another holder), and the device stays
    claimed until the last of them is gone."""
    first = simulation(mdsplit_module, loop, tmp_path)
    second = simulation(mdsplit_module, loop, tmp_path)
    del first
    gc.collect()
    assert claimed(loop)
    del second
    gc.collect()
    assert not claimed(loop)


def test_a_device_held_by_another_program_is_refused(mdsplit_module, loop, tmp_path):
    """A device another program holds exclusively is refused with the
    in-use line, naming the member and the override."""
    fd = os.open(loop, os.O_RDONLY | os.O_EXCL)
    try:
        with pytest.raises(ValueError) as e:
            simulation(mdsplit_module, loop, tmp_path)
    finally:
        os.close(fd)
    assert str(e.value) == (
        f'<text>: members[0].path: "{loop}" is held open exclusively by another program '
        "(open with O_EXCL: Device or resource busy): writing would corrupt it; allowed: an "
        "unused device, or allow_mounted_write=1 in every fio job that writes to it")


def test_the_python_simulation_refuses_a_device_with_a_file_system(mdsplit_module, loop,
                                                                   tmp_path):
    """mdsplit.Simulation checks its block devices as the engine does: an
    ext4 device is refused (it was opened for writing unchecked)."""
    subprocess.run(["mkfs.ext4", "-q", "-F", loop], check=True, capture_output=True)
    with pytest.raises(ValueError, match="carries an ext2/3/4 file system signature"):
        simulation(mdsplit_module, loop, tmp_path)


def test_mkfs_fails_while_fio_writes_the_device(tmp_path, engine, loop):
    """During a fio run that writes a loop device through the engine,
    mkfs.ext4 on that device refuses it as in use; after the run, the
    device is free again."""
    body = "bs=64k\nsize=4m\ntime_based=1\nruntime=4\n[w]\nrw=write\n"
    jobfile = stack_job(tmp_path, engine, f'[[members]]\npath = "{loop}"\n', body)
    result = {}
    runner = threading.Thread(
        target=lambda: result.update(r=run_fio(jobfile, check=False, timeout=120)))
    runner.start()
    deadline = time.monotonic() + 3
    while not claimed(loop) and time.monotonic() < deadline:
        time.sleep(0.05)
    mkfs = subprocess.run(["mkfs.ext4", "-q", "-F", loop], capture_output=True, text=True)
    runner.join()
    assert result["r"].returncode == 0, result["r"].stderr
    assert mkfs.returncode != 0, "mkfs.ext4 wrote a device fio was writing"
    assert "in use" in mkfs.stderr, mkfs.stderr
    assert not claimed(loop)


def test_forked_jobs_one_after_another_share_the_claim(tmp_path, engine, loop):
    """Two forked jobs writing one device with a stonewall between them both
    run (fio sets both up in its main process: one claim, shared), and the
    device is free when fio has exited."""
    body = ("bs=64k\nsize=4m\nstonewall\n"
            "[first]\nrw=write\n[second]\nrw=write\noffset=4m\n")
    result = run_fio(stack_job(tmp_path, engine, f'[[members]]\npath = "{loop}"\n', body),
                     check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert [j["write"]["io_bytes"] for j in result.jobs] == [4 * MIB, 4 * MIB]
    assert not claimed(loop)


def test_a_file_another_run_writes_is_refused(mdsplit_module, tmp_path, engine):
    """While one stack writes a file member (here a Simulation of this
    process), a fio run that would write the same file is refused with one
    line naming it; once the stack is gone, the run goes ahead."""
    member = tmp_path / "m0.img"
    stack = f'[[members]]\npath = "{member}"\nsize = "4m"\n'
    sim = mdsplit_module.Simulation(stack, str(tmp_path))
    jobfile = stack_job(tmp_path, engine, stack, "bs=64k\nsize=1m\n[w]\nrw=write\n")
    refused = run_fio(jobfile, check=False, timeout=60)
    assert refused.returncode != 0
    assert (f'mdsplit: stack.toml: members[0].path: "{member}" is being written by another '
            "mdsplit run (flock: Resource temporarily unavailable): writing would corrupt it; "
            "allowed: a file that no other run, loop device or swap area uses, or "
            "allow_mounted_write=1 in every fio job "
            "that writes to it") in refused.stderr.splitlines(), refused.stderr
    del sim
    gc.collect()
    assert run_fio(jobfile, check=False, timeout=60).returncode == 0


def test_a_file_another_run_reads_is_not_claimed(mdsplit_module, tmp_path, engine):
    """Readers take no claim: a fio run that only reads a file member runs
    while a stack of this process writes it."""
    member = tmp_path / "m0.img"
    stack = f'[[members]]\npath = "{member}"\nsize = "4m"\n'
    sim = mdsplit_module.Simulation(stack, str(tmp_path))
    jobfile = stack_job(tmp_path, engine, stack, "bs=64k\nsize=1m\n[r]\nrw=read\n")
    result = run_fio(jobfile, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    del sim
