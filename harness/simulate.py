"""`harness simulate JOB.fio`: a fio job file run on the core's virtual
clock (engine/sim/fio_job_model.h), deterministically, with fio's JSON
shape as output and the sidecars and blktrace files the engine writes.

    from harness.simulate import simulate_job
    result = simulate_job("jobs/raid5-split-order.fio", sections=["fixed"])
    result["jobs"][0]["read"]["bw"]          # KiB/s, as fio's JSON

This module turns the parsed job file (harness/jobfile.py) into the core's
FioJobSpec dicts and builds fio's JSON. It keeps no rule of the engine's:
which jobs share a stack, how each stack opens, where sidecars and traces
go, and every refusal with its line come from the engine's own run plan
(engine/stack/run_plan.h through mdsplit.plan_run); the sidecars are written
by the engine's code (mdsplit.write_sidecar). What is simulate's own: the
options it models (SUPPORTED) or refuses ("simulate: ..." lines), and the
report (--output), which may replace no file the run reads or writes.
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
                             parse_job_file, parse_range, parse_size_or_percent,
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


def build_run(job_file, sections=None, seed=None, env=None, report=None):
    """The stacks and job specs of a job file, and per job what the output
    needs (name, group, sidecar path). Raises SimulateError."""
    try:
        return _build_run(job_file, sections, seed, env, report)
    except JobFileError as e:  # a value parsed anywhere in the run: one line
        raise SimulateError(str(e)) from None


def _build_run(job_file, sections, seed, env, report):
    jf = parse_job_file(job_file, sections=sections, env=env)
    base = Path(job_file).resolve().parent
    base_seed = DEFAULT_SEED if seed is None else int(seed)
    specs, meta, plan_jobs = [], [], []
    phase = -1
    for index, job in enumerate(jf.jobs):
        _check_options(job)
        if job.stonewall or phase < 0:
            phase += 1
        spec, plan_job = _job_spec(job, index, base, base_seed, phase)
        specs.append(spec)
        plan_jobs.append(plan_job)
        meta.append({"job": job})
    plan = _plan(jf, plan_jobs, base, report)
    for spec, m, planned in zip(specs, meta, plan["jobs"]):
        spec["stack"] = planned["stack"]
        m["stats"], m["stats_shown"] = planned["stats"], planned["stats_shown"]
        # The job's bfq group as the engine's task has it.
        if planned["group"]:
            spec["group"], spec["group_weight"] = planned["group"], planned["group_weight"]
    _check_sidecars_are_simulates(meta)
    _load_stacks(plan["stacks"])
    return jf, plan["stacks"], specs, meta, base_seed


def _plan(jf, plan_jobs, base, report):
    """The engine's run plan of the jobs (engine/stack/run_plan.h through
    mdsplit.plan_run): its first refusal, in the engine's order and words,
    is simulate's error; else which jobs share a stack, how each opens, and
    where sidecars and traces go. The report (--output), written after the
    run, may replace no file the run reads or writes."""
    mdsplit = paths.import_mdsplit()
    job_files = [os.path.abspath(f) for f in jf.files]
    with_report = report not in (None, "-") and not mdsplit.sidecar_is_stream(report)
    plan = mdsplit.plan_run(plan_jobs, str(base),
                            report=os.path.abspath(report) if with_report else report,
                            job_files=job_files)
    if with_report:
        ident = mdsplit.file_identity(report)
        clash = next((f"the job file {f}" for f in jf.files if mdsplit.file_identity(f) == ident),
                     "") or plan["report_clash"]
        if clash:
            raise SimulateError(f"simulate: --output {report} is {clash}: the report would "
                                "replace it; allowed: a file that the run neither reads nor "
                                "writes")
    if plan["refusal"]:
        raise SimulateError(plan["refusal"], 1)
    return plan


def _check_sidecars_are_simulates(meta):
    """simulate's own rule: a sidecar file it did not write (a real-clock
    run's, or no sidecar at all) is not replaced."""
    mdsplit = paths.import_mdsplit()
    for m in meta:
        if not m["stats"] or mdsplit.sidecar_is_stream(m["stats"]):
            continue
        if foreign := _not_simulates(m["stats"]):
            what, loss = foreign
            raise SimulateError(
                f"simulate: mdsplit_stats={m['stats_shown']} holds {what}, which simulate did not "
                f"write: replacing it would lose {loss}; allowed: move it away first, or simulate "
                "a copy of the job file naming another mdsplit_stats")


def _load_stacks(stacks):
    """Each stack file loaded as the engine loads it; the loader's line
    names it as the job does (mdsplit_config=)."""
    mdsplit = paths.import_mdsplit()
    for st in stacks:
        try:
            mdsplit.load_stack_text(read_input_text(st["config"], "stack file"),
                                    base_dir=str(Path(st["config"]).parent),
                                    source=st["source"])
        except JobFileError as e:
            raise SimulateError(str(e), 1) from None
        except mdsplit.ConfigError as e:
            raise SimulateError(mdsplit.engine_line(str(e)), 1) from None


