"""`python3 -m harness compare A B`: two result sets side by side.

A and B may each be
  - a report directory (its metrics.json, or an experiment's result.json),
  - a run id from the history (`history` lists them),
  - a batch name (as `history` lists it: the report directory's name, e.g.
    20251129-231500, with -2, -3 ... when another report of that name was
    recorded first; all its runs),
  - `thread` or `thread:EXPERIMENT`: the thread's published figures
    (jobs/expectations.toml),
  - `latest` / `latest:EXPERIMENT`: the newest recorded run of each experiment.
Metrics are keyed "experiment:variant.metric"; the ratio column is B / A.
Exit status: 0 when at least one metric is on both sides; 1 when none is
(one line says so, after the table of what each side has, if anything); 2
for a side that cannot be read.
"""
from __future__ import annotations

import json
from pathlib import Path

from harness import expectations as exp_mod
from harness.expectations import fmt


class CompareError(ValueError):
    pass


def _read_json(f: Path):
    """The JSON document in f; CompareError naming f when it cannot be read."""
    try:
        text = f.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise CompareError(f"{f}: not UTF-8 text (byte {e.start}); expected JSON") from None
    except OSError as e:
        raise CompareError(f"{f}: cannot read it ({e.strerror or e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CompareError(f"{f}: not valid JSON ({e.msg} at line {e.lineno} "
                           f"column {e.colno})") from None
    except RecursionError:
        raise CompareError(f"{f}: not valid JSON (nested too deeply)") from None


def _short(v) -> str:
    text = json.dumps(v) if not isinstance(v, float) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _metrics(f: Path, where: str, metrics, experiment: str) -> dict:
    """{experiment:metric: number} from one {metric: number} object of f."""
    if not isinstance(metrics, dict):
        raise CompareError(f"{f}: {where} is {_short(metrics)}, not an object "
                           "{metric: number}")
    out = {}
    for k, v in metrics.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise CompareError(f"{f}: metric {experiment}:{k} is {_short(v)}, not a number")
        out[f"{experiment}:{k}"] = v
    return out


def _from_dir(path: Path) -> dict:
    """A report's metrics.json ({experiment: {metric: number}}), an
    experiment's result.json ({"name": ..., "metrics": {metric: number}}), or
    every <experiment>/result.json of a directory. A file of the wrong shape
    is a CompareError naming it and what is wrong."""
    out = {}
    f = path / "metrics.json"
    if f.is_file():
        data = _read_json(f)
        if not isinstance(data, dict):
            raise CompareError(f"{f}: is {_short(data)}, not an object "
                               "{experiment: {metric: number}}")
        for exp, metrics in data.items():
            out.update(_metrics(f, f"experiment {exp!r}", metrics, exp))
        return out
    f = path / "result.json"
    if f.is_file():
        data = _read_json(f)
        if not isinstance(data, dict):
            raise CompareError(f"{f}: is {_short(data)}, not an experiment's result object")
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise CompareError(f"{f}: no experiment \"name\" (a string); "
                               "not an experiment's result.json")
        return _metrics(f, '"metrics"', data.get("metrics", {}), name)
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        if (sub / "result.json").is_file():
            out.update(_from_dir(sub))
    if not out:
        raise CompareError(f"{path}: no metrics.json or */result.json (not a report directory)")
    return out


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except OSError:                 # e.g. a name too long: not a report directory
        return False


def needs_history(spec: str) -> bool:
    """Whether a side is looked up in the history (a run id, a batch,
    `latest`): not a directory and not the thread's figures."""
    return not (_is_dir(Path(spec)) or spec == "thread" or spec.startswith("thread:"))


def load_side(spec: str, history=None, expectations=None):
    """(label, {experiment:metric: value}) for one side of the comparison."""
    p = Path(spec)
    if _is_dir(p):
        return str(p), _from_dir(p)
    if spec == "thread" or spec.startswith("thread:"):
        expectations = expectations if expectations is not None else exp_mod.load()
        names = [spec.split(":", 1)[1]] if ":" in spec else list(expectations)
        out = {}
        for n in names:
            if n not in expectations:
                raise CompareError(f"{spec}: no experiment {n!r} in expectations.toml")
            for k, v in exp_mod.thread_figures(n, expectations).items():
                out[f"{n}:{k}"] = v
        return spec, out
    if history is None:
        raise CompareError(f"{spec}: not a directory, and no history database to look it up in")
    if spec == "latest" or spec.startswith("latest:"):
        names = [spec.split(":", 1)[1]] if ":" in spec else history.experiments()
        out, ids = {}, []
        for n in names:
            runs = history.runs(n, limit=1)
            if runs:
                ids.append(str(runs[0].run_id))
                out.update({f"{n}:{k}": v for k, v in runs[0].metrics.items()})
        if not out:
            raise CompareError(f"{spec}: no runs recorded")
        return f"{spec} (runs {','.join(ids)})", out
    runs = history.resolve(spec)
    if not runs:
        raise CompareError(f"{spec}: not a report directory, run id or batch in {history.path}")
    out = {}
    for r in runs:
        for k, v in r.metrics.items():
            out[f"{r.experiment}:{k}"] = v
    label = f"run {spec}" if len(runs) == 1 and spec.isdigit() else f"batch {spec}"
    return label, out


def compare(a: dict, b: dict) -> list:
    """[(key, value in A or None, value in B or None, B/A or None)], A's
    order first, then what only B has."""
    rows = []
    for key in list(dict.fromkeys(list(a) + list(b))):
        va, vb = a.get(key), b.get(key)
        ratio = vb / va if va not in (None, 0) and vb is not None else None
        rows.append((key, va, vb, ratio))
    return rows


def format_table(label_a: str, label_b: str, rows) -> str:
    w = max([len(r[0]) for r in rows] + [6])
    out = [f"A = {label_a}", f"B = {label_b}",
           f"{'metric':<{w}}  {'A':>14}  {'B':>14}  {'B/A':>8}"]
    for key, va, vb, ratio in rows:
        out.append(f"{key:<{w}}  {fmt(va) if va is not None else '-':>14}  "
                   f"{fmt(vb) if vb is not None else '-':>14}  "
                   f"{f'{ratio:.3f}' if ratio is not None else '-':>8}")
    return "\n".join(out)
