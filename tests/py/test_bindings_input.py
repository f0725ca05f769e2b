"""Bad input at the Python boundary (Simulation, BufferedSimulation, run_fio_jobs):
refused with one ValueError line naming the argument and what is allowed, never
a crash, a hang, a wrapped value or a silently wrong result.

What crashed or hung before it was refused runs in a child process (outcome()),
so that a regression fails its test instead of taking pytest down."""
import threading

import pytest

from child_outcome import RAM, outcome, stack_file  # noqa: F401 (a fixture)
NULL = '[[members]]\nbackend = "null"\nsize = "1m"\n'
BFQ = '[device]\nscheduler = "bfq"\n' + RAM






def fio(path, job, **stack):
    """run_fio_jobs' arguments in a child's code: one stack at `path`, one job."""
    return f"m.run_fio_jobs([dict(config={path!r}, **{stack!r})], [{job!r}])"


# --- Types: a non-dict or a wrong-typed value is a ValueError naming it -------

def test_run_fio_jobs_refuses_a_job_that_is_not_a_dict(stack_file):
    """run_fio_jobs(stacks, [None]) is a ValueError naming jobs[0] (it crashed)."""
    r = outcome(f"m.run_fio_jobs([{{'config': {stack_file()!r}}}], [None])")
    assert r == ("ValueError: run_fio_jobs: jobs[0]: expected a dict, got NoneType; "
                 "allowed: a dict")


def test_run_fio_jobs_names_a_missing_config(mdsplit_module):
    """A stack dict without "config" is a ValueError naming the key (it was a KeyError)."""
    with pytest.raises(ValueError, match=r"^run_fio_jobs: stacks\[0\]: config: missing"):
        mdsplit_module.run_fio_jobs([{}], [{}])


def test_run_fio_jobs_names_a_wrong_typed_value(mdsplit_module, stack_file):
    """A str where an int goes is a ValueError naming the key and the type, not a cast error."""
    with pytest.raises(ValueError, match=r"^run_fio_jobs: jobs\[0\]: iodepth: expected an int, got str;"):
        mdsplit_module.run_fio_jobs([{"config": stack_file()}], [{"iodepth": "4"}])


def test_run_fio_jobs_takes_only_a_bool_for_a_flag(mdsplit_module, stack_file):
    """A flag given the str "false" is a ValueError, not a cast error (nor True, as a str is)."""
    with pytest.raises(ValueError, match=r"^run_fio_jobs: jobs\[0\]: random: expected a bool, got str"):
        mdsplit_module.run_fio_jobs([{"config": stack_file()}], [{"random": "false"}])


def test_set_costs_names_a_wrong_typed_value(mdsplit_module):
    """set_costs({"punt_ns": "5"}) is a ValueError naming the key (not pybind's cast error)."""
    sim = mdsplit_module.BufferedSimulation(RAM)
    with pytest.raises(ValueError, match=r"^set_costs: costs: punt_ns: expected an int, got str"):
        sim.set_costs({"punt_ns": "5"})


def test_an_unknown_fadvise_is_a_value_error_naming_it(mdsplit_module, stack_file):
    """set_fadvise("often") and a job spec's fadvise "often" are ValueErrors listing the advice."""
    allowed = r'allowed: "none" \| "normal" \| "random" \| "sequential"$'
    with pytest.raises(ValueError, match=r'^set_fadvise: "often" is not an advice; ' + allowed):
        mdsplit_module.BufferedSimulation(RAM).set_fadvise("often")
    with pytest.raises(ValueError, match=r'^run_fio_jobs: jobs\[0\]: fadvise: "often" is not an '
                                         r"advice; " + allowed):
        mdsplit_module.run_fio_jobs([{"config": stack_file()}], [{"fadvise": "often"}])


# --- Values that crashed the engine --------------------------------------------

def test_run_fio_jobs_refuses_a_block_size_of_zero(stack_file):
    """A block size of 0 is a ValueError naming bs_read (it died of SIGFPE)."""
    r = outcome(fio(stack_file(), {"bs_read": [(0, 100)]}))
    assert r.startswith("ValueError: run_fio_jobs: jobs[0]: bs_read[0]: bytes: 0 is out of range")


def test_run_fio_jobs_refuses_prioclass_4_on_bfq(stack_file):
    """prioclass 4 is a ValueError (bfq indexed its class queues out of bounds)."""
    r = outcome(fio(stack_file(BFQ), {"prioclass": 4, "size": 65536}))
    assert r == ("ValueError: run_fio_jobs: jobs[0]: prioclass: 4 is out of range; "
                 "allowed: 0..3 (none | rt | be | idle)")


