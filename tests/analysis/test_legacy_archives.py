"""Bad legacy archives: each is a clear CLI error naming the file and the member (and line or annotation),
and nothing is imported. The kinds follow issue 11 (not a zip, truncated, missing members, bad JSON, wrong
types, zip bombs by member and by total, path traversal, duplicate members, empty archive, wrong encoding,
NUL bytes, huge row counts) and the strictness of issue 12 (booleans, query_index)."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from collections.abc import Callable

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from annotation.models import Judgment, Participation, Query
from studies.models import Study, StudySystem
from tests.analysis.legacy_fixture import annotation, make_legacy_zip

pytestmark = pytest.mark.django_db


def _zip(files: list[tuple[str, bytes | str]], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as zf:
        for name, content in files:
            zf.writestr(name, content)
    return buf.getvalue()


def _ann(index: int = 0, **changes: object) -> dict[str, object]:
    raw = annotation(np.random.default_rng(index), index, neither_rate=0.0)
    raw.update(changes)
    return raw


def _results(annotations: list[object], name: str = "results/annotator-1.json") -> bytes:
    return _zip([("users.json", "[]"), (name, json.dumps(annotations))])


def _meta(label: str, **changes: object) -> dict[str, object]:
    raw = _ann()
    metadata = json.loads(json.dumps(raw["metadata"]))
    metadata[label].update(changes)
    raw["metadata"] = metadata
    return raw


def _duplicate_member() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("results/annotator-1.json", json.dumps([_ann(0)]))
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("results/annotator-1.json", json.dumps([_ann(1)]))
    return buf.getvalue()


def _lying_size() -> bytes:
    """A member whose directory entry claims 10 bytes but inflates to 2 MB (a bomb that lies)."""
    body = json.dumps([_ann(0, feedback="x" * 2_000_000)]).encode()
    data = bytearray(_zip([("results/annotator-1.json", body)]))
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.find(signature)
        data[at + offset : at + offset + 4] = struct.pack("<I", 10)
    return bytes(data)


def _corrupt_crc() -> bytes:
    data = bytearray(_zip([("results/annotator-1.json", json.dumps([_ann(0)]))], compression=zipfile.ZIP_STORED))
    at = data.find(b'"query"')
    data[at + 1] = ord("Q")
    return bytes(data)


# (kind, archive builder, what the message must name)
CASES: list[tuple[str, Callable[[], bytes], tuple[str, ...]]] = [
    ("not a zip", lambda: b"this is a CSV file, not a zip\n", ("not a zip archive",)),
    ("truncated zip", lambda: make_legacy_zip(n_annotators=2)[:-200], ("not a zip archive",)),
    ("empty archive", lambda: _zip([]), ("the archive is empty",)),
    ("no results members", lambda: _zip([("users.json", "[]")]), ("no results/annotator-",)),
    (
        "bad JSON in a member",
        lambda: _zip([("results/annotator-1.json", '[\n{"query_index": 0,\n oops}]')]),
        ("results/annotator-1.json, line 3", "not valid JSON"),
    ),
    (
        "bad JSON in users.json",
        lambda: _zip([("users.json", "{"), ("results/annotator-1.json", json.dumps([_ann()]))]),
        ("users.json, line 1",),
    ),
    (
        "wrong encoding (latin-1)",
        lambda: _zip(
            [("results/annotator-1.json", json.dumps([_ann(query="café")], ensure_ascii=False).encode("latin-1"))]
        ),
        ("results/annotator-1.json, line 1", "not UTF-8"),
    ),
    (
        "NUL byte in a member",
        lambda: _zip([("results/annotator-1.json", b'[{"query_index": 0}]\x00')]),
        ("results/annotator-1.json", "NUL"),
    ),
    (
        "NUL character in a text field",
        lambda: _results([_ann(query="what\u0000now")]),
        ("results/annotator-1.json, annotation 1", "query", "NUL"),
    ),
    (
        "results are not a list",
        lambda: _zip([("results/annotator-1.json", '"hello"')]),
        ("results/annotator-1.json", "expected a list of annotations"),
    ),
    (
        "users.json of the wrong type",
        lambda: _zip([("users.json", "42"), ("results/annotator-1.json", json.dumps([_ann()]))]),
        ("users.json", "expected a list of user records"),
    ),
    (
        "an annotation that is not an object",
        lambda: _results([_ann(0), "stray text"]),
        ("results/annotator-1.json, annotation 2", "expected an object"),
    ),
    (
        "a missing member of the design (metadata.C)",
        lambda: _results([{**_ann(), "metadata": {k: v for k, v in _ann()["metadata"].items() if k != "C"}}]),
        ("annotation 1 (query_index 0)", "metadata.C.model is missing"),
    ),
    (
        "has_pre_question as the string 'yes'",
        lambda: _results([_meta("B", has_pre_question="yes")]),
        ("annotation 1 (query_index 0)", "metadata.B.has_pre_question", "not a boolean"),
    ),
    (
        "has_pre_question missing",
        lambda: _results([{**_ann(), "metadata": {**_ann()["metadata"], "D": {"model": "m"}}}]),
        ("metadata.D.has_pre_question is missing",),
    ),
    (
        "two summaries from one system",
        lambda: _results([_meta("A", **_ann()["metadata"]["B"])]),
        ("annotation 1 (query_index 0)", "four different systems"),
    ),
    (
        "query_index missing",
        lambda: _results([{k: v for k, v in _ann().items() if k != "query_index"}]),
        ("annotation 1", "query_index is missing"),
    ),
    (
        "query_index duplicated",
        lambda: _results([_ann(0), _ann(1), _ann(0)]),
        ("annotation 3", "query_index 0 repeats annotation 1"),
    ),
    (
        "query_index not an integer",
        lambda: _results([_ann(query_index="first")]),
        ("annotation 1", "'first' is not an integer"),
    ),
    ("query_index out of range", lambda: _results([_ann(query_index=70000)]), ("annotation 1", "outside 0-32767")),
    (
        "query of the wrong type",
        lambda: _results([_ann(query={"text": "q"})]),
        ("annotation 1 (query_index 0): query", "expected text"),
    ),
    (
        "a choice that is not in the pair",
        lambda: _results([_ann(round1_ab="C")]),
        ("annotation 1 (query_index 0): round1_ab",),
    ),
    ("a choice of the wrong type", lambda: _results([_ann(round1_cd=["C"])]), ("round1_cd",)),
    ("paper_ids of the wrong type", lambda: _results([_ann(paper_ids="W1,W2")]), ("paper_ids must be a list",)),
    (
        "path traversal",
        lambda: _zip([("../../etc/results/annotator-1.json", json.dumps([_ann()]))]),
        ("../../etc/results/annotator-1.json", "outside the archive"),
    ),
    (
        "absolute member name",
        lambda: _zip([("/results/annotator-1.json", json.dumps([_ann()]))]),
        ("/results/annotator-1.json", "outside the archive"),
    ),
    ("duplicate member names", _duplicate_member, ("results/annotator-1.json", "two members of this name")),
    (
        "one annotator in two folders",
        lambda: _zip([("a/results/annotator-1.json", "[]"), ("b/results/annotator-1.json", "[]")]),
        ("b/results/annotator-1.json", "annotator 1 already has results in a/results/annotator-1.json"),
    ),
    (
        "two users.json",
        lambda: _zip([("a/users.json", "[]"), ("b/users.json", "[]"), ("results/annotator-1.json", "[]")]),
        ("two users.json members",),
    ),
    (
        "zip bomb: one member above the cap",
        lambda: _zip([("results/annotator-1.json", json.dumps([_ann(0, feedback=" " * 300_000)]))]),
        ("results/annotator-1.json", "above the cap of 200000"),
    ),
    # zipfile stops at the size the directory declares, so the lie surfaces as a CRC mismatch.
    ("zip bomb: a member that lies about its size", _lying_size, ("results/annotator-1.json", "damaged")),
    (
        "zip bomb: the total above the cap",
        lambda: _zip(
            [(f"results/annotator-{i}.json", json.dumps([_ann(0, feedback=" " * 150_000)])) for i in range(4)]
        ),
        ("above the cap of 500000",),
    ),
    ("huge row count", lambda: _results([_ann(i) for i in range(60)]), ("more than 50 annotations",)),
    ("damaged member (CRC)", _corrupt_crc, ("results/annotator-1.json", "damaged")),
]


@pytest.mark.parametrize(("kind", "build", "expected"), CASES, ids=[c[0] for c in CASES])
@override_settings(
    LEGACY_IMPORT_MAX_MEMBER_BYTES=200_000, LEGACY_IMPORT_MAX_TOTAL_BYTES=500_000, LEGACY_IMPORT_MAX_ANNOTATIONS=50
)
def test_a_bad_archive_is_a_clear_error_and_imports_nothing(kind, build, expected, tmp_path):
    assert len(CASES) >= 17
    path = tmp_path / "paper-export.zip"
    path.write_bytes(build())
    with pytest.raises(CommandError) as error:
        call_command("import_legacy_export", str(path), "--study", "paper")
    message = str(error.value)
    assert str(path) in message and "Nothing was imported" in message, message
    for part in expected:
        assert part in message, f"{kind}: {part!r} not in {message!r}"
    assert "Traceback" not in message
    assert not Study.objects.filter(slug="paper").exists()
    assert not (StudySystem.objects.exists() or Participation.objects.exists() or Query.objects.exists())
    assert not Judgment.objects.exists()


def test_a_bad_annotation_after_good_ones_leaves_nothing_half_imported(tmp_path):
    path = tmp_path / "late.zip"
    good = json.dumps([_ann(i) for i in range(3)])
    path.write_bytes(
        _zip([("results/annotator-1.json", good), ("results/annotator-2.json", json.dumps([_ann(0, final="Z")]))])
    )
    with pytest.raises(CommandError, match=r"annotator-2\.json, annotation 1 \(query_index 0\): final"):
        call_command("import_legacy_export", str(path), "--study", "paper")
    assert not Query.objects.exists() and not Study.objects.exists()


@pytest.mark.parametrize(
    ("value", "persona"),
    [
        (True, True),
        (False, False),
        ("false", False),
        ("TRUE", True),
        (" 0 ", False),
        (1, True),
        ("1", True),
        (0, False),
    ],
)
def test_booleans_are_read_strictly(value, persona, tmp_path):
    from analysis.legacy import parse_legacy_export

    export = parse_legacy_export(_results([_meta("A", has_pre_question=value, model="solo")]))
    assert export.annotators[0].annotations[0].candidate("A").has_pre_question is persona
