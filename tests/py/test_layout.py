"""The engine's folders depend one way (docs/design/layout.md): every #include of our
own headers goes to the same folder or a folder below it.

    base  <-  config  <-  core (block, drivers, trace  <-  md, mm  <-  io_uring)
          <-  stack  <-  sim  <-  fio glue, Python bindings
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# folder -> the folders its files may include (itself included).
LOW_CORE = {"core/block", "core/drivers", "core/trace"}
ALLOWED = {
    "base": {"base"},
    "config": {"base", "config"},
    **{f: {"base", "config"} | LOW_CORE for f in LOW_CORE},
    "core/md": {"base", "config", "core/md"} | LOW_CORE,
    "core/mm": {"base", "config", "core/mm"} | LOW_CORE,
    "core/io_uring": {"base", "config", "core/io_uring", "core/mm"} | LOW_CORE,
}
CORE = {f for f in ALLOWED if f.startswith("core/")}
ALLOWED["stack"] = {"base", "config", "stack"} | CORE
ALLOWED["sim"] = ALLOWED["stack"] | {"sim"}
ALLOWED["fio"] = ALLOWED["sim"] | {"fio"}
GENERATED = {"embedded_models.h"}   # the build's generated header, for the loader


def folder_of(path: str) -> str:
    parts = Path(path).parts
    return "/".join(parts[:2]) if parts[0] == "core" else parts[0]


def our_sources():
    for p in sorted((ROOT / "engine").rglob("*")):
        if p.suffix in (".h", ".cpp"):
            yield p


def test_every_engine_folder_has_a_rule():
    """No engine source lives in a folder the one-way rule does not know."""
    folders = {folder_of(str(p.relative_to(ROOT / "engine"))) for p in our_sources()}
    assert folders <= set(ALLOWED), folders - set(ALLOWED)


@pytest.mark.parametrize("source", [str(p.relative_to(ROOT / "engine")) for p in our_sources()])
def test_includes_go_down_only(source):
    """One source's includes of our headers stay in its folder or go below it."""
    mine = folder_of(source)
    text = (ROOT / "engine" / source).read_text()
    for target in INCLUDE.findall(text):
        if target in GENERATED:
            assert mine == "config", f"{source} includes the generated {target}"
            continue
        if not (ROOT / "engine" / target).exists():
            continue   # a system or fio header spelled with quotes (fio's own headers)
        assert folder_of(target) in ALLOWED[mine], (
            f"{source} ({mine}) includes {target} ({folder_of(target)}); "
            f"{mine} may include only {sorted(ALLOWED[mine])}")


def test_bindings_include_no_fio_glue():
    """The Python bindings build without fio: they never include the fio glue."""
    for p in sorted((ROOT / "bindings").glob("*")):
        for target in INCLUDE.findall(p.read_text()):
            assert not target.startswith("fio/"), f"{p.name} includes {target}"
