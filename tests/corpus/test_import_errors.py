"""`import_corpus` answers every bad file with a CLI error naming the file and line (or field), and a file
with a bad line imports nothing."""

from __future__ import annotations

import gzip
import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from corpus.importing import MAX_ABSTRACT_CHARS, CorpusFileError, corpus_import
from corpus.models import CorpusDocument

pytestmark = pytest.mark.django_db

GOOD = '{"id": "good-1", "title": "Fine", "abstract": "A fine abstract about nurses."}\n'


def run_import(*args: str) -> str:
    out = StringIO()
    call_command("import_corpus", *args, "--no-progress", "--no-stats", stdout=out, stderr=StringIO())
    return out.getvalue()


def _file(tmp_path: Path, name: str, second_line: str | bytes) -> Path:
    path = tmp_path / name
    body = second_line if isinstance(second_line, bytes) else second_line.encode("utf-8")
    path.write_bytes(GOOD.encode() + body + b"\n")
    return path


@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        (b"\xff\xfe{\x00}", "line 2: not valid JSON \\(not UTF-8"),
        ('{"id": "latin", "abstract": "caf\xe9"}'.encode("latin-1"), "line 2: not valid JSON \\(not UTF-8"),
        ("[1, 2]", "line 2: a JSON list, not an object"),
        ('"just text"', "line 2: a JSON str, not an object"),
        ('{"title": "no id", "abstract": "x"}', 'line 2: no "id"'),
        ('{"id": "  ", "abstract": "x"}', 'line 2: no "id"'),
        ('{"id": "e", "abstract": ""}', "line 2: record 'e' has no \"abstract\""),
        ('{"id": {"x": 1}, "abstract": "x"}', 'line 2: "id" must be a string or a number, not a JSON object'),
        ('{"id": "t", "abstract": ["a", "b"]}', "line 2: record 't' \"abstract\" must be a string, not a JSON array"),
        (
            '{"id": "t", "abstract": "x", "title": 5}',
            "line 2: record 't' \"title\" must be a string, not a JSON number",
        ),
        ('{"id": "u", "abstract": "x", "url": ["u"]}', "line 2: record 'u' \"url\" must be a string"),
        ('{"id": "y", "abstract": "x", "year": {"a": 1}}', "line 2: year .* is not a year"),
        ('{"id": "n", "abstract": "a\\u0000b"}', "line 2: record.abstract contains a NUL character"),
        ('{"id": "n", "abstract": "x", "venue": {"name": "\\u0000"}}', "line 2: record.venue.name contains a NUL"),
        ('{"id": "s", "abstract": "x", "venue": "\\udc00"}', "line 2: record.venue contains a lone surrogate"),
        ('{"id": "f", "abstract": "x", "score": NaN}', "line 2: record.score is nan"),
        ('{"id": "f", "abstract": "x", "score": 1e400}', "line 2: record.score is inf"),
        ("[" * 50_000 + "]" * 50_000, "line 2: not valid JSON \\(nested too deeply"),
        ('{"id": "' + "i" * 256 + '", "abstract": "x"}', 'line 2: "id" has 256 characters; at most 255'),
        (
            json.dumps({"id": "big", "abstract": "word " * (MAX_ABSTRACT_CHARS // 5 + 1)}),
            "line 2: record 'big' \"abstract\" has 100,0.. characters; at most 100,000",
        ),
    ],
)
def test_a_bad_line_names_file_and_line_and_imports_nothing(tmp_path, second_line, message):
    path = _file(tmp_path, "papers.jsonl", second_line)
    with pytest.raises(CommandError, match=rf"papers.jsonl {message}") as error:
        run_import(str(path))
    assert "Nothing from papers.jsonl was imported" in str(error.value)
    assert not CorpusDocument.objects.exists()  # not even the good first line


@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        ('{"paper_id": "p", "source": "one string", "target": []}', '"source" must be an array of strings'),
        ('{"paper_id": "p", "source": [{"a": 1}], "target": []}', '"source" must be an array of strings .* object'),
        ('{"paper_id": "p", "source": ["A sentence."], "target": "a tldr"}', '"target" must be an array of strings'),
        ('{"paper_id": "p", "source": [], "target": []}', 'has no "source" sentences'),
        ('{"id": "jsonl-row", "abstract": "x"}', 'no "paper_id"'),
    ],
)
def test_a_bad_scitldr_row_names_the_layout(tmp_path, second_line, message):
    path = tmp_path / "SciTLDR-A_test.jsonl"
    path.write_text('{"paper_id": "ok", "source": ["A sentence."], "target": ["tl;dr"]}\n' + second_line + "\n")
    with pytest.raises(CommandError, match=rf"SciTLDR-A_test.jsonl line 2: .*{message}"):
        run_import(str(path))
    assert not CorpusDocument.objects.exists()


