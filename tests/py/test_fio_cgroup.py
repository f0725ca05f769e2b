"""fio's own cgroup= names the bfq group of a job's I/O, as the kernel charges
a bio to its task's cgroup (bio_associate_blkg(), bfq_bic_update_cgroup()):
the engine and `harness simulate` both read it when mdsplit_group is unset.
Skips only where fio cannot make a cgroup (no root, no blkio or cgroup2
hierarchy)."""
import json
import os
import subprocess

import pytest

from conftest import stack_job
from harness import run_fio
from harness.simulate import simulate_job

BFQ = '[device]\nscheduler = "bfq"\n[[members]]\nbackend = "null"\nsize = "4m"\n'


@pytest.fixture
def fio_cgroups(tmp_path):
    """The name of a cgroup fio may create, or a skip with fio's reason."""
    name = f"mdsplit-test-{os.getpid()}"
    probe = subprocess.run(["fio", "--name=probe", "--ioengine=null", "--size=4k",
                            f"--cgroup={name}", "--output=/dev/null"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    if probe.returncode != 0:
        pytest.skip("fio cannot create a cgroup here: " + probe.stderr.strip().splitlines()[-1])
    return name


def member_groups(sidecar):
    member = next(d for d in sidecar["devices"] if d["role"] == "member")
    return sorted((g["name"], g.get("weight")) for g in member["bfq"]["groups"])


def test_fio_cgroup_is_the_jobs_bfq_group(tmp_path, engine, fio_cgroups):
    """A job with cgroup=NAME and mdsplit_group_weight=250: its bfq group is NAME at 250, engine and simulate."""
    jobfile = stack_job(tmp_path, engine, BFQ,
                        f"rw=randread\nbs=4k\nsize=1m\n[j]\ncgroup={fio_cgroups}\n"
                        "mdsplit_group_weight=250\nmdsplit_stats=s.json\n")
    run_fio(jobfile, timeout=60)
    real = member_groups(json.loads((tmp_path / "s.json").read_text()))
    assert real == [("/", None), (fio_cgroups, 250)]
    # simulate replaces no real run's sidecar: the real one is moved away.
    (tmp_path / "s.json").rename(tmp_path / "s-real.json")
    simulate_job(jobfile)
    assert member_groups(json.loads((tmp_path / "s.json").read_text())) == real


def test_same_name_in_cgroup_and_mdsplit_group_is_one_group(tmp_path, engine, fio_cgroups):
    """cgroup=NAME beside mdsplit_group=NAME: accepted, one group NAME."""
    jobfile = stack_job(tmp_path, engine, BFQ,
                        f"rw=randread\nbs=4k\nsize=1m\n[j]\ncgroup={fio_cgroups}\n"
                        f"mdsplit_group={fio_cgroups}\nmdsplit_stats=s.json\n")
    run_fio(jobfile, timeout=60)
    assert member_groups(json.loads((tmp_path / "s.json").read_text())) == \
        [("/", None), (fio_cgroups, 100)]
