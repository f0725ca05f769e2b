"""`harness simulate JOB.fio`: a fio job file run on the core's virtual
clock (engine/sim/fio_job_model.h), deterministically, with fio's JSON
shape as output and the sidecars and blktrace files the engine writes.

    from harness.simulate import simulate_job
    result = simulate_job("jobs/raid5-split-order.fio", sections=["fixed"])
    result["jobs"][0]["read"]["bw"]          # KiB/s, as fio's JSON

This module turns the parsed job file (harness/jobfile.py) into the core's
FioJobSpec dicts with the engine's rules (engine/fio/mdsplit_engine.cpp
mdsplit_setup: the stack of a job is its mdsplit_config + filename label;
thread=1 jobs naming the same ones share it, other jobs get their own;
writable when any job of the run naming the stack file may write, with the
engine's device safety checks before anything opens; the scheduling identity from
prio/prioclass and mdsplit_group (or fio's cgroup)/_weight), refuses options that would
change the I/O pattern and are not modelled, and builds fio's JSON.
Paths in the job file are relative to the job file's directory (the
harness runs fio from there).
"""
import json
import math
import os
import re
import stat
import sys
from pathlib import Path

from harness import paths
from harness.jobfile import (JobFileError, last_of, parse_bool, parse_bssplit, parse_int,
                             parse_job_file, parse_range, parse_size, parse_size_or_percent,
                             parse_size_per_direction,
                             parse_time_us, read_input_text)

VERSION = "mdsplit-simulate-1"
DEFAULT_SEED = 0x89  # fio's randrepeat=1 default: every run the same sequence
# fio's default clat percentiles (stat.c fio_default_percentiles? options.c
# def_percentile_list): 1,5,10,20,30,40,50,60,70,80,90,95,99,99.5,99.9,99.95,99.99
PERCENTILES = [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0,
               99.5, 99.9, 99.95, 99.99]


class SimulateError(Exception):
    """One line for stderr; exit_code 2 for unsupported options or bad job
    files, 1 for what fio would also refuse at run time (the engine's errors)."""

    def __init__(self, message, exit_code=2):
        super().__init__(message)
        self.exit_code = exit_code


# Options that shape the I/O and are modelled (see fio_job_model.h).
SUPPORTED = {
    "rw", "rwmixread", "rwmixwrite", "bs", "bsrange", "bssplit", "blockalign",
    "iodepth", "iodepth_batch_submit", "size", "io_size", "offset", "offset_increment",
    "numjobs", "startdelay", "runtime", "time_based", "ramp_time", "loops", "direct",
    "buffered", "thread", "prio", "prioclass", "randseed", "randrepeat", "norandommap",
    "random_distribution", "fsync", "end_fsync", "sync", "rate_iops", "thinktime",
    "thinktime_blocks", "verify", "do_verify", "invalidate", "filename", "ioengine",
    "stonewall", "wait_for_previous", "new_group", "name", "description",
    "mdsplit_config", "mdsplit_stats", "mdsplit_trace", "mdsplit_group",
    "mdsplit_group_weight", "continue_on_error", "cgroup", "ioscheduler",
    "fadvise_hint",
    "unlink", "unlink_each_loop",  # refused as the engine refuses them
}
# Options that only change what fio reports or how the host runs fio, not
# the I/O: accepted and ignored.
REPORTING_ONLY = {
    "write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log", "log_avg_msec",
    "log_hist_msec", "log_hist_coarseness", "log_max_value", "log_offset", "log_compression",
    "log_store_compressed", "log_unix_epoch", "log_alternate_epoch", "per_job_logs",
    "log_prio", "log_entries", "log_compression_cpus", "log_alternate_epoch_clock_id",
    "group_reporting", "percentile_list", "clat_percentiles", "lat_percentiles",
    "slat_percentiles", "disable_lat", "disable_clat", "disable_slat", "disable_bw_measurement",
    "stats", "unit_base", "significant_figures", "disk_util", "verify_fatal", "verify_dump",
    "clocksource", "gtod_reduce",
    "gtod_cpu", "cpus_allowed", "cpus_allowed_policy", "cpumask", "nice", "uid", "gid",
    "allow_file_create", "allow_mounted_write", "create_on_open", "fallocate",
    "overwrite", "kb_base", "eta_newline", "status_interval", "verify_backlog_batch",
    "iodepth_batch_complete_min", "iodepth_batch_complete_max", "lat_percentiles",
    "steadystate_check_interval",
}
# Not modelled, and not reporting only, so refused by name: exitall ends the
# other jobs when one ends (backend.c), max_latency fails a job with
# ETIMEDOUT (io_u.c lat_fatal)).
# options.c verify's values: "0" but not "1" (fio refuses verify=1).
VERIFY_KINDS = {"0", "md5", "crc64", "crc32c", "crc32c-intel", "crc32", "crc16", "crc7",
                "xxhash", "sha512", "sha256", "sha1", "sha3-224", "sha3-256", "sha3-384",
                "sha3-512", "meta", "pattern", "null"}


# fio's continue_on_error values (options.c) as ERROR_TYPE_*_BIT masks
# (fio.h: read 1, write 2, verify 4); fio_job_model.cpp ends_job().
CONTINUE_ON_ERROR = {"none": 0, "0": 0, "read": 1, "write": 2, "io": 3, "verify": 4,
                     "all": 7, "1": 7}


def unsupported(option):
    return SimulateError(f"simulate: option '{option}' is not supported in virtual time")


def _check_options(job):
    for key, value in job.options.items():
        if key in SUPPORTED or key in REPORTING_ONLY:
            continue
        if key.lower() in SUPPORTED or key.lower() in REPORTING_ONLY:
            # parse.c find_option(): strcmp, so fio says "Bad option <RW=...>".
            raise SimulateError(f"simulate: option '{key}' is not an fio option (names are "
                                f"case-sensitive); allowed: {key.lower()}")
        raise unsupported(key)
    o = job.options
    if o.get("kb_base", "1024") != "1024":
        raise unsupported("kb_base=" + o["kb_base"])
    if o.get("random_distribution", "random") != "random":
        raise unsupported("random_distribution=" + o["random_distribution"])
    for key in ("iodepth_batch_complete_min", "iodepth_batch_complete_max"):
        if key in o and parse_int(key, o[key]) > 1:
            raise unsupported(f"{key}={o[key]}")
    if "rate_iops" in o and "," in o["rate_iops"]:
        raise unsupported("rate_iops=" + o["rate_iops"] + " (per direction)")
    if o.get("verify", "0") not in VERIFY_KINDS:
        raise SimulateError(f"simulate: verify={o['verify']}: unknown verify method")
    engine = o.get("ioengine", "")
    if not engine.startswith("external:") or not engine.endswith("libmdsplit.so"):
        raise SimulateError(f"simulate: job {job.name}: ioengine={engine or '(fio default)'}; "
                            "simulate runs jobs of the mdsplit engine "
                            "(ioengine=external:.../libmdsplit.so)")


