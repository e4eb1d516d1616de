"""Flagging summaries that cite sources that do not exist, or none."""

from generation.citations import check_citations


def test_valid_citations_pass() -> None:
    check = check_citations("Checklists help [1]; shifts matter [2][3] and [4, 5].", 10)
    assert check.ok
    assert check.cited == (1, 2, 3, 4, 5)
    assert check.problems == ()


def test_nonexistent_source_is_flagged() -> None:
    check = check_citations("Checklists help [1] and [11]; see also [0].", 10)
    assert not check.ok
    assert check.nonexistent == (11, 0)
    assert check.problems == ("cites [11], [0], but only [1]..[10] exist",)


def test_no_citation_is_flagged() -> None:
    check = check_citations("Checklists help at handover.", 10)
    assert check.cites_none and not check.ok
    assert check.to_dict()["problems"] == ["cites no source"]


def test_ranges_and_named_brackets_count_but_other_brackets_do_not() -> None:
    check = check_citations("Results [2-4] agree [Source 6]; see [Table 1] and a ratio of [0.5].", 6)
    assert check.cited == (2, 3, 4, 6)
    assert check.ok


def test_range_past_the_end_is_flagged() -> None:
    assert check_citations("Many studies [8–12].", 10).nonexistent == (11, 12)
