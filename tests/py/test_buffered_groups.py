"""Buffered I/O in BFQ groups (issue 19 item 5), on the virtual clock
(`harness simulate`): a buffered job's page reads are charged to its
mdsplit_group (the reader's blkcg; io-wq workers run in the submitter's,
io_wq_switch_blkcg() in 5.9), and write-back to the group of the job that
dirtied the pages (cgroup write-back, wbc_init_bio()). Two buffered jobs in
two groups on one BFQ member; the sidecar's per-group and per-queue figures."""
import json

import pytest

from harness.simulate import simulate_job

STACK = """
[device]
kind = "passthrough"
scheduler = "bfq"

[[members]]
path = "m0"
size = "1g"
backend = "null"
model = "nvme"

[page_cache]
size = "256m"
ra_kb = 0
rasync = {rasync}
variant = "{variant}"
"""

JOB = """
[global]
ioengine=external:libmdsplit.so
filename=md0
thread=1
direct=0
bs=4k
mdsplit_config=s.toml
mdsplit_stats=stats/g.json

[reader]
rw=randread
offset=0
size=8m
iodepth=8
mdsplit_group=gr

[writer]
rw=write
offset=512m
size=4m
end_fsync=1
mdsplit_group=gw
mdsplit_group_weight=300
"""


def member_bfq(tmp_path, variant, rasync):
    (tmp_path / "s.toml").write_text(STACK.format(variant=variant, rasync=rasync))
    (tmp_path / "j.fio").write_text(JOB)
    simulate_job(tmp_path / "j.fio")
    stats = json.loads((tmp_path / "stats/g.json").read_text())
    (member,) = [d for d in stats["devices"] if d["role"] == "member"]
    return member["bfq"]


# rasync off with pre-c8d317aa: every read issued by an io-wq worker
@pytest.mark.parametrize("variant,rasync", [("c8d317aa", "true"), ("pre-c8d317aa", "false"),
                                            ("forced-ra", "false")])
def test_reads_go_to_the_readers_group_and_writeback_to_the_dirtiers(tmp_path, mdsplit_module,
                                                                      variant, rasync):
    """8 MiB of page reads under gr, the 4 MiB written back under gw, none under the root."""
    bfq = member_bfq(tmp_path, variant, rasync)
    groups = {g["name"]: g for g in bfq["groups"]}
    assert groups["gr"]["service_sectors"] == (8 << 20) >> 9
    assert groups["gw"]["service_sectors"] == (4 << 20) >> 9
    assert groups["gw"]["weight"] == 300
    assert groups["/"]["service_sectors"] == 0


def test_each_job_has_its_own_queue_in_its_group(tmp_path, mdsplit_module):
    """One bfq queue per job (its pid), in its own group: reads and write-back are not merged
    into one loop-owned queue."""
    bfq = member_bfq(tmp_path, "c8d317aa", "true")
    queues = {q["group"]: q for q in bfq["queues"] if q["service_sectors"]}
    assert set(queues) == {"gr", "gw"}
    assert queues["gr"]["pid"] != queues["gw"]["pid"]
