"""Where things are: the repository, the build, the engine, the Python module."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("MDSPLIT_BUILD_DIR", ROOT / "build"))
INSTALLED_ENGINE = Path("/usr/local/lib/mdsplit/libmdsplit.so")


def engine_path() -> Path:
    """The engine the job files load: the installed one (job files name it
    by its absolute path), else the build's."""
    env = os.environ.get("MDSPLIT_ENGINE")
    if env:
        return Path(env)
    if INSTALLED_ENGINE.exists():
        return INSTALLED_ENGINE
    return BUILD / "libmdsplit.so"


def ensure_built() -> None:
    """Builds (and installs the engine) when the build is missing."""
    if (BUILD / "libmdsplit.so").exists() and list((BUILD / "python").glob("mdsplit*.so")):
        return
    subprocess.run([str(ROOT / "ci" / "build.sh"), str(BUILD)], check=True,
                   stdout=subprocess.DEVNULL)


def import_mdsplit():
    """The pybind11 module built from the core."""
    p = str(BUILD / "python")
    if p not in sys.path:
        sys.path.insert(0, p)
    import mdsplit  # noqa: E402
    return mdsplit
