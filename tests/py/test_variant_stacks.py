"""One stack per thread (issue 39): each reproduction's variant stack files
differ only in the variant keys, so before and after share one model: no
device constant, layout or cost is tuned per variant."""
import difflib
import re
import tomllib

import pytest

from harness.paths import ROOT

JOBS = ROOT / "jobs"
# reproduction: (its stack files, the keys allowed to differ as "table.key")
GROUPS = {
    "raid5": (["raid5-legacy.toml", "raid5-fixed.toml"], {"device.split_order"}),
    "raid5-buffered": (["raid5-buffered-legacy.toml", "raid5-buffered-fixed.toml"],
                       {"device.split_order"}),
    "bio-size": (["bio-original.toml", "bio-align.toml", "bio-max_sectors.toml"],
                 {"bio.policy", "bio.align"}),
    "bfq": (["bfq-legacy.toml", "bfq-fixed.toml"], {"bfq.group_counting"}),
    "buffered": ([f"buffered-{v}{r}.toml" for v in ("c8d317aa", "pre-c8d317aa", "forced-ra")
                  for r in ("", "-norasync")], {"page_cache.variant", "page_cache.rasync"}),
}


def without(doc: dict, keys: set) -> dict:
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    for dotted in keys:
        table, key = dotted.split(".")
        doc.get(table, {}).pop(key, None)
    return doc


def stray_lines(a: str, b: str, keys: set) -> list:
    """Lines of two stack texts that differ outside the variant keys."""
    bare = {k.split(".")[1] for k in keys}
    changed = [l[2:] for l in difflib.ndiff(a.splitlines(), b.splitlines())
               if l[:2] in ("- ", "+ ")]
    return [l for l in changed if not (m := re.match(r"(\w+) = ", l)) or m.group(1) not in bare]


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_variant_stacks_differ_only_in_the_variant_keys(name):
    """Text and parsed TOML of a reproduction's stack files: equal but for the variant keys."""
    files, keys = GROUPS[name]
    texts = {f: (JOBS / f).read_text() for f in files}
    first = files[0]
    for f in files[1:]:
        stray = stray_lines(texts[first], texts[f], keys)
        assert not stray, f"{first} vs {f}: lines outside the variant keys {sorted(keys)}: {stray}"
        a, b = (without(tomllib.loads(texts[x]), keys) for x in (first, f))
        assert a == b, f"{first} vs {f}"


def test_the_diff_sees_a_tuned_constant(tmp_path):
    """A per-variant constant (a layout in one file only) is a stray line."""
    a = (JOBS / "raid5-legacy.toml").read_text()
    b = a.replace("split_order = \"legacy\"", "split_order = \"fixed\"").replace(
        "seed = 1 }", "seed = 2 }")
    stray = stray_lines(a, b, GROUPS["raid5"][1])
    assert len(stray) == 2 and all(l.startswith("contiguity = ") for l in stray)


@pytest.mark.parametrize("files, model", [(GROUPS["bio-size"][0], "ufs-seed001")])
def test_inline_model_copies_equal_the_fitted_preset(files, model):
    """A stack's [models.X] copy (what a sweep varies) is jobs/models.toml's fitted preset."""
    preset = tomllib.loads((JOBS / "models.toml").read_text())["models"][model]
    for f in files:
        assert tomllib.loads((JOBS / f).read_text())["models"][model] == preset, f


def test_every_reproduction_with_variant_stacks_is_diffed():
    """Each experiment's job file naming two or more stack files has them all in GROUPS."""
    from harness import reproduce
    grouped = {f for files, _ in GROUPS.values() for f in files}
    for name in reproduce.available():
        job = JOBS / reproduce.load_experiment(name).JOB
        stacks = set(re.findall(r"(?m)^mdsplit_config=(\S+)", job.read_text()))
        if len(stacks) > 1:
            assert stacks <= grouped, (name, sorted(stacks - grouped))
