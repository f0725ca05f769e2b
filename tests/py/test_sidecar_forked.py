"""mdsplit_stats and forked jobs: each process owns its copy of a passthrough
stack and writes its sidecar when its job ends, by a temporary file renamed
into place. Processes ending together must not take each other's temporary
file (they did: one rename failed with ENOENT and its job failed "cannot
write it"), and two jobs with devices of their own must not name one sidecar
file (the last to end overwrote the others' statistics)."""
from conftest import PASSTHROUGH_FILE_STACK, write_job
from harness import run_fio

STACK = PASSTHROUGH_FILE_STACK


def forked_jobs(engine, jobs=12, stats=lambda i: f"stats/s{i}.json", thread=False):
    text = f"""
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
rw=randread
bs=4k
size=1m
{"thread=1" if thread else ""}
"""
    return text + "".join(f"[j{i}]\nmdsplit_stats={stats(i)}\n" for i in range(jobs))


def test_forked_jobs_ending_together_all_write_their_sidecars(engine, workdir):
    # Twelve processes ending at once in one directory, three runs: every
    # job ends clean and each sidecar is whole JSON, with no temporary file
    # left beside them.
    (workdir / "stack.toml").write_text(STACK)
    job = write_job(workdir, "forked.fio", forked_jobs(engine))
    for _ in range(3):
        result = run_fio(job, check=False)
        assert result.mdsplit_errors() == []
        assert result.returncode == 0
        assert [j["error"] for j in result.jobs] == [0] * 12
        for i in range(12):
            assert result.sidecars[f"stats/s{i}.json"].device("md0")["read"]["ios"] == 256
        assert sorted(p.name for p in (workdir / "stats").iterdir()) == sorted(
            f"s{i}.json" for i in range(12))


def test_forked_jobs_naming_one_sidecar_are_refused(engine, workdir):
    # Two processes, two copies of the device, one file: refused at setup
    # with one line naming the option, the other job and what is allowed.
    (workdir / "stack.toml").write_text(STACK)
    job = write_job(workdir, "forked.fio", forked_jobs(engine, 2, lambda i: "stats/s.json"))
    result = run_fio(job, check=False)
    assert result.returncode != 0
    errors = result.mdsplit_errors()
    assert errors and all("mdsplit_stats=stats/s.json: job j" in e and "writes it too" in e
                          and "allowed: a file per job, or thread=1" in e for e in errors)


def test_threads_sharing_the_device_share_its_sidecar(engine, workdir):
    # thread=1, one stack file and filename: one device, one sidecar with
    # both jobs' I/O.
    (workdir / "stack.toml").write_text(STACK)
    job = write_job(workdir, "threads.fio",
                    forked_jobs(engine, 2, lambda i: "stats/s.json", thread=True))
    result = run_fio(job, check=False)
    assert result.mdsplit_errors() == []
    assert result.returncode == 0
    assert result.sidecars["stats/s.json"].device("md0")["read"]["ios"] == 512
