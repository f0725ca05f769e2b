"""README.md and docs/ cannot rot: every repository path, engine option,
stack-file key and command they name exists, the code blocks marked
runnable run, and no sentence tells what the project used to do. Each
checker is also shown failing on a text naming something that is not there."""
import json
import os
import re
import shutil
import subprocess
from glob import glob
from pathlib import Path

import pytest

from harness import paths

ROOT = paths.ROOT
DOCS = [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").rglob("*.md")
                                     if "seeds" not in p.relative_to(ROOT / "docs").parts)
HISTORY = re.compile(r"used to|\(before|until 20", re.I)
TOP_DIRS = r"(?:\.ci|engine|harness|jobs|tests|docs|ci|bench|bindings)"
PATH_RE = re.compile(r"(?<![\w./-])(?:\./)?" + TOP_DIRS + r"/[\w./*{},<>+-]*")
GENERATED = ("build", "reports")            # made by a build or a run, not in a clone


def code_texts(text: str) -> list:
    """The inline code spans and the lines of the fenced blocks of a page."""
    out = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            out.append(line)
        else:
            out.extend(re.findall(r"`([^`\n]+)`", line))
    return out


def _expand(token: str) -> list:
    """Brace alternatives {h,cpp} expanded, <placeholders> as globs."""
    token = re.sub(r"<[^>]*>", "*", token)
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [x for alt in m.group(1).split(",")
            for x in _expand(token[:m.start()] + alt + token[m.end():])]


def path_exists(token: str, root: Path = ROOT) -> bool:
    """A path as the docs name it: a file or folder, a glob, a brace list, or
    a file's stem (`engine/stack/member_claim` for .h and .cpp)."""
    token = token.split("::")[0].rstrip(".,;:)")
    if token.startswith("./"):
        token = token[2:]
    for t in _expand(token):
        if glob(str(root / t)) or glob(str(root / t) + ".*"):
            continue
        return False
    return True


def missing_paths(text: str, root: Path = ROOT) -> list:
    found = {m.group(0) for s in code_texts(text) for m in PATH_RE.finditer(s)}
    return sorted(p for p in found if not path_exists(p, root))


def build_targets() -> set:
    """The names CMakeLists.txt gives its targets (mdsplit_tests, ...): not options."""
    text = (ROOT / "CMakeLists.txt").read_text()
    return set(re.findall(r"add_(?:executable|library)\(\s*(\w+)", text)) | \
        set(re.findall(r"pybind11_add_module\(\s*(\w+)", text))


def named_engine_options(text: str) -> set:
    return {o for s in code_texts(text)
            for o in re.findall(r"(?<![\w/.])(mdsplit_[a-z_]+)(?![\w.(/])", s)} - build_targets()


def named_toml_keys(text: str) -> set:
    """(section, key) named as `[section] key` or `section.key`."""
    keys = set()
    for s in code_texts(text):
        keys.update(re.findall(r"^\[(\w+)\] (\w+)", s))
        keys.update(re.findall(r"^(device|members|bio|bfq|page_cache|cpu)\.(\w+)$", s))
    return keys


def named_commands(text: str) -> set:
    """(front end, command, option) triples: `./mdsplit CMD --opt`,
    `python3 -m harness CMD --opt` (option None for the command itself)."""
    out = set()
    for s in code_texts(text):
        for m in re.finditer(r"(?:python3 -m harness|\./mdsplit harness) ([a-z][\w-]*)((?: [^\s#]+)*)", s):
            out.add(("harness", m.group(1), None))
            out.update(("harness", m.group(1), o) for o in re.findall(r"--[a-z][\w-]*", m.group(2)))
        for m in re.finditer(r"\./mdsplit ([a-z][\w-]*)((?: [^\s#]+)*)", s):
            if m.group(1) != "harness":
                out.add(("mdsplit", m.group(1), None))
                out.update(("mdsplit", m.group(1), o) for o in re.findall(r"--[a-z][\w-]*", m.group(2)))
    return out


def stack_reference_block() -> str:
    text = (ROOT / "docs" / "stack-toml.md").read_text()
    start = text.index("```toml\n") + len("```toml\n")
    return text[start:text.index("```", start)]


def reference_keys(block: str) -> set:
    keys, section = set(), None
    for line in block.splitlines():
        m = re.match(r"\s*\[\[?([\w.-]+)\]?\]", line)
        if m:
            section = m.group(1).split(".")[0]
            continue
        m = re.match(r"\s*(\w+)\s*=", line)
        if m and section:
            keys.add((section, m.group(1)))
    return keys


def help_text(*cmd) -> str:
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    return r.stdout + r.stderr


