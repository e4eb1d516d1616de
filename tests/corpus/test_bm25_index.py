"""The corpus's BM25 index (CORPUS_SEARCH=bm25): built by import_corpus, read back from disk, kept current."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import bm25s
import numpy as np
import pytest
from django.core.management import CommandError, call_command

from corpus import index as corpus_index
from corpus.models import CorpusDocument
from corpus.search import CorpusBM25Retrieval, CorpusRetrieval
from generation.registry import get_retrieval_backend
from kernel.text import index_terms
from tests.conftest import SHARED_DATA

DEV = SHARED_DATA / "scitldr" / "SciTLDR-A_dev.jsonl"

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def index_dir(settings, tmp_path: Path) -> Path:
    settings.CORPUS_INDEX_DIR = str(tmp_path / "index")
    corpus_index.forget_loaded()
    yield tmp_path / "index"
    corpus_index.forget_loaded()


@pytest.fixture
def dev(tmp_path: Path) -> Path:
    """SciTLDR's first 200 dev papers (a fifth of the import time of all 619)."""
    path = tmp_path / "SciTLDR-A_dev.jsonl"
    path.write_text("".join(DEV.read_text(encoding="utf-8").splitlines(keepends=True)[:200]), encoding="utf-8")
    return path


def run_import(*args: str) -> str:
    out = StringIO()
    call_command("import_corpus", *args, "--no-progress", stdout=out, stderr=StringIO())
    return out.getvalue()


def tldr_queries(n: int) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in DEV.read_text().splitlines()[:n]]
    return [(row["paper_id"], row["target"][0]) for row in rows]


def ids(documents: list) -> list[str]:
    return [d.external_id for d in documents]


def test_import_builds_the_index_which_a_restarted_process_reads_from_disk(index_dir: Path, dev: Path) -> None:
    out = run_import(str(dev))
    assert "Search index built: 200 abstracts" in out
    builds = list((index_dir / "builds").iterdir())
    assert len(builds) == 1
    files_before = {f.name: f.stat().st_mtime_ns for f in builds[0].iterdir()}

    corpus_index.forget_loaded()  # what a new web or worker process starts with
    retrieval = CorpusBM25Retrieval(auto_build_max=0)  # no rebuild allowed: only the files on disk can answer
    found = 0
    for paper_id, tldr in tldr_queries(40):
        documents = retrieval.search(tldr, k=10)
        assert retrieval.last_source == "index"
        assert [d.score for d in documents] == sorted((d.score for d in documents), reverse=True)
        found += paper_id in ids(documents)
    assert found >= 38  # bm25s finds 0.97 of SciTLDR's papers by their TLDR in its top 10
    loaded = corpus_index.load_current()
    assert isinstance(loaded.bm25.scores["data"], np.memmap)  # mapped, not read into each process's memory
    assert {f.name: f.stat().st_mtime_ns for f in builds[0].iterdir()} == files_before

    # The deployment setting makes it the "corpus" backend of every study.
    assert isinstance(get_retrieval_backend("corpus"), CorpusRetrieval)
    with pytest.MonkeyPatch.context() as patch:
        from django.conf import settings

        patch.setattr(settings, "CORPUS_SEARCH", "bm25")
        assert isinstance(get_retrieval_backend("corpus"), CorpusBM25Retrieval)


def test_same_top_ten_as_bm25s_in_memory(index_dir: Path, dev: Path) -> None:
    run_import(str(dev))
    rows = list(CorpusDocument.objects.order_by("id").values_list("external_id", "title", "abstract"))
    for _, title, abstract in rows:  # the index's memoised analyser is the kernel's
        assert corpus_index.analyse(f"{title} {abstract}") == index_terms(f"{title} {abstract}")
    reference = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    reference.index([index_terms(f"{title} {abstract}") for _, title, abstract in rows], show_progress=False)
    retrieval = CorpusBM25Retrieval(auto_build_max=0)
    for _paper_id, tldr in tldr_queries(60):
        terms = [t for t in dict.fromkeys(index_terms(tldr)) if t in reference.vocab_dict]
        hits, scores = reference.retrieve([terms], k=10, show_progress=False, n_threads=1)
        expected = [rows[i][0] for i, score in zip(hits[0], scores[0], strict=True) if score > 0]
        documents = retrieval.search(tldr, k=10)
        assert ids(documents) == expected, tldr
        assert [d.score for d in documents] == pytest.approx([s for s in scores[0] if s > 0], rel=1e-5)


