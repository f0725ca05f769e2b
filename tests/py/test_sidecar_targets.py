"""Where an mdsplit_stats sidecar may go, engine and `harness simulate` alike.
A regular file is replaced whole, through its symbolic links (the link
stays); a character device, a FIFO or an open descriptor (/dev/null,
/dev/stderr, a pipe) is a stream each job appends its document to; a block
device, a directory or a socket is refused at setup with one line. Before,
the sidecar was renamed over whatever the path named: mdsplit_stats=/dev/null
replaced the system's /dev/null with a regular file, /dev/stderr its link,
and a block device path its device node (simulate wrote the JSON onto the
device itself)."""
import hashlib
import json
import os
import socket
import stat
import subprocess
import threading

import pytest

from conftest import PASSTHROUGH_FILE_STACK, have_root, stack_job
from harness import run_fio
from harness.simulate import SimulateError, simulate_job


def job(tmp_path, engine, stats, more=""):
    return stack_job(tmp_path, engine, PASSTHROUGH_FILE_STACK,
                     f"rw=randread\nbs=4k\nsize=256k\n{more}[j]\nmdsplit_stats={stats}\n")


def fio(jobfile, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run(["fio", "--output=/dev/null", str(jobfile)], cwd=jobfile.parent,
                          text=True, timeout=60, **kw)


def null_node(tmp_path):
    """A character device node equal to /dev/null in tmp_path (the system's
    own is never put at risk by these tests)."""
    if not have_root():
        pytest.skip("mknod of a character device needs root")
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return node


def documents(text):
    """The JSON documents appended one after another in `text`."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while at < len(text.rstrip()):
        doc, at = decoder.raw_decode(text, at)
        out.append(doc)
        at += len(text[at:]) - len(text[at:].lstrip())
    return out


def test_character_device_sidecar_stays_a_device(tmp_path, engine):
    """A sidecar on a /dev/null node is written into it: the node stays a character device."""
    node = null_node(tmp_path)
    r = fio(job(tmp_path, engine, node))
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.stat(node).st_mode)


def test_forked_subjobs_share_a_character_device_sidecar(tmp_path, engine):
    """numjobs=2 forked on a /dev/null node: no "null.1" file is made beside it."""
    node = null_node(tmp_path)
    r = fio(job(tmp_path, engine, node, "numjobs=2\n"))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.glob("null*")) == ["null"]
    assert stat.S_ISCHR(os.stat(node).st_mode)


def test_simulate_keeps_a_character_device_sidecar(tmp_path, engine):
    """harness simulate writes a /dev/null node sidecar into it, forked subjobs too."""
    node = null_node(tmp_path)
    simulate_job(job(tmp_path, engine, node, "numjobs=2\n"))
    assert sorted(p.name for p in tmp_path.glob("null*")) == ["null"]
    assert stat.S_ISCHR(os.stat(node).st_mode)


def test_stderr_sidecar_is_appended_to_the_redirected_file(tmp_path, engine):
    """A sidecar on a link to /proc/self/fd/2 (as /dev/stderr) with stderr in a file:
    the JSON is appended, the file and the link kept."""
    # The test's own link, not /dev/stderr: an engine that regressed would
    # replace this one, not the machine's.
    (tmp_path / "stderr").symlink_to("/proc/self/fd/2")
    log = tmp_path / "log.txt"
    log.write_text("before\n")
    inode = os.stat(log).st_ino
    with open(log, "a") as err:
        r = fio(job(tmp_path, engine, "stderr"), stderr=err)
    assert r.returncode == 0
    assert os.readlink(tmp_path / "stderr") == "/proc/self/fd/2"
    assert os.stat(log).st_ino == inode
    text = log.read_text()
    assert text.startswith("before\n")
    [doc] = documents(text[text.index("{"):])
    assert doc["devices"][0]["name"] == "md0"


def test_descriptor_sidecar_on_a_pipe_reaches_the_reader(tmp_path, engine):
    """mdsplit_stats=/dev/fd/N on a pipe: the reader gets one whole document."""
    read_end, write_end = os.pipe()
    jobfile = job(tmp_path, engine, f"/dev/fd/{write_end}")
    got = []
    reader = threading.Thread(target=lambda: got.append(os.fdopen(read_end).read()))
    reader.start()
    r = fio(jobfile, pass_fds=(write_end,))
    os.close(write_end)
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    [doc] = documents(got[0])
    assert doc["devices"][0]["read"]["ios"] == 64


def test_symlink_sidecar_replaces_the_target_not_the_link(tmp_path, engine):
    """A sidecar path that is a symbolic link: the link stays, its target gets the JSON."""
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "real.json"
    target.write_text("{}")
    (tmp_path / "link.json").symlink_to("out/real.json")
    r = fio(job(tmp_path, engine, "link.json"))
    assert r.returncode == 0, r.stderr
    assert os.readlink(tmp_path / "link.json") == "out/real.json"
    assert json.loads(target.read_text())["devices"][0]["name"] == "md0"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["real.json"]


def test_a_link_planted_at_the_temporary_name_is_never_followed(tmp_path, engine):
    """Symbolic links at every name the sidecar's temporary file may take (fio as pid 1 of a new pid namespace): the file they point at is untouched."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for pid in range(1, 65):  # fio and the processes it forks come first in the namespace
        for serial in range(4):
            (tmp_path / f"s.json.tmp.{pid}.{serial}").symlink_to("victim")
    jobfile = job(tmp_path, engine, "s.json")
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "fio", "--output=/dev/null",
                        str(jobfile)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and "unshare failed" in r.stderr:
        pytest.skip(f"no pid namespaces here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious\n"
    assert json.loads((tmp_path / "s.json").read_text())["devices"][0]["name"] == "md0"


def test_fifo_sidecar_without_a_reader_fails_instead_of_hanging(tmp_path, engine):
    """A FIFO nobody reads: the job ends with one line naming the option, fio does not hang."""
    os.mkfifo(tmp_path / "fifo")
    r = fio(job(tmp_path, engine, "fifo"))
    assert r.returncode != 0
    assert "mdsplit: mdsplit_stats=fifo: cannot write it (No such device or address)" in r.stderr


def test_directory_sidecar_is_refused_before_the_job_runs(tmp_path, engine):
    """A directory sidecar: refused at setup (it failed at the job's end), engine and simulate."""
    (tmp_path / "d").mkdir()
    jobfile = job(tmp_path, engine, "d")
    line = ("mdsplit: mdsplit_stats=d is a directory; allowed: a regular file (replaced "
            "whole), or a character device or FIFO such as /dev/null or /dev/stderr")
    r = fio(jobfile)
    assert r.returncode != 0 and line in r.stderr, r.stderr
    assert not (tmp_path / "m0.img").exists()
    with pytest.raises(SimulateError, match="is a directory"):
        simulate_job(jobfile)


def test_socket_sidecar_is_refused(tmp_path, engine):
    """A sidecar on a UNIX socket cannot be written: refused at setup with one line."""
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "s.sock"))
    try:
        r = fio(job(tmp_path, engine, "s.sock"))
    finally:
        sock.close()
    assert r.returncode != 0
    assert "mdsplit: mdsplit_stats=s.sock is a socket; allowed:" in r.stderr, r.stderr


