"""Arguments at the Python boundary, continued (test_bindings_input.py has the
first part): wrong types and unknown keywords as one line naming the argument,
allocations bounded by what can be in flight and by the device's end, the
engine's refusals (groups, alignment, the device's end) made up front.

What could exhaust memory runs in a child process with its address space
limited (outcome(limit=...)), so that a regression fails its test instead of
taking the machine's memory."""
import pytest

from child_outcome import RAM, outcome, stack_file  # noqa: F401 (a fixture)

BFQ = '[device]\nscheduler = "bfq"\n' + RAM






def one_line_error(f, *args, **kwargs) -> str:
    """`ErrorType: message` of what f(*args, **kwargs) raised (a ValueError:
    fails otherwise), checked to be one line."""
    with pytest.raises(ValueError) as e:
        f(*args, **kwargs)
    text = str(e.value)
    assert "\n" not in text
    return f"{type(e.value).__name__}: {text}"


# --- Allocations: what can be in flight, what the device holds --------------------

def test_buffered_submit_read_buffer_stops_at_the_device_end():
    """BufferedSimulation.submit of a 4 GiB read of a 16 MiB device allocates 16 MiB at most."""
    r = outcome("""
        b = m.BufferedSimulation(RAM16)
        b.submit('read', 0, 1 << 32)
        (c,) = b.run()
        result = (c['error'], c['resid'], len(c['data']))
        """, limit=1 << 30)
    assert r == f"OK (0, {(1 << 32) - (16 << 20)}, {16 << 20})"


def test_buffered_submit_write_past_the_end_fails_as_the_device_does():
    """A 64 GiB write of a 16 MiB device completes with ENOSPC, as Simulation's (bad_alloc before)."""
    r = outcome("""
        b = m.BufferedSimulation(RAM16)
        b.submit('write', 0, 1 << 36)
        (c,) = b.run()
        result = (c['error'], c['resid'])
        """, limit=1 << 30)
    assert r == f"OK (-28, {1 << 36})"


@pytest.mark.parametrize("cls, call", [
    ("Simulation", "write"), ("BufferedSimulation", "write"),
    ("BufferedSimulation", "direct_write"),
])
def test_a_synchronous_write_past_the_end_is_refused_naming_data(mdsplit_module, cls, call):
    """write() past the device's end is one ValueError line naming data (an "I/O failed" before)."""
    sim = getattr(mdsplit_module, cls)(RAM)
    assert one_line_error(getattr(sim, call), sim.size - 4096, b"x" * 8192) == (
        f"ValueError: {call}: data: 8192 bytes at offset {sim.size - 4096} pass the end of the "
        f"device ({sim.size} bytes); allowed: at most 4096 bytes at that offset")


# --- Types and keywords: one line naming the argument ------------------------------

S = "m.Simulation(RAM)"
B = "m.BufferedSimulation(RAM)"


