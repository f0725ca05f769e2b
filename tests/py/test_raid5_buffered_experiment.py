"""harness/experiments/raid5_buffered.py: each point of the assumed range is
the shipped stack pair moved to that array (split_order still the only
difference), with md's read-ahead, and runs through simulate of the job."""
import difflib
import tomllib

from harness.experiments import raid5_buffered as RB
from harness.paths import ROOT

JOBS = ROOT / "jobs"


def texts(point):
    return {v: RB.point_stack((JOBS / f"raid5-buffered-{v}.toml").read_text(), *point)
            for v in RB.VARIANTS}


def test_a_point_moves_the_array_and_keeps_split_order_the_only_difference():
    """12 NVMe members, 1M chunks, 16 KiB folios: both files moved alike, split_order apart."""
    t = texts((12, 1024, "nvme", 16))
    changed = [l for l in difflib.ndiff(t["legacy"].splitlines(), t["fixed"].splitlines())
               if l[:2] in ("- ", "+ ")]
    assert changed == ['- split_order = "legacy"', '+ split_order = "fixed"']
    doc = tomllib.loads(t["fixed"])
    assert doc["device"]["chunk"] == "1024k" and doc["device"]["scheduler"] == "none"
    assert doc["page_cache"] == {**doc["page_cache"], "ra_kb": 2 * 1024 * 11, "folio_kb": 16}
    assert [m["model"] for m in doc["members"]] == ["nvme"] * 12
    assert len({m["path"] for m in doc["members"]}) == 12


def test_read_ahead_is_two_stripes_of_data_or_the_vm_default():
    """ra_kb = max(2 x chunk x data disks, 128): blk_apply_bdi_limits over raid5's io_opt."""
    assert RB.ra_kb(8, 512) == 7168 and RB.ra_kb(8, 64) == 896 and RB.ra_kb(3, 16) == 128


def test_the_order_matters_below_one_mib_chunks_only(tmp_path):
    """Through simulate: 8 SAS SSDs at 64k chunks lose under legacy; at 1M chunks the orders tie."""
    small, large = RB.sweep(JOBS, tmp_path, [(8, 64, "sas-ssd-seed000", 64),
                                             (8, 1024, "sas-ssd-seed000", 64)], workers=1)
    assert small["fixed_over_legacy"] > 1.3
    assert large["legacy.md0_GiBps"] == large["fixed.md0_GiBps"]
