"""The local corpus: importing real SciTLDR rows and JSONL, and finding papers again by full-text search."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from corpus.models import CorpusDocument
from corpus.search import CorpusRetrieval
from tests.conftest import SHARED_DATA

SCITLDR = SHARED_DATA / "scitldr"
DEV = SCITLDR / "SciTLDR-A_dev.jsonl"

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not DEV.is_file(), reason="SciTLDR data not present"),
]


def run_import(*args: str) -> str:
    out = StringIO()
    call_command("import_corpus", *args, "--no-progress", stdout=out, stderr=StringIO())
    return out.getvalue()


def dev_rows() -> list[dict[str, object]]:
    return [json.loads(line) for line in DEV.read_text().splitlines() if line.strip()]


def test_scitldr_import_keeps_text_and_tldrs() -> None:
    output = run_import(str(DEV))
    rows = dev_rows()
    assert CorpusDocument.objects.count() == len(rows) == 619
    assert "619 new" in output

    first = rows[0]
    doc = CorpusDocument.objects.get(external_id=first["paper_id"])
    assert doc.title == first["title"]
    assert doc.abstract.startswith(str(first["source"][0]).strip())  # type: ignore[index]
    assert doc.extra["tldrs"] == [t.strip() for t in first["target"]]  # type: ignore[union-attr]
    assert doc.extra["split"] == "dev"
    assert doc.url == f"https://openreview.net/forum?id={first['paper_id']}"


def test_reimport_is_idempotent() -> None:
    run_import(str(DEV))
    before = dict(CorpusDocument.objects.values_list("external_id", "abstract"))
    output = run_import(str(DEV), "--batch-size", "100")
    assert CorpusDocument.objects.count() == 619
    assert "0 new, 619 updated" in output
    assert dict(CorpusDocument.objects.values_list("external_id", "abstract")) == before


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL full-text search")
def test_search_finds_a_paper_by_its_tldr() -> None:
    run_import(str(DEV))
    retrieval = CorpusRetrieval()
    rows = dev_rows()[:40]
    found = 0
    for row in rows:
        docs = retrieval.search(str(row["target"][0]), k=10)  # type: ignore[index]
        assert len(docs) == 10
        assert all(d.abstract and d.score is not None for d in docs)
        assert [d.score for d in docs] == sorted((d.score for d in docs), reverse=True)
        found += row["paper_id"] in {d.external_id for d in docs}
    assert found >= 32  # Recall@10 >= 0.8 on these 40 real queries

    # A long natural-language question, most of whose words no abstract contains, still matches.
    question = "Could you please tell me about adaptive loss scaling for mixed precision training in 2019 GPUs?"
    assert retrieval.search(question, k=3)[0].external_id == "rJlnfaNYvB"


def test_jsonl_import_keeps_other_fields_and_filters_by_year(tmp_path: Path) -> None:
    path = tmp_path / "papers.jsonl"
    records = [
        {
            "id": "p1",
            "title": "Handover checklists for nurses",
            "abstract": "Checklists cut omissions at nurse handover.",
            "url": "https://example.org/p1",
            "year": 2019,
            "venue": "Nursing Informatics",
            "authors": ["A. Lee"],
        },
        {
            "id": "p2",
            "title": "Shift length and errors",
            "abstract": "Longer nurse shifts lead to more handover errors.",
            "year": "2023",
            "doi": "10.1/x",
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    run_import(str(path))
    p1 = CorpusDocument.objects.get(external_id="p1")
    assert (p1.year, p1.url) == (2019, "https://example.org/p1")
    assert p1.extra == {"venue": "Nursing Informatics", "authors": ["A. Lee"]}
    assert CorpusDocument.objects.get(external_id="p2").extra == {"doi": "10.1/x"}

    retrieval = CorpusRetrieval()
    docs = retrieval.search("nurse handover", k=5)
    assert {d.external_id for d in docs} == {"p1", "p2"}
    p1_doc = next(d for d in docs if d.external_id == "p1")
    assert p1_doc.venue == "Nursing Informatics" and p1_doc.authors == ("A. Lee",)
    assert [d.external_id for d in retrieval.search("nurse handover", k=5, filters={"from_year": 2020})] == ["p2"]


def test_bad_files_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file"):
        run_import(str(tmp_path / "missing.jsonl"))

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "abstract": "fine"}\n{"id": "b", "abstract": \n')
    with pytest.raises(CommandError, match=r"broken.jsonl line 2: not valid JSON"):
        run_import(str(broken))

    no_abstract = tmp_path / "no_abstract.jsonl"
    no_abstract.write_text('{"id": "c", "title": "only a title"}\n')
    with pytest.raises(CommandError, match=r"line 1: record 'c' has no \"abstract\""):
        run_import(str(no_abstract))

    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(CommandError, match="no records"):
        run_import(str(empty))

    output = run_import(str(broken), "--skip-invalid")
    assert "1 records, 1 new, 0 updated, 1 skipped" in output


def test_bm25_fallback_ranks_the_matching_rows(tmp_path: Path) -> None:
    # The path SQLite takes without FTS5; its SQL is portable, so it runs on any database.
    path = tmp_path / "papers.jsonl"
    rows = [
        {"id": "a", "title": "Nurse handover", "abstract": "Handover checklists help nurses.", "year": 2019},
        {"id": "b", "title": "Heat in cities", "abstract": "Trees cool streets in summer.", "year": 2021},
        {"id": "c", "title": "Shift work", "abstract": "Nurse shifts and handover errors.", "year": 2023},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    run_import(str(path))
    retrieval = CorpusRetrieval()
    docs = retrieval._search_bm25_fallback("What helps at nurse handover?", 5, None, None)
    assert [d.external_id for d in docs] == ["a", "c"]
    assert docs[0].score is not None and docs[0].score > docs[1].score > 0  # type: ignore[operator]
    assert [d.external_id for d in retrieval._search_bm25_fallback("nurse handover", 5, 2020, None)] == ["c"]
    assert retrieval._search_bm25_fallback("the of and", 5, None, None) == []
