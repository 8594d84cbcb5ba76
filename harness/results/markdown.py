"""Markdown tables with aligned columns, for every table adh prints (light: no pandas)."""
from __future__ import annotations


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table with aligned columns (readable in a terminal too)."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), rule, *map(line, rows)])
