"""Expectations as data: jobs/expectations.toml holds, for each reproduction,
the thread's published figures and the checks our results must meet. The
report, `check` and pytest all read it through this module.

File layout (one table per experiment, named as on the command line)::

    [raid5]
    title = "md RAID5 recursive split ordering"
    seeds = ["000_fa5278d1f568ad45.txt"]

    [raid5.metrics]
    "fixed.md0_MBps" = { thread = 5271.88, unit = "MB/s", better = "higher" }

    [[raid5.checks]]
    expr = "fixed.md0_MBps / legacy.md0_MBps >= 1.3"
    why = "issue 3 acceptance; thread 5271.88 / 3276.87 = 1.61"

Metric keys: ``thread`` (the published figure, optional), ``unit``,
``better`` ("higher" | "lower": the direction `check` guards), ``tolerance``
(relative noise floor for `check`, e.g. 0.1) and ``abs_tolerance``.

Check expressions use a small grammar, evaluated here without eval()::

    check := expr CMP expr              CMP: >= <= > < == !=
    expr  := term (("+" | "-") term)*
    term  := unary (("*" | "/") unary)*
    unary := "-" unary | atom
    atom  := NUMBER | METRIC | FUNC "(" expr ("," expr)* ")" | "(" expr ")"
    FUNC  := min | max | abs

Metric names may contain letters, digits, "_", "." and "-" ("forced-ra.
rasync_on.qd1_kIOPS"), so binary "-" must have a space on both sides:
"a - b" subtracts, "a-b" is one name.
"""
from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from harness.paths import ROOT

DEFAULT_PATH = ROOT / "jobs" / "expectations.toml"

__all__ = ["DEFAULT_PATH", "BASES", "ExpressionError", "Metric", "Check", "Expectation", "Fitted",
           "basis_of", "basis_counts", "basis_line", "metric_bases",
           "load", "evaluate", "metric_names", "evaluate_checks", "direction",
           "thread_figures"]


class ExpressionError(ValueError):
    """A check expression outside the grammar."""


@dataclass
class Metric:
    name: str
    thread: float | None = None
    unit: str = ""
    better: str | None = None          # "higher" | "lower" | None
    tolerance: float | None = None     # relative floor for `check`
    abs_tolerance: float | None = None


@dataclass
class Check:
    expr: str
    why: str = ""
    basis: str = ""     # one of BASES: what the check is evidence of

    @property
    def description(self) -> str:
        return self.expr + (f" ({self.why})" if self.why else "")


@dataclass
class Expectation:
    experiment: str
    title: str = ""
    seeds: list = field(default_factory=list)
    note: str = ""
    metrics: dict = field(default_factory=dict)   # name -> Metric
    checks: list = field(default_factory=list)    # [Check]
    fitted: list = field(default_factory=list)    # [Fitted]


@dataclass
class Fitted:
    """A model parameter chosen to match a published figure."""
    parameter: str
    value: str
    figure: str          # the thread's figure it was chosen on (seed file and line)


_METRIC_KEYS = {"thread", "unit", "better", "tolerance", "abs_tolerance"}
_EXPERIMENT_KEYS = {"title", "seeds", "note", "metrics", "checks", "fitted"}
# A check's basis: what it is evidence of.
#   fit          a model parameter was chosen (or a layout, a member) while
#                looking at a figure the check compares
#   identity     it follows by arithmetic from fitted figures or the set-up
#   construction it holds by the set-up whatever the model's numbers
#   prediction   nothing was chosen while looking at the figure it compares
BASES = ("prediction", "fit", "identity", "construction")
_FITTED_KEYS = {"parameter", "value", "figure"}


def _number(v, where):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{where}: expected a number, got {v!r}")
    return float(v)


