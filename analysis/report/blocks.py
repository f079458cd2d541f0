"""The content of a report as blocks (headings, paragraphs, bullets, tables, figures), rendered
twice by `analysis.report.render`: as HTML and as Markdown."""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.describe.numbers import FLAG

__all__ = ["FLAG", "Bullets", "FigureBlock", "Heading", "Paragraph", "Table"]


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    flagged: set[int] = field(default_factory=set)  # rows to highlight (extrapolations)


@dataclass
class FigureBlock:
    name: str
    title: str
    caption: str