# --- Runs that never ended ---------------------------------------------------------

def test_runtime_without_virtual_time_is_refused(stack_file):
    """A time-based job on a stack whose I/O takes no virtual time (and no fio CPU time) is a
    ValueError once drained (it never returned)."""
    r = outcome(fio(stack_file(), {"time_based": True, "runtime_ns": 1000, "fio_submit_ns": 0,
                                   "fio_complete_ns": 0, "size": 65536}), timeout=30)
    assert r.startswith("ValueError: run_fio_jobs: jobs[0]: time_based: no virtual time passes")


@pytest.mark.parametrize("key", ["start_delay_ns", "runtime_ns", "think_ns"])
def test_run_fio_jobs_bounds_time_arguments(stack_file, key):
    """A time argument past 2**60 ns is a ValueError naming it (2**64 - 1 stalled the event loop)."""
    r = outcome(fio(stack_file(), {"size": 8192, key: 2**64 - 1}), timeout=30)
    assert r == (f"ValueError: run_fio_jobs: jobs[0]: {key}: 18446744073709551615 is out of "
                 "range; allowed: 0..1152921504606846976 (ns: at most 2**60, about 36.5 years)")


def test_a_run_past_the_time_horizon_is_refused(stack_file):
    """Think times that carry the clock past 2**62 ns are a ValueError once drained (it wrapped)."""
    r = outcome(fio(stack_file(), {"think_ns": 2**60, "size": 8 * 4096}), timeout=30)
    assert r.startswith("ValueError: simulate: the virtual clock passed 2**62 ns")


def test_run_fio_jobs_bounds_phase(stack_file):
    """A phase past the number of jobs is a ValueError (2**62 stepped through empty phases forever)."""
    r = outcome(fio(stack_file(), {"phase": 2**62, "size": 65536}), timeout=30)
    assert r.startswith("ValueError: run_fio_jobs: jobs[0]: phase: 4611686018427387904 is out of "
                        "range; allowed: 0..0")


def test_run_fio_jobs_refuses_time_based_without_runtime(stack_file):
    """time_based without runtime_ns is a ValueError (it ran forever)."""
    r = outcome(fio(stack_file(), {"time_based": True, "size": 65536}), timeout=30)
    assert r.startswith("ValueError: run_fio_jobs: jobs[0]: time_based: True needs a runtime_ns")


def test_run_fio_jobs_refuses_time_based_without_virtual_time(stack_file):
    """A time_based job on a stack where no time passes is a ValueError (it never returned)."""
    job = {"time_based": True, "runtime_ns": 1000, "fio_submit_ns": 0, "fio_complete_ns": 0}
    r = outcome(fio(stack_file(), job), timeout=30)
    assert r.startswith("ValueError: run_fio_jobs: jobs[0]: time_based: no virtual time passes")


def test_run_fio_jobs_bounds_ramp(stack_file):
    """ramp_ns = 2**64 - 1 is a ValueError (its stop time overflowed)."""
    r = outcome(fio(stack_file(), {"ramp_ns": 2**64 - 1, "size": 65536}), timeout=30)
    assert r.startswith("ValueError: run_fio_jobs: jobs[0]: ramp_ns: 18446744073709551615 is "
                        "out of range; allowed: 0..1152921504606846976")


@pytest.mark.parametrize("call", [
    "m.BufferedSimulation(RAM).set_iodepth(65537)",
    "m.run_fio_jobs([{'config': PATH}], [{'iodepth': 65537, 'size': 65536}])",
])
def test_iodepth_is_bounded_everywhere(call, stack_file):
    """An iodepth past 65536 is a ValueError wherever one is taken (each slot's buffer is allocated)."""
    r = outcome(f"RAM = {RAM!r}; PATH = {stack_file()!r}\n{call}")
    assert r.startswith("ValueError: ") and "iodepth: 65537 is out of range; allowed: 1..65536" in r


# --- One object, one call at a time ---------------------------------------------

@pytest.mark.parametrize("cls, other_call", [("Simulation", lambda s: s.now_ns),
                                             ("BufferedSimulation", lambda s: s.costs())])
