"""BFQ on a virtual clock (seed 004): idling when a non-root group is
active, legacy vs fixed (6.2) group counting, and service guarantees.

Scenarios run several fio jobs at once through the one virtual-time driver
(mdsplit.run_fio_jobs, as `harness simulate` runs a job file: tests/py/
fio_jobs.py), each job its own pid, group, group weight and ioprio, on null
members with a timing model, and read the scheduler's statistics: the
member's "bfq" entry with per-queue and per-group entries.
"""
import pytest

from fio_jobs import job, member_bfq, run

MS = 1_000_000
S = 1_000_000_000


def stack(counting, model, queue_depth=64, extra=""):
    return f"""
[device]
kind = "passthrough"
scheduler = "bfq"

[[members]]
path = "m0"
size = "64g"
backend = "null"
model = "{model}"
queue_depth = {queue_depth}

[bfq]
group_counting = "{counting}"
{extra}
"""


def throughput(results, rw="write"):
    total = sum(r[rw]["bytes"] for r in results)
    span = max(r["end_ns"] for r in results) - min(r["start_ns"] for r in results)
    return total * 1e9 / span


# --- seed 004 in small ------------------------------------------------------
# The thread's fio job: 8 jobs of psync 4k random writes, startdelay 0..7,
# offset_increment, on an NVMe drive, in the root cgroup or all in one
# non-root cgroup. Here: iodepth 1 time-based jobs started 2 ms apart, all
# running until 60 ms, on the `nvme` preset.

def seed_run(mdsplit, tmp, counting, groups):
    """groups: the group of each of the 8 jobs (None = root)."""
    end = 60 * MS
    jobs = []
    for i, group in enumerate(groups):
        # No fio CPU time between a completion and the writer's next write:
        # bfq's injection under the legacy counting turns on that think
        # time (docs/reproductions/bfq.md); at 0 it idles without injecting.
        j = job("randwrite", iodepth=1, start_ns=i * 2 * MS, runtime_ns=end - i * 2 * MS,
                offset=i * (8 << 30), size=8 << 30, name=f"task{i}", fio_submit_ns=0,
                fio_complete_ns=0)
        if group:
            j["group"] = group
        jobs.append(j)
    results, stats = run(mdsplit, tmp, stack(counting, "nvme"), jobs)
    return throughput(results), member_bfq(stats), results


@pytest.fixture(scope="module")
def seed(mdsplit_module, tmp_path_factory):
    out = {}
    tmp = tmp_path_factory.mktemp("bfq-seed")
    for counting in ("legacy", "fixed"):
        out[counting, "root"] = seed_run(mdsplit_module, tmp, counting, [None] * 8)
        out[counting, "nonroot"] = seed_run(mdsplit_module, tmp, counting, ["g1"] * 8)
    return out


def test_seed_root_group_never_idles_for_asymmetry(seed):
    # The root group is symmetric in both forms; what idling remains is for
    # a queue that is the only busy one (tot_busy_queues == 1), rare here.
    legacy_idles = seed["legacy", "nonroot"][1]["idle_periods"]
    for counting in ("legacy", "fixed"):
        bw, st, _ = seed[counting, "root"]
        assert st["group_counting"] == counting
        assert st["idle_periods"] < 0.1 * legacy_idles
        assert st["asymmetric_true"] == 0
        # an empty queue is given up, not idled for: at the next dispatch
        # (no_more_requests) or when another queue's request arrives while
        # its own is in flight (preempted: bfq_bfqq_handle_idle_busy_switch()'s
        # !bfq_better_to_idle(in_service_queue) term)
        assert st["expirations"]["no_more_requests"] + st["expirations"]["preempted"] > 0
    # legacy never counts the root group; fixed counts it as one group
    assert seed["legacy", "root"][1]["max_groups_with_pending_reqs"] == 0
    assert seed["fixed", "root"][1]["max_groups_with_pending_reqs"] == 1
    assert seed["legacy", "root"][0] == pytest.approx(seed["fixed", "root"][0], rel=1e-9)


def test_seed_legacy_nonroot_group_idles_and_loses_throughput(seed):
    root_bw = seed["legacy", "root"][0]
    bw, st, results = seed["legacy", "nonroot"]
    # num_groups_with_pending_reqs > 0: every sync queue is idled for.
    assert st["max_groups_with_pending_reqs"] == 1
    assert st["asymmetric_true"] > 0
    assert st["idle_periods"] > 1000          # one per request of the in-service queue
    assert bw < 0.5 * root_bw                 # one queue at a time in the drive
    (g1,) = [g for g in st["groups"] if g["name"] == "g1"]
    assert g1["weight"] == 100 and g1["queues"] == 8
    assert g1["idle_periods"] == st["idle_periods"]
    assert all(r["write"]["ios"] > 0 for r in results)