@pytest.mark.parametrize("call, message", [
    ("m.Simulation(None)",
     "Simulation: toml: expected a str, got NoneType; allowed: the stack's TOML text (a str)"),
    (f"{S}.submit(None, 0, 4096)",
     'submit: op: expected a str, got NoneType; allowed: "read" | "write" | "discard"'),
    (f"{S}.submit_batch(None)", "submit_batch: ios: expected a list, got NoneType; "
                                "allowed: a list of (op, offset, length) tuples"),
    (f"{S}.submit_batch(x for x in [('read', 0, 4096)])",
     "submit_batch: ios: expected a list, got generator; allowed: a list of (op, offset, "
     "length) tuples"),
    (f"{S}.submit_batch([('read', 0)])", "submit_batch: ios[0]: expected a tuple of 3, got "
                                         "tuple of 2; allowed: a list of (op, offset, length) "
                                         "tuples"),
    (f"{B}.submit_batch([('read', 0)])", "submit_batch: ios[0]: expected a tuple of 3, got "
                                         "tuple of 2; allowed: a list of (op, offset, length) "
                                         "tuples"),
    (f"{S}.write(0, 'text')", "write: data: expected bytes, got str; allowed: bytes, bytearray "
                              "or another contiguous bytes-like object"),
    (f"{S}.events(device=None)", 'events: device: expected a str, got NoneType; allowed: a '
                                 'device name of the stack, or "" for all'),
    ("m.read_blktrace(None)", "read_blktrace: path: expected a str, got NoneType; allowed: a "
                              "path (a str)"),
    ("m.load_stack_text(None)", "load_stack_text: text: expected a str, got NoneType; allowed: "
                                "the stack's TOML text (a str)"),
    ("m.BufferedSimulation(RAM, variant=5)", 'variant: expected a str, got int; allowed: '
                                             '"pre-c8d317aa" | "c8d317aa" | "forced-ra", or None'),
    (f"{B}.set_fadvise(None)", 'set_fadvise: advice: expected a str, got NoneType; allowed: '
                               '"none" | "normal" | "random" | "sequential"'),
    ("m.run_fio_jobs((), None)",
     "run_fio_jobs: jobs: expected a list, got NoneType; allowed: a list of job dicts"),
    ("m.measure_buffered_costs(reads=-1)",
     "measure_buffered_costs: reads: -1 is out of range; allowed: 1..100000"),
    ("m.measure_buffered_costs(reads=1.5)",
     "measure_buffered_costs: reads: expected an int, got float; allowed: 1..100000"),
    ("m.measure_buffered_costs(reads=None)",
     "measure_buffered_costs: reads: expected an int, got NoneType; allowed: 1..100000"),
])
def test_a_wrong_type_is_one_line_naming_the_argument(mdsplit_module, call, message):
    """A wrong type is one ValueError line naming the argument (pybind's TypeError was several)."""
    def run():
        eval(call, {"m": mdsplit_module, "RAM": RAM})
    assert one_line_error(run) == "ValueError: " + message


@pytest.mark.parametrize("call, message", [
    ("m.Simulation(RAM, foo=1)", 'Simulation: unknown keyword argument "foo"; allowed: toml, '
                                 'base_dir, label, trace_dir, record_events'),
    ("m.BufferedSimulation(RAM, cache=4096)",
     'BufferedSimulation: unknown keyword argument "cache"; allowed: toml, base_dir, label, '
     'trace_dir, variant, rasync, ra_kb, cache_size, record_paths'),
    (f"{S}.events(action='Q')",
     'events: unknown keyword argument "action"; allowed: device, actions'),
    ("m.run_fio_jobs([], [], dat=False)",
     'run_fio_jobs: unknown keyword argument "dat"; allowed: stacks, jobs, data'),
])
def test_an_unknown_keyword_is_one_line_naming_it(mdsplit_module, call, message):
    """An unknown keyword is one UnknownKeyError line listing the allowed ones."""
    def run():
        eval(call, {"m": mdsplit_module, "RAM": RAM})
    assert one_line_error(run) == "UnknownKeyError: " + message


@pytest.mark.parametrize("cls", ["Simulation", "BufferedSimulation"])
def test_write_takes_any_bytes_like_data(mdsplit_module, cls):
    """write() takes a bytearray or a memoryview as bytes (it was a TypeError)."""
    sim = getattr(mdsplit_module, cls)(RAM)
    sim.write(0, bytearray(b"\x01" * 4096))
    sim.write(4096, memoryview(b"\x02" * 4096))
    assert sim.read(0, 8192) == b"\x01" * 4096 + b"\x02" * 4096


def test_run_fio_jobs_takes_tuples(mdsplit_module, stack_file):
    """run_fio_jobs takes tuples of stacks and jobs as lists (it was a TypeError)."""
    r = mdsplit_module.run_fio_jobs(({"config": stack_file()},), ({"size": 65536},))
    assert r["jobs"][0]["read"]["ios"] == 16