def test_a_corpus_change_invalidates_the_index(index_dir: Path, tmp_path: Path) -> None:
    papers = tmp_path / "papers.jsonl"
    papers.write_text(
        "\n".join(
            json.dumps({"id": f"p{i}", "title": f"Paper {i}", "abstract": text, "year": year})
            for i, (text, year) in enumerate(
                [
                    ("Bayesian optimisation of hyperparameters for gradient boosting.", 2018),
                    ("Hyperparameters of deep networks tuned by random search.", 2021),
                    ("Protein folding predicted with attention.", 2021),
                ]
            )
        ),
        encoding="utf-8",
    )
    run_import(str(papers))
    retrieval = CorpusBM25Retrieval(auto_build_max=0)
    assert ids(retrieval.search("hyperparameters search", k=10)) == ["p1", "p0"]
    assert retrieval.last_source == "index"
    assert ids(retrieval.search("hyperparameters", k=10, filters={"from_year": 2020})) == ["p1"]

    # A row written outside import_corpus (the admin, SQL): the old index would not know it.
    CorpusDocument.objects.create(external_id="new", title="Quokka", abstract="Quokka hyperparameters census.")
    assert ids(retrieval.search("quokka", k=10)) == ["new"]
    assert retrieval.last_source == "fallback"  # a large corpus: full-text search until rebuilt
    rebuilding = CorpusBM25Retrieval()  # a small corpus: rebuilt on the spot
    assert ids(rebuilding.search("quokka", k=10)) == ["new"]
    assert rebuilding.last_source == "rebuilt"
    assert ids(retrieval.search("quokka", k=10)) == ["new"]
    assert retrieval.last_source == "index"

    CorpusDocument.objects.filter(external_id="p1").delete()
    assert sorted(ids(retrieval.search("hyperparameters search", k=10))) == ["new", "p0"]
    assert retrieval.last_source == "fallback"
    call_command("build_corpus_index", stdout=StringIO())
    assert sorted(ids(retrieval.search("hyperparameters search", k=10))) == ["new", "p0"]
    assert retrieval.last_source == "index"
    assert len(list((index_dir / "builds").iterdir())) == 1  # replaced builds are removed


@pytest.mark.parametrize("damage", ["truncated scores", "garbage pointer", "missing build"])
def test_a_damaged_index_is_rebuilt_or_bypassed_never_an_error(index_dir: Path, dev: Path, damage: str) -> None:
    run_import(str(dev))
    build = corpus_index.current_build()
    if damage == "truncated scores":
        data = build / "data.csc.index.npy"
        data.write_bytes(data.read_bytes()[:1000])
    elif damage == "garbage pointer":
        (index_dir / "CURRENT.json").write_text("{not json", encoding="utf-8")
    else:
        for f in build.iterdir():
            f.unlink()
        build.rmdir()
    corpus_index.forget_loaded()
    paper_id, tldr = tldr_queries(1)[0]

    bypassing = CorpusBM25Retrieval(auto_build_max=0)
    assert paper_id in ids(bypassing.search(tldr, k=10))
    assert bypassing.last_source == "fallback"
    rebuilding = CorpusBM25Retrieval()
    assert paper_id in ids(rebuilding.search(tldr, k=10))
    assert rebuilding.last_source == "rebuilt"
    assert corpus_index.current_build() != build


def test_an_unwritable_index_folder_is_named(settings, tmp_path: Path, dev: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    settings.CORPUS_INDEX_DIR = str(blocker / "index")
    assert "Search index built" not in run_import(str(dev), "--no-index")
    with pytest.raises(CommandError, match=r"search index was not built: cannot write .*a-file/index"):
        run_import(str(dev))
    assert CorpusDocument.objects.count() == 200  # the abstracts themselves were imported
    with pytest.raises(CommandError, match=r"cannot write the corpus search index under .*a-file/index"):
        call_command("build_corpus_index", stdout=StringIO())
    # Searching still answers, from full-text search.
    retrieval = CorpusBM25Retrieval()
    paper_id, tldr = tldr_queries(1)[0]
    assert paper_id in ids(retrieval.search(tldr, k=10))
    assert retrieval.last_source == "fallback"
