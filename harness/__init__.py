"""mdsplit harness: runs fio with the mdsplit engine and reads what it wrote.

    from harness import run_fio
    result = run_fio("jobs/passthrough-demo.fio")
    result.jobs[0]["read"]["iops"], result.sidecars["stats/demo.json"].device("m0")
"""
from harness.fio_runner import FioResult, FioError, run_fio
from harness.sidecar import Sidecar, load_sidecar
from harness.blktrace import read_blktrace, read_trace_dir

__all__ = ["FioResult", "FioError", "run_fio", "Sidecar", "load_sidecar",
           "read_blktrace", "read_trace_dir"]