_RW = {  # fio's rw values: (random, read_pct, trim); rwmix does not apply to trims
    "read": (False, 100, ""), "write": (False, 0, ""), "randread": (True, 100, ""),
    "randwrite": (True, 0, ""), "rw": (False, None, ""), "readwrite": (False, None, ""),
    "randrw": (True, None, ""), "trim": (False, 0, "trim"), "randtrim": (True, 0, "trim"),
    "trimwrite": (False, 0, "trimwrite"), "randtrimwrite": (True, 0, "trimwrite"),
}
# The engine's refusal (mdsplit_engine.cpp unsupported_option()), word for word.
BUFFERED_TRIM = ("mdsplit: rw=trim/randtrim/trimwrite with direct=0: a buffered job's discard "
                 "is not emulated; allowed: direct=1 for jobs that trim")


def _pattern(o):
    # parse.c matches a FIO_OPT_STR value with strncmp: case counts (rw=RandWrite fails).
    rw = o.get("rw", "read").split(":")[0].strip()
    if rw not in _RW:
        raise SimulateError(f"simulate: rw={rw}: allowed: " + ", ".join(_RW))
    if ":" in o.get("rw", ""):
        raise unsupported(f"rw={o['rw']} (offset modifier)")
    random, read_pct, trim = _RW[rw]
    # fio's parser checks the range (maxval 100) whatever rw is.
    for key in ("rwmixread", "rwmixwrite"):
        if key in o and not 0 <= parse_int(key, o[key]) <= 100:
            raise SimulateError(f"simulate: {key}={o[key]}: allowed: 0 to 100")
    if read_pct is None:
        # The one set last wins: str_rwmix_write_cb sets rwmix[READ] = 100 - val.
        last = last_of(o, "rwmixread", "rwmixwrite")
        if last == "rwmixread":
            read_pct = parse_int("rwmixread", o["rwmixread"])
        elif last == "rwmixwrite":
            read_pct = 100 - parse_int("rwmixwrite", o["rwmixwrite"])
        else:
            read_pct = 50
        if not 0 <= read_pct <= 100:
            raise SimulateError("simulate: rwmixread/rwmixwrite must be 0..100")
    return random, read_pct, trim


def _block_sizes(o):
    """Per direction (read, write, trim): bs, bsrange, bssplit, blockalign."""
    # fio refuses an empty value ("bs=", or bs=${UNSET}); an empty read part
    # ("bs=,8k") keeps its default 4k.
    if not o.get("bs", "4k").strip():
        raise SimulateError(f"simulate: bs={o['bs']}: empty; allowed: a size like 4k")
    bs = [[(b if b is not None else 4096, 100)]
          for b in parse_size_per_direction("bs", o.get("bs", "4k"))]
    bs_max = [0, 0, 0]
    if "bsrange" in o:
        ranges = parse_range("bsrange", o["bsrange"])
        bs = [[(lo, 100)] for lo, _ in ranges]
        bs_max = [hi for _, hi in ranges]
    if "bssplit" in o:
        bs = [[(b, p) for b, p in d] for d in parse_bssplit("bssplit", o["bssplit"])]
    align = [0, 0, 0]
    if "blockalign" in o:
        align = [a or 0 for a in parse_size_per_direction("blockalign", o["blockalign"])]
    for d in bs:
        for b, _ in d:
            if b <= 0:
                raise SimulateError("simulate: bs must be positive")
    return bs, bs_max, align


def _continue_on_error(o) -> int:
    value = o.get("continue_on_error", "none").strip()  # strncmp: case counts
    if value not in CONTINUE_ON_ERROR:
        raise SimulateError(f"simulate: continue_on_error={value}: allowed: "
                            + ", ".join(CONTINUE_ON_ERROR))
    return CONTINUE_ON_ERROR[value]


def _resolve(base: Path, p: str) -> str:
    q = Path(p)
    return str(q if q.is_absolute() else base / q)


def build_run(job_file, sections=None, seed=None, env=None, report=None):
    """The stacks and job specs of a job file, and per job what the output
    needs (name, group, sidecar path). Raises SimulateError."""
    try:
        return _build_run(job_file, sections, seed, env, report)
    except JobFileError as e:  # a value parsed anywhere in the run: one line
        raise SimulateError(str(e)) from None


