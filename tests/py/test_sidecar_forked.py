"""mdsplit_stats named by several forked jobs of one run: each process owns
its copy of a passthrough stack and writes the sidecar when its job ends, by
a temporary file renamed into place. Processes ending together must not take
each other's temporary file (they did: one rename failed with ENOENT and its
job failed "cannot write it")."""
from conftest import write_job
from harness import run_fio

STACK = """
[device]
kind = "passthrough"

[[members]]
path = "m0.img"
size = "16m"
backend = "io_uring"
"""


def forked_jobs(engine, jobs=12):
    text = f"""
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
mdsplit_stats=stats/s.json
direct=1
rw=randread
bs=4k
size=1m
"""
    return text + "".join(f"[j{i}]\n" for i in range(jobs))


def test_forked_jobs_ending_together_all_write_the_sidecar(engine, workdir):
    # Twelve processes ending at once, three runs: every job ends clean and
    # the sidecar is whole JSON, with no temporary file left beside it.
    (workdir / "stack.toml").write_text(STACK)
    job = write_job(workdir, "forked.fio", forked_jobs(engine))
    for _ in range(3):
        result = run_fio(job, check=False)
        assert result.mdsplit_errors() == []
        assert result.returncode == 0
        assert [j["error"] for j in result.jobs] == [0] * 12
        assert result.sidecars["stats/s.json"].device("md0")["read"]["ios"] == 256
        assert sorted(p.name for p in (workdir / "stats").iterdir()) == ["s.json"]
