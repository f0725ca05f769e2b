"""The reproduction reports' clock-agreement table (harness/experiment.py
clock_agreement_table): one row per job and direction that ran on both
clocks, virtual / real, recorded as unchecked machine.* metrics."""
from harness.experiment import ExperimentResult, clock_agreement_table
from harness.fio_runner import FioResult


def _fio(jobs):
    def direction(iops):
        return {"iops": iops}
    return FioResult("job.fio", 0, {"jobs": [
        {"jobname": name, "read": direction(r), "write": direction(w), "trim": direction(0)}
        for name, r, w in jobs]}, "")


def test_ratio_per_job_and_direction():
    virtual = _fio([("a", 200.0, 0.0), ("b", 0.0, 50.0), ("only-virtual", 1.0, 0.0)])
    real = _fio([("a", 100.0, 0.0), ("b", 0.0, 100.0), ("only-real", 5.0, 0.0)])
    result = ExperimentResult("x")
    text = clock_agreement_table([("run", virtual, real)], result)
    assert result.metrics == {"machine.agreement.run/a.read_ratio": 2.0,
                              "machine.agreement.run/b.write_ratio": 0.5}
    rows = [l.split() for l in text.splitlines()[2:]]
    assert rows == [["run/a", "read", "200.0", "100.0", "2.00"],
                    ["run/b", "write", "50.0", "100.0", "0.50"]]


def test_no_common_job_says_so():
    assert "no job ran on both clocks" in clock_agreement_table(
        [("", _fio([("a", 1.0, 0.0)]), _fio([("b", 1.0, 0.0)]))])


def _sidecar(host_bound, share, p99_ns=412_000, suggested=32.0):
    from harness.sidecar import Sidecar
    return Sidecar(path="stats/x.json", elapsed_ns=1, devices=[
        {"name": "md0", "role": "virtual", "lag": {"total": {"p99_ns": p99_ns}}}],
        host_lag={"host_bound": host_bound, "host_share": share,
                  "suggested_time_scale": suggested})


def test_row_says_the_real_run_was_host_bound():
    real = _fio([("a", 100.0, 0.0)])
    real.sidecars = {"stats/x.json": _sidecar(True, 0.22)}
    result = ExperimentResult("x")
    text = clock_agreement_table([("", _fio([("a", 200.0, 0.0)]), real)], result)
    assert text.splitlines()[2].endswith(
        "host-bound (host share 22 %, p99 lag 412 us; time_scale 32 keeps up)")
    assert result.machine_notes["machine.agreement.a.read_ratio"].startswith("host-bound")


def test_row_says_the_host_kept_up():
    real = _fio([("a", 100.0, 0.0)])
    real.sidecars = {"stats/x.json": _sidecar(False, 0.012)}
    text = clock_agreement_table([("", _fio([("a", 100.0, 0.0)]), real)])
    assert text.splitlines()[2].endswith("keeps up (host share 1.2 %)")


def test_real_clock_plot_title_says_host_bound():
    from harness.experiment import real_clock_title
    real = _fio([("a", 1.0, 0.0)])
    real.sidecars = {"stats/x.json": _sidecar(True, 0.5)}
    assert real_clock_title("bw", [real]) == "bw\n(real clock, this machine: host-bound)"
