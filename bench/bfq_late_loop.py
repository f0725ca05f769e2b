"""fio on the BFQ non-root job of tests/py/test_host_lag.py (bfq_job,
bfq_stack) at a fixed time_scale, think time 0: per run the legacy/fixed
ratio, bfq's injected requests and the host's share, with simulate's ratio
of the same job file (docs/sidecar-lag.md, "The BFQ non-root comparison").

Run from the repository's root:
  MDSPLIT_BUILD_DIR=$PWD/build MDSPLIT_ENGINE=$PWD/build/libmdsplit.so \
      /usr/bin/python3 bench/bfq_late_loop.py TIME_SCALE RUNTIME RUNS
e.g. 64 4s 8."""
import json, os, shutil, sys, tempfile
from pathlib import Path
sys.path.insert(0, os.getcwd())
import tests.py.test_host_lag as t
from harness.fio_runner import run_fio
from harness.simulate import simulate_job

engine = os.environ["MDSPLIT_ENGINE"]
k, runtime, runs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
t.THINKTIME = 0
sim_ratio = None
for r in range(runs):
    d = Path(tempfile.mkdtemp(prefix="lateloop-"))
    t.write(d, {"bfq-legacy.toml": t.bfq_stack("legacy", k), "bfq-fixed.toml": t.bfq_stack("fixed", k),
                "job.fio": t.bfq_job(engine, runtime)})
    res = run_fio(d / "job.fio")
    real = t.written(res)
    ratio = t.group_sum(real, "nonroot-legacy") / t.group_sum(real, "nonroot-fixed")
    side = {v: json.loads((d / f"stats/bfq-{v}.json").read_text()) for v in ("legacy", "fixed")}
    inj = {v: side[v]["devices"][1]["bfq"]["injected"] for v in side}
    lag = {v: round(side[v]["host_lag"]["host_share"], 3)
           for v in side}
    if sim_ratio is None:
        t.move_real_sidecars(d)
        b = t.sim_bytes(simulate_job(d / "job.fio", data=False))
        sim_ratio = t.group_sum(b, "nonroot-legacy") / t.group_sum(b, "nonroot-fixed")
    print(f"run {r}: ratio {ratio:.3f} simulate {sim_ratio:.3f} real/sim {ratio/sim_ratio:.2f} "
          f"injected {inj} host_share {lag} verdicts {len(t.verdicts(res))}", flush=True)
    shutil.rmtree(d)
