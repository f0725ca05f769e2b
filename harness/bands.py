"""Predictions as bands: one job file run on the virtual clock over several
settings of what the fit does not pin (a buffer layout's seed, a device
constant swept over its stated range), each run in its own copy of the job
and stack files, in parallel over the machine's cores; each figure then
reported as its median and 10-90 % band.

A setting is {stack file name: {"dotted.key": TOML value text}}: the copy's
stack file gets those keys replaced (`set_keys`), nothing else changes, so a
band's runs differ only in the swept values. A prediction passes when the
thread's figure is inside its tolerance of the band's median; a band wider
than +-25 % of its median is "not determined by the evidence" (issue 39).
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

UNDETERMINED = 0.25          # a band wider than +-25 % of its median


def set_keys(text: str, keys: dict) -> str:
    """The stack file's text with each "table.key" (or "table.sub.key" for
    an inline table's member, e.g. "bio.contiguity.seed") set to the given
    TOML value text. A key the file does not have is an error naming it."""
    for dotted, value in keys.items():
        parts = dotted.split(".")
        section = None
        for i in range(len(parts) - 1, 0, -1):     # the longest [table] the file has
            table = ".".join(parts[:i])
            section = re.search(rf"(?ms)^\[{re.escape(table)}\]\n(.*?)(?=^\[|\Z)", text)
            if section and len(parts) - i <= 2:
                key, sub = parts[i], (parts[i + 1] if len(parts) - i == 2 else None)
                break
            section = None
        if not section:
            raise KeyError(f"no table of {dotted} in the stack file")
        body = section.group(1)
        line = re.search(rf"(?m)^{re.escape(key)} = (.*)$", body)
        if not line:
            raise KeyError(f"{table}.{key} not in the stack file (setting {dotted})")
        if sub is None:
            new_line = f"{key} = {value}"
        else:
            old = line.group(1)
            if not re.search(rf"\b{re.escape(sub)} = ", old):
                raise KeyError(f"{dotted} not in the stack file")
            new_line = f"{key} = " + re.sub(rf"\b{re.escape(sub)} = [^,}}\s]+",
                                           f"{sub} = {value}", old)
        body = body[:line.start()] + new_line + body[line.end():]
        text = text[:section.start(1)] + body + text[section.end(1):]
    return text


def set_fio_options(text: str, options: dict) -> str:
    """A fio job file's text with each "section.option" (e.g.
    "global.thinktime") set to the value; an option the section does not
    have is an error naming it."""
    for dotted, value in options.items():
        section, option = dotted.split(".", 1)
        block = re.search(rf"(?ms)^\[{re.escape(section)}\]\n(.*?)(?=^\[|\Z)", text)
        line = block and re.search(rf"(?m)^{re.escape(option)}=.*$", block.group(1))
        if not line:
            raise KeyError(f"[{section}] {option}= not in the job file (setting {dotted})")
        start = block.start(1) + line.start()
        text = text[:start] + f"{option}={value}" + text[block.start(1) + line.end():]
    return text


def prepare_copy(jobs_dir: Path, dest: Path, setting: dict, drop_traces: bool = True) -> None:
    """jobs_dir's job and stack files in dest with the setting applied; with
    drop_traces the job files' mdsplit_trace lines are left out (a band's
    runs need figures, not traces)."""
    dest.mkdir(parents=True, exist_ok=True)
    for p in Path(jobs_dir).iterdir():
        if p.is_file() and p.suffix in (".fio", ".toml"):
            text = p.read_text()
            if p.name in setting:
                text = (set_fio_options if p.suffix == ".fio" else set_keys)(text, setting[p.name])
            if drop_traces and p.suffix == ".fio":
                text = "\n".join(l for l in text.split("\n")
                                 if not l.startswith("mdsplit_trace="))
            (dest / p.name).write_text(text)


def _call(args):
    """A worker: (index, fn(arg)) for fn named "module:function"."""
    index, fn_name, arg = args
    import importlib
    module, func = fn_name.rsplit(":", 1)
    return index, getattr(importlib.import_module(module), func)(arg)


def run_pool(fn_name: str, args: list, workers: int = None) -> list:
    """[fn(a) for a in args] in a pool of `workers` processes (default: the
    machine's cores), fn named "module:function" (a spawned worker imports
    it afresh: no engine state is shared)."""
    tasks = [(i, fn_name, a) for i, a in enumerate(args)]
    workers = workers or os.cpu_count() or 1
    out = [None] * len(tasks)
    if workers == 1 or len(tasks) == 1:
        for t in tasks:
            i, figs = _call(t)
            out[i] = figs
        return out
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        for i, figs in pool.map(_call, tasks):
            out[i] = figs
    return out


def simulate_figures(args) -> dict:
    """A worker: the job file in its copy on the virtual clock, --no-data;
    the figures the experiment's "module:function" reads off the run."""
    copy, job, sections, figures = args
    import importlib
    from harness.fio_runner import run_simulated
    module, func = figures.rsplit(":", 1)
    result = run_simulated(Path(copy) / job, sections=sections, data=False)
    return getattr(importlib.import_module(module), func)(result)


