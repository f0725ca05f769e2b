import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness import paths  # noqa: E402


def _ensure_built() -> None:
    """The build the tests use must exist (ci/test.sh builds first): each
    test that needs it fails with the harness's one line otherwise (it
    built, installing packages and the engine, before)."""
    try:
        paths.ensure_built()
    except paths.BuildMissing as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def engine() -> Path:
    """The build's engine, or $MDSPLIT_ENGINE (CI points it at the TSan
    build's engine for the multi-job tests)."""
    if os.environ.get("MDSPLIT_ENGINE"):
        p = Path(os.environ["MDSPLIT_ENGINE"]).resolve()
        assert p.exists(), f"MDSPLIT_ENGINE={p} does not exist"
        return p
    _ensure_built()
    p = paths.BUILD / "libmdsplit.so"
    assert p.exists(), f"{p} was not built"
    return p


@pytest.fixture(scope="session")
def mdsplit_module():
    _ensure_built()
    return paths.import_mdsplit()


def write_job(dir: Path, name: str, text: str) -> Path:
    p = dir / name
    p.write_text(text)
    return p

# One 16 MiB file member behind a passthrough device (created in the job's
# directory): the stack of the tests about several jobs' output files.
PASSTHROUGH_FILE_STACK = """
[device]
kind = "passthrough"

[[members]]
path = "m0.img"
size = "16m"
backend = "io_uring"
"""


def stack_job(dir: Path, engine: Path, stack: str, body: str) -> Path:
    """dir/stack.toml with `stack`, and dir/job.fio: the engine on md0 of that
    stack, direct=1, in [global], then `body` (more global lines and sections)."""
    (dir / "stack.toml").write_text(stack)
    return write_job(dir, "job.fio", f"""[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
{body}""")


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "stats").mkdir()
    return tmp_path


@pytest.fixture
def xattrs(workdir):
    """Skips where workdir's file system keeps no user extended attributes
    (a RAID5's md superblocks live in one, user.mdsplit.md)."""
    probe = workdir / "xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.probe", b"1")
    except OSError as e:
        pytest.skip(f"no user xattrs on {workdir}: {e.strerror}")
    finally:
        probe.unlink()


def have_root() -> bool:
    return os.geteuid() == 0


def losetup_works() -> str:
    """'' when loop devices can be used here, else the reason."""
    if not have_root():
        return "needs root for losetup"
    if not shutil.which("losetup"):
        return "losetup is not installed"
    r = subprocess.run(["losetup", "-f"], capture_output=True, text=True)
    if r.returncode != 0:
        return "no free loop device: " + r.stderr.strip()
    return ""


@pytest.fixture
def loop_devices(tmp_path):
    """attach(size, sector_size) -> a new blank loop device over a sparse file
    in tmp_path; each is detached afterwards. Skips (with the reason) where
    loop devices cannot be used."""
    reason = losetup_works()
    if reason:
        pytest.skip(reason)
    attached = []

    def attach(size=16 << 20, sector_size=512):
        backing = tmp_path / f"loop{len(attached)}.img"
        with open(backing, "wb") as f:
            f.truncate(size)
        dev = subprocess.run(["losetup", "-f", "--show", "-b", str(sector_size), str(backing)],
                             check=True, capture_output=True, text=True).stdout.strip()
        attached.append(dev)
        return dev

    yield attach
    for dev in attached:
        subprocess.run(["losetup", "-d", dev], capture_output=True)
