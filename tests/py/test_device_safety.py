"""Data safety through the engine on real loop devices and files (issue 20):
a device with a file system is never written, as a passthrough or a RAID5
member, mounted or not; the open mode comes from the whole run, not from
the first job; a failed member create leaves nothing behind.

Each test states the one behaviour it checks. Tests that need loop devices
skip only when the machine has none (no root, no losetup)."""
import hashlib
import os
import resource
import signal
import subprocess

import pytest

from conftest import stack_job
from harness import run_fio

MKFS_EXT4 = ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def ext4_loop(loop_devices):
    """A 16 MiB loop device formatted ext4, and a list of mount points to
    unmount afterwards."""
    dev = loop_devices()
    subprocess.run(MKFS_EXT4 + [dev], check=True, capture_output=True)
    mounted = []
    yield dev, mounted
    for m in mounted:
        subprocess.run(["umount", str(m)], capture_output=True)


def job(tmp_path, engine, body, stack):
    return stack_job(tmp_path, engine, stack, "bs=64k\nsize=4m\n" + body)


def raid5_with(dev, tmp_path):
    return ('[device]\nkind = "raid5"\nchunk = "64k"\n'
            f'[[members]]\npath = "{dev}"\n' +
            "".join(f'[[members]]\npath = "{tmp_path}/r{i}.img"\nsize = "16m"\n'
                    for i in range(2)))


RUNS = {
    "write": "[w]\nrw=write\n",
    "randrw": "[rw]\nrw=randrw\n",
    "verify": "[v]\nrw=randwrite\nverify=crc32c\n",
}


