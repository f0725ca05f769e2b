"""Where things are: the repository, the build, the engine, the Python module."""
import os
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


class BuildMissing(RuntimeError):
    """The build is missing: one line telling the user to build; the
    command line exits 2."""


def ensure_built() -> None:
    """Raises BuildMissing when the build (the engine and the Python module
    in BUILD) is missing. It never builds: a build installs Debian packages
    (apt-get) and, as root, the engine (cmake --install), which only
    `./mdsplit build` (asked for) does."""
    if (BUILD / "libmdsplit.so").exists() and list((BUILD / "python").glob("mdsplit*.so")):
        return
    raise BuildMissing(f"no build in {BUILD} (libmdsplit.so and python/mdsplit*.so): run "
                       f"{ROOT / 'mdsplit'} build first (or set MDSPLIT_BUILD_DIR to a build)")


def import_mdsplit():
    """The pybind11 module built from the core."""
    p = str(BUILD / "python")
    if p not in sys.path:
        sys.path.insert(0, p)
    import mdsplit  # noqa: E402
    return mdsplit