# --- Flags and counts: a bool is a bool, an int not a bool ------------------------

@pytest.mark.parametrize("data, got", [(None, "NoneType"), (1, "int")])
def test_run_fio_jobs_data_is_a_checked_bool(mdsplit_module, stack_file, data, got):
    """run_fio_jobs(data=None) or data=1 is refused (None ran without data, silently)."""
    assert one_line_error(mdsplit_module.run_fio_jobs, [{"config": stack_file()}],
                          [{"size": 65536}], data=data) == (
        f"ValueError: run_fio_jobs: data: expected a bool, got {got}; allowed: True | False")


def test_measure_buffered_costs_refuses_a_bool_count(mdsplit_module):
    """measure_buffered_costs(reads=True) is refused, not taken as 1 read."""
    assert one_line_error(mdsplit_module.measure_buffered_costs, reads=True) == (
        "ValueError: measure_buffered_costs: reads: expected an int, got bool; allowed: "
        "1..100000")


# --- Groups: as the engine refuses them ----------------------------------------------

def test_run_fio_jobs_refuses_a_weight_for_the_empty_group(mdsplit_module, stack_file):
    """group "" (the root group) with a group_weight is refused: the weight was ignored."""
    assert one_line_error(mdsplit_module.run_fio_jobs, [{"config": stack_file(BFQ)}],
                          [{"size": 65536, "group": "", "group_weight": 300}]) == (
        'ValueError: run_fio_jobs: jobs[0]: group_weight: is the weight of a group, and none '
        'is named; allowed: "group" (a name, not "") beside it, or no group_weight')


def test_run_fio_jobs_takes_the_empty_group_without_bfq(mdsplit_module, stack_file):
    """group "" is the root group, as the engine's empty mdsplit_group: taken on any stack."""
    r = mdsplit_module.run_fio_jobs([{"config": stack_file()}], [{"size": 4096, "group": ""}])
    assert r["jobs"][0]["read"]["ios"] == 1


def test_run_fio_jobs_refuses_the_default_weight_beside_another(mdsplit_module, stack_file):
    """A job of a group without a weight (100) beside one that gives 300 is refused."""
    job = {"size": 65536, "group": "g"}
    assert one_line_error(mdsplit_module.run_fio_jobs, [{"config": stack_file(BFQ)}],
                          [dict(job, group_weight=300), job]) == (
        'ValueError: run_fio_jobs: jobs[1]: group_weight: 100 (the default) for group "g", '
        'which jobs[0] on that stack gives 300, and a group has one weight; allowed: the same '
        'group_weight on every task of a group (on one device)')


@pytest.mark.parametrize("job, message", [
    ({"group": "g"}, "jobs[0]: group: groups are scheduled by bfq, which this stack does not "
                     'run; allowed: device.scheduler = "bfq" in the stack, or no group (or "")'),
    ({"group_weight": 300}, 'jobs[0]: group_weight: is the weight of a group, and none is '
                            'named; allowed: "group" (a name, not "") beside it, or no '
                            'group_weight'),
])
def test_run_fio_jobs_refuses_group_settings_as_the_engine(mdsplit_module, stack_file, job,
                                                               message):
    """A group without bfq, or a weight without a group, is refused by run_fio_jobs too."""
    assert one_line_error(mdsplit_module.run_fio_jobs, [{"config": stack_file()}],
                          [dict(job, size=65536)]) == "ValueError: run_fio_jobs: " + message


def test_run_fio_jobs_refuses_two_weights_for_one_group(mdsplit_module, stack_file):
    """Two jobs of one group on one stack with different weights are refused."""
    jobs = [{"size": 65536, "group": "g", "group_weight": w} for w in (300, 200)]
    assert one_line_error(mdsplit_module.run_fio_jobs, [{"config": stack_file(BFQ)}], jobs) == (
        'ValueError: run_fio_jobs: jobs[1]: group_weight: 200 for group "g", which jobs[0] on '
        'that stack gives 300, and a group has one weight; allowed: the same group_weight on '
        'every task of a group (on one device)')


