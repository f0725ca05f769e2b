#!/usr/bin/env bash
# The engine's own host cost per request, per behaviour, on this machine, and
# the factor time_scale = "auto" picks here for each shipped job file
# (docs/sidecar-lag.md). A timing measurement, so a benchmark and not a test.
#
# Host cost: fio at iodepth 1 for RUNTIME seconds on members that store
# nothing and model nothing (null backends, no timing model): every
# microsecond of a request's cycle is the host's (fio's loop and the
# engine's), so the cost is 1 / fio's IOPS (bfq-8-writers: 8 jobs on one
# device, 1 / their summed IOPS). Prints
#   host cost <behaviour>: <us> us per request (<what it ran>)
# Auto: each jobs/*.fio (a copy) with every stack's time_scale = "auto",
# run until its stacks have been calibrated at setup (then stopped). Prints
#   auto <job file> <device>: time_scale <k> (<the calibration's line>)
#
# Usage: bench/host_cost.sh [ENGINE.so] [RUNTIME_SECONDS]
# Environment: MDSPLIT_ENGINE, MDSPLIT_BENCH_DIR (default /var/tmp), FIO
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
engine=$(realpath "${1:-${MDSPLIT_ENGINE:-$root/build/libmdsplit.so}}")
runtime=${2:-2}
[[ $runtime =~ ^[0-9]+$ && $runtime -gt 0 ]] || {
    echo "host_cost.sh: runtime must be a whole number of seconds, got '$runtime'" >&2
    exit 1
}
[[ -f $engine ]] || {
    echo "host_cost.sh: engine $engine not found" >&2
    exit 1
}
work=$(mktemp -d "${MDSPLIT_BENCH_DIR:-/var/tmp}/mdsplit-host-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$root"
/usr/bin/python3 - "$engine" "$runtime" "$work" "${FIO:-fio}" <<'PY'
import json, re, shutil, subprocess, sys, time
from pathlib import Path

engine, runtime, work, fio = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]

def null_members(n):
    return "".join(f'\n[[members]]\npath = "m{i}"\nsize = "1g"\nbackend = "null"\n' for i in range(n))

CASES = {
    "passthrough": ('[device]\nkind = "passthrough"\n' + null_members(1), "rw=randread\nbs=4k\n"),
    "raid5": ('[device]\nkind = "raid5"\nchunk = "64k"\nsplit_order = "fixed"\n' + null_members(8),
              "rw=read\nbs=4480k\n"),
    "bfq": ('[device]\nkind = "passthrough"\nscheduler = "bfq"\n' + null_members(1),
            "rw=randwrite\nbs=4k\n"),
    # 8 psync writers on one device (seed 004's shape): the shared stack's
    # hand-offs between the fio threads are part of each request's cycle.
    "bfq-8-writers": ('[device]\nkind = "passthrough"\nscheduler = "bfq"\n' + null_members(1),
                      "rw=randwrite\nbs=4k\nnumjobs=8\nthread=1\ngroup_reporting=1\n"),
    "buffered": ('[device]\nkind = "passthrough"\n' + null_members(1) +
                 '\n[page_cache]\nsize = "64m"\n', "rw=read\nbs=4k\ndirect=0\n"),
}
for name, (stack, body) in CASES.items():
    d = work / name
    d.mkdir()
    (d / "stack.toml").write_text(stack)
    (d / "job.fio").write_text(f"[global]\nioengine=external:{engine}\nmdsplit_config=stack.toml\n"
                               f"filename=md0\ndirect=1\niodepth=1\ntime_based=1\nruntime={runtime}\n"
                               f"[{name}]\n{body}")
    out = subprocess.run([fio, "--output-format=json", "job.fio"], cwd=d, capture_output=True,
                         text=True, check=True)
    job = json.loads(out.stdout)["jobs"][0]
    iops = sum(job[k]["iops"] for k in ("read", "write"))
    what = body.strip().replace("\n", " ")
    print(f"host cost {name}: {1e6 / iops:.1f} us per request ({what}, null member, iodepth 1)")

jobs = work / "jobs"
shutil.copytree(Path("jobs"), jobs)
for toml in jobs.glob("*.toml"):
    text = toml.read_text()
    if "[device]" not in text:
        continue
    if re.search(r"(?m)^time_scale\s*=", text):
        text = re.sub(r"(?m)^time_scale\s*=.*$", 'time_scale = "auto"', text)
    else:
        text = text.replace("[device]\n", '[device]\ntime_scale = "auto"\n', 1)
    toml.write_text(text)
for job in sorted(jobs.glob("*.fio")):
    text = job.read_text()
    job.write_text(re.sub(r"(?m)^ioengine=external:.*$", f"ioengine=external:{engine}", text))
    (jobs / "stats").mkdir(exist_ok=True)
    (jobs / "work").mkdir(exist_ok=True)
    # Every stack calibrates in fio's setup, before the first job runs:
    # stopped once no new calibration line came for 30 s (120 s at most).
    proc = subprocess.Popen([fio, "--output-format=json", "--output=/dev/null", job.name],
                            cwd=jobs, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    last, start, seen = time.monotonic(), time.monotonic(), 0
    while proc.poll() is None and time.monotonic() - last < 30 and time.monotonic() - start < 120:
        if sel.select(timeout=0.5):
            line = proc.stderr.readline()
            if 'time_scale = "auto"' in line:
                m = re.match(r'mdsplit: (\S+): time_scale = "auto": (\S+) ', line)
                print(f"auto {job.name} {m.group(1)}: time_scale {m.group(2)} ({line.strip()})")
                last, seen = time.monotonic(), seen + 1
    if proc.poll() is None:
        proc.terminate()
    proc.wait()
    if not seen:
        print(f"auto {job.name}: no calibration line (see fio's errors)")
PY
