"""Where things are: the repository, the build, the engine, the Python module."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("MDSPLIT_BUILD_DIR", ROOT / "build"))
INSTALLED_ENGINE = Path("/usr/local/lib/mdsplit/libmdsplit.so")


def engine_path() -> Path:
    """The engine to load: $MDSPLIT_ENGINE, else this clone's build, else
    the installed one (the path the shipped job files name)."""
    env = os.environ.get("MDSPLIT_ENGINE")
    if env:
        return Path(env)
    if (BUILD / "libmdsplit.so").exists():
        return BUILD / "libmdsplit.so"
    return INSTALLED_ENGINE


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