def _build_run(job_file, sections, seed, env, report):
    try:
        jf = parse_job_file(job_file, sections=sections, env=env)
    except JobFileError as e:
        raise SimulateError(str(e)) from None
    base = Path(job_file).resolve().parent
    base_seed = DEFAULT_SEED if seed is None else int(seed)
    stacks, stack_keys, specs, meta = [], {}, [], []
    stack_names = []  # per stack: its mdsplit_trace option and the job that opened it
    phase = -1
    all_configs = {}
    job_order, run_writes, run_creates, allow_mounted = [], {}, {}, {}
    jobs_info = []  # per job: what the engine's checks across jobs look at
    _check_thread_cgroups(jf.jobs)
    for index, job in enumerate(jf.jobs):
        _check_options(job)
        o = job.options
        try:
            config = o.get("mdsplit_config")
            if not config:
                raise SimulateError("mdsplit: mdsplit_config is required: the TOML file "
                                    "describing the device stack (see docs/stack-toml.md)", 1)
            config_path = os.path.realpath(_resolve(base, config))
            label = o.get("filename", "")
            if not label:
                # init.c add_job(): a job without filename= gets one file named
                # after it, jobname.N.0 (N its subjob), or the job's name itself
                # where that exists and is no regular file (exists_and_not_regfile).
                named = os.path.join(base, job.name)
                label = job.name if os.path.exists(named) and not os.path.isfile(named) \
                    else f"{job.name}.{job.subjob}.0"
            if ":" in label:
                # The engine counts fio's files (td->files_index): str_filename_cb
                # adds one per ':'-separated name up to the first empty one.
                names = label.split(":")
                files = names.index("") if "" in names else len(names)
                raise SimulateError("mdsplit: filename must name exactly one virtual device "
                                    f"(e.g. md0); got {files} files", 1)
            thread = parse_bool("thread", o.get("thread", "0"))
            gw_text = o.get("mdsplit_group_weight", "100")
            gw = int(gw_text) if gw_text.lstrip("-").isdigit() else 0
            if not 1 <= gw <= 1000:
                raise SimulateError(f"mdsplit: mdsplit_group_weight={gw_text} is not a group "
                                    "weight; allowed: an integer 1..1000", 1)
            for opt in ("unlink", "unlink_each_loop"):
                if parse_bool(opt, o.get(opt, "0")):
                    raise SimulateError(
                        f"mdsplit: {opt}=1: filename= names the virtual device, not a file, so "
                        "there is nothing to unlink; allowed: unlink=0 and unlink_each_loop=0 "
                        "(the defaults)", 1)
            if o.get("mdsplit_group") and \
                    _stack_doc(config_path).get("device", {}).get("scheduler", "none") != "bfq":
                raise SimulateError(f"mdsplit: mdsplit_group={o['mdsplit_group']} needs "
                                    f"device.scheduler = \"bfq\" in {config}", 1)
            scheduler = _stack_doc(config_path).get("device", {}).get("scheduler", "none")
            if o.get("ioscheduler") and o["ioscheduler"] != scheduler:
                raise SimulateError(
                    f"mdsplit: ioscheduler={o['ioscheduler']}: the virtual device's scheduler is "
                    f"device.scheduler in {config} (\"{scheduler}\"); allowed: "
                    f"ioscheduler={scheduler} or unset, or device.scheduler = \"none\" | "
                    "\"mq-deadline\" | \"bfq\" in the stack file", 1)
            # As the engine's group_of(): mdsplit_group, else fio's cgroup.
            if o.get("mdsplit_group") and o.get("cgroup") and o["mdsplit_group"] != o["cgroup"]:
                raise SimulateError(
                    f"mdsplit: mdsplit_group={o['mdsplit_group']} and cgroup={o['cgroup']}: a "
                    "job's I/O is charged to one group, its cgroup's; allowed: one of the two, "
                    "or the same name in both", 1)
            group = o.get("mdsplit_group") or o.get("cgroup")
            if "mdsplit_group_weight" in o and not group:
                raise SimulateError(
                    f"mdsplit: mdsplit_group_weight={gw_text} without mdsplit_group: the weight "
                    "is a group's, and the root group has none; allowed: mdsplit_group=NAME (or "
                    "fio's cgroup=NAME) beside it (with device.scheduler = \"bfq\")", 1)
            random, read_pct, trim = _pattern(o)
            bs, bs_max, align = _block_sizes(o)
            norandommap = parse_bool("norandommap", o.get("norandommap", "0"))
            # init.c fixup_options(): blockalign is for random jobs only (else
            # the smallest bs); one that differs from the smallest bs turns off
            # the random map ("Any use of blockalign= turns off randommap").
            for d in range(3):
                min_d = min(b for b, _ in bs[d])
                if not align[d] or not random:
                    align[d] = 0
                elif align[d] != min_d:
                    norandommap = True
            # buffered (neg=1) and direct both set o.odirect: the later one wins.
            direct = parse_bool("direct", o.get("direct", "0"))
            buffered = not parse_bool("buffered", o["buffered"]) if "buffered" in o else None
            if last_of(o, "direct", "buffered") == "buffered":
                direct = buffered
            if trim and not direct:
                raise SimulateError(BUFFERED_TRIM, 1)
            verify = o.get("verify", "0") not in ("0", "null") and \
                parse_bool("do_verify", o.get("do_verify", "1"))
            if verify and trim:
                raise unsupported(f"verify with rw={o['rw']}")
            # The engine's may_write(): writes, trims, or replays a log.
            writes = read_pct < 100 or bool(trim) or bool(o.get("read_iolog"))
            # filesetup.c get_start_offset(), with the device's size (fio_job_model.cpp
            # start_offset()): bytes or a percentage of the device for each.
            offset, offset_pct = parse_size_or_percent("offset", o.get("offset", "0"))
            increment, increment_pct = parse_size_or_percent(
                "offset_increment", o.get("offset_increment", "0"))
            size, size_pct = parse_size_or_percent("size", o.get("size", "0"))
            io_size, io_size_pct = parse_size_or_percent("io_size", o.get("io_size", "0"))
            if job.stonewall or phase < 0:
                phase += 1
            randrepeat = parse_bool("randrepeat", o.get("randrepeat", "1"))
            if "randseed" in o:
                job_seed = parse_int("randseed", o["randseed"])
            else:
                job_seed = base_seed if randrepeat else base_seed ^ 0x5eed
            job_seed = (job_seed * 1_000_003 + index) & 0xFFFFFFFFFFFFFFFF
            time_us = {k: _time_us(o, k) for k in ("startdelay", "runtime", "ramp_time",
                                                  "thinktime")}
            prio = parse_int("prio", o["prio"]) if "prio" in o else 4
            # prioclass is an FIO_OPT_INT of 0..3 (options.c): fio refuses "idle".
            pclass = parse_int("prioclass", o["prioclass"]) if "prioclass" in o else 2
            if not 0 <= pclass <= 3 or not 0 <= prio <= 7:
                raise SimulateError("simulate: prio must be 0..7 and prioclass 0..3")
        except JobFileError as e:
            raise SimulateError(str(e)) from None
        key = (config_path, label) if thread else (config_path, label, index)
        all_configs.setdefault(config_path, []).append((job, thread))
        job_order.append((config_path, job))
        # As the engine: a stack opens read-write when any job of the run
        # naming its stack file may write (set on every stack below).
        run_writes[config_path] = run_writes.get(config_path, False) or writes
        # As the engine (StackUse::create): a job's allow_file_create=0 means
        # no member file of its stack file is made.
        run_creates[config_path] = run_creates.get(config_path, True) and \
            parse_bool("allow_file_create", o.get("allow_file_create", "1"))
        # As the engine (StackUse::writers_allow_mounted): the override holds
        # when every job that may write the stack sets it.
        if writes:
            allow_mounted[config_path] = allow_mounted.get(config_path, True) and \
                parse_bool("allow_mounted_write", o.get("allow_mounted_write", "0"))
        jobs_info.append({"name": job.name, "key": key, "config": config_path,
                          "config_option": config, "label": label,
                          "thread": thread,
                          "writes": writes, "buffered": not direct,
                          "trace": o.get("mdsplit_trace") or "",
                          "group": group, "weight": gw})
        if key not in stack_keys:
            stack_keys[key] = len(stacks)
            # As the engine (trace_dir_of): a forked subjob N traces into DIR.N.
            trace = o.get("mdsplit_trace")
            if trace and not thread and job.subjob:
                # DIR/ is DIR: its subjob's directory is DIR.N, not DIR/.N inside it.
                trace = (trace.rstrip("/") or "/") + f".{job.subjob}"
            stacks.append({"config": config_path, "label": label,
                           "trace_dir": _resolve(base, trace) if trace else ""})
            stack_names.append((trace or "", job.name))
        stats = o.get("mdsplit_stats")
        if stats:
            stats = _resolve(base, stats)
            if job.subjob and not _sidecar_is_stream(stats):
                stats += f".{job.subjob}"
        spec = {
            "name": job.name, "stack": stack_keys[key], "phase": phase, "pid": 1000 + index,
            "random": random, "read_pct": read_pct, "trim": trim,
            "bs_read": bs[0], "bs_write": bs[1], "bs_trim": bs[2], "bs_max": bs_max,
            "align": align,
            "offset": offset, "offset_pct": offset_pct, "offset_increment": increment,
            "offset_increment_pct": increment_pct, "subjob": job.subjob,
            # options.c str_size_cb / str_io_size_cb: bytes or N% (of the device /
            # of the region), applied as setup_files() does (fio_job_model.cpp).
            "size": size, "size_pct": size_pct, "io_size": io_size, "io_size_pct": io_size_pct,
            # backend.c keep_running(): loops=0 runs the one pass loops=1 does.
            "loops": max(1, parse_int("loops", o.get("loops", "1"))),
            "norandommap": norandommap,
            "seed": job_seed,
            "iodepth": _iodepth(o),
            "batch": _batch(o),
            "direct": direct,
            "invalidate": parse_bool("invalidate", o.get("invalidate", "1")) and not direct,
            "dsync": _sync_option(o.get("sync", "none")),
            "fadvise": _fadvise(o.get("fadvise_hint", "1"), random),
            "fsync_blocks": parse_int("fsync", o.get("fsync", "0")),
            "end_fsync": parse_bool("end_fsync", o.get("end_fsync", "0")),
            "rate_iops": parse_int("rate_iops", o.get("rate_iops", "0")),
            "think_ns": time_us["thinktime"] * 1000,
            "think_blocks": max(1, parse_int("thinktime_blocks", o.get("thinktime_blocks", "1"))),
            "verify": verify and writes,
            "continue_on_error": _continue_on_error(o),
            "start_delay_ns": time_us["startdelay"] * 1000,
            "runtime_ns": time_us["runtime"] * 1000,
            "ramp_ns": time_us["ramp_time"] * 1000,
            "time_based": parse_bool("time_based", o.get("time_based", "0")),
            "prio": prio, "prioclass": pclass,
        }
        # The job's group as the engine's task has it, for bfq to schedule:
        # run_fio_jobs refuses a group on another scheduler (fio's cgroup=
        # there names a group nothing schedules) and a weight without one.
        if group and scheduler == "bfq":
            spec["group"] = group
            spec["group_weight"] = gw
        # init.c fixup_options(): a size below td_min_bs() (the smallest block
        # size of the three directions) is refused.
        min_bs = min(b for d in bs for b, _ in d)
        if spec["size"] and spec["size"] < min_bs:
            raise SimulateError(f"simulate: size={o['size']}: {spec['size']} bytes is less than "
                                f"the minimum block size {min_bs} (fio: size too small)")
        if spec["time_based"] and not spec["runtime_ns"]:
            # init.c fixup_options(): fio says so and runs the job size-bound.
            print("fio: time_based requires a runtime/timeout setting", file=sys.stderr)
            spec["time_based"] = False
        specs.append(spec)
        meta.append({"job": job, "stats": stats})
    # The report (--output) is written after the run: over a file the run
    # reads or writes, it would destroy it. (A sidecar on it is the engine's
    # refusal below, as fio's --output.)
    if report not in (None, "-") and not _sidecar_is_stream(report):
        clash = _file_of_run(report, jf, jobs_info, stacks, stack_names)
        if clash:
            raise SimulateError(f"simulate: --output {report} is {clash}: the report would "
                                "replace it; allowed: a file that the run neither reads nor "
                                "writes")
    # mdsplit_setup (output_rival on mdsplit_stats): two jobs writing one sidecar file from
    # devices of their own would overwrite each other.
    sidecar_stack = {}
    for spec, m in zip(specs, meta):
        if not m["stats"]:
            continue
        # mdsplit_setup (input_at): a sidecar over a member or a stack file.
        inp = _input_at(jobs_info, m["stats"])
        option = m["job"].options["mdsplit_stats"] + \
            (f".{m['job'].subjob}" if m["job"].subjob and not _sidecar_is_stream(m["stats"])
             else "")
        if inp:
            raise SimulateError(
                f"mdsplit: mdsplit_stats={option} is {inp}: the sidecar would overwrite it; "
                "allowed: a file that is neither a member nor a stack file of the run", 1)
        # mdsplit_setup (find_file_use): a file system image behind a loop device, a swap file.
        use = paths.import_mdsplit().file_in_use(m["stats"])
        if use:
            raise SimulateError(
                f"mdsplit: mdsplit_stats={option} is {use}: the sidecar would replace it; "
                "allowed: a file that no loop device or swap area uses", 1)
        # mdsplit_setup (trace_file_at): a sidecar over a trace file of the run.
        trace = "" if _sidecar_is_stream(m["stats"]) else \
            _trace_file_at(stacks, stack_names, m["stats"])
        if trace:
            raise SimulateError(
                f"mdsplit: mdsplit_stats={option} is {trace}: the sidecar would replace it; "
                "allowed: a file that is not a trace file of the run", 1)
        # mdsplit_setup (check_sidecar_writable): no sidecar on a device or a directory.
        kind = _unwritable_kind(m["stats"])
        if kind:
            raise SimulateError(
                f"mdsplit: mdsplit_stats={option} is {kind}; allowed: a regular file (replaced "
                "whole), or a character device or FIFO such as /dev/null or /dev/stderr", 1)
        if _is_report(m["stats"], report):
            raise SimulateError(
                f"mdsplit: mdsplit_stats={option} is where fio writes its own report (stdout or "
                "--output): the sidecar would mix into it; allowed: another file or stream, such "
                "as /dev/stderr", 1)
        if _sidecar_is_stream(m["stats"]):
            if not os.access(m["stats"], os.W_OK):  # check_sidecar_writable(): a stream
                raise SimulateError(
                    f"mdsplit: mdsplit_stats={option}: cannot write it (Permission denied); "
                    "allowed: a writable file or stream", 1)
            continue  # each job appends its own document
        if foreign := _not_simulates(m["stats"]):
            what, loss = foreign
            raise SimulateError(
                f"simulate: mdsplit_stats={option} holds {what}, which simulate did not write: "
                f"replacing it would lose {loss}; allowed: move it away first, or simulate a "
                "copy of the job file naming another mdsplit_stats")
        first = sidecar_stack.setdefault(os.path.realpath(m["stats"]), (spec["stack"], spec["name"]))
        if first[0] != spec["stack"]:
            rel = os.path.relpath(m["stats"], base)
            raise SimulateError(
                f"mdsplit: mdsplit_stats={rel}: job {first[1]} writes it too, from a device of "
                "its own, so one sidecar would overwrite the other; allowed: a file per job, or "
                "thread=1 with the same mdsplit_config and filename (one shared device, one "
                "sidecar)", 1)
        if why := _sidecar_cannot_be_created(m["stats"]):
            raise SimulateError(
                f"mdsplit: mdsplit_stats={option}: cannot create it ({why}); allowed: a path in "
                "a writable directory", 1)
    # mdsplit_setup (output_rival on mdsplit_trace): two stacks tracing into one directory
    # (by the engine's run_path(): "tr" and "tr/" are one) would truncate each other's
    # blktrace files (both name members m0, ...).
    mdsplit = paths.import_mdsplit()
    trace_stack = {}
    for i, (st, (option, _)) in enumerate(zip(stacks, stack_names)):
        if not st["trace_dir"]:
            continue
        first = trace_stack.setdefault(mdsplit.resolved_path(st["trace_dir"]), i)
        if first != i:
            raise SimulateError(
                f"mdsplit: mdsplit_trace={option}: job {stack_names[first][1]} writes its "
                "traces there too, from a device of its own, so one job's blktrace files would "
                "overwrite the other's; allowed: a directory per job, or thread=1 with the same "
                "mdsplit_config and filename (one shared device, one set of traces)", 1)
    _check_shared_device_options(jobs_info, base)
    threads = [i["thread"] for i in jobs_info]
    _check_device_owners(jobs_info, jf.jobs, job_order, threads)
    for st in stacks:
        st["writable"] = run_writes[st["config"]]
        st["allow_mounted_write"] = allow_mounted.get(st["config"], False)
        st["create_members"] = run_creates[st["config"]]
    # mdsplit_setup: a raid5 or bfq device named by several forked jobs
    # that may run at the same time (no stonewall between them) needs one owner.
    devices = {}  # (stack file, filename) -> [(info, job)]
    for info, (_, job) in zip(jobs_info, job_order):
        devices.setdefault((info["config"], info["label"]), []).append((info, job))
    device_order = [((i["config"], i["label"]), job) for i, (_, job) in zip(jobs_info, job_order)]
    for config_path, users in all_configs.items():
        forked = [j for j, thread in users if not thread]
        if forked and _has_ram_members(config_path):
            # As the engine (forked_writer_and_reader): a forked job reading
            # what another wrote in its own process's ram would read zeroes.
            kinds = {info["name"]: info["writes"] for info in jobs_info
                     if info["config"] == config_path and not info["thread"]}
            writer = next((n for n, w in kinds.items() if w), None)
            reader = next((n for n, w in kinds.items() if not w), None)
            if writer and reader:
                raise SimulateError(
                    f"mdsplit: job {reader} reads what job {writer} writes on the ram members of "
                    f"{os.path.relpath(config_path, base)}, but as forked processes each has its "
                    "own empty memory; allowed: thread=1 (one device in one process), or members "
                    "on files", 1)
        # As the engine: forked processes each keep their own page cache, per
        # device (stack file and filename).
        for device, mine in devices.items():
            infos = [i for i, _ in mine]
            pair = _overlap_pair(device_order, device, threads)
            if device[0] == config_path and pair and any(i["buffered"] for i in infos) and \
                    any(i["writes"] for i in infos):
                raise SimulateError(
                    f"mdsplit: jobs {pair[0]} and {pair[1]} share the device of "
                    f"{os.path.relpath(config_path, base)} with buffered I/O (direct=0) and "
                    "writes, and may run at the same time, but forked processes each keep their "
                    "own page cache, so one would read stale data: add thread=1 so they share "
                    "one page cache in one process, or stonewall so they run one after another",
                    1)
    # The loader's line names the stack file as the job does (the engine's
    # mdsplit_config=), not as "<text>".
    config_option = {info["config"]: info["config_option"] for info in jobs_info}
    for st in stacks:
        try:
            st["source"] = config_option.get(st["config"], st["config"])
            mdsplit.load_stack_text(read_input_text(st["config"], "stack file"),
                                    base_dir=str(Path(st["config"]).parent),
                                    source=st["source"])
        except JobFileError as e:
            raise SimulateError(str(e), 1) from None
        except mdsplit.ConfigError as e:
            msg = str(e)
            raise SimulateError(msg if msg.startswith("mdsplit:") else "mdsplit: " + msg,
                                1) from None
    return jf, stacks, specs, meta, base_seed