def section_of(experiment: str) -> str:
    """The section an experiment's figures are checked against: the
    EXPECTATIONS its module states (harness/experiments/), else its name
    (also for a name no module has, e.g. a recorded run's)."""
    from harness.reproduce import expectations_section, load_experiment
    try:
        module = load_experiment(experiment)
    except Exception:       # a module that does not load: reproduce reports it
        module = None
    return expectations_section(module, experiment)


def load(path=None) -> dict:
    """{experiment: Expectation} from the TOML file (default
    jobs/expectations.toml). Raises ValueError naming the bad key."""
    path = Path(path) if path else DEFAULT_PATH
    with open(path, "rb") as f:
        try:
            doc = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: {e}") from None
    out = {}
    for exp, body in doc.items():
        if not isinstance(body, dict):
            raise ValueError(f"{path}: [{exp}] must be a table")
        unknown = set(body) - _EXPERIMENT_KEYS
        if unknown:
            raise ValueError(f"{path}: [{exp}] unknown key(s) {', '.join(sorted(unknown))}; "
                             f"allowed {', '.join(sorted(_EXPERIMENT_KEYS))}")
        e = Expectation(exp, title=body.get("title", ""), seeds=list(body.get("seeds", [])),
                        note=body.get("note", ""))
        for name, m in body.get("metrics", {}).items():
            where = f"{path}: [{exp}.metrics] {name!r}"
            if not isinstance(m, dict):
                raise ValueError(f"{where}: must be an inline table")
            unknown = set(m) - _METRIC_KEYS
            if unknown:
                raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                                 f"allowed {', '.join(sorted(_METRIC_KEYS))}")
            better = m.get("better")
            if better not in (None, "higher", "lower"):
                raise ValueError(f"{where}: better = {better!r}; allowed \"higher\", \"lower\"")
            e.metrics[name] = Metric(
                name,
                thread=_number(m["thread"], where + ".thread") if "thread" in m else None,
                unit=str(m.get("unit", "")),
                better=better,
                tolerance=_number(m["tolerance"], where) if "tolerance" in m else None,
                abs_tolerance=_number(m["abs_tolerance"], where) if "abs_tolerance" in m else None)
        for i, c in enumerate(body.get("checks", [])):
            where = f"{path}: [[{exp}.checks]] #{i + 1}"
            if not isinstance(c, dict) or "expr" not in c:
                raise ValueError(f"{where}: needs expr = \"...\"")
            unknown = set(c) - {"expr", "why", "basis"}
            if unknown:
                raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                                 "allowed basis, expr, why")
            basis = c.get("basis", "")
            if basis and basis not in BASES:
                raise ValueError(f"{where}: basis = {basis!r}; allowed "
                                 + ", ".join(f'"{b}"' for b in BASES))
            try:
                _parse(c["expr"])
            except ExpressionError as err:
                raise ValueError(f"{where}: {err}") from None
            e.checks.append(Check(c["expr"], str(c.get("why", "")), basis))
        for i, f in enumerate(body.get("fitted", [])):
            where = f"{path}: [[{exp}.fitted]] #{i + 1}"
            if not isinstance(f, dict) or set(f) != _FITTED_KEYS:
                raise ValueError(f"{where}: needs exactly parameter, value, figure")
            e.fitted.append(Fitted(str(f["parameter"]), str(f["value"]), str(f["figure"])))
        out[exp] = e
    return out


