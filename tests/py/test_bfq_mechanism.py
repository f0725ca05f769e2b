"""Seed 004's non-root loss as a mechanism (issue 39 item 4): under the
legacy group counting, bfq_asymmetric_scenario() holds with one active
non-root group, so bfq idles the in-service queue after each of its
requests for its think time (bfq_better_to_idle), and during that idle
only bfq_choose_bfqq_for_injection() dispatches other queues' requests,
at most inject_limit of them (bfq_update_inject_limit); the fixed
counting idles for none of it. These tests run the shipped
jobs/bfq-groups.fio's non-root runs on the virtual clock."""
import pytest

from harness.paths import ROOT


@pytest.fixture(scope="module")
def nonroot(tmp_path_factory):
    from harness.experiment import simulate_copy
    from harness.experiments import bfq as B
    out = {}
    for variant in ("legacy", "fixed"):
        d = tmp_path_factory.mktemp(variant)
        fio = simulate_copy(ROOT / "jobs", "bfq-groups.fio", d,
                            sections=B.place_sections(ROOT / "jobs", "nonroot", variant)[0],
                            data=False)
        sidecar = fio.sidecars[f"stats/bfq-nonroot-{variant}.json"]
        out[variant] = (B.place_MiBps(fio, "nonroot", variant), sidecar.members[0]["bfq"])
    return out


def test_legacy_idles_once_per_in_service_request(nonroot):
    """Legacy: every request of the in-service queue is followed by one idle period."""
    _, st = nonroot["legacy"]
    assert st["asymmetric_true"] == st["asymmetric_checks"] > 0
    assert st["idle_periods"] == st["dispatches"] - st["injected"]


def test_legacy_idle_lasts_the_writers_think_time(nonroot):
    """Each idle period lasts about the in-service queue's think time (bfq waits for its next request)."""
    _, st = nonroot["legacy"]
    think = sum(q["think_time_ns"] for q in st["queues"]) / len(st["queues"])
    assert st["idle_ns"] / st["idle_periods"] == pytest.approx(think, rel=0.3)


def test_legacy_injection_is_capped_by_the_inject_limit(nonroot):
    """What other queues get in is at most inject_limit a period: fewer than the 7 waiting writers."""
    _, st = nonroot["legacy"]
    per_period = st["injected"] / st["idle_periods"]
    limits = [q["inject_limit"] for q in st["queues"]]
    assert 0 < per_period <= max(limits) < 7


def test_fixed_neither_idles_nor_injects(nonroot):
    """Fixed: no asymmetric scenario, no injection, idle on < 1 % of requests."""
    _, st = nonroot["fixed"]
    assert st["asymmetric_true"] == 0 and st["injected"] == 0
    assert st["idle_periods"] < 0.01 * st["dispatches"]


def test_legacy_loses_a_fifth_over_the_jitter_draws():
    """Legacy's median over jitter_seed 1-9 loses >= 20 % against fixed (one draw may lose less)."""
    import statistics
    from harness import sweep
    from harness.experiments import bfq as B
    runs = sweep.bfq_runs(ROOT / "jobs", B.jitter_seed_settings())
    legacy = statistics.median(r["nonroot.before_MiBps"] for r in runs)
    fixed = statistics.median(r["nonroot.after_MiBps"] for r in runs)
    assert legacy < 0.8 * fixed, (legacy, fixed)


def test_shipped_runs_autotune_max_budget(nonroot):
    """Both shipped non-root runs autotune max_budget (bfq_user_max_budget == 0)."""
    for variant in ("legacy", "fixed"):
        _, st = nonroot[variant]
        assert st["max_budget_auto"] is True and st["peak_rate"] > 0


def test_peak_rate_never_updates_inside_the_checked_window(nonroot):
    """The first peak-rate interval (1 s of device time) outlasts the checked run: max_budget stays 16384."""
    for variant in ("legacy", "fixed"):
        _, st = nonroot[variant]
        assert st["peak_rate_updates"] <= 1
        assert all(q["max_budget"] <= 16384 for q in st["queues"])


def test_max_budget_study_sets_both_shipped_stacks(tmp_path):
    """harness.bfq_max_budget's draws set max_budget, the seed and the runtime in the shipped files."""
    from harness import bands, bfq_max_budget
    bands.prepare_copy(ROOT / "jobs", tmp_path, bfq_max_budget.settings(4096, 160)[0])
    for variant in ("legacy", "fixed"):
        text = (tmp_path / f"bfq-{variant}.toml").read_text()
        assert "\nmax_budget = 4096\n" in text and "jitter_seed = 1" in text
    assert "\nruntime=160\n" in (tmp_path / "bfq-groups.fio").read_text()