def _check_shared_device_options(jobs_info, base):
    """As the engine's mdsplit_setup: the jobs of one shared device (threads
    naming one stack file and filename) agree on mdsplit_trace (the same
    directory by the engine's run_path(), trace_disagreement()), and the
    jobs of one group on its weight. The first job's view, as fio reports it."""
    resolved = paths.import_mdsplit().resolved_path

    def trace_dir(info):
        return resolved(_resolve(base, info["trace"])) if info["trace"] else ""
    for i, a in enumerate(jobs_info):
        for b in jobs_info[i + 1:]:
            if a["key"] != b["key"] or not a["thread"]:
                continue
            if trace_dir(a) != trace_dir(b):
                raise SimulateError(
                    f"mdsplit: mdsplit_trace: jobs {a['name']} ({a['trace'] or 'none'}) and "
                    f"{b['name']} ({b['trace'] or 'none'}) share one device (thread=1, the same "
                    "mdsplit_config and filename), which writes one set of traces; allowed: the "
                    "same mdsplit_trace (or none) on every job that shares the device", 1)
            if a["group"] and a["group"] == b["group"] and a["weight"] != b["weight"]:
                raise SimulateError(
                    f"mdsplit: mdsplit_group_weight: jobs {a['name']} ({a['weight']}) and "
                    f"{b['name']} ({b['weight']}) put group {a['group']} of one device at two "
                    "weights, and a group has one; allowed: the same mdsplit_group_weight on "
                    "every job of a group", 1)