# --- the expression grammar -------------------------------------------------

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?![A-Za-z_])
    | (?P<name>[A-Za-z_][A-Za-z0-9_.]*(?:-[A-Za-z0-9_.]+)*)
    | (?P<op>>=|<=|==|!=|[<>+\-*/(),])
    )""", re.VERBOSE)

_FUNCS = {"min": min, "max": max, "abs": abs}
_CMP = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        "<": lambda a, b: a < b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def _tokens(text: str) -> list:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExpressionError(f"{text!r}: unexpected {text[pos:].strip()[:20]!r} at "
                                  f"column {pos + 1}")
        pos = m.end()
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
    return out


class _Parser:
    def __init__(self, text):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, value=None):
        kind, v = self.peek()
        if kind is None or (value is not None and v != value):
            want = repr(value) if value else "more"
            raise ExpressionError(f"{self.text!r}: expected {want}, got "
                                  f"{v!r}" if v else f"{self.text!r}: expected {want} at the end")
        self.i += 1
        return kind, v

    def check(self):
        lhs = self.expr()
        kind, op = self.peek()
        if op not in _CMP:
            raise ExpressionError(f"{self.text!r}: needs one comparison (>= <= > < == !=)")
        self.i += 1
        rhs = self.expr()
        if self.peek()[0] is not None:
            raise ExpressionError(f"{self.text!r}: unexpected {self.peek()[1]!r} after the "
                                  "comparison")
        return ("cmp", op, lhs, rhs)

    def expr(self):
        node = self.term()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            node = (op, node, self.term())
        return node

    def term(self):
        node = self.unary()
        while self.peek()[1] in ("*", "/"):
            op = self.take()[1]
            node = (op, node, self.unary())
        return node

    def unary(self):
        if self.peek()[1] == "-":
            self.take()
            return ("neg", self.unary())
        return self.atom()

    def atom(self):
        kind, v = self.take()
        if kind == "num":
            return ("num", float(v))
        if kind == "name":
            if self.peek()[1] == "(":
                if v not in _FUNCS:
                    raise ExpressionError(f"{self.text!r}: unknown function {v!r}; "
                                          f"allowed {', '.join(_FUNCS)}")
                self.take("(")
                args = [self.expr()]
                while self.peek()[1] == ",":
                    self.take()
                    args.append(self.expr())
                self.take(")")
                return ("call", v, args)
            return ("metric", v)
        if v == "(":
            node = self.expr()
            self.take(")")
            return node
        raise ExpressionError(f"{self.text!r}: unexpected {v!r}")


_CACHE: dict = {}


def _parse(text: str):
    if text not in _CACHE:
        _CACHE[text] = _Parser(text).check()
    return _CACHE[text]


class _Missing(Exception):
    pass


def _eval(node, metrics):
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "metric":
        if node[1] not in metrics:
            raise _Missing(node[1])
        return float(metrics[node[1]])
    if kind == "neg":
        return -_eval(node[1], metrics)
    if kind == "call":
        vals = [_eval(a, metrics) for a in node[2]]
        if node[1] == "abs":
            if len(vals) != 1:
                raise ExpressionError("abs() takes one argument")
            return abs(vals[0])
        return _FUNCS[node[1]](vals)
    a, b = _eval(node[1], metrics), _eval(node[2], metrics)
    if kind == "+":
        return a + b
    if kind == "-":
        return a - b
    if kind == "*":
        return a * b
    if kind == "/":
        if b == 0:
            raise ZeroDivisionError
        return a / b
    raise ExpressionError(f"bad node {kind}")


def _names(node, out):
    if node[0] == "metric":
        out.append(node[1])
    elif node[0] == "call":
        for a in node[2]:
            _names(a, out)
    elif node[0] in ("neg",):
        _names(node[1], out)
    elif node[0] not in ("num",):
        for n in node[2:] if node[0] == "cmp" else node[1:]:
            _names(n, out)
    return out


def metric_names(expr: str) -> list:
    """The metric names an expression reads, in order, without repeats."""
    return list(dict.fromkeys(_names(_parse(expr), [])))


def fmt(x: float) -> str:
    """A number as a person reads it: 5271.88, 1.61, 29.5, 0."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 1e12:
        return str(int(x))
    if abs(x) >= 10:
        return f"{x:.2f}".rstrip("0").rstrip(".")
    if abs(x) >= 1:
        return f"{x:.3f}".rstrip("0").rstrip(".")
    return f"{x:.3g}"