def _device_label(job, base):
    """The file fio opens for the job: filename=, else init.c add_job()'s one
    file named after the job, jobname.N.0 (N its subjob), or the job's name
    itself where that exists and is no regular file (exists_and_not_regfile)."""
    label = job.options.get("filename", "")
    if label:
        return label
    named = os.path.join(base, job.name)
    return job.name if os.path.exists(named) and not os.path.isfile(named) \
        else f"{job.name}.{job.subjob}.0"


def _files(label):
    """The files fio makes of filename= (str_filename_cb): one per
    ':'-separated name up to the first empty one."""
    names = label.split(":")
    return names.index("") if "" in names else len(names)


def _plan_job(job, label, writes, trim, direct):
    """The job as the engine describes it to its run plan (PlanJob)."""
    o = job.options

    def flag(key, default="0"):
        return parse_bool(key, o.get(key, default))
    return {
        "name": job.name, "config": o.get("mdsplit_config", ""), "filename": label,
        "files": _files(label), "thread": flag("thread"), "stonewall": job.stonewall,
        "subjob": job.subjob, "writes": writes, "trims": bool(trim), "buffered": not direct,
        "verify_only": flag("verify_only"), "create_serialize": flag("create_serialize", "1"),
        "allow_create": flag("allow_file_create", "1"),
        "allow_mounted_write": flag("allow_mounted_write"),
        "stats": o.get("mdsplit_stats", ""), "trace": o.get("mdsplit_trace", ""),
        "mdsplit_group": o.get("mdsplit_group", ""), "cgroup": o.get("cgroup", ""),
        "group_weight_text": o.get("mdsplit_group_weight", ""),
        "ioscheduler": o.get("ioscheduler", ""),
        "unlink": flag("unlink"), "unlink_each_loop": flag("unlink_each_loop"),
    }


def _layout(o, random):
    """Block sizes, ranges and alignment per direction, and norandommap:
    init.c fixup_options() keeps blockalign for random jobs only (else the
    smallest bs), and one that differs from the smallest bs turns off the
    random map ("Any use of blockalign= turns off randommap")."""
    bs, bs_max, align = _block_sizes(o)
    norandommap = parse_bool("norandommap", o.get("norandommap", "0"))
    for d in range(3):
        min_d = min(b for b, _ in bs[d])
        if not align[d] or not random:
            align[d] = 0
        elif align[d] != min_d:
            norandommap = True
    return bs, bs_max, align, norandommap


def _direct(o):
    """buffered (neg=1) and direct both set o.odirect: the later one wins."""
    direct = parse_bool("direct", o.get("direct", "0"))
    if last_of(o, "direct", "buffered") == "buffered":
        direct = not parse_bool("buffered", o["buffered"])
    return direct


def _job_seed(o, base_seed, index):
    randrepeat = parse_bool("randrepeat", o.get("randrepeat", "1"))
    if "randseed" in o:
        job_seed = parse_int("randseed", o["randseed"])
    else:
        job_seed = base_seed if randrepeat else base_seed ^ 0x5eed
    return (job_seed * 1_000_003 + index) & 0xFFFFFFFFFFFFFFFF


def _job_spec(job, index, base, base_seed, phase):
    """The job's FioJobSpec dict (its stack set from the plan) and its
    PlanJob dict."""
    o = job.options
    random, read_pct, trim = _pattern(o)
    bs, bs_max, align, norandommap = _layout(o, random)
    direct = _direct(o)
    verify = o.get("verify", "0") not in ("0", "null") and \
        parse_bool("do_verify", o.get("do_verify", "1"))
    if verify and trim:
        raise unsupported(f"verify with rw={o['rw']}")
    # The engine's PlanJob::writes: writes, trims, or replays a log.
    writes = read_pct < 100 or bool(trim) or bool(o.get("read_iolog"))
    spec = {
        "name": job.name, "stack": 0, "phase": phase, "pid": 1000 + index,
        "random": random, "read_pct": read_pct, "trim": trim,
        "bs_read": bs[0], "bs_write": bs[1], "bs_trim": bs[2], "bs_max": bs_max,
        "align": align, "subjob": job.subjob, "norandommap": norandommap,
        "seed": _job_seed(o, base_seed, index), "direct": direct,
        "verify": verify and writes,
        "invalidate": parse_bool("invalidate", o.get("invalidate", "1")) and not direct,
        "fadvise": _fadvise(o.get("fadvise_hint", "1"), random),
    }
    spec.update(_region(o))
    spec.update(_pacing(o))
    _check_size(spec, o, bs)
    return spec, _plan_job(job, _device_label(job, base), writes, trim, direct)


def _region(o):
    """Where and how much (filesetup.c get_start_offset(), options.c
    str_size_cb / str_io_size_cb): bytes or N% (of the device / of the
    region), applied as setup_files() does (fio_job_model.cpp)."""
    offset, offset_pct = parse_size_or_percent("offset", o.get("offset", "0"))
    increment, increment_pct = parse_size_or_percent(
        "offset_increment", o.get("offset_increment", "0"))
    size, size_pct = parse_size_or_percent("size", o.get("size", "0"))
    io_size, io_size_pct = parse_size_or_percent("io_size", o.get("io_size", "0"))
    return {"offset": offset, "offset_pct": offset_pct, "offset_increment": increment,
            "offset_increment_pct": increment_pct, "size": size, "size_pct": size_pct,
            "io_size": io_size, "io_size_pct": io_size_pct,
            # backend.c keep_running(): loops=0 runs the one pass loops=1 does.
            "loops": max(1, parse_int("loops", o.get("loops", "1")))}


