"""Multi-host runs through fio's client/server mode (harness/hosts.py): two
fio servers on this machine, in two network namespaces joined by a veth pair
where `ip netns` is permitted, and on 127.0.0.1 with distinct ports; a small
passthrough job on both; both hosts' results and sidecars come back."""
import contextlib
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import fio_servers as S
from process_checks import left_running
from harness import hosts as H
from harness import paths
from harness.fio_runner import FioError

STACK = """
[device]
kind = "passthrough"

[[members]]
path = "work/m0.img"
size = "64m"
backend = "io_uring"
max_sectors = "512k"
"""

JOB = """\
; a tiny passthrough job for two hosts
[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
size=16m
runtime=1
time_based=1

[hosts-randread]
rw=randread
bs=4k
iodepth=8
mdsplit_stats=stats/randread.json
"""


# --- without servers ------------------------------------------------------------

def test_parse_host_forms():
    assert H.parse_host("ip:10.0.0.2,9000") == H.HostSpec("ip:10.0.0.2,9000", "ip", "10.0.0.2", 9000)
    assert H.parse_host("box7").port == H.DEFAULT_PORT
    assert H.parse_host("ip6:::1,4444").host == "::1"
    s = H.parse_host("sock:/tmp/fio.sock")
    assert (s.kind, s.port, s.tag) == ("sock", 0, "fio.sock")
    assert H.parse_host("ip:10.0.0.2,9000").tag == "10.0.0.2-9000"
    for bad in ("", "ip:10.0.0.2,x", "ip:,80", "h,70000"):
        with pytest.raises(ValueError):
            H.parse_host(bad)


def test_rewrite_job_paths_and_options(tmp_path):
    text = ("[global]\nmdsplit_config=stack.toml ; the stack\nfilename=md0\n"
            "[a]\nmdsplit_stats=stats/a.json\nmdsplit_trace=traces/a\n"
            f"[b]\nmdsplit_stats={tmp_path}/stats/b.json\n")
    out = H.rewrite_job(text, tmp_path, tmp_path / "hosts" / "h1", {"runtime": "2"})
    assert f"mdsplit_config={tmp_path / 'stack.toml'} ; the stack" in out
    assert f"mdsplit_stats={tmp_path}/hosts/h1/stats/a.json" in out
    assert f"mdsplit_trace={tmp_path}/hosts/h1/traces/a" in out
    assert f"mdsplit_stats={tmp_path}/hosts/h1/stats/b.json" in out     # under the job dir
    assert "filename=md0" in out
    sections = out.split("[")
    assert "runtime=2" not in sections[1] and "runtime=2" in sections[2] and "runtime=2" in sections[3]


def test_rewrite_job_keeps_a_dotdot_sidecar_below_the_hosts_directory(tmp_path):
    """mdsplit_stats=../x/s.json (or a/../../y) goes below hosts/<host>/, not beside it (both hosts wrote one file)."""
    job_dir = tmp_path / "jobs"
    host = job_dir / "hosts" / "h1"
    text = "[a]\nmdsplit_stats=../x/s.json\nmdsplit_trace=a/../../y\n"
    out = H.rewrite_job(text, job_dir, host)
    values = [Path(l.split("=", 1)[1]) for l in out.splitlines() if "=" in l]
    assert values == [host / str(tmp_path).lstrip("/") / "x" / "s.json",
                      host / str(tmp_path).lstrip("/") / "y"]
    assert all(".." not in v.parts for v in values)


def test_split_args():
    local, job = H.split_args(["--runtime=2", "--eta=never", "--status-interval=1", "--bs=8k", "-d"])
    assert job == {"runtime": "2", "bs": "8k"}
    assert local == ["--eta=never", "--status-interval=1", "-d"]