def test_a_line_past_the_size_limit_is_refused_without_reading_it_whole(tmp_path):
    path = _file(tmp_path, "huge.jsonl", '{"id": "h", "abstract": "' + "x" * 5000 + '"}')
    with open(path, "ab") as out:
        out.write(GOOD.replace("good-1", "good-3").encode())
    with pytest.raises(CorpusFileError, match=r"huge.jsonl line 2: longer than 1,024 bytes"):
        corpus_import(path=path, max_line_bytes=1024)
    assert not CorpusDocument.objects.exists()
    skipped: list[tuple[int, str]] = []
    result = corpus_import(
        path=path, max_line_bytes=1024, skip_invalid=True, on_skip=lambda n, r: skipped.append((n, r))
    )
    # The long line is left out and reading resumes at the next line, not in the middle of the long one.
    assert (result.read, result.skipped) == (2, 1) and skipped[0][0] == 2
    assert set(CorpusDocument.objects.values_list("external_id", flat=True)) == {"good-1", "good-3"}


def test_missing_files_directories_and_broken_gzip_are_named(tmp_path):
    with pytest.raises(CommandError, match=r"missing.jsonl: no such file"):
        run_import(str(tmp_path / "missing.jsonl"))
    (tmp_path / "folder").mkdir()
    with pytest.raises(CommandError, match=r"folder: a directory, not a corpus file"):
        run_import(str(tmp_path / "folder"))
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(CommandError, match=r"bad.jsonl.gz: cannot read \(Not a gzipped file"):
        run_import(str(tmp_path / "bad.jsonl.gz"))
    truncated = tmp_path / "cut.jsonl.gz"
    truncated.write_bytes(gzip.compress((GOOD * 200).encode())[:-20])
    with pytest.raises(CommandError, match=r"cut.jsonl.gz: cannot read"):
        run_import(str(truncated))
    # Damaged inside (a bad disk block, a download spliced from two): zlib's own error, not an OSError.
    damaged = bytearray(gzip.compress((GOOD * 200).encode()))
    damaged[40:48] = b"\xff" * 8
    (tmp_path / "damaged.jsonl.gz").write_bytes(bytes(damaged))
    with pytest.raises(CommandError, match=r"damaged.jsonl.gz: cannot read \(Error -3 while decompressing"):
        run_import(str(tmp_path / "damaged.jsonl.gz"))
    assert not CorpusDocument.objects.exists()


def test_with_skip_invalid_bad_lines_are_reported_and_the_rest_imported(tmp_path):
    path = _file(tmp_path, "mixed.jsonl", '{"id": "n", "abstract": "a\\u0000b"}')
    err = StringIO()
    out = StringIO()
    call_command("import_corpus", str(path), "--skip-invalid", "--no-progress", "--no-stats", stdout=out, stderr=err)
    assert "skipped mixed.jsonl line 2: record.abstract contains a NUL character" in err.getvalue()
    assert "2 records" not in out.getvalue() and "1 records, 1 new, 0 updated, 1 skipped" in out.getvalue()
    assert list(CorpusDocument.objects.values_list("external_id", flat=True)) == ["good-1"]


def test_a_later_bad_file_says_the_earlier_ones_were_imported(tmp_path):
    good = tmp_path / "first.jsonl"
    good.write_text(GOOD)
    bad = _file(tmp_path, "second.jsonl", "[1]")
    with pytest.raises(CommandError, match=r"Nothing from second.jsonl was imported\..* first.jsonl was imported"):
        run_import(str(good), str(bad))
    assert list(CorpusDocument.objects.values_list("external_id", flat=True)) == ["good-1"]


def test_numeric_ids_are_accepted_as_text(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_text('{"id": 42, "abstract": "Numbered."}\n')
    run_import(str(path))
    assert CorpusDocument.objects.get().external_id == "42"


def test_the_admin_page_takes_the_documents_an_import_takes_and_names_what_it_refuses(admin_client):
    """A document added by hand on the admin page gets the import's limits: an abstract of a megabyte was a
    500 (PostgreSQL's search vector refuses it), now a form error, and nothing is stored."""
    form = {"external_id": "by-hand", "title": "Night shifts", "year": "2024", "extra": "{}", "url": ""}
    huge = " ".join(f"finding{i}" for i in range(120_000))  # distinct words: a search vector over 1 MB
    refused = admin_client.post("/admin/corpus/corpusdocument/add/", form | {"abstract": huge})
    assert refused.status_code == 200
    assert f"Ensure this value has at most {MAX_ABSTRACT_CHARS} characters" in refused.content.decode()
    assert not CorpusDocument.objects.filter(external_id="by-hand").exists()
    saved = admin_client.post("/admin/corpus/corpusdocument/add/", form | {"abstract": "Night shifts and sleep."})
    assert saved.status_code == 302, saved.content.decode()[-2000:]
    assert CorpusDocument.objects.get(external_id="by-hand").abstract == "Night shifts and sleep."
