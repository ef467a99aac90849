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


def test_split_table_keeps_the_key_columns_in_both_tables_and_every_other_cell_once():
    from gitutor.tables import split_table

    header, rows = ["name", "a", "b", "c"], [("x", 1, 2, 3), ("y", 4, 5, 6)]
    first, second = split_table(header, iter(rows), 3).split("\n\n")
    assert first == markdown_table(["name", "a", "b"], [["x", 1, 2], ["y", 4, 5]])
    assert second == markdown_table(["name", "c"], [["x", 3], ["y", 6]])
    first, second = split_table(header, rows, 3, keys=2).split("\n\n")
    assert first.splitlines()[0] == "| name | a | b |" and second.splitlines()[0] == "| name | a | c |"
    assert split_table(header, rows, 4) == markdown_table(header, rows)  # nothing from `at` on: one table


def test_split_table_refuses_a_split_that_leaves_no_column_and_checks_the_whole_table():
    from gitutor.tables import split_table

    for at, keys in ((1, 1), (2, 2), (3, 0), (2.0, 1)):
        with pytest.raises(ValueError, match="at|keys"):
            split_table(["a", "b", "c"], [[1, 2, 3]], at, keys)
    with pytest.raises(ValueError, match="rows\\[1\\]"):
        split_table(["a", "b", "c"], [[1, 2, 3], [4, 5]], 2)
    with pytest.raises(TypeError, match="header"):
        split_table("abc", [[1, 2, 3]], 2)
