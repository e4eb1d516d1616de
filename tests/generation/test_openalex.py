"""OpenAlex retrieval against a local server that answers like the /works endpoint."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.cache import cache

from generation.openalex import OpenAlexRetrieval, rebuild_abstract
from generation.registry import get_retrieval_backend
from generation.settings import openalex_from_settings
from kernel.backends import BackendError
from kernel.storable import unstorable_text
from tests.support.openalex_standin import (
    HAND_INDEX,
    HAND_INDEX_ABSTRACT,
    inverted_index,
    make_work,
    openalex_standin,
)


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def backend(base_url: str, **overrides: object) -> OpenAlexRetrieval:
    """The deployment's client (settings), pointed at the stand-in, with short waits and these overrides."""
    options: dict[str, object] = {"backoff_s": 0.01, "timeout": 2.0, "mailto": "", "api_key": ""} | overrides
    config = replace(openalex_from_settings(), base_url=base_url, **options)  # type: ignore[arg-type]
    return OpenAlexRetrieval(config, cache=cache)


def test_rebuilds_abstract_from_inverted_index() -> None:
    # The index OpenAlex ships lists words in no particular order and repeats positions.
    assert rebuild_abstract(HAND_INDEX) == HAND_INDEX_ABSTRACT
    text = "We measure what we measure because we can, and we report it."
    assert rebuild_abstract(inverted_index(text)) == text
    assert rebuild_abstract(None) == ""


def test_search_returns_documents_with_metadata() -> None:
    with openalex_standin() as server:
        docs = backend(server.base_url).search("persona summarisation nurses", k=3)

    first = docs[0]
    assert first.external_id == "W4001"
    assert first.title == "Persona-aware summarisation of scientific abstracts"
    assert first.abstract.startswith("We study how a reader's persona changes which summary")
    assert first.year == 2023
    assert first.venue == "Journal of Summarisation Studies"
    assert first.url == "https://doi.org/10.5555/jss.2023.4001"
    assert first.authors == ("Ada Lin", "Ben Ortiz", "Chen Wu")
    assert len(docs) == 3


def test_keeps_k_documents_that_have_abstracts() -> None:
    with openalex_standin() as server:
        # The filter has_abstract:true is always sent; the stand-in honours it, so turn to a
        # server that ignores it by stripping the abstracts after the fact.
        for work in server.works:
            if work["id"].endswith("W4100"):
                work["abstract_inverted_index"] = None
        docs = backend(server.base_url).search("summarisation", k=10)
        params = server.requests[0]

    assert len(docs) == 10
    assert all(doc.abstract for doc in docs)
    assert "W4002" not in {d.external_id for d in docs}  # no abstract in OpenAlex
    assert "W4100" not in {d.external_id for d in docs}
    assert "has_abstract:true" in params["filter"].split(",")
    assert int(params["per-page"]) >= 10


def test_hand_written_index_comes_back_as_its_abstract() -> None:
    with openalex_standin() as server:
        (doc,) = backend(server.base_url).search("summaries that cite their sources", k=1)
    assert doc.external_id == "W4003"
    assert doc.abstract == HAND_INDEX_ABSTRACT
    assert doc.authors == ("Ivy Chen", "Jon Kahn")


def test_study_filters_go_into_the_request() -> None:
    filters = {
        "from_year": 2020,
        "to_year": 2024,
        "concepts": ["C204321447", "https://openalex.org/C41008148"],
        "fields": ["17"],
        "open_access_only": True,
    }
    with openalex_standin() as server:
        docs = backend(server.base_url, mailto="lab@example.org", api_key="oa-key").search(
            "summarisation", k=10, filters=filters
        )
        (url,) = server.urls

    query = parse_qs(urlsplit(url).query)
    parts = set(query["filter"][0].split(","))
    assert {
        "has_abstract:true",
        "publication_year:2020-2024",
        "concepts.id:C204321447|C41008148",
        "primary_topic.field.id:17",
        "open_access.is_oa:true",
    } <= parts
    assert query["mailto"] == ["lab@example.org"]
    assert query["api_key"] == ["oa-key"]
    assert query["search"] == ["summarisation"]
    # And the answers honour them.
    assert docs
    assert all(d.year is not None and 2020 <= d.year <= 2024 for d in docs)
    assert "W4005" not in {d.external_id for d in docs}  # medicine, field 27


def test_unknown_filter_is_a_readable_configuration_error() -> None:
    with openalex_standin() as server:
        with pytest.raises(BackendError) as caught:
            backend(server.base_url).search("summarisation", k=5, filters={"year_from": 2020})
        assert server.calls == 0
    assert not caught.value.transient
    assert "year_from" in caught.value.reason


