"""md RAID5: through the bindings on a virtual clock, the parity checker, and
real fio runs (io_uring members, verify, parity check, degraded verify,
loop-device members, the split order in the member traces)."""
import os
import random
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, losetup_works, stack_job, write_job
from harness import read_trace_dir, run_fio
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
    # A physically contiguous 2 MiB buffer: one bvec, one 2 MiB bio.
    sim = mdsplit_module.Simulation(ram_stack(members=4, size="8m", chunk="512k",
                                              split_order=split_order,
                                              bio="[bio]\ncontiguity = { pattern = [512] }"))
    sim.submit("read", 0, 2 * MiB)
    done = sim.run()
    assert [c["error"] for c in done] == [0]
    md0 = [e for e in sim.events() if e["device_name"] == "md0"]
    remaps = [e["from_sector"] * 512 for e in sim.events(actions="A") if e["from_device"] ==
              md0[0]["device"]]
    assert remaps == expected
    assert sum(1 for e in md0 if e["action"] == "X") == 3
    assert sim.stats()["devices"][0]["read"]["ios"] == 4  # one per chunk-sized bio


@pytest.mark.parametrize("split_order", ["legacy", "fixed"])
def test_sim_submitting_cpu_spaces_the_member_bios(mdsplit_module, split_order):
    """[cpu] submit_bio = c: every ->submit_bio call of the __submit_bio_noacct
    loop takes c of the submitter's time, and what it does happens when it
    returns. A 2 MiB read over 512 KiB chunks is 8 calls (md_submit_bio of a
    chunk, blk_mq_submit_bio of its member bio, four times): md remaps chunk
    k at (2k + 1) c, its member allocates the request at (2k + 2) c. Each
    512 KiB request flushes the plug (>= BLK_PLUG_FLUSH_SIZE) when the next
    one is added, yet every request counts from the plug's cached time, the
    first one's (6.17: blk_add_rq_to_plug()'s flush keeps plug->cur_ktime);
    md0 accounts each chunk from its own remap. With c = 0 all is at t = 0."""
    c = 5000
    bio = '[bio]\ncontiguity = { pattern = [512] }\n[cpu]\nsubmit_bio = "5us"'
    sim = mdsplit_module.Simulation(ram_stack(members=4, size="8m", chunk="512k",
                                              split_order=split_order, bio=bio))
    sim.submit("read", 0, 2 * MiB)
    assert [d["error"] for d in sim.run()] == [0]
    ev = sim.events()
    assert [e["time_ns"] for e in ev if e["action"] == "A"] == [c, 3 * c, 5 * c, 7 * c]
    assert [e["time_ns"] for e in ev if e["action"] == "G"] == [2 * c, 4 * c, 6 * c, 8 * c]
    # The last request is issued at blk_finish_plug, after the 8th call.
    assert max(e["time_ns"] for e in ev if e["action"] == "D") == 8 * c
    devices = sim.stats()["devices"]
    md0, members = devices[0], devices[1:]
    # ram members complete at dispatch: request k is dispatched when request
    # k + 1 is added, at (2k + 4) c (the last at 8c), and counts from 2c
    # (without the cached time: 2c each).
    assert sorted(m["read"]["ticks_ns"] for m in members) == [2 * c, 4 * c, 6 * c, 6 * c]
    # md0: chunk k from its remap, (2k + 1) c, to its request's completion.
    assert md0["read"]["ticks_ns"] == (4 - 1) * c + (6 - 3) * c + (8 - 5) * c + (8 - 7) * c
    free = mdsplit_module.Simulation(ram_stack(members=4, size="8m", chunk="512k",
                                               split_order=split_order,
                                               bio="[bio]\ncontiguity = { pattern = [512] }"))
    free.submit("read", 0, 2 * MiB)
    free.run()
    assert {e["time_ns"] for e in free.events()} == {0}


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


