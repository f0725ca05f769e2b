"""report.html beside summary.md: the same tables, figures and captions in
one self-contained page a browser opens from anywhere (every figure embedded
as a data: URI, the style inline; no external asset, no script).

It converts the Markdown subset write_summary() writes: headings, bullet
lists, pipe tables, fenced blocks, images followed by an italic caption
line, inline code, bold and links (links to the report's own files stay
relative).
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

STYLE = """body{font-family:sans-serif;max-width:72em;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:2px 8px}
pre{background:#f4f4f4;padding:.5em;overflow-x:auto;font-size:85%}
figure{margin:1em 0}figure img{max-width:100%}figcaption{font-style:italic;max-width:60em}"""


def _inline(text: str) -> str:
    out, pos = [], 0
    for m in re.finditer(r"`([^`]+)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\(([^)]+)\)", text):
        out.append(html.escape(text[pos:m.start()]))
        if m.group(1) is not None:
            out.append(f"<code>{html.escape(m.group(1))}</code>")
        elif m.group(2) is not None:
            out.append(f"<strong>{html.escape(m.group(2))}</strong>")
        else:
            out.append(f'<a href="{html.escape(m.group(4), quote=True)}">{html.escape(m.group(3))}</a>')
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _image(src: str, alt: str, base: Path) -> str:
    try:
        data = (base / src).read_bytes()
    except OSError as e:                    # a figure that could not be written
        return f"<p>(figure {html.escape(src)} missing: {html.escape(e.strerror or str(e))})</p>"
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return f'<img src="{uri}" alt="{html.escape(alt, quote=True)}">'


def markdown_to_html(md: str, base: Path, title: str = "mdsplit reproduction") -> str:
    """The page for summary.md's text; images are read from base."""
    body, lines, i = [], md.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            body.append("<pre>" + html.escape("\n".join(lines[i + 1:j])) + "</pre>")
            i = j + 1
            continue
        m = re.match(r"(#{1,6}) (.*)", line)
        if m:
            n = len(m.group(1))
            body.append(f"<h{n}>{_inline(m.group(2))}</h{n}>")
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                    rows.append(cells)
                i += 1
            head = "".join(f"<th>{_inline(c)}</th>" for c in rows[0])
            rest = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>"
                           for r in rows[1:])
            body.append(f"<table><tr>{head}</tr>{rest}</table>")
            continue
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            body.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif re.fullmatch(r"!\[([^\]]*)\]\(([^)]+)\)", line):
            alt, src = re.fullmatch(r"!\[([^\]]*)\]\(([^)]+)\)", line).groups()
            caption = ""
            k = i + 1
            while k < len(lines) and not lines[k].strip():
                k += 1
            if k < len(lines) and re.fullmatch(r"\*[^*].*\*", lines[k].strip()):
                caption = lines[k].strip()[1:-1]
                i = k
            body.append("<figure>" + _image(src, alt, base)
                        + (f"<figcaption>{_inline(caption)}</figcaption>" if caption else "")
                        + "</figure>")
        elif line.strip():
            body.append(f"<p>{_inline(line)}</p>")
        i += 1
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_report_html(report: Path) -> Path:
    """report/report.html from report/summary.md."""
    report = Path(report)
    md = (report / "summary.md").read_text()
    first = md.splitlines()[0].lstrip("# ") if md else "mdsplit reproduction"
    path = report / "report.html"
    path.write_text(markdown_to_html(md, report, first))
    return path