def test_unreachable_host_is_a_one_line_error(tmp_path):
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    job = _job(tmp_path)
    port = S.free_port()          # nothing listens there
    with pytest.raises(FioError) as e:
        H.run_hosts(job, [f"ip:127.0.0.1,{port}"], timeout=30)
    assert "\n" not in str(e.value) and "127.0.0.1" in str(e.value)
    r = subprocess.run(["/usr/bin/python3", "-m", "harness", "run", str(job), "--hosts",
                        f"ip:127.0.0.1,{port}"], cwd=paths.ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("run: ")


def test_stale_sidecar_removal_takes_only_the_exact_names(tmp_path):
    """Before a --hosts run, hosts/<host>/stats/randread.json goes; randread.json.keep and randread.jsonl stay."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    job = _job(tmp_path)
    port = S.free_port()          # nothing listens there: the run fails after the removal
    stats = tmp_path / "hosts" / f"127.0.0.1-{port}" / "stats"
    stats.mkdir(parents=True)
    for name in ("randread.json", "randread.json.keep", "randread.jsonl"):
        (stats / name).write_text("an earlier file")
    with pytest.raises(FioError):
        H.run_hosts(job, [f"ip:127.0.0.1,{port}"], timeout=30)
    assert sorted(p.name for p in stats.iterdir()) == ["randread.json.keep", "randread.jsonl"]


# --- two servers ------------------------------------------------------------------

def _engine() -> Path:
    engine = paths.engine_path()
    if not engine.exists():
        pytest.skip(f"no engine at {engine}")
    return engine


def _job(tmp_path) -> Path:
    (tmp_path / "stack.toml").write_text(STACK)
    job = tmp_path / "hosts.fio"
    job.write_text(JOB.format(engine=paths.engine_path()))
    return job


@contextlib.contextmanager
def _servers(mode):
    """Two local fio servers for the block; the test skips (with the reason)
    where they cannot start here."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    if mode == "netns":
        reason = S.netns_reason()
        if reason:
            pytest.skip(f"network namespaces: {reason}")
    cm = S.local_servers(2, mode=mode)
    try:
        ls = cm.__enter__()                  # HostsUnavailable comes on entering it
    except S.HostsUnavailable as e:
        pytest.skip(f"fio servers cannot start: {e}")
    try:
        yield ls
    finally:
        cm.__exit__(None, None, None)


def _check_both_hosts(result, hosts):
    assert set(result.hosts) == set(hosts)
    for h in hosts:
        hr = result.hosts[h]
        j = hr.job("hosts-randread")
        assert j["error"] == 0 and j["read"]["total_ios"] > 0
        assert list(hr.sidecars) == ["stats/randread.json"], hr.missing_sidecars
        side = hr.sidecars["stats/randread.json"]
        assert side.device("m0")["read"]["ios"] > 0
        assert Path(side.path).is_relative_to(Path(result.results_dir) / hr.tag)
    total = result.total("hosts-randread")
    assert total["hosts"] == 2
    assert total["read"]["total_ios"] == sum(result.hosts[h].job("hosts-randread")["read"]["total_ios"]
                                             for h in hosts)
    # fio's own aggregate agrees.
    if result.totals:
        assert result.totals[0]["read"]["total_ios"] == total["read"]["total_ios"]


@pytest.mark.parametrize("mode", ["netns", "loopback"])
def test_two_hosts(mode, tmp_path):
    _engine()
    job = _job(tmp_path)
    with _servers(mode) as ls:
        assert ls.mode == mode
        if mode == "netns":
            assert all(s.spec.host.startswith("10.231.") for s in ls.servers)
        result = H.run_hosts(job, ls.hosts, client_netns=ls.client_netns, timeout=60)
        _check_both_hosts(result, ls.hosts)
        summary = H.summary(result)
        assert set(summary["hosts"]) == set(ls.hosts) and summary["total"][0]["hosts"] == 2
    for s in ls.servers:
        assert not s.alive() or S._zombie(s.pid), f"fio server {s.pid} still runs"


def test_cli_run_hosts(tmp_path):
    _engine()
    job = _job(tmp_path)
    with _servers("loopback") as ls:
        r = subprocess.run(["/usr/bin/python3", "-m", "harness", "run", str(job), "--hosts",
                            *ls.hosts, "--results-dir", str(tmp_path / "shared"), "--timeout", "60"],
                           cwd=paths.ROOT, capture_output=True, text=True, timeout=90)
        # An engine error on the servers comes back as one line naming it.
        bad = tmp_path / "bad.fio"
        bad.write_text(job.read_text().replace("mdsplit_config=stack.toml",
                                               "mdsplit_config=missing.toml"))
        with pytest.raises(FioError) as e:
            H.run_hosts(bad, ls.hosts, timeout=60)
        assert "mdsplit:" in str(e.value) and "missing.toml" in str(e.value)
        assert "\n" not in str(e.value)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["hosts"]) == set(ls.hosts)
    for h in ls.hosts:
        assert out["hosts"][h]["jobs"][0]["read_iops"] > 0
        assert "stats/randread.json" in out["hosts"][h]["sidecars"]
        tag = H.parse_host(h).tag
        assert (tmp_path / "shared" / tag / "stats" / "randread.json").is_file()
    assert out["total"][0]["hosts"] == 2