def test_429_then_success_is_retried() -> None:
    with openalex_standin(script=["429", "503"]) as server:
        docs = backend(server.base_url, max_retries=2).search("summarisation", k=2)
        assert server.calls == 3
    assert len(docs) == 2


def test_by_default_one_call_per_task_attempt() -> None:
    # The retrieval task owns the retries (annotation/tasks.py); the client's are off unless asked for.
    with openalex_standin(script=["503"]) as server:
        with pytest.raises(BackendError) as caught:
            backend(server.base_url).search("summarisation", k=2)
        assert server.calls == 1
    assert caught.value.transient


def test_a_study_asks_openalex_once_per_attempt_and_says_the_fault_is_passing(settings) -> None:
    # As a study's question is retrieved: the backend by name, configured by the deployment's settings alone
    # (OPENALEX_MAX_RETRIES: 0 in config/settings/base.py). A 503 costs one call, not five, and the question's
    # attempt fails as transient, so the retrieval task (annotation/tasks.py) asks again after its backoff.
    with openalex_standin(script=["503", "503", "503", "503", "503"]) as server:
        settings.OPENALEX_BASE_URL = server.base_url
        with pytest.raises(BackendError) as caught:
            get_retrieval_backend("openalex").search("summarisation", k=2)
        assert server.calls == 1
    assert caught.value.transient
    assert "503" in caught.value.reason and "asked" not in caught.value.reason


def test_retries_are_bounded() -> None:
    with openalex_standin(script=["500"] * 10) as server:
        with pytest.raises(BackendError) as caught:
            backend(server.base_url, max_retries=2).search("summarisation", k=2)
        assert server.calls == 3
    assert caught.value.transient
    assert "500" in caught.value.reason


def test_timeout_then_success() -> None:
    with openalex_standin(script=["timeout"], hang_s=3.0) as server:
        docs = backend(server.base_url, timeout=0.3, max_retries=1).search("summarisation", k=2)
        assert server.calls == 2
    assert len(docs) == 2


def test_a_reply_trickled_byte_by_byte_ends_at_the_time_out() -> None:
    # Each byte comes within the read time-out: only a limit on the whole reply ends the call (a threads-pool
    # worker enforces no soft time limit; kernel/reply_deadline.py).
    with openalex_standin(script=["trickle"], hang_s=60) as server:
        started = time.monotonic()
        with pytest.raises(BackendError) as caught:
            backend(server.base_url, timeout=1.0).search("summarisation", k=2)
        took = time.monotonic() - started
        assert server.calls == 1
    assert caught.value.transient and "did not answer within 1s" in caught.value.reason
    assert took < 3.0, took  # the body alone would take minutes


def test_bad_request_fails_fast_with_openalex_message() -> None:
    with openalex_standin() as server:
        with pytest.raises(BackendError) as caught:
            backend(server.base_url).search("x", k=2, filters={"openalex_filter": "no_such_field:1"})
        assert server.calls == 1
    assert not caught.value.transient
    assert "400" in caught.value.reason and "no_such_field" in caught.value.reason


def test_cache_by_query_and_filters() -> None:
    with openalex_standin() as server:
        retrieval = backend(server.base_url)
        first = retrieval.search("summarisation", k=3)
        again = retrieval.search("summarisation", k=3)
        assert server.calls == 1
        assert again == first
        retrieval.search("summarisation", k=3, filters={"open_access_only": True})
        assert server.calls == 2


def test_long_question_falls_back_to_keywords() -> None:
    with openalex_standin() as server:
        docs = backend(server.base_url).search("What do nurses need from handover notes?", k=2)
        searches = [r["search"] for r in server.requests]
    # The stand-in matches any word, so the first search already finds it.
    assert docs[0].external_id == "W4005"
    assert searches[0] == "What do nurses need from handover notes?"


def test_no_results_tries_content_words_once() -> None:
    with openalex_standin(works=[]) as server:
        docs = backend(server.base_url).search("What helps nurses at handover?", k=2)
        searches = [r["search"] for r in server.requests]
    assert docs == []
    assert searches == ["What helps nurses at handover?", "helps OR nurses OR handover"]