def unknown_commands(named: set, helps: dict) -> list:
    """The named (front end, command, option) not in the --help texts; helps
    maps (front end, command) to its help text, (front end, None) to the
    list of commands."""
    bad = []
    for front, cmd, opt in sorted(named, key=lambda x: (x[0], x[1], x[2] or "")):
        commands = helps[(front, None)]
        if cmd not in commands:
            bad.append(f"{front} {cmd}")
        elif opt and not re.search(re.escape(opt) + r"\b", helps.get((front, cmd), "")):
            bad.append(f"{front} {cmd} {opt}")
    return bad


def all_text() -> str:
    return "\n".join(p.read_text() for p in DOCS)


# --- the docs as they are -------------------------------------------------

def test_readme_fits_on_a_screen_of_screens():
    """README.md is under 200 lines and names a docs/ page in every section."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 200
    sections = re.split(r"(?m)^## ", text)[1:]
    for s in sections:
        assert "docs/" in s, f"README section '{s.splitlines()[0]}' names no docs/ page"


def test_no_sentence_tells_history():
    """No "used to", "(before" or "until 20..." in README.md or docs/."""
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in DOCS
            for i, line in enumerate(p.read_text().splitlines(), 1) if HISTORY.search(line)]
    assert not hits, "\n".join(hits)


def test_every_named_path_exists():
    """Every repository path README.md and docs/ name exists."""
    bad = [f"{p.relative_to(ROOT)}: {m}" for p in DOCS for m in missing_paths(p.read_text())]
    assert not bad, "\n".join(bad)


def test_no_page_points_outside_the_clone():
    """No page names ../shared (a folder a clone does not have)."""
    for p in DOCS + [ROOT / "jobs" / "expectations.toml"]:
        assert "../shared" not in p.read_text(), p


def test_every_named_engine_option_is_the_engines(engine):
    """Every mdsplit_* option named is listed by fio --enghelp for the built engine."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    listed = set(re.findall(r"(?m)^(mdsplit_\w+)", help_text("fio", f"--enghelp={engine}")))
    assert listed, "fio --enghelp listed no option"
    named = named_engine_options(all_text())
    assert named and named <= listed, sorted(named - listed)
    assert listed <= named, f"options without a docs entry: {sorted(listed - named)}"


def test_the_stack_reference_loads_and_names_every_key(mdsplit_module, tmp_path):
    """docs/stack-toml.md's block is accepted by the loader, and every
    `[section] key` the docs name is one of its keys."""
    block = stack_reference_block()
    member = re.search(r"\[\[members\]\].*?(?=\n\[bio\])", block, re.S).group(0)
    three = "\n".join(member.replace('"work/m0.img"', f'"work/m{i}.img"') for i in range(3))
    assert mdsplit_module.load_stack_text(block.replace(member, three), str(tmp_path)) is True
    named = named_toml_keys(all_text())
    assert named and named <= reference_keys(block), sorted(named - reference_keys(block))


@pytest.fixture(scope="module")
def command_helps() -> dict:
    top = help_text("/usr/bin/python3", "-m", "harness", "--help")
    cmds = re.search(r"\{([\w,-]+)\}", top).group(1).split(",")
    helps = {("harness", None): cmds}
    for c in cmds:
        helps[("harness", c)] = help_text("/usr/bin/python3", "-m", "harness", c, "--help")
    wrapper = (ROOT / "mdsplit").read_text()
    case = re.findall(r"(?m)^([a-z|]+)\)$", wrapper)
    helps[("mdsplit", None)] = [c for line in case for c in line.split("|")]
    usage = re.sub(r"(?m)^[^#].*$", "", wrapper)       # the usage comment at the top
    for c in helps[("mdsplit", None)]:
        helps[("mdsplit", c)] = "\n".join(l for l in usage.splitlines()
                                          if f"mdsplit {c}" in l or f"({c}" in l or f" {c}," in l
                                          or f", {c}" in l)
    # ./mdsplit simulate is python3 -m harness simulate (after a build).
    helps[("mdsplit", "simulate")] += helps[("harness", "simulate")]
    return helps


def test_every_named_command_and_option_exists(command_helps):
    """Every `./mdsplit CMD --opt` and `python3 -m harness CMD --opt` named is in its --help."""
    named = named_commands(all_text())
    assert ("harness", "reproduce", "--strict") in named
    bad = unknown_commands(named, command_helps)
    assert not bad, bad


# --- runnable blocks --------------------------------------------------------

def marked_blocks(text: str) -> list:
    """[(marker, info, body)] of the fenced blocks that follow an
    `<!-- file: NAME -->` or `<!-- runnable -->` line."""
    return [(m.group(1).strip(), m.group(2), m.group(3)) for m in re.finditer(
        r"<!-- (file: [\w./-]+|runnable) -->\n```(\w*)\n(.*?)\n```", text, re.S)]


