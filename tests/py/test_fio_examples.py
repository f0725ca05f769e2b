"""fio's own examples/*.fio, from Debian's fio source (the tree the engine is
built against), rewritten to the engine and run shortened with the real fio.

Each example is rewritten to `ioengine=external:<engine>`,
`mdsplit_config=stack.toml`, `filename=md0` over a small sparse-file member;
options that name files, devices or directories, or another ioengine, are
dropped; runtimes, sizes, job counts, loops and delays are cut down
(`rewrite_example`). Every example either passes (fio exits 0, no job error,
any verify passes, I/O went through the engine, its mdsplit_stats sidecar is
whole with no device error) or is listed below with the
reason it cannot apply: NOT_APPLICABLE for examples about something that is
not a block device (network/cluster engines, pmem/dax, GPUs, file-system
operations, zoned devices, SCSI/NVMe pass-through, CPU-only engines),
REFUSED_BY_ENGINE for fio features the engine refuses at setup on purpose
(each checked to be refused with its one line, so the list cannot go stale
once the feature exists). Buffered examples whose jobs write at the same
time run with thread=1 (BUFFERED_SHARED: forked, they are refused). A RAID5
subset runs again with thread=1, the
stonewalled ones also forked, each ending with the parity checker.
"""
import glob
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from harness import paths
from harness.fio_runner import FioResult, fio_environment
from harness.parity_check import check_parity, load_stack
from harness.sidecar import load_sidecar

