"""The shapes issue 42 asks of the edges, kept: the fio glue is thin (under
600 lines, no function over 80, as fio's engines/io_uring.c), and
harness/simulate.py keeps no engine line of its own (no "mdsplit:" string:
every such line comes from the C++ through the bindings) and no function
over 100 lines. Each check is also run on a made-up violation, so it is
seen to fail."""
import ast
import re

from conftest import ROOT

GLUE = ROOT / "engine" / "fio" / "mdsplit_engine.cpp"
SIMULATE = ROOT / "harness" / "simulate.py"
GLUE_MAX_LINES, GLUE_MAX_FUNCTION = 600, 80
SIMULATE_MAX_FUNCTION = 100


def cpp_blocks(text):
    """(first line, length) of each top-level definition of a clang-formatted
    C++ file: from a line at column 0 ending in "{" to the next "}" at column 0."""
    blocks, start = [], None
    for i, line in enumerate(text.splitlines()):
        if start is None and re.match(r"^[A-Za-z_].*[({=]\s*$", line) and \
                not re.match(r"^(namespace|extern|#)", line):
            start = i
        elif start is not None and line.startswith("}"):
            blocks.append((text.splitlines()[start].strip(), i - start + 1))
            start = None
    return blocks


def glue_violations(text):
    lines = text.count("\n")
    found = [f"{lines} lines (at most {GLUE_MAX_LINES - 1})"] if lines >= GLUE_MAX_LINES else []
    return found + [f"{head!r}: {n} lines" for head, n in cpp_blocks(text)
                    if n > GLUE_MAX_FUNCTION]


def simulate_violations(text):
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                "mdsplit:" in node.value:
            found.append(f"line {node.lineno}: an engine line of its own: {node.value[:40]!r}")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > SIMULATE_MAX_FUNCTION:
                found.append(f"{node.name}(): {n} lines")
    return found


def test_the_glue_is_thin():
    """mdsplit_engine.cpp: under 600 lines, no function over 80."""
    assert glue_violations(GLUE.read_text()) == []


def test_simulate_keeps_no_engine_line_and_no_long_function():
    """simulate.py: no "mdsplit:" string literal, no function over 100 lines."""
    assert simulate_violations(SIMULATE.read_text()) == []


def test_the_glue_check_fails_on_a_long_file_and_a_long_function():
    """A glue of 600 lines, and one with an 81-line function, are caught."""
    body = "".join(f"    x += {i};\n" for i in range(80))
    long_function = "int f(int x) {\n" + body + "}\n"
    assert any("f(int x)" in v for v in glue_violations(long_function))
    assert glue_violations("// x\n" * GLUE_MAX_LINES)[0].startswith("600 lines")
    assert glue_violations("int f(int x) {\n" + body[:-12] + "}\n") == []


def test_the_simulate_check_fails_on_an_engine_line_and_a_long_function():
    """A "mdsplit:" literal (an f-string too) and a 101-line function are caught."""
    assert simulate_violations('def f(x):\n    raise E(f"mdsplit: {x}=1; allowed: 0")\n')
    assert simulate_violations('M = "mdsplit: mdsplit_config is required"\n')
    long_function = "def f():\n" + "    x = 1\n" * 100
    assert simulate_violations(long_function) == ["f(): 101 lines"]
    assert simulate_violations("def f():\n" + "    x = 1\n" * 99) == []