@pytest.mark.parametrize("mounted", [False, True], ids=["unmounted", "mounted"])
@pytest.mark.parametrize("kind", ["passthrough", "raid5"])
@pytest.mark.parametrize("run", sorted(RUNS))
def test_ext4_device_is_never_written(tmp_path, engine, ext4_loop, kind, run, mounted):
    """A writing job on an ext4 device (mounted or not, alone or in a RAID5)
    is refused at setup and the device's bytes stay the same; e2fsck passes."""
    dev, mounts = ext4_loop
    if mounted:
        where = tmp_path / "mnt"
        where.mkdir()
        subprocess.run(["mount", dev, str(where)], check=True, capture_output=True)
        mounts.append(where)
    stack = f'[[members]]\npath = "{dev}"\n' if kind == "passthrough" else raid5_with(dev, tmp_path)
    before = digest(dev)
    result = run_fio(job(tmp_path, engine, RUNS[run], stack), check=False, timeout=60)
    assert result.returncode != 0
    want = "is mounted at" if mounted else "carries an ext2/3/4 file system signature"
    assert any(l.startswith("mdsplit: ") and want in l for l in result.stderr.splitlines()), \
        result.stderr
    assert digest(dev) == before
    if not mounted:
        fsck = subprocess.run(["e2fsck", "-fn", dev], capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def test_ext4_device_may_be_read(tmp_path, engine, ext4_loop):
    """A run whose jobs only read an ext4 device is allowed, and leaves it unchanged."""
    dev, _ = ext4_loop
    before = digest(dev)
    result = run_fio(job(tmp_path, engine, "[r]\nrw=read\n", f'[[members]]\npath = "{dev}"\n'),
                     check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    assert digest(dev) == before


@pytest.mark.parametrize("kind", ["passthrough", "raid5"])
def test_reader_listed_before_writer_shares_a_writable_stack(tmp_path, engine, kind):
    """With thread=1, a read job listed before a write job on one stack: the
    stack opens read-write for both, no I/O fails, and the written data verifies."""
    for name in ("m.img", "r0.img", "r1.img", "r2.img"):  # existing files, as the run
        with open(tmp_path / name, "wb") as f:
            f.truncate(16 << 20)
    if kind == "passthrough":
        stack = f'[[members]]\npath = "{tmp_path}/m.img"\nsize = "16m"\n'
    else:
        stack = '[device]\nkind = "raid5"\nchunk = "64k"\n' + "".join(
            f'[[members]]\npath = "{tmp_path}/r{i}.img"\nsize = "16m"\n' for i in range(3))
    body = ("thread=1\n[r]\nrw=randread\noffset=8m\n"
            "[w]\nrw=randwrite\nverify=crc32c\nsize=4m\n")
    result = run_fio(job(tmp_path, engine, body, stack), check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    for j in result.jobs:
        assert j["error"] == 0, j["jobname"]


def test_failed_create_leaves_nothing(tmp_path, engine):
    """A member file that cannot be sized (RLIMIT_FSIZE below it) is refused
    with the loader's one-line form, and neither it nor its new directory remains."""
    member = tmp_path / "new" / "m.img"
    jobfile = job(tmp_path, engine, "[w]\nrw=write\n",
                  f'[[members]]\npath = "{member}"\nsize = "64m"\n')

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    r = subprocess.run(["fio", str(jobfile)], cwd=tmp_path, capture_output=True, text=True,
                       preexec_fn=small_files, timeout=60)
    assert r.returncode != 0
    assert f'mdsplit: stack.toml: members[0].size: cannot size "{member}": File too large; ' \
           "allowed: a size the file system can hold" in r.stderr, r.stderr
    assert not member.exists() and not member.parent.exists()


def test_missing_device_path_is_not_created(tmp_path, engine):
    """A member path under /dev that does not exist is refused; nothing appears in /dev."""
    path = f"/dev/mdsplit-test-{os.getpid()}"
    result = run_fio(job(tmp_path, engine, "[w]\nrw=write\n",
                         f'[[members]]\npath = "{path}"\nsize = "1m"\n'), check=False, timeout=60)
    assert result.returncode != 0
    assert "no file is created in a device directory" in result.stderr
    assert not os.path.exists(path)


@pytest.mark.parametrize("how", ["allow_file_create=0", "--readonly"])
def test_run_that_creates_no_files_does_not_create_a_member(tmp_path, engine, how):
    """fio's --readonly or allow_file_create=0: a missing member file is
    refused with one line, and neither it nor its directory is made (a
    sparse file was created and read as zeros)."""
    body = "[r]\nrw=read\n" + ("allow_file_create=0\n" if how.startswith("allow") else "")
    args = ["--readonly"] if how == "--readonly" else []
    result = run_fio(job(tmp_path, engine, body,
                         '[[members]]\npath = "new/m.img"\nsize = "8m"\n'),
                     args=args, check=False, timeout=60)
    assert result.returncode != 0
    assert "members[0].path: " in result.stderr and \
        "does not exist, and this run creates no files (fio's --readonly or " \
        "allow_file_create=0)" in result.stderr, result.stderr
    assert not (tmp_path / "new").exists()


def test_oversized_stack_file_is_refused_at_once(tmp_path, engine):
    """A stack file over 1 MiB is refused before it is parsed, with one line."""
    (tmp_path / "huge.toml").write_text("# padding\n" * 200_000)
    jobfile = job(tmp_path, engine, "[w]\nrw=read\nmdsplit_config=huge.toml\n", "")
    result = run_fio(jobfile, check=False, timeout=60)
    assert result.returncode != 0
    assert "mdsplit: huge.toml: is 2000000 bytes, more than a stack file may hold; " \
           "allowed: a TOML file of at most 1 MiB" in result.stderr, result.stderr


def test_unwritable_sidecar_fails_the_job(tmp_path, engine):
    """An mdsplit_stats file in a directory that cannot exist fails fio (non-zero exit)."""
    (tmp_path / "afile").write_text("x")
    result = run_fio(job(tmp_path, engine, "[r]\nrw=read\nmdsplit_stats=afile/s.json\n",
                         f'[[members]]\npath = "{tmp_path}/m.img"\nsize = "8m"\n'),
                     check=False, timeout=60)
    assert result.returncode != 0
    assert "mdsplit: mdsplit_stats=afile/s.json: cannot create it" in result.stderr


def test_iolog_replay_without_rw_may_write(tmp_path, engine):
    """A read_iolog replay without rw= opens the stack read-write (the log's
    directions are known only as fio reads it): its writes succeed."""
    with open(tmp_path / "m.img", "wb") as f:  # an existing member, opened as the run needs
        f.truncate(8 << 20)
    (tmp_path / "replay.log").write_text(
        "fio version 2 iolog\nmd0 add\nmd0 open\n" +
        "".join(f"md0 write {i * 65536} 65536\n" for i in range(16)) +
        "".join(f"md0 read {i * 65536} 65536\n" for i in range(16)) + "md0 close\n")
    jobfile = stack_job(tmp_path, engine, f'[[members]]\npath = "{tmp_path}/m.img"\n',
                        "[replay]\nread_iolog=replay.log\nbs=64k\n")
    result = run_fio(jobfile, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    [j] = result.jobs
    assert j["error"] == 0 and j["write"]["io_bytes"] == 16 * 65536, j["write"]


def test_simulate_refuses_an_ext4_device_as_the_engine_does(tmp_path, engine, ext4_loop):
    """harness simulate writes members as the engine would, so it refuses an
    ext4 device for a writing job with the same line, and leaves it unchanged."""
    dev, _ = ext4_loop
    jobfile = job(tmp_path, engine, "[w]\nrw=write\n", f'[[members]]\npath = "{dev}"\n')
    before = digest(dev)
    r = subprocess.run(["/usr/bin/python3", "-m", "harness", "simulate", str(jobfile)],
                       capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert r.returncode != 0
    assert "carries an ext2/3/4 file system signature" in r.stderr, r.stderr
    assert digest(dev) == before


# An output named like a loop device's backing file (a link, or a hard link,
# under the output's name) destroyed the file system image: a trace truncated
# it, a sidecar replaced it (the loop then read a deleted inode).
OUTPUTS = {
    "trace": ("mdsplit_trace=tr\n", "tr/m0.blktrace.0", "mdsplit: mdsplit_trace: "),
    "sidecar": ("mdsplit_stats=st.json\n", "st.json", "mdsplit: mdsplit_stats=st.json "),
}


def output_over_backing_file(tmp_path, engine, loop_devices, output, link):
    """A loop device over tmp_path/loop0.img, `output`'s file made a link to
    that image, and a writing job with the output: (job file, image, expected
    start of the error, the image's digest)."""
    dev = loop_devices()
    image = tmp_path / "loop0.img"
    subprocess.run(MKFS_EXT4 + [dev], check=True, capture_output=True)
    option, name, prefix = OUTPUTS[output]
    (tmp_path / "tr").mkdir()
    link(image, tmp_path / name)
    jobfile = job(tmp_path, engine, option + "[w]\nrw=write\n",
                  '[[members]]\npath = "m.img"\nsize = "8m"\n')
    return jobfile, image, prefix, digest(image)


@pytest.mark.parametrize("link", [os.symlink, os.link], ids=["symlink", "hardlink"])
@pytest.mark.parametrize("output", sorted(OUTPUTS))
def test_output_over_a_loop_backing_file_is_refused(tmp_path, engine, loop_devices, output, link):
    """A trace or sidecar file that is a loop device's backing file is refused
    at setup with one line, and the image keeps its bytes and its inode."""
    jobfile, image, prefix, before = output_over_backing_file(tmp_path, engine, loop_devices,
                                                              output, link)
    inode = os.stat(image).st_ino
    result = run_fio(jobfile, check=False, timeout=60)
    assert result.returncode != 0
    assert any(l.startswith(prefix) and "is the backing file of loop" in l
               for l in result.stderr.splitlines()), result.stderr
    assert (digest(image), os.stat(image).st_ino) == (before, inode)


@pytest.mark.parametrize("output", sorted(OUTPUTS))
def test_simulate_refuses_an_output_over_a_loop_backing_file(tmp_path, engine, loop_devices,
                                                             output):
    """harness simulate refuses the same outputs with the engine's line."""
    jobfile, image, prefix, before = output_over_backing_file(tmp_path, engine, loop_devices,
                                                              output, os.symlink)
    r = subprocess.run(["/usr/bin/python3", "-m", "harness", "simulate", str(jobfile)],
                       capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert r.returncode != 0
    assert r.stderr.startswith(prefix) and "is the backing file of loop" in r.stderr, r.stderr
    assert digest(image) == before