# Examples whose subject is not a block device the engine can stand in for:
# name -> (text the example must contain, the reason).
NOT_APPLICABLE = {
    # Network and cluster storage engines: the example is the protocol.
    "gfapi.fio": ("ioengine=gfapi",
        "GlusterFS client engine (ioengine=gfapi, volume/brick)"),
    "gpudirect-rdmaio-client.fio": ("ioengine=rdma",
        "RDMA network engine with CUDA memory (ioengine=rdma, mem=cudamalloc)"),
    "gpudirect-rdmaio-server.fio": ("ioengine=rdma",
        "RDMA network engine with CUDA memory (ioengine=rdma, mem=cudamalloc)"),
    "http-s3-crypto.fio": ("ioengine=http",
        "HTTP/S3 object-store engine (ioengine=http, remote host and keys)"),
    "http-s3-storage-class.fio": ("ioengine=http",
        "HTTP/S3 object-store engine (ioengine=http, remote host and keys)"),
    "http-s3.fio": ("ioengine=http",
        "HTTP/S3 object-store engine (ioengine=http, remote host and keys)"),
    "http-swift.fio": ("ioengine=http",
        "HTTP/Swift object-store engine (ioengine=http, remote host and token)"),
    "http-webdav.fio": ("ioengine=http",
        "HTTP/WebDAV object-store engine (ioengine=http, a WebDAV server)"),
    "libhdfs.fio": ("ioengine=libhdfs",
        "HDFS client engine (ioengine=libhdfs, a namenode)"),
    "libiscsi.fio": ("ioengine=libiscsi",
        "iSCSI initiator engine (ioengine=libiscsi, an iscsi:// target)"),
    "nbd.fio": ("ioengine=nbd",
        "NBD client engine (ioengine=nbd, an nbd+unix:// server socket)"),
    "netio.fio": ("ioengine=net",
        "network engine (ioengine=net, TCP sender/receiver)"),
    "netio_multicast.fio": ("ioengine=net",
        "network engine (ioengine=net, UDP multicast ping-pong)"),
    "nfs.fio": ("ioengine=nfs",
        "userspace NFS client engine (ioengine=nfs, an nfs:// server)"),
    "rados.fio": ("ioengine=rados",
        "Ceph RADOS engine (ioengine=rados, a Ceph cluster)"),
    "rbd.fio": ("ioengine=rbd",
        "Ceph RBD engine (ioengine=rbd, a Ceph cluster)"),
    "rdmaio-client.fio": ("ioengine=rdma",
        "RDMA network engine (ioengine=rdma, hostname/port/verb)"),
    "rdmaio-server.fio": ("ioengine=rdma",
        "RDMA network engine (ioengine=rdma, port)"),
    "dfs.fio": ("ioengine=dfs",
        "DAOS file-system engine (ioengine=dfs, pool/container)"),
    "ime.fio": ("ioengine=ime_",
        "DDN IME engines (ioengine=ime_psync/ime_psyncv/ime_aio)"),
    "librpma_apm-client.fio": ("ioengine=librpma_apm_client",
        "RDMA persistent-memory engine (librpma_apm_client, serverip)"),
    "librpma_apm-server.fio": ("ioengine=librpma_apm_server",
        "RDMA persistent-memory engine (librpma_apm_server, serverip)"),
    "librpma_gpspm-client.fio": ("ioengine=librpma_gpspm_client",
        "RDMA persistent-memory engine (librpma_gpspm_client, serverip)"),
    "librpma_gpspm-server.fio": ("ioengine=librpma_gpspm_server",
        "RDMA persistent-memory engine (librpma_gpspm_server, serverip)"),
    # Persistent memory / DAX.
    "dev-dax.fio": ("ioengine=dev-dax",
        "device-DAX engine on /dev/dax0.0 (load/store to pmem, no block I/O)"),
    "libpmem.fio": ("ioengine=libpmem",
        "libpmem engine on a DAX-mounted pmem file system, NUMA-bound"),
    "pmemblk.fio": ("ioengine=pmemblk",
        "libpmemblk engine on a pmem pool file"),
    # GPUs.
    "libcufile-cufile.fio": ("ioengine=libcufile",
        "NVIDIA cuFile/GPUDirect Storage engine (gpu_dev_ids, cuda_io)"),
    "libcufile-posix.fio": ("ioengine=libcufile",
        "NVIDIA cuFile engine with CUDA buffers (gpu_dev_ids, cuda_io)"),
    # Engines that exercise a file system, not a block device.
    "e4defrag.fio": ("ioengine=e4defrag",
        "ext4 online-defragment engine (ioengine=e4defrag, EXT4_IOC_MOVE_EXT)"),
    "e4defrag2.fio": ("ioengine=e4defrag",
        "ext4 online-defragment engine (ioengine=e4defrag, EXT4_IOC_MOVE_EXT)"),
    "falloc.fio": ("ioengine=falloc",
        "fallocate engine on a file system (ioengine=falloc, punch-hole fuzzing)"),
    "ftruncate.fio": ("ioengine=ftruncate",
        "ftruncate engine on a file system (ioengine=ftruncate)"),
    "filecreate-ioengine.fio": ("ioengine=filecreate",
        "file-creation engine (ioengine=filecreate, 31250 files)"),
    "filedelete-ioengine.fio": ("ioengine=filedelete",
        "file-deletion engine (ioengine=filedelete)"),
    "filestat-ioengine.fio": ("ioengine=filestat",
        "stat(2) engine (ioengine=filestat)"),
    "enospc-pressure.fio": ("ignore_error=,ENOSPC",
        "fills a file system to ENOSPC (directory, filesize=128G, "
        "create_on_open, punch holes); a stack has a fixed size"),
    # Engines with no block I/O at all, or about fio's own null engines.
    "cpuio.fio": ("ioengine=cpuio",
        "CPU-burning engine (ioengine=cpuio), no I/O"),
    "exec.fio": ("ioengine=exec",
        "program-running engine (ioengine=exec, turbostat) with cpuio jobs, no I/O"),
    "null.fio": ("ioengine=null",
        "about fio's null engine (ioengine=null) itself"),
    "cpp_null.fio": ("ioengine=cpp_null",
        "about fio's C++ external null engine (ioengine=cpp_null) itself"),
    # Zoned devices (zonemode=zbd needs a zoned block device).
    "libzbc-rand-write.fio": ("zonemode=zbd",
        "zoned device through libzbc (zonemode=zbd, ioengine=libzbc)"),
    "libzbc-seq-read.fio": ("zonemode=zbd",
        "zoned device through libzbc (zonemode=zbd, ioengine=libzbc)"),
    "zbd-rand-write.fio": ("zonemode=zbd",
        "zoned block device (zonemode=zbd, max_open_zones)"),
    "zbd-seq-read.fio": ("zonemode=zbd",
        "zoned block device (zonemode=zbd, read_beyond_wp)"),
    "uring-cmd-zoned.fio": ("zonemode=zbd",
        "zoned NVMe namespace through io_uring_cmd (/dev/ng0n1, zonemode=zbd)"),
    "xnvme-zoned.fio": ("zonemode=zbd",
        "zoned device through xNVMe (zonemode=zbd), ${FIO_*} placeholders"),
    # Device-specific pass-through command sets and engine-only options.
    "uring-cmd-ng.fio": ("ioengine=io_uring_cmd",
        "NVMe generic char device through ioengine=io_uring_cmd (cmd_type=nvme)"),
    "sg_verify.fio": ("ioengine=sg",
        "SCSI generic engine (ioengine=sg, sg_write_mode=verify_bytchk_*)"),
    "sg_verify-fail.fio": ("ioengine=sg",
        "SCSI generic engine (ioengine=sg, sg_write_mode=verify_bytchk_*)"),
    "sg_write_same_ndob.fio": ("ioengine=sg",
        "SCSI generic engine (ioengine=sg, sg_write_mode=write_same_ndob)"),
    "mtd.fio": ("ioengine=mtd",
        "MTD flash engine (ioengine=mtd, /dev/mtd0, skip_bad, erase as trim)"),
    "cmdprio-bssplit.fio": ("cmdprio_bssplit=",
        "cmdprio_bssplit/cmdprio_class are options of the libaio and "
        "io_uring engines (per-command ioprio), not fio's"),
    "cmdprio-percentage.fio": ("cmdprio_percentage=",
        "cmdprio_percentage/cmdprio_class are options of the libaio and "
        "io_uring engines (per-command ioprio), not fio's"),
    # NUMA.
    "numa.fio": ("numa_cpu_nodes=0-1",
        "about NUMA placement of fio's jobs (numa_cpu_nodes=0-1, "
        "numa_mem_policy=interleave:0-1), not the device; needs two NUMA nodes"),
}

