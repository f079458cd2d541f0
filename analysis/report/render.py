"""Rendering the blocks: one self-contained HTML page (figures as data: URIs, no script, no external
reference) and its Markdown twin; every file written atomically, the HTML last."""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

from analysis.report.blocks import Bullets, Heading, Paragraph, Table
from scaling.errors import UserError
from scaling.store import atomic_write_bytes

# ---------------------------------------------------------------- rendering
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 1180px; margin: 2em auto;
       padding: 0 1em; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.7em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: .88em; }
th, td { border: 1px solid #ccc; padding: .25em .55em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
tr.flag td { background: #fff1d6; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #333; max-width: 60em; }
@media print { figure { break-inside: avoid; } }
"""


def figure_file_name(name: str) -> str:
    return f"{name}.png"


def render_html(blocks: list, figures: dict[str, bytes]) -> str:
    """One self-contained page: inline CSS, figures as data: URIs; no scripts, no external references."""
    title = next(b.text for b in blocks if isinstance(b, Heading))
    body = "\n".join(_html_block(b, figures) for b in blocks)
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
        f"<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _html_block(block, figures: dict[str, bytes]) -> str:
    e = html.escape
    if isinstance(block, Heading):
        return f"<h{block.level}>{e(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        return f"<p>{e(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>\n" + "\n".join(f"<li>{e(item)}</li>" for item in block.items) + "\n</ul>"
    if isinstance(block, Table):
        head = "" if not any(block.header) else "<tr>" + "".join(f"<th>{e(h)}</th>" for h in block.header) + "</tr>\n"
        rows = "\n".join(
            ('<tr class="flag">' if i in block.flagged else "<tr>") + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>"
            for i, row in enumerate(block.rows)
        )
        return f"<table>\n{head}{rows}\n</table>"
    data = base64.b64encode(figures[block.name]).decode("ascii")
    return (
        f'<figure id="{e(block.name)}">\n<img src="data:image/png;base64,{data}" alt="{e(block.title)}">\n'
        f"<figcaption><b>{e(block.title)}.</b> {e(block.caption)}</figcaption>\n</figure>"
    )


def render_markdown(blocks: list, figure_dir: str) -> str:
    """The Markdown twin: the same blocks, figures referenced as ``figure_dir/NAME.png``."""
    return "\n\n".join(_markdown_block(b, figure_dir) for b in blocks) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown_block(block, figure_dir: str) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {block.text}"
    if isinstance(block, Paragraph):
        return block.text
    if isinstance(block, Bullets):
        return "\n".join(f"- {item}" for item in block.items)
    if isinstance(block, Table):
        header = [h or " " for h in block.header]
        lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
        for i, row in enumerate(block.rows):
            cells = [_md(c) for c in row]
            if i in block.flagged:
                cells[0] = f"**{cells[0]}**"
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)
    return f"![{block.title}]({figure_dir}/{figure_file_name(block.name)})\n\n*{block.title}.* {block.caption}"


REPORT_TITLE = "Scaling-law report"  # the report's first heading: its Markdown twin starts "# " and this


def guard_twin(out_html: Path, option: str) -> None:
    """One UserError line when the report's HTML or its Markdown twin exists and is not a report's (it would be
    replaced; user21: the user's notes in c6.md, user23: their page.html)."""
    for path, mark in ((out_html, f"<title>{REPORT_TITLE}"), (report_paths(out_html)[0], f"# {REPORT_TITLE}")):
        if not path.is_file():
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
        if mark not in head:
            raise UserError(
                f"{option}: {str(path)!r} exists and is not a report (it begins {head.strip()[:40]!r}): writing the "
                "report would replace it; move it or give another name"
            )


def report_paths(out_html: Path) -> tuple[Path, Path]:
    """(Markdown twin, figure directory) written beside ``out_html``: NAME.md and NAME-figures/."""
    return out_html.with_suffix(".md"), out_html.with_name(f"{out_html.stem}-figures")


def write_readable(path: Path, data: bytes) -> None:
    """`scaling.store.atomic_write_bytes`, then the permissions of a file created normally (0666 less
    the umask): the temporary file it renames is private (0600), and a report is meant to be shared."""
    atomic_write_bytes(path, data)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def write_report(out_html: Path, blocks: list, figures: dict[str, bytes]) -> list[Path]:
    """Write the figures, the Markdown twin and the HTML (last), each atomically; returns the paths."""
    out_html = Path(out_html)
    markdown, figure_dir = report_paths(out_html)
    html_text, markdown_text = (
        render_html(blocks, figures),
        render_markdown(blocks, figure_dir.name),
    )  # before any write
    written = []
    for name, png in figures.items():
        write_readable(figure_dir / figure_file_name(name), png)
        written.append(figure_dir / figure_file_name(name))
    write_readable(markdown, markdown_text.encode())
    write_readable(out_html, html_text.encode())
    return written + [markdown, out_html]