def evaluate(expr: str, metrics: dict):
    """(passed, detail) of one check expression against {metric: value}.
    A missing metric or a division by zero fails the check, saying so.
    Raises ExpressionError for text outside the grammar."""
    tree = _parse(expr)
    _, op, lhs, rhs = tree
    try:
        a, b = _eval(lhs, metrics), _eval(rhs, metrics)
    except _Missing as e:
        return False, f"metric {e.args[0]!r} missing"
    except ZeroDivisionError:
        return False, "division by zero"
    passed = bool(_CMP[op](a, b))
    used = ", ".join(f"{n}={fmt(float(metrics[n]))}" for n in metric_names(expr))
    return passed, f"{fmt(a)} {op} {fmt(b)}" + (f" ({used})" if used else "")


def evaluate_checks(experiment: str, metrics: dict, expectations=None) -> list:
    """[(description, passed, detail)] for every check of the experiment in
    expectations.toml (loaded from the default path when not given)."""
    if expectations is None:
        expectations = load()
    e = expectations.get(experiment)
    if e is None:
        return []
    return [(c.description, *evaluate(c.expr, metrics)) for c in e.checks]


# Suffixes that tell the good direction of a metric not listed in the file.
_HIGHER = re.compile(r"(_MBps|_MiBps|_KiBps|_GBps|_GiBps|_kIOPS|_IOPS|_iops|_bw)$")
_LOWER = re.compile(r"(_us|_ms|_ns|_sec|errors|_lat)$")


def direction(experiment: str, metric: str, expectations=None):
    """'higher', 'lower' or None: from the file, else from the name's unit
    suffix (_MBps, _IOPS: higher; _us, _ms, errors: lower)."""
    if expectations is None:
        expectations = load()
    e = expectations.get(experiment)
    if e and metric in e.metrics and e.metrics[metric].better:
        return e.metrics[metric].better
    if _HIGHER.search(metric):
        return "higher"
    if _LOWER.search(metric):
        return "lower"
    return None


def thread_figures(experiment: str, expectations=None) -> dict:
    """{metric: published figure} of one experiment."""
    if expectations is None:
        expectations = load()
    e = expectations.get(experiment)
    if e is None:
        return {}
    return {n: m.thread for n, m in e.metrics.items() if m.thread is not None}


def basis_of(experiment: str, expectations=None) -> dict:
    """{check description: basis} of one experiment's checks."""
    if expectations is None:
        expectations = load()
    e = expectations.get(experiment)
    return {c.description: c.basis for c in e.checks} if e else {}


def basis_counts(experiment: str, checks: list, expectations=None) -> dict:
    """{basis: (passed, total)} over evaluated checks [(description, passed,
    detail)]; checks the file does not list (an experiment's own) count
    under "unlabelled"."""
    bases = basis_of(experiment, expectations)
    out = {}
    for desc, ok, _ in checks:
        b = bases.get(desc) or "unlabelled"
        passed, total = out.get(b, (0, 0))
        out[b] = (passed + bool(ok), total + 1)
    return out


def basis_line(counts: dict) -> str:
    """'predictions inside tolerance 5/12; fits 10/10, identities 3/3, ...'."""
    p, n = counts.get("prediction", (0, 0))
    parts = []
    for b, label in (("fit", "fits"), ("identity", "identities"),
                     ("construction", "constructions"), ("unlabelled", "unlabelled")):
        if b in counts:
            parts.append(f"{label} {counts[b][0]}/{counts[b][1]}")
    return f"predictions inside tolerance {p}/{n}" + ("; " + ", ".join(parts) if parts else "")


def metric_bases(expectation: Expectation) -> dict:
    """{metric: basis} from the checks that name one metric alone (the
    first such check's basis)."""
    out = {}
    for c in expectation.checks:
        names = metric_names(c.expr)
        if len(names) == 1:
            out.setdefault(names[0], c.basis)
    return out