# Examples about a fio feature the engine refuses on purpose: each is run and
# must fail with the one line naming it (offload: fio's own, FIO_NO_OFFLOAD).
REFUSED_BY_ENGINE = {
    "fixed-rate-submission.fio": ("offloaded submit", "offload workers reload the engine "
                                  "and would each get a stack of their own"),
    "poisson-rate-submission.fio": ("offloaded submit", "offload workers reload the engine "
                                    "and would each get a stack of their own"),
}

# Run again on a 4-member RAID5 stack with thread=1 (one stack shared by
# all of a run's jobs): the verify family and mixed read/write shapes.
RAID5_SUBSET = ["basic-verify.fio", "surface-scan.fio", "cross-stripe-verify.fio",
                "ssd-test.fio", "fio-rand-RW.fio", "tiobench-example.fio",
                "iometer-file-access-server.fio", "backwards-read.fio", "waitfor.fio",
                "flow.fio", "exitwhat.fio", "dedupe-global.fio", "jesd219.fio", "fsx.fio"]

# Forked jobs (fio's default) on RAID5: examples whose jobs a stonewall
# keeps from overlapping, so each process owns the stack in turn.
RAID5_FORKED_SUBSET = ["basic-verify.fio", "surface-scan.fio", "ssd-test.fio"]

# Buffered (direct=0) examples whose jobs write and may run at the same time:
# forked, each process would keep its own page cache of one device, so the
# engine refuses them (validation row 155); they run with thread=1, one page
# cache, as the refusal asks, and their forked refusal is checked below.
BUFFERED_SHARED = ["dedupe-global.fio", "exitwhat.fio", "fio-rand-RW.fio", "fio-rand-write.fio",
                   "fio-seq-RW.fio", "steadystate.fio", "waitfor.fio"]

STACK_MB = 64  # the member (passthrough) / each member (RAID5)
SIZE_CAP = "8m"  # any size= or io_size=
NUMJOBS_CAP = 2
IODEPTH_CAP = 64