def digest(dev):
    with open(dev, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_block_device_sidecar_is_refused_and_the_device_untouched(tmp_path, engine,
                                                                  loop_devices, run):
    """A block device sidecar: refused with one line; its node and its data stay as they were."""
    dev = loop_devices(1 << 20)
    before = digest(dev)
    jobfile = job(tmp_path, engine, dev)
    line = f"mdsplit: mdsplit_stats={dev} is a block device; allowed:"
    if run == "fio":
        r = fio(jobfile)
        assert r.returncode != 0 and line in r.stderr, r.stderr
    else:
        with pytest.raises(SimulateError) as e:
            simulate_job(jobfile)
        assert str(e.value).startswith(line)
    assert stat.S_ISBLK(os.stat(dev).st_mode)
    assert digest(dev) == before
    assert not [p for p in os.listdir("/dev") if "mdsplit-probe" in p or ".tmp." in p]


def test_harness_run_gathers_a_stream_sidecar_without_reading_it(tmp_path, engine):
    """harness run with a /dev/null node sidecar: the run succeeds and gathers no sidecar."""
    node = null_node(tmp_path)
    result = run_fio(job(tmp_path, engine, node), check=False)
    assert result.returncode == 0, result.stderr
    assert result.sidecars == {}


@pytest.mark.parametrize("run", ["fio", "simulate"])
def test_sidecar_on_the_report_file_is_refused(tmp_path, engine, run):
    """mdsplit_stats naming the --output file: refused (it replaced fio's report)."""
    jobfile = job(tmp_path, engine, "report.json")
    line = ("mdsplit: mdsplit_stats=report.json is where fio writes its own report (stdout or "
            "--output): the sidecar would mix into it; allowed: another file or stream, such as "
            "/dev/stderr")
    if run == "fio":
        r = subprocess.run(["fio", "--output-format=json", "--output=report.json", str(jobfile)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and line in r.stderr, r.stderr
        report = (tmp_path / "report.json").read_text()
        assert json.loads(report[report.index("{"):])["jobs"]
    else:
        with pytest.raises(SimulateError) as e:
            simulate_job(jobfile, report=str(tmp_path / "report.json"))
        assert str(e.value) == line


def test_sidecar_on_stdout_into_a_pipe_is_refused_and_the_json_stays_whole(tmp_path, engine):
    """mdsplit_stats=/dev/stdout while fio's JSON goes down the same pipe: refused, one parseable document."""
    jobfile = job(tmp_path, engine, "/dev/stdout")
    r = subprocess.run(["fio", "--output-format=json", str(jobfile)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "mdsplit: mdsplit_stats=/dev/stdout is where fio writes its own report" in r.stderr
    # One document from the first brace: a sidecar before fio's JSON would be "extra data".
    assert json.loads(r.stdout[r.stdout.index("{"):])["jobs"]