def test_the_readme_example_runs_as_shown(engine, tmp_path):
    """README's example (its stack and job files, its command) runs, and the
    sidecar and blkparse output it shows are what the run writes."""
    if not shutil.which("fio") or not shutil.which("blkparse"):
        pytest.skip("fio or blkparse is not installed")
    readme = (ROOT / "README.md").read_text()
    blocks = marked_blocks(readme)
    files = [(m[len("file: "):], body) for m, _, body in blocks if m.startswith("file: ")]
    runs = [body for m, _, body in blocks if m == "runnable"]
    assert files and runs, "README marks no runnable example"
    for name, body in files:
        (tmp_path / name).write_text(body.replace("/usr/local/lib/mdsplit/libmdsplit.so",
                                                  str(engine)) + "\n")
    for body in runs:
        r = subprocess.run(["sh", "-ec", body], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    shown = re.search(r"<!-- from: stats.json -->\n```\n(.*?)\n```", readme, re.S).group(1)
    devices = {d["name"]: d for d in stats["devices"]}
    checked = 0
    for line in shown.splitlines():
        name = line.split()[0] if line.strip() and not line.startswith(" ") else name
        for key, value in re.findall(r"([\w.]+) (\{[^}]*\}|\d+)(?!\.\d)", line):
            if key == "aqu_sz":
                continue                                # this machine's timing
            got = devices[name]
            for k in key.split("."):
                got = got[k]
            assert got == json.loads(value), (name, key, got, value)
            checked += 1
    assert checked >= 8
    # Every field the run's sidecar holds is defined in docs/sidecar.md.
    sidecar_doc = (ROOT / "docs" / "sidecar.md").read_text()
    fields = set(stats) | {k for d in stats["devices"] for k in d}
    for obj in ("io_uring", "page_cache"):
        fields |= set(stats[obj])
    for d in stats["devices"]:
        for k in ("seek", "read"):
            fields |= set(d.get(k, {}))
    undocumented = sorted(f for f in fields if f"`{f}`" not in sidecar_doc)
    assert not undocumented, f"sidecar fields without an entry in docs/sidecar.md: {undocumented}"
    shown = re.search(r"<!-- from: blkparse -->\n```\n(.*?)\n```", readme, re.S).group(1)
    parsed = subprocess.run(["blkparse", "-i", "traces/md0", "-i", "traces/m0"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60).stdout.splitlines()
    # Device, sequence number, action, RWBS and sectors; not the time or the pid.
    def cols(l):
        f = l.split()
        return [f[0], f[2]] + f[5:]
    assert [cols(l) for l in shown.splitlines()] == [cols(l) for l in parsed[:len(shown.splitlines())]]


# --- each checker fails when what it checks is removed ------------------------

def test_a_removed_path_is_reported(tmp_path):
    """A path named in the docs that is not in the tree (a file removed) is reported."""
    text = (ROOT / "README.md").read_text()
    assert missing_paths(text) == []
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "docs" / "stack-toml.md").unlink()
    for d in ("engine", "harness", "jobs", "tests", "ci", "bench", "bindings", ".ci"):
        (tmp_path / d).symlink_to(ROOT / d)
    assert "docs/stack-toml.md" in missing_paths(text, tmp_path)
    assert missing_paths("see `engine/core/block/no_such_file.cpp`") == \
        ["engine/core/block/no_such_file.cpp"]
    assert missing_paths("`engine/core/mm/filemap.{h,cxx}`") == ["engine/core/mm/filemap.{h,cxx}"]


def test_a_removed_engine_option_is_reported():
    """An option the docs name that the engine no longer lists fails the check."""
    named = named_engine_options(all_text())
    listed = named - {"mdsplit_trace"}                 # the engine without mdsplit_trace
    assert "mdsplit_trace" in named - listed


def test_a_removed_toml_key_is_reported():
    """A key the docs name that the reference block (the loader's) lacks fails the check."""
    block = stack_reference_block().replace("time_scale = 1.0", "")
    assert ("device", "time_scale") in named_toml_keys(all_text()) - reference_keys(block)


def test_a_removed_command_or_option_is_reported(command_helps):
    """A harness command or option the docs name that --help lacks is reported."""
    helps = dict(command_helps)
    helps[("harness", None)] = [c for c in helps[("harness", None)] if c != "compare"]
    helps[("harness", "reproduce")] = helps[("harness", "reproduce")].replace("--strict", "")
    helps[("mdsplit", "test")] = helps[("mdsplit", "test")].replace("--quick", "")
    bad = unknown_commands(named_commands(all_text()), helps)
    assert "harness compare" in bad and "harness reproduce --strict" in bad
    assert "mdsplit test --quick" in bad


def test_a_history_sentence_is_reported():
    """The history pattern finds each of the phrases it bans."""
    for s in ("it used to fail", "(before, the engine", "until 2026-12-06 the line"):
        assert HISTORY.search(s)
    assert not HISTORY.search("the legacy (pre-patch) column")