def test_seed_fixed_one_active_group_does_not_idle(seed):
    root_bw = seed["fixed", "root"][0]
    bw, st, _ = seed["fixed", "nonroot"]
    assert st["max_groups_with_pending_reqs"] == 1   # "> 1" is false
    assert st["idle_periods"] < 0.1 * seed["legacy", "nonroot"][1]["idle_periods"]
    assert st["asymmetric_true"] == 0
    assert bw == pytest.approx(root_bw, rel=0.02)
    assert bw > 2 * seed["legacy", "nonroot"][0]


def test_fixed_still_idles_with_two_active_groups(mdsplit_module, tmp_path):
    bw_one, _, _ = seed_run(mdsplit_module, tmp_path, "fixed", ["g1"] * 8)
    bw_two, st, _ = seed_run(mdsplit_module, tmp_path, "fixed", ["g1"] * 4 + ["g2"] * 4)
    assert st["max_groups_with_pending_reqs"] == 2
    assert st["idle_periods"] > 0
    assert bw_two < 0.5 * bw_one


# --- service guarantees -------------------------------------------------------
# The thread's check: null_blk with 100 ms completions and queue depth 1
# (the `slow-qd1` preset), two groups of greedy readers with weights 100 and
# 300: the heavier group must get three times the service, in both variants.

@pytest.mark.parametrize("counting", ["legacy", "fixed"])
@pytest.mark.parametrize("iodepth,readers", [(1, 3), (4, 2)])
def test_group_weights_are_guaranteed_on_a_slow_device(mdsplit_module, tmp_path, counting,
                                                       iodepth, readers):
    jobs = []
    for group, weight in (("light", 100), ("heavy", 300)):
        for _ in range(readers):
            jobs.append(job("randread", iodepth=iodepth, group=group, group_weight=weight,
                            runtime_ns=60 * S, offset=len(jobs) << 30, size=1 << 30))
    results, stats = run(mdsplit_module, tmp_path, stack(counting, "slow-qd1", queue_depth=1),
                         jobs)
    by_group = {}
    for j, r in zip(jobs, results):
        by_group[j["group"]] = by_group.get(j["group"], 0) + r["read"]["bytes"]
    assert by_group["heavy"] / by_group["light"] == pytest.approx(3.0, rel=0.10)
    st = member_bfq(stats)
    groups = {g["name"]: g for g in st["groups"]}
    assert groups["heavy"]["weight"] == 300 and groups["light"]["weight"] == 100
    assert groups["heavy"]["service_sectors"] / groups["light"]["service_sectors"] == \
        pytest.approx(3.0, rel=0.10)
    assert st["idle_periods"] > 0
    assert st["max_groups_with_pending_reqs"] == 2
    # Inside each group the readers share equally.
    for group in ("light", "heavy"):
        mine = [r["read"]["bytes"] for j, r in zip(jobs, results) if j["group"] == group]
        assert max(mine) / min(mine) < 1.25


def test_ioprio_gives_queue_weights(mdsplit_module, tmp_path):
    # (8 - prio) * 10: prio 0 -> 80, prio 4 -> 40 (greedy queues, iodepth 4).
    jobs = [job("randread", iodepth=4, prio=0, runtime_ns=60 * S, offset=0, size=1 << 30,
                pid=1000),
            job("randread", iodepth=4, prio=4, prioclass="be", runtime_ns=60 * S,
                offset=1 << 30, size=1 << 30, pid=1001)]
    results, stats = run(mdsplit_module, tmp_path, stack("fixed", "slow-qd1", queue_depth=1), jobs)
    assert results[0]["read"]["bytes"] / results[1]["read"]["bytes"] == \
        pytest.approx(2.0, rel=0.10)
    weights = {q["pid"]: q["weight"] for q in member_bfq(stats)["queues"]}
    assert weights[1000] == 80 and weights[1001] == 40


# --- statistics and API -------------------------------------------------------

def test_bfq_statistics_shape(seed):
    _, st, _ = seed["legacy", "nonroot"]
    for key in ("service_sectors", "charged_sectors", "dispatches", "injected", "idle_periods",
                "idle_ns", "slices", "expirations", "queues", "groups", "slice_idle_ns",
                "timeout_sync_ns", "max_budget_sectors", "low_latency"):
        assert key in st
    assert set(st["expirations"]) == {"too_idle", "budget_timeout", "budget_exhausted",
                                      "no_more_requests", "preempted"}
    assert st["slice_idle_ns"] == 8 * MS and st["timeout_sync_ns"] == 125 * MS
    assert st["max_budget_sectors"] == 16384 and st["low_latency"] is False
    assert len(st["queues"]) == 8
    for q in st["queues"]:
        assert q["sync"] and q["group"] == "g1" and q["weight"] == 40 and q["ioprio_class"] == "be"
        assert q["service_sectors"] == 8 * q["dispatches"]
    assert sum(q["service_sectors"] for q in st["queues"]) == st["service_sectors"]
    root = [g for g in st["groups"] if g["name"] == "/"][0]
    assert root["weight"] is None and root["queues"] == 0