# Per-example corrections, each with its reason.
OVERRIDES = {
    # Written when rate= was in KiB/s (its comment: "1024kb/s reading
    # clients"); fio 3 reads a bare number as bytes/s (4 KiB per 3 s).
    "1mbs_clients.fio": {"rate": "1250k", "ratemin": "1024k"},
    # A steady-state slope needs two one-second samples: over one, fio's
    # JSON prints "slope" : -nan (not JSON).
    "steadystate.fio": {"runtime": "3", "ss_dur": "2"},
}
# fio command-line arguments an example's README asks for.
ARGS = {
    # "Compare fio IO engines": run as `fio xnvme-compare.fio
    # --section=default --ioengine=...` (the [override] section takes its
    # options from ${FIO_RW}/${FIO_IODEPTH}/${FIO_BS}).
    "xnvme-compare.fio": ["--section=default"],
}
# Every run is also capped at this many seconds (fio's runtime= without
# time_based ends a job early, not in error).
RUNTIME_CAP = "2"
# Every job writes the engine's statistics: job N (in file order) to
# stats/jobN.json, its numjobs clones to stats/jobN.json.1, .2, ...
SIDECAR_DIR = "stats"

# Options naming files, directories or devices, or another engine: dropped.
DROPPED = {"filename", "directory", "filename_format", "nrfiles", "nr_files", "filesize",
           "openfiles", "unlink", "create_on_open", "opendir",
           "ioengine", "ramp_time"}
# Time options cut to one second.
SHORTENED = {"runtime": "1", "timeout": "1", "ss_dur": "1", "ss_ramp": "0"}


def examples_dir() -> Path:
    """examples/ of fio's source as ci/fetch-fio-source.sh lays it out
    (<repo>/build-fio-source/fio-<version>), else the FIO_SOURCE_DIR the
    build was configured with (a worktree sharing another's fetch)."""
    found = sorted(glob.glob(str(ROOT / "build-fio-source" / "fio-*" / "examples")))
    if found:
        return Path(found[-1])
    cache = paths.BUILD / "CMakeCache.txt"
    if cache.exists():
        m = re.search(r"^FIO_SOURCE_DIR:\w+=(.+)$", cache.read_text(), re.M)
        if m and (Path(m.group(1)) / "examples").is_dir():
            return Path(m.group(1)) / "examples"
    return ROOT / "build-fio-source" / "fio-*" / "examples"  # reported missing by the tests


EXAMPLES = examples_dir()
ALL = sorted(p.name for p in EXAMPLES.glob("*.fio")) if EXAMPLES.is_dir() else []
RUNNABLE = [n for n in ALL if n not in NOT_APPLICABLE and n not in REFUSED_BY_ENGINE]


def _time_scaled(value: str, factor: int) -> str:
    """A startdelay in seconds divided by factor, in milliseconds."""
    m = re.fullmatch(r"(\d+)s?", value)
    return f"{int(m.group(1)) * 1000 // factor}ms" if m else value


def _capped(value: str, cap: int) -> str:
    return str(min(int(value), cap)) if value.isdigit() else value


def rewrite_option(key: str, value: str, overrides: dict):
    """The option as run here (key, value), or None to drop it."""
    if key in overrides:
        return key, overrides[key]
    if key in DROPPED:
        return None
    if key in SHORTENED:
        return key, SHORTENED[key]
    if key in ("size", "io_size"):
        return key, SIZE_CAP
    if key == "offset_increment":
        return key, SIZE_CAP
    if key == "numjobs":
        return key, _capped(value, NUMJOBS_CAP)
    if key == "iodepth":
        return key, _capped(value, IODEPTH_CAP)
    if key == "loops":
        return key, _capped(value, 2)
    if key == "number_ios":
        return key, _capped(value, 200)
    if key == "startdelay":
        return key, _time_scaled(value, 50)
    if key == "zonesize":
        return key, "1m"
    if key == "zoneskip":
        return key, "2m"
    if key == "latency_window":
        return key, "200000"
    return key, value