def test_a_simulation_refuses_a_second_thread(mdsplit_module, cls, other_call):
    """A call on a simulation from another thread while a call on it runs raises RuntimeError."""
    sim = getattr(mdsplit_module, cls)(RAM)
    inside, tried = threading.Event(), threading.Event()
    errors = []

    class Offset:  # read while read() parses its arguments: lets the other thread in
        def __index__(self):
            inside.set()
            tried.wait(10)
            return 0

    def other():
        inside.wait(10)
        try:
            other_call(sim)
        except RuntimeError as e:
            errors.append(str(e))
        tried.set()

    t = threading.Thread(target=other)
    t.start()
    sim.read(Offset(), 4096)
    t.join()
    assert errors and errors[0].startswith(f"{cls}: in use by another thread")


# --- Results that were wrong -----------------------------------------------------

def test_resid_past_4_gib_is_exact():
    """A read 4 GiB + 4 KiB past the end reports that residual (it was cut to 32 bits)."""
    r = outcome(f"""
        s = m.Simulation({NULL!r})
        s.submit('read', 0, 2**32 + 2**20 + 4096)
        result = s.run()[0]['resid']
        """)
    assert r == f"OK {2**32 + 4096}"


def test_simulation_read_past_the_end_returns_only_the_bytes_read(mdsplit_module):
    """Simulation.read() past the end returns the bytes read, not zero padding."""
    sim = mdsplit_module.Simulation(RAM)
    sim.write(sim.size - 512, b"\xff" * 512)
    assert sim.read(sim.size - 512, 4096) == b"\xff" * 512


def test_direct_read_past_the_end_returns_only_the_bytes_read(mdsplit_module):
    """BufferedSimulation.direct_read() past the end returns the bytes read, not zero padding."""
    sim = mdsplit_module.BufferedSimulation(RAM)
    sim.direct_write(sim.size - 4096, b"\xff" * 4096)
    assert sim.direct_read(sim.size - 4096, 8192) == b"\xff" * 4096


def test_simulation_submit_batch_with_a_bad_op_queues_nothing(mdsplit_module):
    """A refused Simulation.submit_batch() leaves none of its I/Os queued."""
    sim = mdsplit_module.Simulation(RAM)
    with pytest.raises(ValueError, match=r'^submit_batch: ios\[1\]: op: "bogus"'):
        sim.submit_batch([("read", 0, 4096), ("bogus", 0, 4096)])
    assert sim.run() == []


def test_simulation_refused_submit_takes_no_cookie(mdsplit_module):
    """A refused Simulation.submit() leaves nothing behind: the next I/O is cookie 1."""
    sim = mdsplit_module.Simulation(RAM)
    with pytest.raises(ValueError, match=r'^submit: op: "bogus"'):
        sim.submit("bogus", 0, 4096)
    assert sim.submit("read", 0, 4096) == 1
    assert sim.run() == [{"cookie": 1, "error": 0, "resid": 0}]


def test_buffered_submit_batch_with_a_bad_op_queues_nothing(mdsplit_module):
    """A refused BufferedSimulation.submit_batch() leaves none of its I/Os queued."""
    sim = mdsplit_module.BufferedSimulation(RAM)
    with pytest.raises(ValueError, match=r'^submit_batch: ios\[1\]: op: "bogus"'):
        sim.submit_batch([("read", 0, 4096), ("bogus", 0, 4096)])
    assert sim.run() == []


def test_set_costs_applies_nothing_when_a_key_is_unknown(mdsplit_module):
    """set_costs() with an unknown key leaves every cost as it was."""
    sim = mdsplit_module.BufferedSimulation(RAM)
    before = sim.costs()
    with pytest.raises(ValueError):
        sim.set_costs({"punt_ns": before["punt_ns"] + 1, "nope": 1})
    assert sim.costs() == before


def test_set_costs_unknown_key_is_a_value_error(mdsplit_module):
    """An unknown cost key is a ValueError naming it and the allowed keys."""
    sim = mdsplit_module.BufferedSimulation(RAM)
    with pytest.raises(ValueError, match=r'^set_costs: costs: unknown key "nope"; allowed: arm_ns, '):
        sim.set_costs({"nope": 1})


# --- Nothing wrapped, nothing raised from 0 ------------------------------------------

@pytest.mark.parametrize("key", ["iodepth", "batch", "pid", "group_weight"])
def test_run_fio_jobs_does_not_wrap_at_32_bits(mdsplit_module, stack_file, key):
    """2**32 + 100 is refused by name, not taken as 100."""
    with pytest.raises(ValueError, match=rf"^run_fio_jobs: jobs\[0\]: {key}: 4294967396 is out of range"):
        mdsplit_module.run_fio_jobs([{"config": stack_file()}], [{"size": 4096, key: 2**32 + 100}])


