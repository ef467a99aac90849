"""Markdown tables: the one way the package and the chapters write a table.

Glued with ``myst_nb.glue(name, Markdown(table), display=False)`` and pasted with
``{glue:md}`` in a Markdown cell, or shown as a cell's ``Markdown`` output, the table renders
as an HTML table in the book (myst-nb renders Markdown outputs as MyST, see ``_config.yml``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A Markdown table with ``header`` and one line per row; cells are ``str()``-ed, ``|`` escaped.

    Args:
        header: the column titles.
        rows: rows of already formatted cells (any value is turned into its ``str``).

    Raises:
        ValueError: if ``header`` is empty or a row has another number of cells than ``header``.
    """
    header = list(header)
    if not header:
        raise ValueError("header must name at least one column")
    lines = ["| " + " | ".join(map(_cell, header)) + " |", "|" + "---|" * len(header)]
    for index, row in enumerate(rows):
        row = list(row)
        if len(row) != len(header):
            raise ValueError(
                f"rows[{index}] has {len(row)} cells, the header {len(header)}"
            )
        lines.append("| " + " | ".join(map(_cell, row)) + " |")
    return "\n".join(lines)


def code(text: str) -> str:
    """``text`` as a Markdown inline code span, typeset verbatim (MyST would turn a command's ``--``
    into a dash in plain text).

    Raises:
        ValueError: if ``text`` holds a backtick or a line break (a span cannot hold them as given).
    """
    text = str(text)
    if "`" in text or "\n" in text:
        raise ValueError(f"text must hold no backtick or line break, got {text!r}")
    return f"`{text}`"