def test_bfq_jobs_are_deterministic_and_report_per_job(mdsplit_module, tmp_path):
    a = seed_run(mdsplit_module, tmp_path, "legacy", ["g1"] * 8)
    b = seed_run(mdsplit_module, tmp_path, "legacy", ["g1"] * 8)
    assert a[2] == b[2] and a[1] == b[1]
    r = a[2][3]
    assert r["start_ns"] == 6 * MS
    for key in ("ios", "bytes", "errors", "runtime_ns", "clat", "lat"):
        assert key in r["write"]


def test_bfq_jobs_reject_a_group_without_bfq_and_a_bad_prioclass(mdsplit_module, tmp_path):
    with pytest.raises(ValueError, match="group"):
        run(mdsplit_module, tmp_path, stack("fixed", "nvme").replace('scheduler = "bfq"', ""),
            [job("randread", total=4096, group="g1")])
    with pytest.raises(ValueError, match="prioclass"):
        run(mdsplit_module, tmp_path, stack("fixed", "nvme"),
            [job("randread", total=4096, prioclass="urgent")])


# --- issue 18: the thread's figures on the virtual clock ---------------------
# harness/experiments/bfq.py's virtual run (`harness simulate` of the shipped
# jobs/bfq-groups.fio on the thread-nvme preset, and the null_blk guarantee
# test) against jobs/expectations.toml's checks.

def test_thread_guarantee_test_gives_each_group_its_weight_share(mdsplit_module):
    from harness.experiments import bfq as exp
    for variant in ("legacy", "fixed"):
        shares = exp.guarantee_test(variant)
        assert set(shares) == {"/", "g100", "g200", "g400"}
        for group, (service, weight) in shares.items():
            assert service == pytest.approx(weight, rel=0.1), (variant, group)


def test_thread_figures_pass_their_checks_on_the_virtual_clock(mdsplit_module, tmp_path):
    """simulate of bfq-groups.fio meets every check but the non-root 349 predictions, twice alike."""
    from harness import expectations as E
    from harness.experiment import ExperimentResult
    from harness.experiments import bfq as exp
    from harness.paths import ROOT
    runs = []
    for i in range(2):
        result = ExperimentResult("bfq")
        exp.run_virtual(result, ROOT / "jobs", tmp_path / str(i), lambda step: None)
        runs.append(result)
    checks = E.evaluate_checks("bfq", runs[0].metrics)
    assert len(checks) == 14
    failed = {d: detail for d, ok, detail in checks if not ok}
    # 349 and 550/349 are predictions the model misses (docs/reproductions/
    # bfq.md); every fit, identity and guarantee prediction passes.
    bases = E.basis_of("bfq")
    missed = {d for d in bases if "thread's 349" in d or "thread's 1.58" in d}
    assert len(missed) == 2 and all(bases[d] == "prediction" for d in missed)
    assert set(failed) <= missed, failed
    assert runs[0].metrics == runs[1].metrics
    assert runs[0].seed == 137 and runs[0].engine_version


def test_the_job_files_think_time_is_the_thread_hosts_in_device_time():
    """bfq-groups.fio's thinktime = THINK_NS x the stacks' time_scale."""
    import tomllib
    from harness.experiments import bfq as exp
    from harness.paths import ROOT
    jobs = ROOT / "jobs"
    text = (jobs / "bfq-groups.fio").read_text()
    think_us = int(next(l.split("=")[1] for l in text.splitlines() if l.startswith("thinktime=")))
    for name in ("bfq-legacy.toml", "bfq-fixed.toml"):
        scale = tomllib.loads((jobs / name).read_text())["device"]["time_scale"]
        assert think_us * 1000 == exp.THINK_NS * scale, name
    # bfq-guarantee.fio: the same writers' think time, its stacks unscaled
    text = (jobs / exp.GUARANTEE_JOB).read_text()
    think_us = int(next(l.split("=")[1] for l in text.splitlines() if l.startswith("thinktime=")))
    assert think_us * 1000 == exp.THINK_NS
    for name in ("bfq-null-blk-legacy.toml", "bfq-null-blk-fixed.toml"):
        assert "time_scale" not in tomllib.loads((jobs / name).read_text())["device"], name


def test_the_stack_files_carry_the_thread_nvme_preset_unchanged():
    import tomllib
    from pathlib import Path
    jobs = Path(__file__).resolve().parents[2] / "jobs"
    preset = tomllib.loads((jobs / "models.toml").read_text())["models"]["thread-nvme"]
    for name in ("bfq-legacy.toml", "bfq-fixed.toml"):
        assert tomllib.loads((jobs / name).read_text())["models"]["thread-nvme"] == preset, name
