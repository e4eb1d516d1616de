"""The kernel's JSONL reader and year parser: one error format, one set of rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.jsonl import JsonlError, iter_jsonl, read_jsonl
from kernel.years import YearError, parse_year, year_range


def test_read_jsonl_numbers_lines_as_an_editor_does(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('\ufeff{"a": 1}\n\n{"b": "\u00e9"}\n', encoding="utf-8")
    assert list(read_jsonl(path)) == [(1, {"a": 1}), (3, {"b": "\u00e9"})]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"a": 1}\n{"a": \n', "line 2: not valid JSON (Expecting value, column 6)"),
        ('{"a": 1}\n\n[1, 2]\n', "line 3: a JSON list, not an object"),
        (b'{"a": "\xff"}\n', "line 1: not valid JSON (not UTF-8"),
    ],
)
def test_errors_name_file_line_and_problem(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(JsonlError) as caught:
        list(read_jsonl(path))
    assert str(caught.value).startswith(f"{path} {message}")
    assert caught.value.path == str(path) and caught.value.line == int(message.split()[1].rstrip(":"))


def test_missing_file_and_in_memory_lines(tmp_path: Path) -> None:
    with pytest.raises(JsonlError, match=r"absent.jsonl: cannot read"):
        list(read_jsonl(tmp_path / "absent.jsonl"))
    assert list(iter_jsonl(['{"x": 1}', ""], name="-")) == [(1, {"x": 1})]


def test_parse_year_reads_years_and_dates() -> None:
    assert parse_year(2019) == 2019 and parse_year("2023") == 2023 and parse_year("2019-05-01") == 2019
    assert parse_year(None) is None and parse_year("") is None and parse_year("  ") is None
    for bad in (True, "abc", 0, 10_000, [2019]):
        with pytest.raises(YearError):
            parse_year(bad)


def test_year_range_from_bounds_lists_and_strings() -> None:
    assert year_range(None) == (None, None)
    assert year_range({"from_year": 2018, "to_year": "2024"}) == (2018, 2024)
    assert year_range({"years": [2018, 2020, 2023]}) == (2018, 2023)
    assert year_range({"years": "2018-2023"}) == (2018, 2023)
    assert year_range({"years": "2020"}) == (2020, 2020)
    assert year_range({"years": "-2020"}) == (None, 2020)
    assert year_range({"from_year": 2000, "years": "2019-"}) == (2019, 2019)
    with pytest.raises(YearError) as caught:
        year_range({"to_year": "soon"})
    assert caught.value.key == "to_year"
