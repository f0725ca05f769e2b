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
{align}# The thread's layout (jobs/bio-*.toml): runs of 1/2/4 pages, 10/80/10 %.
contiguity = {{ runs = [[1, 0.1], [2, 0.8], [4, 0.1]], seed = 1 }}
"""
IO = 64 * 1024 * 1024


def run(mdsplit, policy):
    align = 'align = "256k"\n' if policy == "align" else ""
    sim = mdsplit.Simulation(STACK.format(policy=policy, align=align))
    sim.submit("read", 0, IO)
    assert sim.run() == [{"cookie": 1, "error": 0, "resid": 0}]
    bios = [e["nr_sectors"] for e in sim.events(device="md0", actions="Q")]
    issued = [(e["sector"], e["nr_sectors"]) for e in sim.events(device="m0", actions="D")]
    return sim, bios, issued


def test_original_gives_unaligned_bios_with_small_tails(mdsplit_module):
    _, bios, issued = run(mdsplit_module, "original")
    assert sum(bios) * 512 == IO
    # Full bios (256 bvecs) of 4128..4448 sectors: 4 x 1024 + a tail.
    assert all(4096 < n < 4608 for n in bios[:-1]), Counter(bios)
    sizes = Counter(n for _, n in issued)
    tails = {n for n in sizes if n != 1024}
    assert tails == {n % 1024 for n in bios} - {0}
    assert all(n < 512 for n in tails)  # tails of 32..176 KiB


def test_small_tails_are_issued_after_the_next_bios_first_piece(mdsplit_module):
    # A tail < BLK_PLUG_FLUSH_SIZE does not flush the plug, and the LIFO plug
    # of Linux < 6.13 then issues the next bio's first piece before it: the
    # odd tail lands out of order, as the thread saw.
    sim, bios, issued = run(mdsplit_module, "original")
    out_of_order = [(a, b) for a, b in zip(issued, issued[1:]) if b[0] < a[0]]
    small = [n % 1024 for n in bios[:-1] if n % 1024 < 256]  # tails < 128 KiB
    assert len(out_of_order) == len(small) > 0
    assert sorted(b[1] for a, b in out_of_order) == sorted(small)
    assert all(a[1] == 1024 for a, b in out_of_order)
    # The same stack with the FIFO plug of Linux >= 6.13 issues in order.
    fifo = mdsplit_module.Simulation(STACK.format(policy="original", align="").replace('"lifo"', '"fifo"'))
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


def test_align_gives_the_threads_3584_sector_bios(mdsplit_module):
    _, bios, issued = run(mdsplit_module, "align")
    # The seed's trace: "block_bio_queue: 254,52 R 2997760 + 3584" ...
    assert bios == [3584] * 36 + [2048]
    # Each split at max_sectors 512 KiB into 3 x 1024 + 512, in order.
    assert [n for _, n in issued] == [1024, 1024, 1024, 512] * 36 + [1024, 1024]
    starts = [s for s, _ in issued]
    assert starts == sorted(starts)


def test_align_with_an_unalignable_layout_keeps_multiples_of_256k(mdsplit_module):
    sim = mdsplit_module.Simulation(STACK.format(policy="align", align="align = \"256k\"\n").replace(
        "runs = [[1, 0.1], [2, 0.8], [4, 0.1]], seed = 1", "pattern = [2, 1, 1]"))
    sim.submit("read", 0, IO)
    sim.run()
    bios = [e["nr_sectors"] for e in sim.events(device="md0", actions="Q")]
    assert sum(bios) * 512 == IO
    assert all(n % 512 == 0 for n in bios[:-1]), Counter(bios)


def test_sidecar_has_bio_and_request_size_distributions(mdsplit_module):
    sim, bios, issued = run(mdsplit_module, "original")
    stats = sim.stats()
    md0, m0 = stats["devices"]
    assert {int(k): v for k, v in md0["bio_sizes"].items()} == dict(Counter(bios))
    assert {int(k): v for k, v in m0["request_sizes"].items()} == dict(Counter(n for _, n in issued))


def test_virtual_run_meets_every_bio_size_check(mdsplit_module):
    """The checked figures (`harness simulate jobs/bio-align.fio`, ufs-seed001 fitted
    on the max_sectors column) meet jobs/expectations.toml: six MB/s within
    10 %, ratios to original within 5 %, both orderings, align's 3584-sector
    bios and their 3 x 1024 + 512 splits."""
    from harness import expectations as E
    from harness.experiment import ExperimentResult
    from harness.experiments import bio_size
    from harness.paths import ROOT
    virt, sim = bio_size.virtual_run(ROOT / "jobs")
    assert sim.simulated and sim.fio["seed"] == 137
    result = ExperimentResult(bio_size.NAME)
    bio_size.add_checked_metrics(result, virt)
    checks = E.evaluate_checks("bio-size", result.metrics)
    assert len(checks) == 16
    failed = [(desc, detail) for desc, ok, detail in checks if not ok]
    assert not failed, failed
    # The same numbers on a second run: the virtual clock is deterministic.
    again = ExperimentResult(bio_size.NAME)
    bio_size.add_checked_metrics(again, bio_size.virtual_run(ROOT / "jobs")[0])
    assert again.metrics == result.metrics


def test_pagemap_layout_is_one_64m_read_per_policy_through_simulate(mdsplit_module):
    """pagemap_layout(): simulate of bio-align.fio's reads, loops=1, real PFNs."""
    import os
    from harness.experiments import bio_size
    from harness.paths import ROOT
    if os.geteuid() != 0:
        pytest.skip("contiguity = \"pagemap\" reads /proc/self/pagemap's PFNs: needs root")
    layout = bio_size.pagemap_layout(ROOT / "jobs")
    assert "skipped" not in layout, layout
    for p in bio_size.POLICIES:
        for kind in ("bios", "requests"):
            assert sum(n * c for n, c in layout[p][kind].items()) == IO // 512, (p, kind)
    assert layout["max_sectors"]["requests"] == {1024: 128}
