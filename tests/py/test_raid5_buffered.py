"""Seed 000's buffered dd on RAID5 (docs/reproductions/raid5-buffered.md):
large folios let readahead bios past md's 1 MiB max_sectors, which is what
makes the split order matter for buffered reads (virtual clock)."""
import pytest

MiB = 1024 * 1024


def raid5_stack(order, folio_kb):
    text = f"""
[device]
kind = "raid5"
chunk = "512k"
max_sectors = "1m"
split_order = "{order}"
scheduler = "mq-deadline"

[page_cache]
size = "64m"
ra_kb = 3072
folio_kb = {folio_kb}
"""
    for i in range(4):
        text += (f'\n[[members]]\npath = "r{i}"\nsize = "16m"\nbackend = "ram"\n'
                 f'model = "sas-ssd-seed000"\nmax_sectors = "512k"\n')
    return text


def dd(mdsplit_module, order, folio_kb):
    """A buffered sequential read of 48 MiB in 6400 KiB blocks (fio job,
    run_fio_jobs): (its result, the page cache's statistics)."""
    import tempfile
    from fio_jobs import job, run
    with tempfile.TemporaryDirectory() as tmp:
        (r,), stats = run(mdsplit_module, tmp, raid5_stack(order, folio_kb),
                          [job("read", 6400 * 1024, iodepth=1, total=48 * MiB, direct=False)])
    assert r["error"] == 0 and r["read"]["errors"] == 0
    return r, stats["page_cache"]


def test_single_page_folios_cap_readahead_bios_at_one_mib(mdsplit_module):
    _, pc = dd(mdsplit_module, "fixed", 4)
    assert pc["read_bios"] * 256 >= pc["pages_read"]


def test_large_folios_build_readahead_bios_past_one_mib(mdsplit_module):
    _, pc = dd(mdsplit_module, "fixed", 64)
    assert pc["read_bios"] * 512 < pc["pages_read"]


def test_split_order_does_not_matter_with_bios_of_one_mib(mdsplit_module):
    legacy, _ = dd(mdsplit_module, "legacy", 4)
    fixed, _ = dd(mdsplit_module, "fixed", 4)
    assert legacy["runtime_ns"] == fixed["runtime_ns"]


def test_legacy_order_is_slower_once_bios_are_split_twice(mdsplit_module):
    legacy, _ = dd(mdsplit_module, "legacy", 64)
    fixed, _ = dd(mdsplit_module, "fixed", 64)
    assert legacy["runtime_ns"] > fixed["runtime_ns"]


@pytest.mark.parametrize("value", ["3", "12", "512"])
def test_folio_kb_must_be_a_power_of_two_from_4_to_256(mdsplit_module, value):
    text = raid5_stack("fixed", 64).replace("folio_kb = 64", f"folio_kb = {value}")
    with pytest.raises(Exception, match="page_cache.folio_kb"):
        mdsplit_module.BufferedSimulation(text)
