"""The core through the pybind11 module, on a virtual clock."""
import pytest

from fio_jobs import closed_loop

NULL_STACK = """
[device]
kind = "passthrough"

[[members]]
path = "n0"
size = "1g"
backend = "null"
max_sectors = "512k"
queue_depth = 32
model = { command = "50us", bandwidth = 500_000_000, random_penalty = "30us", parallelism = 4 }
"""


def run(mdsplit, rw, bs, iodepth, total, stack=NULL_STACK):
    """A closed loop as one fio job on the virtual clock (run_fio_jobs)."""
    res = closed_loop(mdsplit, stack, rw, bs, iodepth, total)
    return res.pop("stats"), res


def test_virtual_time_run_is_deterministic(mdsplit_module):
    a_stats, a = run(mdsplit_module, "randread", 4096, 16, 8 * 1024 * 1024)
    b_stats, b = run(mdsplit_module, "randread", 4096, 16, 8 * 1024 * 1024)
    assert a == b
    assert a_stats == b_stats


def test_timing_model_throughput_matches_its_formula(mdsplit_module):
    # Model: command 50us on 4 channels, then media: 30us penalty if not
    # sequential + bytes / 500 MB/s, one request at a time (timing_model.h).
    # Sequential 128k at depth 4: media bound, 128k / 500 MB/s per request.
    bs = 128 * 1024
    _, seq = run(mdsplit_module, "read", bs, 4, 256 * bs)
    assert seq["bandwidth_bps"] == pytest.approx(500e6, rel=0.02)
    media = 30e-6 + 4096 / 500e6
    # Random 4k at depth 1: command + penalty + transfer per request.
    _, qd1 = run(mdsplit_module, "randread", 4096, 1, 4096 * 2000)
    assert qd1["iops"] == pytest.approx(1 / (50e-6 + media), rel=0.01)
    # Depth 2: two commands overlap, still channel bound: 2 / (50 + 38.2) us.
    _, qd2 = run(mdsplit_module, "randread", 4096, 2, 4096 * 2000)
    assert qd2["iops"] == pytest.approx(min(2 / (50e-6 + media), 1 / media), rel=0.02)
    # Depth 32 (member queue depth 32): media bound: 1 / (30 + 8.192) us.
    _, deep = run(mdsplit_module, "randread", 4096, 32, 4096 * 4000)
    assert deep["iops"] == pytest.approx(1 / media, rel=0.02)


def test_timing_model_qd1_sequential_is_exact(mdsplit_module):
    bs = 64 * 1024
    _, seq = run(mdsplit_module, "read", bs, 1, 100 * bs)
    service = 50e-6 + bs / 500e6
    # The first request of the run is not sequential (no previous request).
    expected_ns = 100 * service * 1e9 + 30e3
    assert seq["elapsed_ns"] == pytest.approx(expected_ns, rel=1e-6)


def test_ram_backend_keeps_data(mdsplit_module):
    sim = mdsplit_module.Simulation(NULL_STACK.replace('backend = "null"', 'backend = "ram"'))
    payload = bytes(range(256)) * 64
    sim.write(8192, payload)
    assert sim.read(8192, len(payload)) == payload
    assert sim.read(0, 4096) == b"\0" * 4096


def test_events_and_stats_are_python_objects(mdsplit_module):
    sim = mdsplit_module.Simulation(NULL_STACK)
    sim.submit("read", 0, 1024 * 1024)
    done = sim.run()
    assert done == [{"cookie": 1, "error": 0, "resid": 0}]
    # 1 MiB over a 512 KiB member limit: split once, two requests issued.
    issued = sim.events(device="m0", actions="D")
    assert [(e["sector"], e["nr_sectors"]) for e in issued] == [(0, 1024), (1024, 1024)]
    assert sim.stats()["devices"][1]["read"]["ios"] == 2


def test_read_past_end_is_short(mdsplit_module):
    sim = mdsplit_module.Simulation(NULL_STACK)
    sim.submit("read", sim.size - 4096, 8192)
    assert sim.run() == [{"cookie": 1, "error": 0, "resid": 4096}]


def test_unaligned_io_is_einval(mdsplit_module):
    sim = mdsplit_module.Simulation(NULL_STACK)
    sim.submit("read", 100, 4096)
    assert sim.run()[0]["error"] == -22


def test_config_error_is_value_error(mdsplit_module):
    with pytest.raises(ValueError, match="device.kind"):
        mdsplit_module.load_stack_text('[device]\nkind = "x"\n')


# rw=randtrim is fio's name for random discards: they complete, without data.
def test_randtrim_discards(mdsplit_module):
    _, res = run(mdsplit_module, "randtrim", 4096, 4, 4096 * 64)
    assert res["ios"] == 64 and res["errors"] == 0


def test_time_scale_runs_the_model_in_slow_motion(mdsplit_module):
    scaled = NULL_STACK.replace('kind = "passthrough"', 'kind = "passthrough"\ntime_scale = 4')
    _, a = run(mdsplit_module, "randread", 4096, 1, 4096 * 100)
    stats, b = run(mdsplit_module, "randread", 4096, 1, 4096 * 100, stack=scaled)
    assert b["elapsed_ns"] == pytest.approx(4 * a["elapsed_ns"], rel=1e-6)
    assert stats["time_scale"] == 4


def test_long_runs_release_the_gil(mdsplit_module, tmp_path):
    """Another Python thread keeps running while run_fio_jobs runs."""
    import threading
    (tmp_path / "stack.toml").write_text(
        '[[members]]\nbackend = "ram"\nsize = "8m"\nmodel = "nvme"\n')
    ticks, done = [0], threading.Event()

    def ticker():
        while not done.is_set():
            ticks[0] += 1
            done.wait(0.001)
    t = threading.Thread(target=ticker)
    t.start()
    try:
        before = ticks[0]
        mdsplit_module.run_fio_jobs([{"config": str(tmp_path / "stack.toml")}],
                                    [{"random": True, "iodepth": 8, "io_size": 4096 * 200_000,
                                      "norandommap": True}])
        during = ticks[0] - before
    finally:
        done.set()
        t.join()
    assert during >= 5, f"the other thread ran {during} times during the call"
