"""md RAID5: through the bindings on a virtual clock, the parity checker, and
real fio runs (io_uring members, verify, parity check, degraded verify)."""
import random
import subprocess
import sys

import pytest

from conftest import ROOT, write_job
from harness import run_fio
from harness.parity_check import check_parity, compute_blocknr, load_stack, parity_disk

KiB = 1024
MiB = 1024 * KiB


def ram_stack(members=5, size="1m", chunk="16k", layout="left-symmetric", split_order="fixed",
              failed=None, bio=""):
    text = f"""
[device]
kind = "raid5"
chunk = "{chunk}"
layout = "{layout}"
max_sectors = "1m"
split_order = "{split_order}"
{bio}
"""
    for i in range(members):
        text += f"""
[[members]]
path = "r{i}"
size = "{size}"
backend = "ram"
max_sectors = "512k"
{"failed = true" if i == failed else ""}
"""
    return text


def random_writes(sim, rng, model, rounds):
    size = len(model)
    for _ in range(rounds):
        length = rng.randrange(1, 600) * 512
        offset = rng.randrange(0, (size - length) // 512 + 1) * 512
        data = rng.randbytes(length)
        sim.write(offset, data)
        model[offset:offset + length] = data


@pytest.mark.parametrize("layout", ["left-asymmetric", "right-asymmetric", "left-symmetric",
                                    "right-symmetric"])
def test_sim_random_writes_read_back(mdsplit_module, layout):
    sim = mdsplit_module.Simulation(ram_stack(layout=layout))
    assert sim.size == 4 * MiB  # (5 - 1) x 1 MiB
    rng = random.Random(layout)
    model = bytearray(sim.size)
    random_writes(sim, rng, model, 80)
    assert sim.read(0, sim.size) == bytes(model)
    for _ in range(30):
        length = rng.randrange(1, 300) * 512
        offset = rng.randrange(0, (sim.size - length) // 512) * 512
        assert sim.read(offset, length) == bytes(model[offset:offset + length])
    stats = {d["name"]: d for d in sim.stats()["devices"]}
    assert stats["md0"]["write"]["ios"] >= 80
    assert stats["md0"]["write"]["errors"] == 0


@pytest.mark.parametrize("split_order,expected", [
    ("legacy", [0, 1 * MiB, 1536 * KiB, 512 * KiB]),
    ("fixed", [0, 512 * KiB, 1 * MiB, 1536 * KiB]),
])
def test_sim_two_mib_read_reaches_members_in_split_order(mdsplit_module, split_order, expected):
    # Physically contiguous pairs of pages: one 2 MiB bio (256 bvecs of 8 KiB).
    sim = mdsplit_module.Simulation(ram_stack(members=4, size="8m", chunk="512k",
                                              split_order=split_order,
                                              bio="[bio]\ncontiguity = { pattern = [2] }"))
    sim.submit("read", 0, 2 * MiB)
    done = sim.run()
    assert [c["error"] for c in done] == [0]
    md0 = [e for e in sim.events() if e["device_name"] == "md0"]
    remaps = [e["from_sector"] * 512 for e in sim.events(actions="A") if e["from_device"] ==
              md0[0]["device"]]
    assert remaps == expected
    assert sum(1 for e in md0 if e["action"] == "X") == 3
    assert sim.stats()["devices"][0]["read"]["ios"] == 4  # one per chunk-sized bio


@pytest.mark.parametrize("failed", [0, 2, 4])
def test_sim_degraded_writes_and_reads(mdsplit_module, failed):
    sim = mdsplit_module.Simulation(ram_stack(failed=failed))
    rng = random.Random(failed)
    model = bytearray(sim.size)
    random_writes(sim, rng, model, 60)
    assert sim.read(0, sim.size) == bytes(model)
    stats = {d["name"]: d for d in sim.stats()["devices"]}
    dead = stats[f"m{failed}"]
    assert dead["read"]["ios"] == 0 and dead["write"]["ios"] == 0
    assert not [e for e in sim.events(device=f"m{failed}")]


def test_sim_full_stripe_writes_read_nothing(mdsplit_module):
    sim = mdsplit_module.Simulation(ram_stack(members=4, chunk="64k", size="4m"))
    sim.write(0, random.Random(1).randbytes(3 * 64 * KiB * 4))  # 4 whole chunk-stripes
    stats = sim.stats()["devices"]
    assert all(d["read"]["ios"] == 0 for d in stats)
    assert all(d["write"]["merges"] > 0 for d in stats if d["role"] == "member")


# ---------------------------------------------------------------- parity checker

def make_array(dir, members, chunk, layout, rows_data):
    """Member files holding a consistent array; returns their paths."""
    n = len(members)
    files = [bytearray(rows_data * 4096) for _ in range(n)]
    rng = random.Random(3)
    for row in range(rows_data):
        stripe, chunk_offset = divmod(row * 8, chunk // 512)
        pd = parity_disk(stripe, n, layout)
        parity = 0
        for disk in range(n):
            if disk == pd:
                continue
            unit = rng.randbytes(4096)
            files[disk][row * 4096:(row + 1) * 4096] = unit
            parity ^= int.from_bytes(unit, "little")
        files[pd][row * 4096:(row + 1) * 4096] = parity.to_bytes(4096, "little")
    paths = []
    for i, data in enumerate(files):
        p = dir / members[i]
        p.write_bytes(bytes(data))
        paths.append(p)
    return paths


def test_parity_checker_finds_a_flipped_byte(tmp_path):
    names = [f"p{i}.img" for i in range(4)]
    paths = make_array(tmp_path, names, 16 * KiB, 2, 64)
    assert check_parity(paths, 16 * KiB, "left-symmetric") == []
    data = bytearray(paths[2].read_bytes())
    data[4096 * 37 + 5] ^= 0x40
    paths[2].write_bytes(bytes(data))
    bad = check_parity(paths, 16 * KiB, 2)
    assert [b.row for b in bad] == [37]
    assert bad[0].parity_member == parity_disk(37 * 8 // 32, 4, 2)
    # Degraded: the failed member is not read, nothing to check.
    assert check_parity(paths, 16 * KiB, 2, failed=1) == []

    toml = tmp_path / "stack.toml"
    toml.write_text('[device]\nkind = "raid5"\nchunk = "16k"\n' + "".join(
        f'[[members]]\npath = "{n}"\n' for n in names))
    assert load_stack(toml)[0] == paths
    cli = subprocess.run([sys.executable, "-m", "harness.parity_check", str(toml)], cwd=ROOT,
                         capture_output=True, text=True)
    assert cli.returncode == 1
    assert "row 37" in cli.stdout


def test_parity_checker_blocknr_matches_md_table():
    # Left-symmetric, 4 disks: stripe 1 holds D4 D5 P D3 (md(4)).
    assert [compute_blocknr(1, 0, d, 4, 1, 2) for d in range(4)] == [4, 5, None, 3]
    # Right-asymmetric: stripe 1 holds D3 P D4 D5.
    assert [compute_blocknr(1, 0, d, 4, 1, 1) for d in range(4)] == [3, None, 4, 5]


# ---------------------------------------------------------------- fio

def fio_stack(members=8, failed=None):
    text = '[device]\nkind = "raid5"\nchunk = "64k"\nsplit_order = "fixed"\n'
    for i in range(members):
        text += f"""
[[members]]
path = "m{i}.img"
size = "16m"
backend = "io_uring"
max_sectors = "512k"
{"failed = true" if i == failed else ""}
"""
    return text


def verify_job(engine, name, config, extra=""):
    return f"""
[global]
ioengine=external:{engine}
mdsplit_config={config}
filename=md0
direct=1
size=64m
rw=randwrite
bsrange=4k-1m
iodepth=16
verify=crc32c
do_verify=1
verify_fatal=1
mdsplit_stats=stats/{name}.json
{extra}

[{name}]
"""


def test_fio_randwrite_verify_parity_then_degraded_verify(engine, workdir):
    (workdir / "stack.toml").write_text(fio_stack())
    result = run_fio(write_job(workdir, "write.fio", verify_job(engine, "write", "stack.toml")))
    j = result.job("write")
    assert j["error"] == 0
    assert j["write"]["io_bytes"] == 64 * MiB
    assert j["read"]["io_bytes"] == 64 * MiB
    assert result.mdsplit_errors() == []
    md0 = result.sidecars["stats/write.json"].device("md0")
    assert md0["write"]["errors"] == 0 and md0["read"]["errors"] == 0

    members, chunk, layout, failed = load_stack(workdir / "stack.toml")
    assert check_parity(members, chunk, layout) == []
    cli = subprocess.run([sys.executable, "-m", "harness.parity_check",
                          str(workdir / "stack.toml")], cwd=ROOT, capture_output=True, text=True)
    assert cli.returncode == 0, cli.stdout + cli.stderr

    # Member 3 fails: fio reads back what it wrote (verify_only), its chunks
    # rebuilt from the other seven.
    (workdir / "degraded.toml").write_text(fio_stack(failed=3))
    result = run_fio(write_job(workdir, "dverify.fio",
                               verify_job(engine, "dverify", "degraded.toml", "verify_only=1")))
    j = result.job("dverify")
    assert j["error"] == 0
    assert j["read"]["io_bytes"] == 64 * MiB
    devices = {d["name"]: d for d in result.sidecars["stats/dverify.json"].devices}
    assert devices["md0"]["write"]["ios"] == 0
    assert devices["m3"]["read"]["ios"] == 0 and devices["m3"]["write"]["ios"] == 0
    assert all(devices[f"m{i}"]["read"]["ios"] > 0 for i in range(8) if i != 3)


def test_fio_degraded_randwrite_verify(engine, workdir):
    (workdir / "degraded.toml").write_text(fio_stack(failed=5))
    result = run_fio(write_job(workdir, "dwrite.fio",
                               verify_job(engine, "dwrite", "degraded.toml")))
    j = result.job("dwrite")
    assert j["error"] == 0
    assert j["read"]["io_bytes"] == 64 * MiB
    devices = {d["name"]: d for d in result.sidecars["stats/dwrite.json"].devices}
    assert devices["m5"]["read"]["ios"] == 0 and devices["m5"]["write"]["ios"] == 0
