"""Seed 001: direct-I/O bio sizes against a member's max_sectors."""
from collections import Counter

import pytest

STACK = """
[device]
kind = "passthrough"
plug_order = "lifo"

[[members]]
path = "u0"
size = "256m"
backend = "null"
model = "ufs"
max_sectors = "512k"

[bio]
policy = "{policy}"
align = "256k"
# 256 bvecs of 2, 2, 2, 1 pages: 448 pages = 3584-sector bios, as in the
# thread's block_bio_queue trace.
contiguity = {{ pattern = [2, 2, 2, 1] }}
"""
IO = 64 * 1024 * 1024


def run(mdsplit, policy):
    sim = mdsplit.Simulation(STACK.format(policy=policy))
    sim.submit("read", 0, IO)
    assert sim.run() == [{"cookie": 1, "error": 0, "resid": 0}]
    bios = [e["nr_sectors"] for e in sim.events(device="md0", actions="Q")]
    issued = [(e["sector"], e["nr_sectors"]) for e in sim.events(device="m0", actions="D")]
    return sim, bios, issued


def test_original_gives_3584_sector_bios_and_odd_tails(mdsplit_module):
    _, bios, issued = run(mdsplit_module, "original")
    assert set(bios[:-1]) == {3584}
    assert sum(bios) * 512 == IO
    sizes = Counter(n for _, n in issued)
    # 3584 = 3 x 1024 + 512: full requests plus a 512-sector tail per bio.
    assert sizes[1024] >= 3 * (len(bios) - 1)
    assert sizes[512] >= len(bios) - 2
    assert set(sizes) - {1024, 512} <= {n for n in sizes if n < 1024}


def test_small_tails_are_issued_after_the_next_bios_first_piece(mdsplit_module):
    # 17 pages per 16 bvecs: 272-page bios = 2 x 1024 + 128 sectors. A
    # 64 KiB tail does not flush the plug (< BLK_PLUG_FLUSH_SIZE), and the
    # LIFO plug of Linux < 6.13 then issues the next bio's first piece
    # before it: the odd tail lands out of order, as the thread saw.
    sim = mdsplit_module.Simulation(STACK.format(policy="original").replace(
        "pattern = [2, 2, 2, 1]", "pattern = [2" + ", 1" * 15 + "]"))
    sim.submit("read", 0, IO)
    sim.run()
    issued = [(e["sector"], e["nr_sectors"]) for e in sim.events(device="m0", actions="D")]
    out_of_order = [(a, b) for a, b in zip(issued, issued[1:]) if b[0] < a[0]]
    assert out_of_order and all(b[1] == 128 for a, b in out_of_order)
    # The same stack with the FIFO plug of Linux >= 6.13 issues in order.
    fifo = mdsplit_module.Simulation(STACK.format(policy="original").replace(
        "pattern = [2, 2, 2, 1]", "pattern = [2" + ", 1" * 15 + "]").replace('"lifo"', '"fifo"'))
    fifo.submit("read", 0, IO)
    fifo.run()
    starts = [e["sector"] for e in fifo.events(device="m0", actions="D")]
    assert starts == sorted(starts)


def test_max_sectors_gives_only_full_requests(mdsplit_module):
    _, bios, issued = run(mdsplit_module, "max_sectors")
    assert all(n <= 1024 for n in bios)
    sizes = [n for _, n in issued]
    assert all(n == 1024 for n in sizes[:-1])
    # In order, no tails.
    starts = [s for s, _ in issued]
    assert starts == sorted(starts)


def test_align_gives_multiples_of_256k(mdsplit_module):
    sim = mdsplit_module.Simulation(STACK.format(policy="align").replace(
        "pattern = [2, 2, 2, 1]", "pattern = [2, 1, 1]"))
    sim.submit("read", 0, IO)
    sim.run()
    bios = [e["nr_sectors"] for e in sim.events(device="md0", actions="Q")]
    assert sum(bios) * 512 == IO
    assert all(n % 512 == 0 for n in bios[:-1]), Counter(bios)


def test_original_with_pattern_211_is_not_aligned(mdsplit_module):
    sim = mdsplit_module.Simulation(STACK.format(policy="original").replace(
        "pattern = [2, 2, 2, 1]", "pattern = [2, 1, 1]"))
    sim.submit("read", 0, IO)
    sim.run()
    bios = [e["nr_sectors"] for e in sim.events(device="md0", actions="Q")]
    # 256 bvecs of 4/3 pages on average: 341 or 342 pages, not 256k multiples.
    assert any(n % 512 for n in bios[:-1])


def test_sidecar_has_bio_and_request_size_distributions(mdsplit_module):
    sim, bios, issued = run(mdsplit_module, "original")
    stats = sim.stats()
    md0, m0 = stats["devices"]
    assert {int(k): v for k, v in md0["bio_sizes"].items()} == dict(Counter(bios))
    assert {int(k): v for k, v in m0["request_sizes"].items()} == dict(Counter(n for _, n in issued))