# --- Messages: the argument, its value, what is allowed --------------------------------

def test_run_fio_jobs_model_errors_name_the_job_index(mdsplit_module, stack_file):
    """An offset past the end names jobs[0], as run_fio_jobs' other errors (not "simulate: job")."""
    assert one_line_error(mdsplit_module.run_fio_jobs, [{"config": stack_file()}],
                          [{"offset": 2 << 20}]) == (
        "ValueError: run_fio_jobs: jobs[0]: offset: 2097152 is past the end of the device "
        "(1048576 bytes); allowed: 0..1048575")


@pytest.mark.parametrize("call, args", [("direct_read", (1, 100)),
                                        ("direct_write", (1, b"x" * 100))])
def test_buffered_direct_io_explains_alignment(mdsplit_module, call, args):
    """direct_read/direct_write unaligned say what the device takes, as Simulation.read does."""
    sim = mdsplit_module.BufferedSimulation(RAM)
    assert one_line_error(getattr(sim, call), *args) == (
        f"ValueError: {call}: offset 1, length 100: not a direct I/O the device takes "
        "(blkdev_dio_invalid); allowed: offset and length multiples of the logical block size, "
        "512 bytes, length > 0")


# --- Refused up front instead of run wrong -------------------------------------------

@pytest.mark.parametrize("args, message", [
    ((5, 0), "offset: 5 given for fsync"),
    ((0, 3), "length: 3 given for fsync"),
])
def test_fsync_refuses_a_range(mdsplit_module, args, message):
    """submit('fsync', offset, length) with a range is refused (the range was ignored)."""
    sim = mdsplit_module.BufferedSimulation(RAM)
    assert one_line_error(sim.submit, "fsync", *args) == (
        f"ValueError: submit: {message}, which syncs the whole device; allowed: 0 (the default)")


# --- Calls: the number and names of the arguments --------------------------------

@pytest.mark.parametrize("call, message", [
    ("s.submit('read', 0)",
     'TypeError: submit: missing argument "length"; allowed: (op, offset, length)'),
    ("s.submit('read', 0, 4096, 1)",
     "TypeError: submit: takes at most 3 arguments, got 4; allowed: (op, offset, length)"),
    ("s.submit('read', 0, 4096, op='read')",
     'TypeError: submit: argument "op" given twice (by position and by keyword); allowed: '
     "(op, offset, length)"),
    ("s.submit('read', 0, 4096, foo=1)",
     'UnknownKeyError: submit: unknown keyword argument "foo"; allowed: op, offset, length'),
    ("s.run(1)", "TypeError: run: takes at most 0 arguments, got 1; allowed: ()"),
    ("m.Simulation.run()",
     "TypeError: Simulation.run: called without its object; allowed: a Simulation's run()"),
    ("m.Simulation()",
     'TypeError: Simulation: missing argument "toml"; allowed: (toml, base_dir=\'.\', '
     "label='md0', trace_dir='', record_events=True)"),
    ("m.Simulation.from_file()",
     'TypeError: Simulation.from_file: missing argument "path"; allowed: (path, label=\'md0\', '
     "trace_dir='', record_events=True)"),
    ("m.file_in_use('/x', bar=1)",
     'UnknownKeyError: file_in_use: unknown keyword argument "bar"; allowed: path'),
    ("m.read_blktrace()",
     'TypeError: read_blktrace: missing argument "path"; allowed: (path)'),
    ("m.BufferedSimulation(RAM).read(0)",
     'TypeError: read: missing argument "length"; allowed: (offset, length)'),
])
def test_a_call_with_wrong_arguments_is_one_line(call, message):
    """Too few, too many, twice given or unknown keyword arguments: one line naming the call
    (pybind's TypeError listed the overloads over several lines)."""
    assert outcome(f"s = m.Simulation(RAM)\n{call}") == message