def run_settings(jobs_dir: Path, work: Path, job: str, settings: list, figures: str,
                 sections=None, workers: int = None) -> list:
    """[figures of each setting] in settings' order: each setting run in
    work/<i>/ (a new directory) in a pool of `workers` processes. figures
    is "module:function" taking the run's FioResult and returning
    {metric: number}."""
    work = Path(work)
    copies = []
    for i, setting in enumerate(settings):
        copy = work / f"{i:03d}"
        prepare_copy(jobs_dir, copy, setting)
        copies.append(copy)
    try:
        return run_pool("harness.bands:simulate_figures",
                        [(str(c), job, sections, figures) for c in copies], workers)
    finally:
        for c in copies:          # the runs' member files and sidecars are not kept
            shutil.rmtree(c, ignore_errors=True)


def quantile(values: list, q: float) -> float:
    """Linear-interpolated quantile (numpy's default) of a non-empty list."""
    v = sorted(values)
    if len(v) == 1:
        return float(v[0])
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return float(v[lo] + (v[hi] - v[lo]) * (pos - lo))


def band(values: list) -> tuple:
    """(median, p10, p90)."""
    return float(statistics.median(values)), quantile(values, 0.1), quantile(values, 0.9)


def bands(runs: list) -> dict:
    """{metric: (median, p10, p90)} over runs [{metric: value}] (metrics in
    every run)."""
    names = [k for k in runs[0] if all(k in r for r in runs)]
    return {k: band([r[k] for r in runs]) for k in names}


def width(b: tuple) -> float:
    """The band's half-width relative to its median (inf for a zero median
    with a non-zero band)."""
    med, lo, hi = b
    half = max(med - lo, hi - med)
    if med == 0:
        return 0.0 if half == 0 else float("inf")
    return half / abs(med)


def _near(x: float, thread: float, tolerance: float = None, abs_tolerance: float = None) -> bool:
    """x within the thread figure's tolerance (relative, default 10 %, or absolute)."""
    if abs_tolerance is not None:
        return abs(x - thread) <= abs_tolerance
    if not thread:
        return abs(x) <= 1e-9
    return abs(x / thread - 1) <= (tolerance if tolerance is not None else 0.1)


def verdict(b: tuple, thread: float, tolerance: float = None, abs_tolerance: float = None) -> str:
    """PASS / MISS for the thread's figure against the band's median within
    its tolerance; a band wider than +-25 % is "not determined" when the
    thread's figure lies within it (or within its tolerance of an end), and
    a MISS when the whole band is off it."""
    med, lo, hi = b
    if width(b) > UNDETERMINED:
        inside = lo <= thread <= hi or any(_near(x, thread, tolerance, abs_tolerance)
                                           for x in (lo, hi))
        return "not determined by the evidence" if inside else "MISS (the whole band)"
    return "PASS" if _near(med, thread, tolerance, abs_tolerance) else "MISS"


def band_table(title: str, rows: list) -> str:
    """rows: [(metric, thread or None, (median, p10, p90), verdict)]."""
    w = max([len(r[0]) for r in rows] + [6]) + 2
    lines = [title, f"{'figure':<{w}}{'thread':>10}{'median':>10}{'p10':>10}{'p90':>10}"
                    f"{'+-%':>7}  verdict"]
    for name, thread, (med, lo, hi), v in rows:
        t = f"{thread:10.2f}" if thread is not None else f"{'-':>10}"
        wd = width((med, lo, hi))
        wd_text = f"{100 * wd:7.1f}" if wd != float("inf") else f"{'inf':>7}"
        lines.append(f"{name:<{w}}{t}{med:10.2f}{lo:10.2f}{hi:10.2f}{wd_text}  {v}")
    return "\n".join(lines)
