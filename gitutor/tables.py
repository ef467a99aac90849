"""Markdown tables: the one way the package and the chapters write a table.

Glued with ``myst_nb.glue(name, Markdown(table), display=False)`` and pasted with
``{glue:md}`` in a Markdown cell, or shown as a cell's ``Markdown`` output, the table renders
as an HTML table in the book (myst-nb renders Markdown outputs as MyST, see ``_config.yml``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def _cell(value, where: str) -> str:
    if (
        hasattr(value, "item")
        and callable(value.item)
        and getattr(value, "ndim", None) == 0
    ):
        value = value.item()  # a NumPy or torch scalar is the number it holds
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(
            f"{where} is {value!r}: a table shows numbers a run measured, not NaN or inf "
            "(write the reason as text, e.g. 'n/a (no LPIPS weights)')"
        )
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A Markdown table with ``header`` and one line per row; cells are ``str()``-ed, ``|`` escaped.

    Args:
        header: the column titles (a list or tuple; a string is refused, it is not a list of titles).
        rows: rows of already formatted cells (any value but a NaN/inf float is turned into its ``str``).

    Raises:
        TypeError: if ``header`` or ``rows`` is a string or not iterable, or a row is a string, bytes, a
            dict or not iterable.
        ValueError: if ``header`` is empty, a row has another number of cells than ``header``, or a cell
            is a NaN or infinite float (naming its row and column).
    """
    if (
        isinstance(header, (str, bytes))
        or not isinstance(header, Iterable)
        or isinstance(rows, (str, bytes))
        or not isinstance(rows, Iterable)
    ):
        raise TypeError(
            "header must be a list of column titles and rows an iterable of rows, "
            f"got {type(header).__name__} and {type(rows).__name__}"
        )
    header = list(header)
    if not header:
        raise ValueError("header must name at least one column")
    lines = [
        "| "
        + " | ".join(_cell(h, f"header[{i}]") for i, h in enumerate(header))
        + " |",
        "|" + "---|" * len(header),
    ]
    for index, row in enumerate(rows):
        if isinstance(row, (str, bytes, dict)) or not isinstance(row, Iterable):
            raise TypeError(
                f"rows[{index}] must be a list of cells, got {type(row).__name__} {row!r}"
            )
        row = list(row)
        if len(row) != len(header):
            raise ValueError(
                f"rows[{index}] has {len(row)} cells, the header {len(header)}"
            )
        lines.append(
            "| "
            + " | ".join(_cell(v, f"rows[{index}][{j}]") for j, v in enumerate(row))
            + " |"
        )
    return "\n".join(lines)


def split_table(
    header: Sequence[str], rows: Iterable[Sequence], at: int, keys: int = 1
) -> str:
    """A table too wide for the page's column as two Markdown tables, separated by a blank line, one line
    per row in each: the columns before ``at``, then the first ``keys`` columns (what names a row) with
    the columns from ``at`` on. The key cells appear in both tables, every other cell in one; a table
    with no column from ``at`` on is written whole (:func:`markdown_table`).

    Raises:
        ValueError: for ``keys`` < 1 or ``at`` ≤ ``keys`` (the first table would hold only key
            columns), or as :func:`markdown_table`.
        TypeError: as :func:`markdown_table`.
    """
    if isinstance(keys, bool) or not isinstance(keys, int) or keys < 1:
        raise ValueError(f"keys must be an int ≥ 1, got {keys!r}")
    if isinstance(at, bool) or not isinstance(at, int) or at <= keys:
        raise ValueError(f"at must be an int > keys = {keys}, got {at!r}")
    if not isinstance(rows, (str, bytes)) and isinstance(rows, Iterable):
        rows = list(rows)  # read once: checked whole, then cut
    whole = markdown_table(header, rows)  # every check of a table, on the whole
    header, rows = list(header), [list(row) for row in rows]
    if len(header) <= at:
        return whole
    first = markdown_table(header[:at], [row[:at] for row in rows])
    second = markdown_table(
        header[:keys] + header[at:], [row[:keys] + row[at:] for row in rows]
    )
    return first + "\n\n" + second


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