def rewrite_example(text: str, engine: Path, thread: bool, overrides=None) -> str:
    """The example as a job file on the engine: our [global] first (fio
    merges later [global] sections into it), then the example's lines with
    inline comments removed and each option through rewrite_option."""
    out = ["[global]", f"ioengine=external:{engine}", "mdsplit_config=stack.toml",
           "filename=md0"]
    jobs = 0
    if "fill_device" not in text:
        # fill_device=1 writes the whole stack (a size would stop it there)
        # and its verify phase reads it all back: neither may be cut short.
        out += [f"size={SIZE_CAP}", f"runtime={RUNTIME_CAP}"]
    if thread:
        out.append("thread=1")
    for raw in text.splitlines():
        line = re.sub(r"\s+[;#].*$", "", raw).strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("["):
            out.append(line)
            if line.strip("[]").strip().lower() != "global":
                # A sidecar per job: forked jobs have devices of their own,
                # and two of them may not name one file (the engine refuses).
                jobs += 1
                out.append(f"mdsplit_stats={SIDECAR_DIR}/job{jobs}.json")
            continue
        key, eq, value = line.partition("=")
        option = rewrite_option(key.strip(), value.strip(), overrides or {})
        if option is None:
            continue
        out.append(f"{option[0]}={option[1]}" if eq else option[0])
    return "\n".join(out) + "\n"


def passthrough_stack() -> str:
    return f"""
[device]
kind = "passthrough"

[[members]]
path = "m0.img"
size = "{STACK_MB}m"
backend = "io_uring"
max_sectors = "512k"
"""


def raid5_stack(members=4) -> str:
    text = '[device]\nkind = "raid5"\nchunk = "64k"\nsplit_order = "fixed"\n'
    for i in range(members):
        text += f"""
[[members]]
path = "m{i}.img"
size = "{STACK_MB // (members - 1)}m"
backend = "io_uring"
max_sectors = "512k"
"""
    return text