@pytest.mark.parametrize("key", ["iodepth", "batch"])
def test_run_fio_jobs_refuses_zero_depth_and_batch(mdsplit_module, stack_file, key):
    """iodepth=0 and batch=0 are refused by name, not raised to 1."""
    with pytest.raises(ValueError, match=rf"^run_fio_jobs: jobs\[0\]: {key}: 0 is out of range; "
                                         r"allowed: 1\.\.65536"):
        mdsplit_module.run_fio_jobs([{"config": stack_file()}], [{"size": 4096, key: 0}])


@pytest.mark.parametrize("key,value,allowed", [
    ("group_weight", 0, "1..1000"),
    ("group_weight", 1001, "1..1000"),
    ("read_pct", 101, "0..100"),
    ("prio", 8, "0..7"),
    ("pid", 2**32, "0..4294967295"),
])
def test_run_fio_jobs_checks_as_fio_does(mdsplit_module, stack_file, key, value, allowed):
    """run_fio_jobs refuses what fio refuses, by name and range."""
    with pytest.raises(ValueError, match=rf"^run_fio_jobs: jobs\[0\]: {key}: {value} is out of range; "
                                         rf"allowed: {allowed}"):
        mdsplit_module.run_fio_jobs([{"config": stack_file()}], [{key: value, "size": 65536}])


@pytest.mark.parametrize("kwargs,message", [
    ({"cache_size": 4097}, "cache_size: 4097 bytes is not a whole number of pages"),
    ({"cache_size": 0}, "cache_size: 0 bytes is not a whole number of pages"),
    ({"ra_kb": 2**20 + 4}, "ra_kb: 1048580 is out of range"),
])
def test_buffered_page_cache_arguments_are_checked_as_toml(mdsplit_module, kwargs, message):
    """cache_size and ra_kb are refused as [page_cache] size and ra_kb are."""
    with pytest.raises(ValueError, match="^" + message):
        mdsplit_module.BufferedSimulation(RAM, **kwargs)


# BufferedSimulation took pybind's conversion: a bool's place took any int
# (rasync=2 was True) and a negative int was a TypeError of several lines.
@pytest.mark.parametrize("call, message", [
    ("m.BufferedSimulation(RAM, rasync=1)", "rasync: expected a bool, got int; allowed: True | False"),
    ("m.BufferedSimulation(RAM, record_paths='no')",
     "record_paths: expected a bool, got str; allowed: True | False"),
    ("m.BufferedSimulation(RAM, ra_kb=-4)",
     "ra_kb: -4 is out of range; allowed: 0..1048576 (a multiple of 4; 0 turns readahead off)"),
    ("m.BufferedSimulation(RAM).set_record_paths(5)",
     "set_record_paths: on: expected a bool, got int; allowed: True | False"),
    ("m.BufferedSimulation(RAM).set_iodepth(True)",
     "set_iodepth: iodepth: expected an int, got bool; allowed: 1..65536"),
    ("m.BufferedSimulation(RAM).read(-1, 5)", "read: offset: -1 is out of range; allowed: an int >= 0"),
    ("m.BufferedSimulation(RAM).direct_write(2**64, b'')",
     "direct_write: offset: 18446744073709551616 is out of range; allowed: an int >= 0"),
    ("m.BufferedSimulation(RAM).submit_batch([('read', 0, -4096)])",
     "submit_batch: ios[0]: length: -4096 is out of range; allowed: an int >= 0"),
])
def test_buffered_simulation_arguments_are_one_line_errors(mdsplit_module, call, message):
    """Every BufferedSimulation bool and int is checked as Simulation's are: one ValueError line."""
    with pytest.raises(ValueError) as e:
        eval(call, {"m": mdsplit_module, "RAM": RAM})
    assert str(e.value) == message


def test_set_iodepth_refuses_zero(mdsplit_module):
    """set_iodepth(0) is refused by name, not raised to 1."""
    sim = mdsplit_module.BufferedSimulation(RAM)
    with pytest.raises(ValueError, match=r"^set_iodepth: iodepth: 0 is out of range"):
        sim.set_iodepth(0)


# events() filters that can match nothing were an empty list, silently.
@pytest.mark.parametrize("kwargs, message", [
    ({"device": "sda"}, 'events: device: "sda" is not a device of the stack; allowed: m0, md0, '
                        'or "" for all'),
    ({"actions": "queue"}, "events: actions: 'q' is not a blktrace action; allowed: letters of "
                           '"QXAGPUMFIDC" (blkparse\'s action column)'),
])
def test_events_filter_that_matches_nothing_is_refused(mdsplit_module, kwargs, message):
    sim = mdsplit_module.Simulation(RAM)
    sim.read(0, 4096)
    with pytest.raises(ValueError) as e:
        sim.events(**kwargs)
    assert str(e.value) == message
    assert sim.events(device="m0", actions="QD")