def test_sim_whole_stripe_writes_with_the_smallest_stripe_cache_read_nothing(mdsplit_module):
    """8 members, 64 KiB chunks (448 KiB stripes), stripe_cache_size 17:
    eight sequential 896 KiB writes (two whole stripes, 32 rows, each) wait
    for free heads, and md's row-by-row walk (raid5_make_request ->
    add_all_stripe_bios) still makes every row a full-stripe write: 256 of
    them, no member read, parity whole."""
    stack = ram_stack(members=8, chunk="64k", size="4m").replace(
        'split_order = "fixed"\n', 'split_order = "fixed"\nstripe_cache_size = 17\n')
    sim = mdsplit_module.Simulation(stack)
    rng = random.Random(17)
    data = rng.randbytes(8 * 896 * KiB)
    for k in range(8):
        sim.write(k * 896 * KiB, data[k * 896 * KiB:(k + 1) * 896 * KiB])
    devices = {d["name"]: d for d in sim.stats()["devices"]}
    r5 = devices["md0"]["raid5"]
    assert r5["stripe_cache_size"] == 17 and r5["stripe_cache_waits"] > 0
    assert r5["full_stripe_writes"] == 256
    assert r5["preread_reads"] == 0 and r5["rmw"] + r5["rcw"] == 0
    assert all(devices[f"m{i}"]["read"]["ios"] == 0 for i in range(8))
    assert sim.read(0, len(data)) == data


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