def run_fio_bounded(job: Path, args=(), timeout=60) -> FioResult:
    """fio on job in its directory; on timeout its whole process group
    (forked jobs included) is killed and the test fails naming the example."""
    out = job.with_suffix(".json")
    proc = subprocess.Popen(["fio", "--output-format=json", f"--output={out}", *args, job.name],
                            cwd=job.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=fio_environment(), start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{job.name}: fio still running after {timeout} s")
    text = out.read_text() if out.exists() else ""
    start = text.find("{")
    result = FioResult(str(job), proc.returncode,
                       json.loads(text[start:]) if start >= 0 else {}, stderr)
    for p in sorted((job.parent / SIDECAR_DIR).glob("job*.json*")):
        result.sidecars[str(p.relative_to(job.parent))] = load_sidecar(p)
    return result


def run_example(engine, tmp_path, name, stack, thread):
    (tmp_path / "stack.toml").write_text(stack)
    # The member files exist before the run, as the devices an example is
    # written for do: some set allow_file_create=0, under which the engine
    # creates no member file.
    for path, size in re.findall(r'path = "(m\d+\.img)"\nsize = "(\d+)m"', stack):
        with open(tmp_path / path, "wb") as f:
            f.truncate(int(size) << 20)
    job = tmp_path / name
    job.write_text(rewrite_example((EXAMPLES / name).read_text(), engine, thread,
                                   OVERRIDES.get(name)))
    return run_fio_bounded(job, ARGS.get(name, ()))


def assert_example_passed(result, name, verifies):
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert result.returncode == 0, f"{name}: fio exited {result.returncode}: " + "\n".join(
        lines[:10])
    assert result.jobs, f"{name}: no jobs in fio's output"
    for j in result.jobs:
        assert j["error"] == 0, f"{name}: job {j['jobname']} error {j['error']}"
    assert result.mdsplit_errors() == []
    # The I/O went through the engine: some job read or wrote.
    assert sum(result.total_ios(j) for j in result.jobs) > 0, f"{name}: no I/O"
    # The engine's statistics were written, whole, with no device error.
    assert result.sidecars, f"{name}: no sidecar in {SIDECAR_DIR}/"
    for path, sidecar in result.sidecars.items():
        assert sidecar.device("md0")["read"]["ios"] + sidecar.device("md0")["write"]["ios"] > 0
        for d in sidecar.devices:
            assert (d["read"]["errors"], d["write"]["errors"]) == (0, 0), (path, d["name"])
    if verifies:  # and what was written was read back and checked
        assert sum(j["read"]["io_bytes"] for j in result.jobs) > 0, f"{name}: nothing verified"


def test_examples_found():
    # fio's source tree is fetched by ci/fetch-fio-source.sh for the engine's
    # headers; without it there is nothing to rewrite.
    assert ALL, f"no examples/*.fio at {EXAMPLES} (run ci/fetch-fio-source.sh)"
    assert len(RUNNABLE) >= 25


def test_lists_name_existing_examples():
    # A listed example that this fio's source does not have is a stale entry.
    listed = set(NOT_APPLICABLE) | set(REFUSED_BY_ENGINE) | set(RAID5_SUBSET) | set(ARGS) | set(
        OVERRIDES) | set(RAID5_FORKED_SUBSET) | set(BUFFERED_SHARED)
    stale = sorted(listed - set(ALL))
    assert stale == [], f"listed but not among {EXAMPLES}'s examples: {stale}"
    assert not set(NOT_APPLICABLE) & set(REFUSED_BY_ENGINE)
    assert set(RAID5_SUBSET) | set(RAID5_FORKED_SUBSET) <= set(RUNNABLE)


@pytest.mark.parametrize("name", sorted(NOT_APPLICABLE))
def test_not_applicable_reason_still_holds(name):
    # The option a reason rests on is still in this fio's example.
    evidence, _ = NOT_APPLICABLE[name]
    assert evidence in (EXAMPLES / name).read_text()


@pytest.mark.parametrize("name", RUNNABLE)
def test_example_passthrough(engine, tmp_path, name):
    # The rewritten example runs clean on a passthrough stack.
    result = run_example(engine, tmp_path, name, passthrough_stack(), name in BUFFERED_SHARED)
    assert_example_passed(result, name, "verify=" in (EXAMPLES / name).read_text())


@pytest.mark.parametrize("name", BUFFERED_SHARED)
def test_example_buffered_shared_forked_is_refused(engine, tmp_path, name):
    # Forked, the example's buffered writers would hold two page caches of one device.
    result = run_example(engine, tmp_path, name, passthrough_stack(), False)
    assert result.returncode != 0
    assert any("each keep their own page cache" in l for l in result.mdsplit_errors()), \
        result.stderr[-2000:]


@pytest.mark.parametrize("name", RAID5_SUBSET)
def test_example_raid5_thread(engine, tmp_path, name):
    # The rewritten example runs clean on a RAID5 stack, jobs as threads,
    # and leaves every stripe's parity consistent.
    result = run_example(engine, tmp_path, name, raid5_stack(), True)
    assert_example_passed(result, name, "verify=" in (EXAMPLES / name).read_text())
    members, chunk, layout, failed, sizes = load_stack(tmp_path / "stack.toml")
    assert check_parity(members, chunk, layout, failed, sizes) == []


@pytest.mark.parametrize("name", RAID5_FORKED_SUBSET)
def test_example_raid5_forked_stonewalled(engine, tmp_path, name):
    # Stonewalled forked jobs run on a RAID5 stack one after another.
    result = run_example(engine, tmp_path, name, raid5_stack(), False)
    assert_example_passed(result, name, "verify=" in (EXAMPLES / name).read_text())
    members, chunk, layout, failed, sizes = load_stack(tmp_path / "stack.toml")
    assert check_parity(members, chunk, layout, failed, sizes) == []


@pytest.mark.parametrize("name", sorted(REFUSED_BY_ENGINE))
def test_example_refused_with_one_line(engine, tmp_path, name):
    # An example about a refused feature fails at setup with the line naming it.
    option, _ = REFUSED_BY_ENGINE[name]
    result = run_example(engine, tmp_path, name, passthrough_stack(), False)
    assert result.returncode != 0
    assert any(option in l for l in result.mdsplit_errors()), result.stderr[-2000:]
    assert sum(result.total_ios(j) for j in result.jobs) == 0