def test_a_work_with_characters_no_database_can_store_comes_back_storable() -> None:
    # OpenAlex's JSON may carry \u0000 or a lone \ud800 in a scraped title or abstract; the question's sources
    # are stored in PostgreSQL, which refuses both: the question's retrieval failed in the database.
    work = make_work(
        7001,
        "Night shifts\ud800 and nurses' sleep",
        "Nurses on night\u0000 shifts sleep less.",
        year=2021,
        venue="Sleep\u0000 Health",
        authors=["Ana\u0000 Ruiz"],
        is_oa=True,
    )
    with openalex_standin([work]) as server:
        (doc,) = backend(server.base_url).search("night shifts nurses sleep", k=1)
    assert doc.title == "Night shifts\ufffd and nurses' sleep"
    assert doc.abstract == "Nurses on night shifts sleep less."
    assert (doc.venue, doc.authors) == ("Sleep Health", ("Ana Ruiz",))
    assert not any(unstorable_text(text) for text in (doc.title, doc.abstract, doc.venue, *doc.authors))


def _night_shift_work(number: int, **malformed: object) -> dict[str, object]:
    work = make_work(
        number,
        f"Night shifts and nurses' sleep, cohort {number}",
        "Nurses on night shifts sleep less and report more errors.",
        year=2021,
        venue="Sleep Health",
        authors=["Ana Ruiz", "Bo Chen"],
        is_oa=True,
        doi=f"10.5555/sleep.{number}",
    )
    return work | malformed


def test_a_work_with_a_malformed_field_is_kept_with_what_is_readable() -> None:
    # OpenAlex (or a proxy, or a mirror) sending a field of another type than documented failed the whole
    # question with "Unexpected error (AttributeError: 'str' object has no attribute 'get')".
    works = [
        _night_shift_work(8001, primary_location="https://example.org/papers/8001"),
        _night_shift_work(8002, authorships="Ana Ruiz, Bo Chen"),
        _night_shift_work(8003, authorships=["Ana Ruiz", {"author": "Bo Chen"}, {"author": {"display_name": 7}}]),
        _night_shift_work(8004, primary_location={"landing_page_url": 8004, "source": "Sleep Health"}),
        _night_shift_work(8005, publication_year="2021", relevance_score="high", id=8005),
        # No readable abstract: missing, like a work without one, so it is not a source.
        _night_shift_work(8006, abstract_inverted_index=["Nurses", "sleep", "less"]),
        _night_shift_work(8007, abstract_inverted_index={"Nurses": 0, "sleep": [1, "two", None]}),
    ]
    with openalex_standin(works) as server:
        docs = {doc.title: doc for doc in backend(server.base_url).search("night shifts nurses sleep", k=10)}

    def cohort(number: int):  # noqa: ANN202 - a test helper
        return docs[f"Night shifts and nurses' sleep, cohort {number}"]

    assert len(docs) == 6
    assert (cohort(8001).url, cohort(8001).venue) == ("https://doi.org/10.5555/sleep.8001", "")
    assert cohort(8001).authors == ("Ana Ruiz", "Bo Chen") and cohort(8001).year == 2021
    assert cohort(8002).authors == ()
    assert cohort(8003).authors == ()
    assert (cohort(8004).url, cohort(8004).venue) == ("https://doi.org/10.5555/sleep.8004", "")
    # An id that is not a string is named by the work's DOI (test_works_without_an_id_are_not_one_source).
    assert (cohort(8005).year, cohort(8005).venue) == (None, "Sleep Health")
    assert cohort(8005).external_id == "doi:10.5555/sleep.8005"
    assert cohort(8007).abstract == "sleep"
    assert all(doc.abstract for doc in docs.values())


def test_works_by_id_keeps_a_work_with_a_malformed_field() -> None:
    with openalex_standin(
        [_night_shift_work(8101, primary_location="W8101", authorships={"author": "Ana Ruiz"})]
    ) as server:
        found = backend(server.base_url).works(["W8101"])
    assert found["W8101"].title == "Night shifts and nurses' sleep, cohort 8101"
    assert (found["W8101"].url, found["W8101"].authors) == ("https://doi.org/10.5555/sleep.8101", ())


def test_works_without_an_id_are_not_one_source(caplog: pytest.LogCaptureFixture) -> None:
    # Every work without a readable id got the external id "", so the second such work in an answer was taken
    # for the first and silently dropped. One named by its DOI is kept; one with neither is left out, logged.
    works = [
        _night_shift_work(8201),
        _night_shift_work(8202, id=None),
        _night_shift_work(8203, id="https://openalex.org/"),
        _night_shift_work(8204, id=None, doi="https://doi.org/10.5555/SLEEP.8204"),
        _night_shift_work(8205, id=None, doi=None),
        _night_shift_work(8206, id="", doi="not a doi"),
    ]
    with openalex_standin(works) as server, caplog.at_level("WARNING", logger="generation.openalex"):
        docs = backend(server.base_url).search("night shifts nurses sleep", k=10)

    assert [(doc.title.rsplit(" ", 1)[-1], doc.external_id) for doc in docs] == [
        ("8201", "W8201"),
        ("8202", "doi:10.5555/sleep.8202"),
        ("8203", "doi:10.5555/sleep.8203"),
        ("8204", "doi:10.5555/sleep.8204"),
    ]
    left_out = [r.getMessage() for r in caplog.records if "no readable id or DOI" in r.getMessage()]
    assert len(left_out) == 2
    assert "cohort 8205" in left_out[0] and "cohort 8206" in left_out[1]