def test_cli_run_hosts_section_runs_only_that_job(tmp_path):
    """run JOB --hosts H1 H2 --section a: each host runs job a only (fio's --section, per --client)."""
    job = tmp_path / "two.fio"
    job.write_text("[global]\nioengine=null\nrw=read\nsize=1m\n[a]\n[b]\n")
    with _servers("loopback") as ls:
        r = subprocess.run(["/usr/bin/python3", "-m", "harness", "run", str(job), "--hosts",
                            *ls.hosts, "--section", "a", "--timeout", "60"],
                           cwd=paths.ROOT, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {h: [j["name"] for j in out["hosts"][h]["jobs"]] for h in ls.hosts} == \
        {h: ["a"] for h in ls.hosts}


def _descendants(pid: int) -> list:
    out, todo = [], [pid]
    while todo:
        kids = S._children(todo.pop())
        out += kids
        todo += kids
    return out


def test_cli_run_hosts_interrupted_stops_the_servers_jobs(tmp_path):
    """^C on `run --hosts`: the jobs on the servers stop too, not only the local fio client."""
    _engine()
    job = _job(tmp_path)
    job.write_text(job.read_text().replace("runtime=1", "runtime=120"))
    with _servers("loopback") as ls:
        p = subprocess.Popen(["/usr/bin/python3", "-m", "harness", "run", str(job), "--hosts",
                              *ls.hosts, "--results-dir", str(tmp_path / "shared"),
                              "--timeout", "300"],
                             cwd=paths.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            # Each server forks a connection handler, it a backend, it the job.
            deadline = time.monotonic() + 60
            while not all(len(_descendants(s.pid)) >= 3 for s in ls.servers):
                assert p.poll() is None, p.communicate()
                assert time.monotonic() < deadline, "the servers never ran the job"
                time.sleep(0.1)
            time.sleep(1)
            jobs = [d for s in ls.servers for d in _descendants(s.pid)]
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 130, err
        assert left_running(jobs, wait_s=20) == [], "the servers' jobs ran on"


def test_run_hosts_job_file_with_include(tmp_path):
    """A job whose options (its sidecar too) come from `include FILE` runs on both hosts, each sidecar below hosts/<host>/."""
    _engine()
    job = _job(tmp_path)
    (tmp_path / "randread.inc").write_text("rw=randread\nbs=4k\niodepth=8\n"
                                           "mdsplit_stats=stats/randread.json\n")
    job.write_text(job.read_text().split("[hosts-randread]")[0] +
                   "[hosts-randread]\ninclude randread.inc\n")
    with _servers("loopback") as ls:
        result = H.run_hosts(job, ls.hosts, timeout=60)
    _check_both_hosts(result, ls.hosts)
