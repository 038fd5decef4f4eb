"""format_table: aligned plain-text tables."""

from __future__ import annotations

from contrastext.report import format_table


def _lines(table: str) -> list[str]:
    return table.split("\n")


def test_every_line_has_the_same_width():
    table = format_table([["alpha", 1, 0.5], ["a much longer name", 1234567, 98765.4321]],
                         headers=["name", "n", "value"])
    lines = _lines(table)
    assert len(lines) == 4
    assert len({len(line) for line in lines}) == 1
    assert set(lines[1]) <= {"-", "+"}
    assert len(lines[1]) == len(lines[0])


def test_exact_layout():
    table = format_table([["alpha", 1, 0.5], ["beta", 12345, 2500.0]], headers=["name", "count", "x"])
    assert table == "\n".join([
        "name  | count  | x      ",
        "------+--------+--------",
        "alpha |      1 |  0.5000",
        "beta  | 12,345 | 2,500.0",
    ])


def test_number_formats():
    table = format_table([
        [0.123456, 1000, True],
        [-0.5, -1234, None],
        [999.99999, 7, "text"],
        [1234.56, 0, "12"],
    ], headers=["float", "int", "other"])
    rows = [[cell.strip() for cell in line.split(" | ")] for line in _lines(table)[2:]]
    assert rows == [
        ["0.1235", "1,000", "True"],          # floats under 1000: four decimals; ints: thousands separators
        ["-0.5000", "-1,234", "None"],
        ["1000.0000", "7", "text"],           # the 1000 threshold is on the value, not on its rounding
        ["1,234.6", "0", "12"],               # floats of 1000 and more: one decimal with separators
    ]


def test_numbers_are_right_aligned_and_text_left_aligned():
    table = format_table([["x", 5, 1.0], ["longer", 123456, -12.5], ["y", "-", "n/a"]],
                         headers=["name", "count", "value"])
    lines = _lines(table)
    name, count, value = lines[2].split(" | ")
    assert name == "x     "                  # text: left
    assert count == "      5"               # int: right (width of "123,456")
    assert value == "  1.0000"              # float: right (width of "-12.5000")
    dash = lines[4].split(" | ")
    assert dash[1] == "-      " and dash[2] == "n/a     "  # placeholders are text: left
    # bools are text, not numbers
    bool_line = _lines(format_table([[True]], headers=["flag"]))[2]
    assert bool_line == "True"


def test_headers_only():
    table = format_table([], headers=["a", "bb"])
    assert _lines(table) == ["a | bb", "--+---"]


def test_header_wider_than_cells_sets_the_width():
    lines = _lines(format_table([[1]], headers=["a long header"]))
    assert lines == ["a long header", "-" * 13, " " * 12 + "1"]