# A NUL in a path would open the part before it: refused, not truncated.
def test_nul_in_a_stack_path_or_label_is_refused(mdsplit_module, tmp_path):
    with pytest.raises(ValueError, match="^Simulation.from_file: path: the path holds a NUL "
                       "character"):
        mdsplit_module.Simulation.from_file(str(tmp_path / "ok.toml") + "\0zz")
    with pytest.raises(RuntimeError, match=r"filename=a\\0b names"):
        mdsplit_module.Simulation(RAM, label="a\0b", trace_dir=str(tmp_path / "tr"))
    assert not (tmp_path / "tr" / "a").exists()


# Integers are checked by the binding, one ValueError line naming the
# argument: pybind's own error was several lines, and a bool passed as 1.
@pytest.mark.parametrize("call, message", [
    (lambda s: s.submit("read", -1, 4096), "submit: offset: -1 is out of range"),
    (lambda s: s.submit("read", True, 4096), "submit: offset: expected an int, got bool"),
    (lambda s: s.submit_batch([("read", 0, 2 ** 64)]), "submit_batch: ios[0]: length: "),
    (lambda s: s.read(1, 4096), "read: offset 1, length 4096: not a direct I/O the device "
                                "takes (blkdev_dio_invalid); allowed: offset and length "
                                "multiples of the logical block size, 512 bytes, length > 0"),
    (lambda s: s.write(0, b"x" * 100), "write: offset 0, length 100: not a direct I/O"),
])
def test_simulation_integers_and_alignment_are_one_line(mdsplit_module, call, message):
    sim = mdsplit_module.Simulation(RAM)
    with pytest.raises(ValueError) as e:
        call(sim)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


# record_events=False keeps no trace events (a long run kept ~60 bytes an
# event for the object's life); events() then says so instead of [].
def test_simulation_without_recorded_events(mdsplit_module):
    sim = mdsplit_module.Simulation(RAM, record_events=False)
    for i in range(8):
        sim.submit("read", i * 4096, 4096)
    assert len(sim.run()) == 8
    with pytest.raises(ValueError, match="records no events"):
        sim.events()
    with pytest.raises(ValueError, match="record_events: expected a bool, got int"):
        mdsplit_module.Simulation(RAM, record_events=0)




# A read past the device's end is cut there before its buffer is allocated
# (a terabyte asked of a 1 MiB device was allocated whole, or bad_alloc).
def test_buffered_read_is_cut_at_the_device_end(mdsplit_module):
    sim = mdsplit_module.BufferedSimulation(RAM)
    assert len(sim.read(0, 1 << 40)) == 1 << 20
    assert len(sim.direct_read(512 << 10, 1 << 40)) == 512 << 10
    assert sim.read(1 << 20, 4096) == b""


@pytest.mark.parametrize("call, where", [
    ("m.Simulation(RAM, base_dir='sub\\0x')", "Simulation: base_dir"),
    ("m.Simulation(RAM, trace_dir='tr\\0x')", "Simulation: trace_dir"),
    ("m.BufferedSimulation(RAM, trace_dir='tr\\0x')", "BufferedSimulation: trace_dir"),
    ("m.load_stack_text(RAM, 'sub\\0x')", "load_stack_text: base_dir"),
    ("m.read_blktrace('t\\0x')", "read_blktrace: path"),
    ("m.run_fio_jobs([{'config': 's.toml', 'trace_dir': 'tr\\0x'}], [])",
     "run_fio_jobs: stacks[0]: trace_dir"),
    ("m.measure_buffered_costs('/tmp\\0x')", "measure_buffered_costs: scratch_dir"),
])
def test_a_nul_in_a_path_argument_is_one_line_naming_it(call, where, tmp_path):
    """A path argument holding a NUL: one ValueError line naming it, nothing made (the part
    before the NUL was created: a directory "tr", "sub")."""
    r = outcome(f"import os; os.chdir({str(tmp_path)!r})\n{call}")
    assert r.startswith(f"ValueError: {where}: the path holds a NUL character; allowed: "), r
    assert r.endswith(", without NUL"), r
    assert sorted(p.name for p in tmp_path.iterdir()) == []
