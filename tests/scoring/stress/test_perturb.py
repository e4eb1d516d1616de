import pytest

from kernel.text import split_sentences
from scoring.stress.perturb import StressError, StressRow, added_source_text, distractor, incremental
from tests.scoring.stress.support import ROWS

ROW_OBJS = [StressRow.from_mapping(r) for r in ROWS]


def _texts(pert, row_id):
    return [level[0].text for level in pert.variants[row_id]]


def test_distractor_is_deterministic_for_a_seed_and_order_independent():
    a = distractor(ROW_OBJS, seed=7)
    b = distractor(list(reversed(ROW_OBJS)), seed=7)
    c = distractor(ROW_OBJS, seed=8)
    for row in ROW_OBJS:
        assert _texts(a, row.id) == _texts(b, row.id)
    assert any(_texts(a, r.id) != _texts(c, r.id) for r in ROW_OBJS)


def test_distractor_levels_are_nested_and_come_from_other_documents():
    pert = distractor(ROW_OBJS, seed=1)
    assert pert.levels == ("original", "+1", "+2", "+3", "+4", "+5")
    for row in ROW_OBJS:
        levels = pert.variants[row.id]
        assert levels[0][0].text == row.summary
        added = levels[5][0].note["added"]
        assert len(added) == 5 and len(set(added)) == 5
        own = set(row.source_sentences)
        others = {s for r in ROW_OBJS if r.id != row.id for s in r.source_sentences}
        assert all(s in others and s not in own for s in added)
        for k in range(1, 6):
            assert levels[k][0].text == " ".join([row.summary, *added[:k]])


def test_distractor_needs_other_documents():
    with pytest.raises(StressError, match="other documents"):
        distractor(ROW_OBJS[:1], seed=0)


def test_incremental_starts_empty_and_ends_with_the_summary():
    rows = [
        StressRow("a", "One. Two here. Three there."),
        StressRow("b", "Only one sentence here."),
    ]
    pert = incremental(rows)
    assert pert.levels == ("0 sent.", "1 sent.", "2 sent.", "3 sent.")
    assert _texts(pert, "a") == ["", "One.", "One. Two here.", "One. Two here. Three there."]
    # a shorter summary stays complete at the higher levels
    assert _texts(pert, "b") == ["", "Only one sentence here."] + ["Only one sentence here."] * 2
    assert len(split_sentences(_texts(pert, "a")[-1])) == 3


def test_incremental_cap():
    pert = incremental([StressRow("a", "One. Two. Three. Four.")], max_levels=2)
    assert _texts(pert, "a") == ["", "One.", "One. Two."]


def test_added_source_text_uses_an_unused_source_sentence():
    pert = added_source_text(ROW_OBJS, seed=3)
    for row in ROW_OBJS:
        base, added = pert.variants[row.id]
        assert base[0].text == row.summary
        sentence = added[0].note["added"]
        assert sentence in row.source_sentences
        assert "weather" in sentence  # the only sentence the summary does not use
        assert added[0].text == f"{row.summary} {sentence}"
    assert added_source_text(ROW_OBJS, seed=3) == pert


def test_added_source_text_without_source_records_why():
    pert = added_source_text([StressRow("x", "A summary.")], seed=0)
    assert pert.variants["x"][1][0].text is None
    assert pert.variants["x"][1][0].note["error"] == "no usable source sentence"


def test_row_from_mapping_requires_id_and_summary():
    with pytest.raises(StressError, match="'id' and 'summary'"):
        StressRow.from_mapping({"summary": "x"})
    row = StressRow.from_mapping({"id": 3, "summary": "s", "source": ["A b.", "C d."], "persona": "nurse"})
    assert row.id == "3" and row.source == "A b. C d." and row.source_sentences == ("A b.", "C d.")
    assert row.metric_fields() == {"source": "A b. C d.", "persona": "nurse"}