def _pacing(o):
    """Depth, syncs, rates, think and run times, priorities, errors."""
    time_us = {k: _time_us(o, k) for k in ("startdelay", "runtime", "ramp_time", "thinktime")}
    prio = parse_int("prio", o["prio"]) if "prio" in o else 4
    # prioclass is an FIO_OPT_INT of 0..3 (options.c): fio refuses "idle".
    pclass = parse_int("prioclass", o["prioclass"]) if "prioclass" in o else 2
    if not 0 <= pclass <= 3 or not 0 <= prio <= 7:
        raise SimulateError("simulate: prio must be 0..7 and prioclass 0..3")
    pacing = {
        "iodepth": _iodepth(o), "batch": _batch(o),
        "dsync": _sync_option(o.get("sync", "none")),
        "fsync_blocks": parse_int("fsync", o.get("fsync", "0")),
        "end_fsync": parse_bool("end_fsync", o.get("end_fsync", "0")),
        "rate_iops": parse_int("rate_iops", o.get("rate_iops", "0")),
        "think_ns": time_us["thinktime"] * 1000,
        "think_blocks": max(1, parse_int("thinktime_blocks", o.get("thinktime_blocks", "1"))),
        "continue_on_error": _continue_on_error(o),
        "start_delay_ns": time_us["startdelay"] * 1000,
        "runtime_ns": time_us["runtime"] * 1000,
        "ramp_ns": time_us["ramp_time"] * 1000,
        "time_based": parse_bool("time_based", o.get("time_based", "0")),
        "prio": prio, "prioclass": pclass,
    }
    if pacing["time_based"] and not pacing["runtime_ns"]:
        # init.c fixup_options(): fio says so and runs the job size-bound.
        print("fio: time_based requires a runtime/timeout setting", file=sys.stderr)
        pacing["time_based"] = False
    return pacing


def _check_size(spec, o, bs):
    """init.c fixup_options(): a size below td_min_bs() (the smallest block
    size of the three directions) is refused."""
    min_bs = min(b for d in bs for b, _ in d)
    if spec["size"] and spec["size"] < min_bs:
        raise SimulateError(f"simulate: size={o['size']}: {spec['size']} bytes is less than "
                            f"the minimum block size {min_bs} (fio: size too small)")


def _fadvise(value, random):
    """fio's fadvise_hint (options.c, td_io_open_file()): 0 none, 1 (the
    default) random for a random job and sequential otherwise, or named."""
    advice = {"0": "none", "random": "random", "sequential": "sequential"}.get(value)
    if advice:
        return advice
    if value == "1":
        return "random" if random else "sequential"
    raise SimulateError(f"simulate: fadvise_hint={value}: allowed: 0, 1, random, sequential")


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


def _sync_option(value):
    """fio's sync= (options.c): none/0, sync/1 (O_SYNC), dsync (O_DSYNC);
    True for either of the two, which make buffered writes synchronous."""
    if value in ("none", "0"):  # strncmp: case counts
        return False
    if value in ("sync", "1", "dsync"):
        return True
    raise SimulateError(f"simulate: sync={value}: allowed: none, 0, sync, 1, dsync")


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
            warnings.append(paths.import_mdsplit().lost_writeback_line(
                stacks[spec["stack"]]["label"], r["silent_writeback_pages"]))
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


def _write_sidecars(specs, meta, raw):
    """Each job's sidecar written as the engine writes it (appended to a
    stream, else the file replaced whole)."""
    mdsplit = paths.import_mdsplit()
    for spec, m in zip(specs, meta):
        if not m["stats"]:
            continue
        why = mdsplit.write_sidecar(m["stats_shown"], m["stats"], raw["stats"][spec["stack"]] + "\n")
        if why:
            raise SimulateError(why, 1)


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
    try:
        raw = mdsplit.run_fio_jobs(stacks, specs, data=data)
    except (mdsplit.ConfigError, RuntimeError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        # run_fio_jobs names a job by its index in the list; simulate by
        # its name in the job file, as fio does.
        m = re.match(r"run_fio_jobs: jobs\[(\d+)\]", msg)
        if m and int(m[1]) < len(specs):
            msg = f"simulate: job {specs[int(m[1])]['name']}" + msg[m.end():]
        elif not msg.startswith("simulate:"):
            msg = mdsplit.engine_line(msg)
        raise SimulateError(msg, 1) from None
    _write_sidecars(specs, meta, raw)
    for line in raw["notices"]:  # a member failed during the run (as the engine says it)
        print(line, file=sys.stderr)
    if raw["write_behind_errors"]:
        # The model completed them; the host's copy failed (the member file).
        raise SimulateError(mdsplit.write_behind_line(raw["write_behind_errors"]), 1)
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
