"""The foundation demo (jobs/passthrough-demo.fio): data written through the
engine is read back and verified (md5), then a 4k random-read job at
iodepth 32 measures the stack. No thread: this is the example of the
experiment interface (harness/experiment.py) the reproductions follow:

  - run the job files from jobs_dir (a fresh copy of jobs/) with run_fio,
    calling progress(step) before each fio run;
  - keep fio's JSON in out_dir and name it (and the sidecars) in `raw`;
  - return flat "variant.metric" numbers (the names jobs/expectations.toml
    uses), the printed tables and the figures written into out_dir.
The expectations' checks are evaluated by `reproduce` itself; `checks` here
are only the experiment's own extra verdicts.

There is no virtual-clock run here: the throughput and latency figures are
fio's real clock on the machine that ran it, so they are named machine.*
(printed as "this machine", never judged by `check`, as every experiment's
real-clock figures). The error counts (md5 verify, I/O errors) are the same
on every machine and stay checked.
"""
import json
import os
from collections import Counter
from pathlib import Path

from harness import plots
from harness.blktrace import read_trace_dir
from harness.experiment import ExperimentResult, use_engine_under_test
from harness.fio_runner import run_fio
from harness.tables import iostat_table, job_table

NAME = "passthrough"
EXPECTATIONS = "passthrough"  # its section of jobs/expectations.toml
JOB = "passthrough-demo.fio"  # in jobs/
TITLE = "foundation demo: randwrite + md5 verify, then 4k randread QD32"
SEEDS = []
ORDER = 0  # `reproduce all` runs the experiments by ORDER, then name
DURATION = (7.0, 1)  # (s, steps) when the history has no run (2-core VM)


def _rel(path, out_dir) -> str:
    return os.path.relpath(path, out_dir)


def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult:

    progress("passthrough-demo.fio: randwrite + verify, 4k randread QD32")
    result = run_fio(use_engine_under_test(jobs_dir / JOB))
    (out_dir / "passthrough-demo.fio.json").write_text(json.dumps(result.fio, indent=1))

    verify = result.job("passthrough-verify")
    randread = result.job("passthrough-randread-qd32")
    side_verify = result.sidecars["stats/passthrough-verify.json"]
    side_read = result.sidecars["stats/passthrough-randread-qd32.json"]

    def device_errors(sidecar):
        return sum(d[direction]["errors"] for d in sidecar.devices for direction in ("read", "write"))

    metrics = {
        "verify.errors": verify["error"] + device_errors(side_verify),
        "randread.errors": randread["error"] + device_errors(side_read),
        # real clock, this machine: never checked
        "machine.verify.write_MiBps": verify["write"]["bw"] / 1024,
        "machine.randread.read_iops": randread["read"]["iops"],
        "machine.randread.read_MiBps": randread["read"]["bw"] / 1024,
        "machine.randread.clat_mean_us": randread["read"]["clat_ns"]["mean"] / 1000,
        "machine.randread.clat_p99_us":
            randread["read"]["clat_ns"]["percentile"]["99.000000"] / 1000,
        "machine.randread.m0_r_await_ms": side_read.device("m0")["r_await_ms"],
    }

    tables = ["this machine (real-clock fio, not checked; errors checked):\n" + job_table(result)]
    for path, sidecar in sorted(result.sidecars.items()):
        tables.append(f"{path} (iostat -x of each device):\n{iostat_table(sidecar)}")

    # One question, one figure: does the stack pass fio's write sizes through
    # unchanged? Bios queued on md0 (Q) against requests issued to m0 (D).
    figures = []
    trace_dir = jobs_dir / "traces" / "passthrough-verify"
    if trace_dir.is_dir():
        traces = read_trace_dir(trace_dir)
        bios = Counter(r.nr_sectors for r in traces.get("md0", []) if r.action == "Q" and r.op == "W")
        reqs = Counter(r.nr_sectors for r in traces.get("m0", []) if r.action == "D" and r.op == "W")
        if bios or reqs:
            plots.size_distribution(out_dir / "write-sizes.png",
                                    {"bios queued on md0 (Q)": bios, "requests issued to m0 (D)": reqs},
                                    unit="sectors", bins="log2",
                                    title="randwrite bsrange=4k-256k through the passthrough device")
            figures.append("write-sizes.png")

    raw = {"fio": "passthrough-demo.fio.json",
           "sidecars": [_rel(jobs_dir / p, out_dir) for p in sorted(result.sidecars)],
           "traces": [_rel(trace_dir, out_dir)] if trace_dir.is_dir() else []}
    return ExperimentResult(name=NAME, tables=tables, metrics=metrics, figures=figures, raw=raw)
