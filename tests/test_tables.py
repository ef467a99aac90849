import pytest

from gitutor.tables import markdown_table


def test_markdown_table_lines_and_escaping():
    assert markdown_table(["a", "b"], [[1, "x|y"], [2.5, "two\nlines"]]).splitlines() == [
        "| a | b |", "|---|---|", "| 1 | x\\|y |", "| 2.5 | two lines |"]


def test_markdown_table_rejects_ragged_rows_and_no_header():
    with pytest.raises(ValueError, match="rows\\[1\\]"):
        markdown_table(["a", "b"], [[1, 2], [3]])
    with pytest.raises(ValueError, match="header"):
        markdown_table([], [])


def test_code_keeps_a_command_verbatim_and_refuses_what_a_span_cannot_hold():
    from gitutor.tables import code

    assert code("python3 x.py --phase base") == "`python3 x.py --phase base`"
    for bad in ("a `b`", "two\nlines"):
        with pytest.raises(ValueError, match="backtick or line break"):
            code(bad)