def _member_identities(config_path):
    """{identity: path} of a stack file's io_uring members (the engine's
    member_identity(): device number, file, or the path of a file not made yet)."""
    doc = _stack_doc(config_path)
    kind = doc.get("device", {}).get("kind", "passthrough")
    out = {}
    for m in doc.get("members", []):
        if m.get("backend", "io_uring") != "io_uring" or "path" not in m:
            continue
        path = os.path.join(os.path.dirname(config_path), m["path"])
        out[_file_identity(path)] = os.path.normpath(path)
    return kind, out


def _file_identity(path):
    """The engine's file_identity(): a block device's number, a file's device
    and inode, or (not there yet) its absolute path."""
    try:
        st = os.stat(path)
    except OSError:
        return "path:" + os.path.realpath(path)
    if (st.st_mode & 0o170000) == 0o060000:
        return f"dev:{st.st_rdev}"
    return f"file:{st.st_dev}:{st.st_ino}"


def _fadvise(value, random):
    """fio's fadvise_hint (options.c, td_io_open_file()): 0 none, 1 (the
    default) random for a random job and sequential otherwise, or named."""
    advice = {"0": "none", "random": "random", "sequential": "sequential"}.get(value)
    if advice:
        return advice
    if value == "1":
        return "random" if random else "sequential"
    raise SimulateError(f"simulate: fadvise_hint={value}: allowed: 0, 1, random, sequential")


def _check_thread_cgroups(jobs):
    """As the engine's thread_cgroup_abort(): fio 3.33 aborts a run of two or
    more threads when one of them has cgroup=."""
    threads = [j for j in jobs if parse_bool("thread", j.options.get("thread", "0"))]
    with_cgroup = [j for j in threads if j.options.get("cgroup")]
    if len(threads) >= 2 and with_cgroup:
        j = with_cgroup[0]
        name = j.options["cgroup"]
        raise SimulateError(
            f"mdsplit: cgroup={name} (job {j.name}) in a run of threads (thread=1): fio 3.33 "
            "frees its cgroup mount at the end of every job (cgroup_shutdown) and aborts when "
            f"the second ends; allowed: mdsplit_group={name} instead (the same bfq group, "
            "without a fio cgroup), or forked jobs (thread=0)", 1)


def _names_descriptor(path):
    """As the engine's names_descriptor(): /dev/stderr, /dev/fd/N,
    /proc/self/fd/N, through any link of the last component."""
    p = os.path.abspath(path)
    for _ in range(41):
        if p.startswith(("/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/")) or \
                re.match(r"/proc/[0-9]+/fd/", p):
            return True
        if not os.path.islink(p):
            return False
        link = os.readlink(p)
        p = link if os.path.isabs(link) else os.path.join(os.path.dirname(p), link)
    return False


def _sidecar_is_stream(path):
    """As the engine's sidecar_is_stream(): a character device, a FIFO or an
    open descriptor, which each job appends its document to."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            return True
    except OSError:
        pass
    return _names_descriptor(path)


def _is_report(path, report):
    """As the engine's check_sidecar_writable(): the sidecar `path` is where
    the report goes (`report`: a path, "-" for stdout, None for nowhere),
    in a file or a pipe (a terminal may show both)."""
    if report is None:
        return False
    try:
        out = os.fstat(1) if report == "-" else os.stat(report)
    except OSError:  # a report file not made yet
        return os.path.realpath(path) == os.path.realpath(report)
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not stat.S_ISCHR(out.st_mode) and (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino)


def _unwritable_kind(path):
    """What check_sidecar_writable() refuses a sidecar on: "a block device",
    "a directory", "a socket", or "" when the path is none of them."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    return ("a block device" if stat.S_ISBLK(mode) else "a directory" if stat.S_ISDIR(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "")