def test_parity_checker_stops_at_each_members_size(tmp_path):
    # Member files longer than their TOML size: the array ends at the size,
    # and whatever lies past it (here random bytes) is not checked.
    names = [f"p{i}.img" for i in range(3)]
    paths = make_array(tmp_path, names, 16 * KiB, 2, 64)
    for p in paths:
        with open(p, "ab") as f:
            f.write(random.Random(str(p)).randbytes(64 * KiB))
    assert check_parity(paths, 16 * KiB, 2) != []
    assert check_parity(paths, 16 * KiB, 2, sizes=[256 * KiB] * 3) == []
    toml = tmp_path / "stack.toml"
    toml.write_text('[device]\nkind = "raid5"\nchunk = "16k"\n' + "".join(
        f'[[members]]\npath = "{n}"\nsize = "256k"\n' for n in names))
    assert load_stack(toml)[4] == [256 * KiB] * 3
    cli = subprocess.run([sys.executable, "-m", "harness.parity_check", str(toml)], cwd=ROOT,
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stdout + cli.stderr


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
verify=md5
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

    members, chunk, layout, failed, sizes = load_stack(workdir / "stack.toml")
    assert check_parity(members, chunk, layout, sizes=sizes) == []
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


# ---------------------------------------------------------------- loop-device members

def test_fio_randwrite_verify_parity_over_loop_devices(engine, workdir):
    reason = losetup_works()
    if reason:
        pytest.skip(reason)
    devices = []
    try:
        for i in range(3):
            backing = workdir / f"loop{i}.img"
            with open(backing, "wb") as f:  # zeroed: no signature, no partition table
                f.truncate(32 * MiB)
            devices.append(subprocess.run(["losetup", "-f", "--show", str(backing)],
                                          capture_output=True, text=True,
                                          check=True).stdout.strip())
        text = '[device]\nkind = "raid5"\nchunk = "64k"\nsplit_order = "fixed"\n'
        for dev in devices:  # block devices: the size is the device's
            text += f'\n[[members]]\npath = "{dev}"\nbackend = "io_uring"\nmax_sectors = "512k"\n'
        (workdir / "stack.toml").write_text(text)
        job = verify_job(engine, "loop", "stack.toml").replace("bsrange=4k-1m", "bsrange=4k-256k")
        result = run_fio(write_job(workdir, "loop.fio", job))
        j = result.job("loop")
        assert j["error"] == 0
        assert j["write"]["io_bytes"] == 64 * MiB  # (3 - 1) x 32 MiB, all of it
        assert j["read"]["io_bytes"] == 64 * MiB
        assert result.mdsplit_errors() == []
        devs = {d["name"]: d for d in result.sidecars["stats/loop.json"].devices}
        for name in ("md0", "m0", "m1", "m2"):
            assert devs[name]["write"]["errors"] == 0 and devs[name]["read"]["errors"] == 0
        assert all(devs[f"m{i}"]["write"]["sectors"] > 0 for i in range(3))

        members, chunk, layout, failed, sizes = load_stack(workdir / "stack.toml")
        assert [str(m) for m in members] == devices and failed == []
        cli = subprocess.run(["/usr/bin/python3", "-m", "harness.parity_check",
                              str(workdir / "stack.toml")], cwd=ROOT, capture_output=True,
                             text=True)
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert "bad" not in cli.stdout + cli.stderr
        # The check reads what the loop devices hold: a flipped byte is found.
        with open(devices[1], "r+b", buffering=0) as f:
            f.seek(5 * MiB + 7)
            old = f.read(1)
            f.seek(5 * MiB + 7)
            f.write(bytes([old[0] ^ 0x01]))
            os.fsync(f.fileno())
        cli = subprocess.run(["/usr/bin/python3", "-m", "harness.parity_check",
                              str(workdir / "stack.toml")], cwd=ROOT, capture_output=True,
                             text=True)
        assert cli.returncode == 1, cli.stdout + cli.stderr
        assert f"row {5 * MiB // 4096} " in cli.stdout
    finally:
        for dev in devices:
            subprocess.run(["losetup", "-d", dev], capture_output=True)


# ---------------------------------------------------------------- split order in real fio

def blkparse_records(trace_dir, names):
    """(sequence, device name, action, sector, sectors, remap from-sector) of
    every event blkparse prints for the named trace files, in sequence order
    (sequence numbers are global across the files of one stack)."""
    if shutil.which("blkparse") is None:  # the harness reader then (same files)
        records = read_trace_dir(trace_dir)
        return sorted((r.sequence, name, r.action, r.sector, r.nr_sectors, r.from_sector)
                      for name in names for r in records[name])
    out = []
    for name in names:
        text = subprocess.run(["blkparse", "-q", "-i", str(trace_dir / name)],
                              capture_output=True, text=True, check=True).stdout
        # "8,16 0 12 0.000001234 4242 A R 2048 + 1024 <- (9,0) 0"
        for m in re.finditer(r"^\s*\d+,\d+\s+\d+\s+(\d+)\s+\S+\s+\d+\s+([A-Z])\s+\S+\s+(\d+)"
                             r"\s+\+\s+(\d+)(?:.*?<-\s+\(\d+,\d+\)\s+(\d+))?", text, re.M):
            seq, action, sector, sectors, frm = m.groups()
            out.append((int(seq), name, action, int(sector), int(sectors),
                        int(frm) if frm else 0))
    assert out, f"blkparse printed no events for {names} in {trace_dir}"
    return sorted(out)


def split_order_stack(members, chunk, split_order, size, contiguity):
    text = f"""
[device]
kind = "raid5"
chunk = "{chunk}"
layout = "left-symmetric"
max_sectors = "1m"
split_order = "{split_order}"

[bio]
contiguity = {{ pattern = [{contiguity}] }}
"""
    for i in range(members):
        text += f'\n[[members]]\npath = "m{i}.img"\nsize = "{size}"\nbackend = "io_uring"\n' \
                'max_sectors = "512k"\n'
    return text


def one_read_job(engine, name, bs, size, extra=""):
    return f"""
[{name}]
ioengine=external:{engine}
mdsplit_config={name}.toml
mdsplit_trace=traces/{name}
mdsplit_stats=stats/{name}.json
filename=md0
direct=1
rw=read
bs={bs}
size={size}
io_size={bs}
iodepth=1
{extra}
"""


@pytest.mark.parametrize("split_order,expected", [
    ("legacy", [0, 1 * MiB, 1536 * KiB, 512 * KiB]),
    ("fixed", [0, 512 * KiB, 1 * MiB, 1536 * KiB]),
])
def test_fio_two_mib_read_reaches_members_in_split_order(engine, workdir, split_order, expected):
    # The bindings test above, in a real fio: one 2 MiB direct read at 0,
    # a physically contiguous buffer (one 2 MiB bio), 4 x 512 KiB chunks.
    (workdir / f"{split_order}.toml").write_text(
        split_order_stack(4, "512k", split_order, "8m", 512))
    result = run_fio(write_job(workdir, "r.fio", one_read_job(engine, split_order, "2m", "6m")))
    assert result.job(split_order)["error"] == 0
    assert result.job(split_order)["read"]["io_bytes"] == 2 * MiB
    events = blkparse_records(workdir / "traces" / split_order, ["m0", "m1", "m2", "m3"])
    remaps = [frm * 512 for _, _, action, _, _, frm in events if action == "A"]
    assert remaps == expected
    # Each piece is one member request of one chunk, queued and issued in that order:
    # chunk k of stripe 0 is on m<k>, chunk 3 on m3 (left-symmetric, parity on m2).
    where = {0: "m0", 512 * KiB: "m1", 1 * MiB: "m2", 1536 * KiB: "m3"}
    for action in ("Q", "D"):
        seen = [(name, sectors) for _, name, a, _, sectors, _ in events if a == action]
        assert seen == [(where[off], 1024) for off in expected], action


@pytest.mark.parametrize("split_order", ["legacy", "fixed"])
def test_fio_4480k_read_member_order(engine, workdir, split_order):
    # dd bs=4480k iflag=direct on 8 x 64 KiB chunks (seeds 000/002): one
    # 4480 KiB bio, split by md to 1 MiB and by chunk_aligned_read to 64 KiB.
    (workdir / f"{split_order}.toml").write_text(
        split_order_stack(8, "64k", split_order, "16m", 512))
    result = run_fio(write_job(workdir, "r.fio",
                               one_read_job(engine, split_order, "4480k", "4480k")))
    assert result.job(split_order)["read"]["io_bytes"] == 4480 * KiB
    names = [f"m{i}" for i in range(8)]
    events = blkparse_records(workdir / "traces" / split_order, names)
    remaps = [frm for _, _, action, _, _, frm in events if action == "A"]
    assert len(remaps) == 70 and sorted(remaps) == [i * 128 for i in range(70)]
    # Each member's requests in issue order (D), by the logical sector each
    # starts at; the plug flush issues queue by queue.
    logical = {(name, sector): frm for _, name, a, sector, _, frm in events if a == "A"}
    issued = {name: [logical[(n, sector)] for _, n, a, sector, _, _ in events
                     if a == "D" and n == name] for name in names}
    assert all(len(issued[name]) >= 5 for name in names)  # 8 or 9 chunks each, some merged
    if split_order == "fixed":
        assert remaps == sorted(remaps)
        assert all(issued[name] == sorted(issued[name]) for name in names), issued
    else:
        # The remainders queued behind the pieces: md0's 1 MiB bios go out
        # of order, and each member seeks back and forth.
        assert remaps != sorted(remaps)
        assert all(issued[name] != sorted(issued[name]) for name in names), issued


def test_raid5_stacks_carry_the_fitted_preset_unchanged():
    """jobs/raid5-*.toml's [models.sas-ssd-seed000] equals jobs/models.toml's preset (the fit)."""
    import tomllib
    from pathlib import Path
    jobs = Path(__file__).resolve().parents[2] / "jobs"
    preset = tomllib.loads((jobs / "models.toml").read_text())["models"]["sas-ssd-seed000"]
    preset = {k: v for k, v in preset.items() if k != "description"}
    for v in ("legacy", "fixed"):
        stack = tomllib.loads((jobs / f"raid5-{v}.toml").read_text())
        assert stack["models"]["sas-ssd-seed000"] == preset, v
        assert {m["model"] for m in stack["members"]} == {"sas-ssd-seed000"}, v


def test_fio_randwrite_verify_parity_with_a_small_stripe_cache(engine, workdir):
    """md's stripe cache at its smallest (17 heads): evictions and waits for
    free heads, and still every write verifies, parity holds, and with a
    member failed fio reads back what it wrote."""
    (workdir / "stack.toml").write_text(
        fio_stack().replace('split_order = "fixed"\n', 'split_order = "fixed"\nstripe_cache_size = 17\n'))
    result = run_fio(write_job(workdir, "write.fio", verify_job(engine, "write", "stack.toml")))
    j = result.job("write")
    assert j["error"] == 0 and j["read"]["io_bytes"] == 64 * MiB
    r5 = result.sidecars["stats/write.json"].device("md0")["raid5"]
    assert r5["stripe_cache_size"] == 17
    assert r5["stripe_cache_misses"] > 17 and r5["stripe_cache_waits"] > 0
    assert r5["rmw"] + r5["rcw"] > 0
    members, chunk, layout, failed, sizes = load_stack(workdir / "stack.toml")
    assert check_parity(members, chunk, layout, sizes=sizes) == []

    (workdir / "degraded.toml").write_text(
        fio_stack(failed=6).replace('split_order = "fixed"\n',
                                    'split_order = "fixed"\nstripe_cache_size = 17\n'))
    result = run_fio(write_job(workdir, "dverify.fio",
                               verify_job(engine, "dverify", "degraded.toml", "verify_only=1")))
    assert result.job("dverify")["error"] == 0
    assert result.job("dverify")["read"]["io_bytes"] == 64 * MiB


def _three_member_raid5(tmp_path):
    return ('[device]\nkind = "raid5"\nchunk = "64k"\n' +
            "".join(f'[[members]]\npath = "m{i}.img"\nsize = "16m"\n' for i in range(3)))


def test_forked_job_then_threads_after_a_stonewall_may_share_raid5(tmp_path, engine):
    """A forked writer, then (stonewall) two threads reading: fio never runs a
    forked job beside another, so the run is accepted (it was refused as if
    the two threads were forked)."""
    body = ("bs=64k\nsize=4m\n[a]\nrw=write\n[b]\nstonewall\nthread=1\nnumjobs=2\nrw=read\n")
    result = run_fio(stack_job(tmp_path, engine, _three_member_raid5(tmp_path), body),
                     check=False, timeout=60)
    assert result.returncode == 0, result.stderr


def test_thread_beside_a_forked_job_on_raid5_is_refused(tmp_path, engine):
    """A thread and a forked job that may run at once on one raid5: refused
    (the forked one has a copy of the device of its own), naming both."""
    body = "bs=64k\nsize=4m\n[t]\nthread=1\nrw=write\n[f]\nrw=read\n"
    result = run_fio(stack_job(tmp_path, engine, _three_member_raid5(tmp_path), body),
                     check=False, timeout=60)
    assert result.returncode != 0
    assert "mdsplit: jobs t and f share the device of stack.toml (raid5) and may run at the " \
           "same time" in result.stderr, result.stderr


@pytest.mark.parametrize("body, line", [
    ("[a]\nrw=write\n[b]\nstonewall\nthread=1\nnumjobs=2\nrw=read\n", None),
    ("[t]\nthread=1\nrw=write\n[f]\nrw=read\n", "mdsplit: job t and job f ("),
])
def test_simulate_judges_forked_and_thread_jobs_as_the_engine(tmp_path, engine, body, line):
    """harness simulate accepts and refuses the two runs above as the engine does
    (the refusal with the line of job t's setup, the engine's first)."""
    job = stack_job(tmp_path, engine, _three_member_raid5(tmp_path), "bs=64k\nsize=4m\n" + body)
    r = subprocess.run(["/usr/bin/python3", "-m", "harness", "simulate", str(job)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    if line is None:
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode != 0
        assert r.stderr.startswith(line), r.stderr


@pytest.mark.parametrize("backend", ["ram", "null"])
@pytest.mark.parametrize("path", ["", 'path = "a.img"\n'])
def test_parity_check_refuses_members_whose_data_is_not_on_disk(tmp_path, backend, path):
    """parity_check of a raid5 with a ram or null member: one line, exit 2 (it printed "'path'",
    or with a path said nothing and exited 0, checking a file the member never wrote)."""
    for name in ("a.img", "b.img", "c.img"):
        (tmp_path / name).write_bytes(b"\x01" * (1 << 20))
    toml = tmp_path / "s.toml"
    toml.write_text(f'[device]\nkind = "raid5"\n[[members]]\nbackend = "{backend}"\n{path}'
                    'size = "1m"\n[[members]]\npath = "b.img"\n[[members]]\npath = "c.img"\n')
    cli = subprocess.run([sys.executable, "-m", "harness.parity_check", str(toml)], cwd=ROOT,
                         capture_output=True, text=True)
    assert (cli.returncode, cli.stdout, cli.stderr.strip()) == (2, "", (
        f"parity_check: {toml}: members[0].backend is '{backend}': its data is not on disk, so "
        "there is no parity to check; allowed: a raid5 stack whose members are all io_uring "
        "(files or block devices)"))
