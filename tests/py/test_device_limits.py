"""A block-device member takes the device's own logical block size
(BLKSSZGET), so the stack refuses at its top what the device could not
take, as a kernel stack over that device would, instead of failing half-way
at the member.

Each test states the one behaviour it checks. They need loop devices and
skip only when the machine has none (no root, no losetup)."""
import errno

import pytest


@pytest.fixture
def loop_4k(loop_devices):
    """A blank 16 MiB loop device with 4096-byte logical blocks."""
    return loop_devices(sector_size=4096)


def test_a_member_takes_the_devices_logical_block_size(mdsplit_module, loop_4k, tmp_path):
    """On a 4Kn device, a 512-byte write fails with EINVAL at the top and
    reaches no member (no D event), while a 4 KiB write lands on the device."""
    sim = mdsplit_module.Simulation(f'[[members]]\npath = "{loop_4k}"\n', str(tmp_path))
    sim.submit("write", 0, 512)
    [done] = sim.run()
    assert done["error"] == -errno.EINVAL, done
    assert sim.events(device="m0", actions="D") == []
    sim.write(4096, b"\x5a" * 4096)
    sim.run()
    del sim
    with open(loop_4k, "rb") as f:
        f.seek(4096)
        assert f.read(4096) == b"\x5a" * 4096