def _trace_file_at(stacks, stack_names, path):
    """The engine's trace_file_at(): "the trace file T of job J" when the
    sidecar `path` is one of the blktrace files a stack of the run writes
    (Stack::trace_paths: DIR/<filename>.blktrace.0, DIR/m<i>.blktrace.0), else ""."""
    ident = _file_identity(path)
    for st, (option, job) in zip(stacks, stack_names):
        if not st["trace_dir"]:
            continue
        members = len(_stack_doc(st["config"]).get("members", []))
        names = [f"{st['label']}.blktrace.0"] + [f"m{i}.blktrace.0" for i in range(members)]
        for name in names:
            trace = os.path.join(st["trace_dir"], name)
            if _file_identity(trace) == ident:
                return f"the trace file {os.path.join(option, name)} of job {job}"
    return ""


def _not_simulates(path):
    """What replacing the regular file at the sidecar `path` would lose, as
    (what it is, what is lost): a real-clock run's sidecar ("clock": "real",
    fio with the engine) or any other file that is not a sidecar simulate
    wrote ("clock": "virtual", Stack::stats_json()); None for no file there,
    an empty one, or simulate's own."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or not st.st_size:
        return None
    try:  # a sidecar is a few KiB: a large file is something else
        doc = json.loads(Path(path).read_bytes()) if st.st_size <= 1 << 24 else None
    except (OSError, ValueError):
        doc = None
    clock = doc.get("clock") if isinstance(doc, dict) else None
    if clock == "virtual":
        return None
    if clock == "real":
        return "the sidecar of a real-clock run (fio with the engine)", "that run's figures"
    return "a file that is not simulate's sidecar", "it"


def _sidecar_cannot_be_created(path):
    """The engine's check_sidecar_writable() for a file: its directory is
    made and a probe file created beside it (then removed); the reason it
    cannot be, "" when it can."""
    target = os.path.realpath(path)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
    except OSError:
        pass  # as the engine: the probe below says why
    try:
        probe = f"{target}.mdsplit-probe.{os.getpid()}"
        with open(probe, "w"):
            pass
        os.unlink(probe)
    except OSError as e:
        return e.strerror or str(e)
    return ""


def _input_at(jobs_info, path):
    """The engine's input_at(): the stack file or member of the run that
    writing the sidecar `path` would destroy, "" when none."""
    ident = _file_identity(path)
    for info in jobs_info:
        if _file_identity(info["config"]) == ident:
            return f"the stack file {info['config_option']}"
        for k, m in enumerate(_stack_doc(info["config"]).get("members", [])):
            if m.get("backend", "io_uring") == "io_uring" and "path" in m and \
                    _file_identity(os.path.join(os.path.dirname(info["config"]), m["path"])) == ident:
                return f"members[{k}] of {info['config_option']}"
    return ""


def _file_of_run(path, jf, jobs_info, stacks, stack_names):
    """What writing `path` would destroy among the files the run uses or
    writes: a job file (or one it includes), a stack file or member
    (_input_at), a trace file (_trace_file_at), or a file in use below a
    block device (the engine's find_file_use: a loop device's backing file,
    a swap file); "" when none. (A sidecar there is refused as the engine
    refuses one on fio's --output: _is_report.)"""
    ident = _file_identity(path)
    for f in jf.files:
        if _file_identity(f) == ident:
            return f"the job file {f}"
    return _input_at(jobs_info, path) or _trace_file_at(stacks, stack_names, path) or \
        paths.import_mdsplit().file_in_use(path)


def _check_device_owners(jobs_info, jobs, job_order, threads):
    """As the engine's mdsplit_setup, job by job: a forked job on a raid5 or
    bfq device that jobs fio may run at once share needs one owner (checked
    first), then member_rival(); the first job refused gives the line."""
    refusals = [r for r in (_one_owner_refusal(jobs_info, job_order, threads),
                            _raid5_rival(jobs_info, jobs)) if r]
    if refusals:
        raise SimulateError(min(refusals, key=lambda r: r[0])[1], 1)


def _one_owner_refusal(jobs_info, job_order, threads):
    """(job index, line) of the first forked job whose stack file is a raid5
    or uses bfq and is named by two jobs fio may run at once (stack_use()'s
    overlap), None for none."""
    for index, info in enumerate(jobs_info):
        if info["thread"]:
            continue
        pair = _overlap_pair(job_order, info["config"], threads)
        if not pair:
            continue
        try:
            text = read_input_text(info["config"], "stack file")
        except JobFileError as e:
            raise SimulateError(str(e), 1) from None
        # the loader's own view of the stack (kind, scheduler)
        kind = "raid5" if _toml_value(text, "kind") == "raid5" else None
        if _toml_value(text, "scheduler") == "bfq":
            kind = kind or "bfq"
        if kind:
            return index, (
                f"mdsplit: jobs {pair[0]} and {pair[1]} share the device of "
                f"{info['config_option']} ({kind}) and may run at the same time, but it needs "
                "one owner: add thread=1 so they share it in one process, or stonewall so they "
                "run one after another")
    return None


def _raid5_rival(jobs_info, jobs):
    """As the engine's member_rival(): two devices over one member, one a
    raid5, in use at once (threads, or jobs fio may run together), and a job
    that may write: two stripe caches and parities corrupt the array. (job
    index, line) of the first job with a rival, None for none."""
    members = {}
    for info in jobs_info:
        if info["config"] not in members:
            members[info["config"]] = _member_identities(info["config"])
    for i, a in enumerate(jobs_info):
        for j, b in enumerate(jobs_info):
            if i == j or a["key"] == b["key"] or not (a["writes"] or b["writes"]):
                continue
            overlap = not _stonewall_between(jobs, min(i, j), max(i, j))
            if not ((a["thread"] and b["thread"]) or overlap):
                continue
            kind_a, mem_a = members[a["config"]]
            kind_b, mem_b = members[b["config"]]
            if "raid5" not in (kind_a, kind_b):
                continue
            shared = [mem_b[ident] for ident in mem_b if ident in mem_a]
            if shared:
                return i, (
                    f"mdsplit: job {a['name']} and job {b['name']} ({shared[0]}) reach one "
                    "member through two devices (another mdsplit_config or filename) that may "
                    "be in use at once, one of them a raid5 with its own stripe cache and "
                    "parity: writing would corrupt the array; allowed: the same mdsplit_config "
                    "and filename for both with thread=1 (one shared device), or forked jobs "
                    "with a stonewall between them")
    return None


def _stack_doc(config_path):
    """The stack file as TOML, or {} when it cannot be read (the loader
    reports that with its own line)."""
    import tomllib
    try:
        return tomllib.loads(read_input_text(config_path, "stack file"))
    except (JobFileError, tomllib.TOMLDecodeError):
        return {}


def _has_ram_members(config_path):
    return any(m.get("backend") == "ram" for m in _stack_doc(config_path).get("members", []))


def _stonewall_between(jobs, first, last):
    """A job after jobs[first] up to jobs[last] starts with a stonewall, so
    fio runs the two one after another (a stonewall waits for every job
    before it): the engine's may_overlap(), negated."""
    return any(job.stonewall for job in jobs[first + 1:last + 1])


def _overlap_pair(job_order, key, threads):
    """The engine's stack_use() overlap: the first two jobs naming `key` (a
    stack file, or in an order keyed by device, a device) that fio may run at
    the same time (no stonewall between them), one at least forked (threads
    share one device); their names, or None. `threads`: each job's thread=."""
    window, forked = [], None
    for (k, job), thread in zip(job_order, threads):
        if job.stonewall:
            window, forked = [], None
        if k != key:
            continue
        if window and (not thread or forked):
            return (window[-1] if not thread else forked, job.name)
        if not thread and forked is None:
            forked = job.name
        window.append(job.name)
    return None


def _sync_option(value):
    """fio's sync= (options.c): none/0, sync/1 (O_SYNC), dsync (O_DSYNC);
    True for either of the two, which make buffered writes synchronous."""
    if value in ("none", "0"):  # strncmp: case counts
        return False
    if value in ("sync", "1", "dsync"):
        return True
    raise SimulateError(f"simulate: sync={value}: allowed: none, 0, sync, 1, dsync")


def _toml_value(text, key):
    import re
    m = re.search(rf'^\s*{key}\s*=\s*"([^"]*)"', text, re.M)
    return m.group(1) if m else None


# --- fio's JSON ------------------------------------------------------------

def plat_idx_to_val(idx, bits=6):
    """stat.c plat_idx_to_val(): the middle of a histogram bucket."""
    val = 1 << bits
    if idx < (val << 1):
        return idx
    error_bits = (idx >> bits) - 1
    base = 1 << (error_bits + bits)
    k = idx % val
    return int(base + ((k + 0.5) * (1 << error_bits)))


def percentiles(hist, n):
    """stat.c calc_clat_percentiles() over the sparse histogram."""
    out = {}
    if not n:
        return {f"{p:f}": 0 for p in PERCENTILES}
    j, total = 0, 0
    for idx, count in hist:
        total += count
        while j < len(PERCENTILES) and total >= PERCENTILES[j] / 100.0 * n:
            out[f"{PERCENTILES[j]:f}"] = plat_idx_to_val(idx)
            j += 1
        if j == len(PERCENTILES):
            break
    return out


def _lat(stat, with_percentiles=False):
    n = stat["n"]
    mean = stat["sum"] / n if n else 0.0
    var = (stat["sum_sq"] - n * mean * mean) / (n - 1) if n > 1 else 0.0
    d = {"min": stat["min"], "max": stat["max"], "mean": mean,
         "stddev": math.sqrt(max(var, 0.0)), "N": n}
    if with_percentiles and n:
        # stat.c add_ddir_lat_json(): "percentile" only with samples (a
        # direction with no I/O, or only failed ones, has none).
        d["percentile"] = percentiles(stat["hist"], n)
    return d


def _direction(r):
    """One direction as stat.c add_ddir_status_json() reports it, over the
    direction's own runtime (fio's ts.runtime[ddir]: the phases that moved
    its bytes, so a write-then-verify job's reads take the verify phase's
    time). "runtime" is fio's milliseconds, rounded up from microseconds
    (backend.c update_runtime()); bw and iops use the nanoseconds."""
    runtime_ns = r["runtime_ns"]
    bw_bytes = int(r["bytes"] * 1e9 / runtime_ns) if runtime_ns else 0
    iops = r["ios"] * 1e9 / runtime_ns if runtime_ns else 0.0
    return {
        "io_bytes": r["bytes"], "io_kbytes": r["bytes"] // 1024, "bw_bytes": bw_bytes,
        "bw": bw_bytes // 1024, "iops": iops, "runtime": (runtime_ns // 1000 + 999) // 1000,
        # fio counts an I/O that completed in error among total_ios, not in io_bytes.
        "total_ios": r["ios"] + r["errors"], "short_ios": 0, "drop_ios": 0,
        "slat_ns": _lat(r["slat"]), "clat_ns": _lat(r["clat"], True), "lat_ns": _lat(r["lat"]),
        "errors": r["errors"],
    }


_NS_KEYS = ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"]
_MS_KEYS = _NS_KEYS + ["2000", ">=2000"]


def fio_json(jf, stacks, specs, meta, raw, seed, data=True):
    jobs, in_error, warnings = [], [], []
    for spec, m, r in zip(specs, meta, raw["jobs"]):
        job = m["job"]
        # stat.c stat_calc_lat(): over every direction's I/Os (ddir_rw_sum)
        total = r["read"]["ios"] + r["write"]["ios"] + r["trim"]["ios"]

        def pct(key):
            return [100.0 * (r["read"][key][i] + r["write"][key][i] + r["trim"][key][i]) / total
                    if total else 0.0 for i in range(len(r["read"][key]))]
        j = {
            "jobname": job.name, "groupid": job.groupid, "error": -r["error"],
            "verify_errors": r["verify_errors"],
            "total_err": r["total_err"], "first_error": -r["first_error"],
            "job options": dict(sorted(job.options.items())),
            "read": _direction(r["read"]),
            "write": _direction(r["write"]),
            "trim": _direction(r["trim"]),
            "sync": {"total_ios": r["syncs"]},
            "job_runtime": int(round(r["runtime_ns"] / 1e6)),
            "job_start_ns": r["start_ns"], "job_end_ns": r["end_ns"],
            "latency_ns": dict(zip(_NS_KEYS, pct("lat_ns"))),
            "latency_us": dict(zip(_NS_KEYS, pct("lat_us"))),
            "latency_ms": dict(zip(_MS_KEYS, pct("lat_ms"))),
        }
        if r["verify_errors"] and not j["error"]:
            j["error"] = 84  # EILSEQ, as fio reports a verify failure
        if j["error"]:
            in_error.append(job.name)
        elif r["total_err"]:
            # stat.c: with continue_on_error the job reports its first error
            # that was let pass; it did not fail (fio's exit status stays 0).
            j["error"] = j["first_error"]
        jobs.append(j)
        if r["verify_unchecked"]:
            # data=False: the figures stay those of a run with data, the check is not made.
            warnings.append(
                f"simulate: job {job.name}: verify={job.options['verify']}: --no-data keeps no "
                f"data, so its {r['verify_unchecked']} bytes of verify reads were timed but not "
                "compared")
        if r["silent_writeback_pages"]:
            # The engine's cleanup line (mdsplit_cleanup); the job's error stays.
            warnings.append(
                f"mdsplit: {stacks[spec['stack']]['label']}: the write-back of "
                f"{r['silent_writeback_pages']} pages failed after their writes completed, and no "
                "sync reported it: that data is not on the members (as in the kernel, fio sees "
                "such errors only through fsync=, fdatasync=, end_fsync=1 or sync=)")
    return {"mdsplit-simulate": VERSION, "mdsplit-version": paths.import_mdsplit().__version__,
            "seed": seed, "virtual_time": True, "data": data,
            "job_file": Path(jf.path).name, "simulated_ns": raw["end_ns"],
            # The jobs an error ended (fio's exit status is non-zero for them).
            "jobs_in_error": in_error, "jobs": jobs,
            # Lines printed on stderr without failing a job: the engine's, and
            # simulate's note on verify reads --no-data could not compare.
            "warnings": warnings}


def _batch(o) -> int:
    """init.c fixup_options(): iodepth_batch_submit 0 or past iodepth is iodepth."""
    depth = _iodepth(o)
    batch = parse_int("iodepth_batch_submit", o.get("iodepth_batch_submit", "1"))
    return depth if batch == 0 or batch > depth else max(1, batch)


# The deepest queue simulate keeps (the bindings' py_args::kMaxIodepth: a
# buffer per slot is allocated up front).
MAX_IODEPTH = 65536
# The latest a virtual time may be (the bindings' kMaxTimeArgNs, 2**60 ns), in us.
MAX_TIME_US = (1 << 60) // 1000
# fio keeps thinktime (FIO_OPT_INT, microseconds) in an unsigned int: more wraps.
MAX_THINKTIME_US = (1 << 32) - 1


def _iodepth(o) -> int:
    """iodepth as fio's parser takes it (options.c: FIO_OPT_INT, minval 1,
    compared as a C int, so 0, negatives and 2**31 or more are refused), and
    at most what simulate keeps in flight."""
    value = o.get("iodepth", "1")
    n = parse_int("iodepth", value)
    if not 1 <= n <= MAX_IODEPTH:
        as_int = (n + (1 << 31)) % (1 << 32) - (1 << 31)  # what fio compares
        why = "fio refuses it: below its minimum 1" if as_int < 1 else \
            f"simulate keeps at most {MAX_IODEPTH} I/Os in flight"
        raise SimulateError(f"simulate: iodepth={value}: {why}; allowed: 1 to {MAX_IODEPTH}")
    return n


def _time_us(o, key) -> int:
    """A time option (startdelay, runtime, ramp_time, thinktime) in
    microseconds, 0 when absent; a negative one (fio 3.33 wraps it to years)
    or one past what can be kept (thinktime: fio's 32 bits of us; the others:
    the virtual clock's 2**60 ns) is refused naming the option."""
    if key not in o:
        return 0
    us = parse_time_us(key, o[key])
    limit = MAX_THINKTIME_US if key == "thinktime" else MAX_TIME_US
    if not 0 <= us <= limit:
        unit = (f"{limit} microseconds (fio keeps it in 32 bits)" if key == "thinktime"
                else f"{limit // 1_000_000}s (the virtual clock's 2**60 ns)")
        raise SimulateError(f"simulate: {key}={o[key]}: {us} us is out of range; allowed: 0 to "
                            f"{unit}")
    return us


def _write_sidecars(stacks, specs, meta, raw):
    for spec, m in zip(specs, meta):
        if not m["stats"]:
            continue
        text = raw["stats"][spec["stack"]] + "\n"
        if _sidecar_is_stream(m["stats"]):
            # As the engine's write_stream(): appended; a FIFO without a reader fails.
            fd = os.open(m["stats"], os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                os.set_blocking(fd, True)
                data = text.encode()
                while data:
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)
            continue
        p = Path(m["stats"])
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def simulate_job(path, sections=None, seed=None, env=None, data=True, report=None) -> dict:
    """Runs a job file on the virtual clock; returns fio's JSON shape as a
    dict (and writes the sidecars and traces the job file names).
    data=False: members on files are not read or written (null backends of
    their size); the figures are the same, since the virtual clock never
    waits on the host's storage. report: where the caller writes the
    report ("-" for stdout), which no sidecar may be, as fio's own output.
    Raises SimulateError (its exit_code: 2 unsupported / bad job file,
    1 the engine's own errors)."""
    if seed is not None and not 0 <= seed < 1 << 64:
        raise SimulateError(f"simulate: --seed {seed}: allowed: 0 to {(1 << 64) - 1} (fio's "
                            "randseed is 64 bits)")
    jf, stacks, specs, meta, base_seed = build_run(path, sections=sections, seed=seed, env=env,
                                                   report=report)
    mdsplit = paths.import_mdsplit()
    for st in stacks:
        if st["trace_dir"]:
            try:
                Path(st["trace_dir"]).mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise SimulateError(f"mdsplit: mdsplit_trace={st['trace_dir']}: cannot create "
                                    f"it: {e.strerror}; allowed: a directory that exists or "
                                    "can be created", 1) from None
    try:
        raw = mdsplit.run_fio_jobs(stacks, specs, data=data)
    except (mdsplit.ConfigError, RuntimeError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        # run_fio_jobs names a job by its index in the list; simulate by
        # its name in the job file, as fio does.
        m = re.match(r"run_fio_jobs: jobs\[(\d+)\]", msg)
        if m and int(m[1]) < len(specs):
            msg = f"simulate: job {specs[int(m[1])]['name']}" + msg[m.end():]
        if not msg.startswith(("mdsplit:", "simulate:")):
            msg = "mdsplit: " + msg
        raise SimulateError(msg, 1) from None
    try:
        _write_sidecars(stacks, specs, meta, raw)
    except OSError as e:
        raise SimulateError(f"mdsplit: mdsplit_stats={e.filename}: cannot write it "
                            f"({e.strerror}); allowed: a path in a writable directory, or a "
                            "writable stream", 1) from None
    for line in raw["notices"]:  # a member failed during the run (as the engine says it)
        print(line, file=sys.stderr)
    if raw["write_behind_errors"]:
        # The model completed them; the host's copy failed (the member file).
        raise SimulateError(f"mdsplit: {raw['write_behind_errors']} writes to member files "
                            "failed on the host (the virtual run completed them)", 1)
    return fio_json(jf, stacks, specs, meta, raw, base_seed, data)


def dumps(result) -> str:
    return json.dumps(result, indent=2, sort_keys=False) + "\n"


def normal_output(result) -> str:
    """A short human summary in the spirit of fio's normal output."""
    lines = [f"{result['mdsplit-simulate']} (virtual time, seed {result['seed']})"]
    for j in result["jobs"]:
        lines.append(f"{j['jobname']}: (groupid={j['groupid']}) err={j['error']} "
                     f"runtime={j['job_runtime']}ms")
        for d in ("read", "write", "trim"):
            r = j[d]
            if not r["total_ios"]:
                continue
            c = r["clat_ns"]
            lines.append(f"  {d:5s}: IOPS={r['iops']:.1f}, BW={r['bw']}KiB/s "
                         f"({r['io_kbytes']}KiB/{r['runtime']}msec) ios={r['total_ios']}")
            if not c["N"]:
                # stat.c show_ddir_status(): no clat line or percentiles without samples.
                continue
            lines.append(f"     clat (nsec): min={c['min']}, max={c['max']}, "
                         f"avg={c['mean']:.1f}, stdev={c['stddev']:.1f}, "
                         f"p50={c['percentile']['50.000000']}, "
                         f"p99={c['percentile']['99.000000']}")
    return "\n".join(lines) + "\n"