def test_two_works_with_one_doi_are_one_source() -> None:
    # OpenAlex lists some papers twice (a preprint and its journal version under two ids, one DOI): the
    # annotator would read the same abstract as two sources, and k sources would hold fewer papers.
    works = [
        _night_shift_work(8301),
        _night_shift_work(8302, doi="https://doi.org/10.5555/SLEEP.8301"),  # the same DOI, told in capitals
        _night_shift_work(8303),
        _night_shift_work(8304, id=None, doi="10.5555/sleep.8303"),  # named by its DOI, which 8303 holds
    ]
    with openalex_standin(works) as server:
        docs = backend(server.base_url).search("night shifts nurses sleep", k=10)
    assert [doc.external_id for doc in docs] == ["W8301", "W8303"]


# The cap on OpenAlex's reply (OPENALEX_MAX_RESPONSE_BYTES), caused by a stand-in that answers with too much.


def test_a_reply_that_never_ends_is_cut_at_the_cap_and_fails_for_good() -> None:
    with openalex_standin(script=["flood", "flood", "flood"]) as server:
        with pytest.raises(BackendError) as caught:
            backend(server.base_url, max_retries=2, max_response_bytes=64 * 1024).search("summarisation", k=2)
        assert server.script.hung_up.wait(5), "the stand-in never saw the client hang up"
        assert server.calls == 1  # the same page would come back: no retry is spent on it
    assert not caught.value.transient
    assert caught.value.reason.startswith("OpenAlex's reply was larger than 64 KiB")
    assert "OPENALEX_MAX_RESPONSE_BYTES" in caught.value.reason
    # The bytes the stand-in managed to write before the hang-up: the cap and the sockets' buffers, not the
    # 256 MiB it would have written to a client reading on.
    assert server.script.streamed < 32 * 1024 * 1024


def test_a_content_length_over_the_cap_fails_before_the_body_is_read() -> None:
    with openalex_standin(script=["announced"]) as server:
        with pytest.raises(BackendError) as caught:
            backend(server.base_url, max_response_bytes=64 * 1024).search("summarisation", k=2)
        assert server.script.hung_up.wait(5)
    assert not caught.value.transient
    assert "larger than 64 KiB; its Content-Length says 1 GiB" in caught.value.reason


def test_a_compressed_reply_is_counted_as_it_decodes() -> None:
    with openalex_standin(script=["bomb"]) as server:  # 64 KiB of gzip that decodes to 64 MiB
        with pytest.raises(BackendError) as caught:
            backend(server.base_url, max_response_bytes=1024 * 1024).search("summarisation", k=2)
    assert "OpenAlex's reply was larger than 1 MiB" in caught.value.reason


def test_a_page_under_the_cap_is_read_and_one_over_it_is_refused() -> None:
    # The stand-in's default page for "summarisation" (25 works asked, 15 found) is about 20 KiB.
    with openalex_standin() as server:
        docs = backend(server.base_url, max_response_bytes=64 * 1024).search("summarisation", k=2)
        with pytest.raises(BackendError) as caught:
            backend(server.base_url, max_response_bytes=4 * 1024).search("summarisation", k=3)
    assert len(docs) == 2
    assert "larger than 4 KiB; its Content-Length says" in caught.value.reason


def test_a_reply_whose_compression_is_broken_is_a_reason_and_asked_again() -> None:
    # It said gzip and was not: the question's failure names OpenAlex's reply, not "Unexpected error", and a
    # second attempt gets the page.
    with openalex_standin(script=["badgzip"]) as server:
        docs = backend(server.base_url, max_retries=1).search("summarisation", k=2)
    assert len(docs) == 2
    with openalex_standin(script=["badgzip"]) as server:
        with pytest.raises(BackendError) as caught:
            backend(server.base_url, max_retries=0).search("summarisation", k=2)
    assert caught.value.transient
    assert "OpenAlex sent a reply that could not be decoded" in caught.value.reason
