"""A local HTTP server that answers like OpenAlex's /works endpoint.

The works and the response shape are written by hand after OpenAlex's documentation of
the Work object (ids as https://openalex.org/W..., abstracts as `abstract_inverted_index`,
`primary_location.source`, `authorships[].author`, `open_access.is_oa`) and of the list
endpoint (`meta` + `results`; parameters search, filter, per-page, page, select, mailto,
api_key; HTTP 400 with an "error"/"message" body for a bad parameter).
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support._http import FaultScript, StandInHandler, StandInServer, serving

SUPPORTED_FILTERS = frozenset(
    {
        "publication_year",
        "from_publication_date",
        "to_publication_date",
        "open_access.is_oa",
        "is_oa",
        "has_abstract",
        "concepts.id",
        "topics.id",
        "primary_topic.field.id",
        "type",
        "openalex",
        "openalex_id",
        "ids.openalex",
    }
)


def inverted_index(text: str) -> dict[str, list[int]]:
    """The way OpenAlex ships an abstract: each whitespace-separated word -> its positions."""
    index: dict[str, list[int]] = {}
    for position, word in enumerate(text.split()):
        index.setdefault(word, []).append(position)
    return index


def make_work(
    number: int,
    title: str,
    abstract: str | None,
    *,
    year: int,
    venue: str,
    authors: Sequence[str],
    is_oa: bool,
    concepts: Sequence[tuple[str, str]] = (),
    field_id: str = "17",
    doi: str | None = None,
    work_type: str = "article",
) -> dict[str, Any]:
    """One work in OpenAlex's shape."""
    wid = f"https://openalex.org/W{number}"
    landing = f"https://doi.org/{doi}" if doi else f"https://example.org/papers/{number}"
    return {
        "id": wid,
        "doi": f"https://doi.org/{doi}" if doi else None,
        "title": title,
        "display_name": title,
        "publication_year": year,
        "publication_date": f"{year}-06-15",
        "type": work_type,
        "language": "en",
        "primary_location": {
            "is_oa": is_oa,
            "landing_page_url": landing,
            "pdf_url": f"https://example.org/papers/{number}.pdf" if is_oa else None,
            "source": {
                "id": f"https://openalex.org/S{number % 7 + 100}",
                "display_name": venue,
                "issn_l": None,
                "type": "journal",
            },
            "license": "cc-by" if is_oa else None,
            "version": "publishedVersion",
        },
        "authorships": [
            {
                "author_position": "first" if i == 0 else ("last" if i == len(authors) - 1 else "middle"),
                "author": {"id": f"https://openalex.org/A{number}{i}", "display_name": name, "orcid": None},
                "institutions": [],
                "raw_author_name": name,
            }
            for i, name in enumerate(authors)
        ],
        "open_access": {
            "is_oa": is_oa,
            "oa_status": "gold" if is_oa else "closed",
            "oa_url": landing if is_oa else None,
            "any_repository_has_fulltext": is_oa,
        },
        "concepts": [
            {"id": f"https://openalex.org/{cid}", "display_name": name, "level": 1, "score": 0.6}
            for cid, name in concepts
        ],
        "primary_topic": {
            "id": "https://openalex.org/T10028",
            "display_name": "Topic",
            "field": {"id": f"https://openalex.org/fields/{field_id}", "display_name": "Field"},
        },
        "cited_by_count": number % 50,
        "abstract_inverted_index": inverted_index(abstract) if abstract is not None else None,
    }


# Root fields of a Work that `select` accepts (relevance_score is not selectable in OpenAlex).
SELECTABLE = frozenset(make_work(0, "t", "a", year=2000, venue="v", authors=(), is_oa=False))

CS = ("C41008148", "Computer science")
NLP = ("C204321447", "Natural language processing")
MED = ("C71924100", "Medicine")

# A hand-written index with repeated words, exactly as OpenAlex ships it (keys in no order).
HAND_INDEX_ABSTRACT = "Summaries that cite their sources help readers check the summaries against the sources."
HAND_INDEX: dict[str, list[int]] = {
    "sources.": [12],
    "the": [8, 11],
    "Summaries": [0],
    "check": [7],
    "that": [1],
    "summaries": [9],
    "cite": [2],
    "against": [10],
    "their": [3],
    "readers": [6],
    "sources": [4],
    "help": [5],
}


def default_works() -> list[dict[str, Any]]:
    works = [
        make_work(
            4001,
            "Persona-aware summarisation of scientific abstracts",
            "We study how a reader's persona changes which summary of retrieved scientific abstracts they prefer. "
            "Personalised summaries won more pairwise comparisons than generic ones for nurses and researchers.",
            year=2023,
            venue="Journal of Summarisation Studies",
            authors=("Ada Lin", "Ben Ortiz", "Chen Wu"),
            is_oa=True,
            concepts=(CS, NLP),
            doi="10.5555/jss.2023.4001",
        ),
        make_work(
            4002,
            "Summarisation benchmarks without abstracts",
            None,
            year=2022,
            venue="Workshop on Summarisation",
            authors=("Dana Moss",),
            is_oa=True,
            concepts=(CS, NLP),
        ),
        make_work(
            4004,
            "Evaluating summarisation metrics with pairwise human judgments",
            "Automatic summarisation metrics are compared with pairwise human judgments of summaries. "
            "Agreement is measured with Krippendorff's alpha for each metric family.",
            year=2015,
            venue="Computational Linguistics Letters",
            authors=("Eli Park", "Fay Green"),
            is_oa=False,
            concepts=(CS, NLP),
        ),
        make_work(
            4005,
            "Nursing handover notes and automatic summarisation",
            "Clinical handover notes written by nurses are long. We summarise them automatically and ask nurses "
            "whether the summaries keep what matters for patient safety.",
            year=2021,
            venue="Journal of Clinical Informatics",
            authors=("Gia Rossi", "Hal Berg"),
            is_oa=True,
            concepts=(MED,),
            field_id="27",
        ),
    ]
    cited = make_work(
        4003,
        "Citations in generated summaries",
        None,
        year=2024,
        venue="Findings of Summarisation",
        authors=("Ivy Chen", "Jon Kahn"),
        is_oa=True,
        concepts=(CS, NLP),
    )
    cited["abstract_inverted_index"] = HAND_INDEX
    works.insert(2, cited)
    for n in range(12):
        works.append(
            make_work(
                4100 + n,
                f"Query-focused summarisation study number {n + 1}",
                f"Study {n + 1} of query-focused summarisation compares extractive and abstractive summaries "
                f"of retrieved abstracts for information needs of researchers.",
                year=2016 + n % 9,
                venue="Proceedings of the Summarisation Conference",
                authors=(f"Author {n} A", f"Author {n} B"),
                is_oa=n % 2 == 0,
                concepts=(CS, NLP),
            )
        )
    return works


@dataclass
class OpenAlexStandIn:
    """What a test sees of the running server."""

    base_url: str
    script: FaultScript
    works: list[dict[str, Any]]
    requests: list[dict[str, str]] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def calls(self) -> int:
        with self.lock:
            return len(self.urls)


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _abstract_text(work: dict[str, Any]) -> str:
    index = work.get("abstract_inverted_index") or {}
    return " ".join(index)


def _year_matches(spec: str, year: int) -> bool:
    if spec.startswith(">"):
        return year > int(spec[1:])
    if spec.startswith("<"):
        return year < int(spec[1:])
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return (not lo or year >= int(lo)) and (not hi or year <= int(hi))
    return year == int(spec)


def _id_matches(wanted: str, full_ids: Iterable[str]) -> bool:
    short = wanted.rsplit("/", 1)[-1].lower()
    return any(fid.rsplit("/", 1)[-1].lower() == short for fid in full_ids)


def _filter_one(work: dict[str, Any], key: str, value: str) -> bool:
    negate = value.startswith("!")
    value = value.removeprefix("!")
    alternatives = value.split("|")

    def one(v: str) -> bool:
        if key == "publication_year":
            return _year_matches(v, int(work["publication_year"]))
        if key == "from_publication_date":
            return str(work["publication_date"]) >= v
        if key == "to_publication_date":
            return str(work["publication_date"]) <= v
        if key in ("open_access.is_oa", "is_oa"):
            return bool(work["open_access"]["is_oa"]) == (v.lower() == "true")
        if key == "has_abstract":
            return (work.get("abstract_inverted_index") is not None) == (v.lower() == "true")
        if key == "concepts.id":
            return _id_matches(v, [c["id"] for c in work.get("concepts", [])])
        if key == "topics.id":
            return _id_matches(v, [work["primary_topic"]["id"]])
        if key == "primary_topic.field.id":
            return _id_matches(v, [work["primary_topic"]["field"]["id"]])
        if key == "type":
            return str(work.get("type")) == v
        if key in ("openalex", "openalex_id", "ids.openalex"):
            return _id_matches(v, [work["id"]])
        raise AssertionError(key)

    matched = any(one(v) for v in alternatives)
    return not matched if negate else matched


def _parse_filter(expr: str) -> list[tuple[str, str]]:
    pairs = []
    for part in expr.split(","):
        if not part:
            continue
        key, sep, value = part.partition(":")
        if not sep or not value:
            raise ValueError(f"Invalid filter {part!r}: filters look like key:value.")
        if key not in SUPPORTED_FILTERS:
            raise ValueError(
                f"{key} is not a valid field. Valid fields are underscore or hyphenated versions of fields."
            )
        pairs.append((key, value))
    return pairs


@contextmanager
def openalex_standin(
    works: list[dict[str, Any]] | None = None,
    *,
    delay: float = 0.0,
    script: Iterable[str] | None = None,
    hang_s: float = 10.0,
) -> Iterator[OpenAlexStandIn]:
    """Run the stand-in for the duration of the block; `base_url` has no trailing slash."""

    class Handler(StandInHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
            with state.lock:
                state.urls.append(self.path)
                state.requests.append(params)
            fault = state.script.next()
            if fault is not None:
                message = {"429": "Too many requests", "401": "Invalid API key"}.get(fault, "Internal server error")
                self.play_fault(fault, {"error": message, "message": message}, state.script)
                return
            if parts.path.rstrip("/") != "/works":
                self.send_json(404, {"error": "Not found", "message": f"{parts.path} is not an endpoint"})
                return
            try:
                payload = self.list_works(params)
            except ValueError as exc:
                self.send_json(400, {"error": "Invalid query parameters error.", "message": str(exc)})
                return
            if delay:
                threading.Event().wait(delay)
            self.send_json(200, payload)

        def list_works(self, params: dict[str, str]) -> dict[str, Any]:
            per_page = int(params.get("per-page", params.get("per_page", "25")))
            if not 1 <= per_page <= 200:
                raise ValueError("per-page parameter must be between 1 and 200")
            page = int(params.get("page", "1"))
            filters = _parse_filter(params.get("filter", ""))
            hits = [w for w in state.works if all(_filter_one(w, k, v) for k, v in filters)]
            query = _tokens(params.get("search", ""))
            if query:
                scored = []
                for w in hits:
                    title = _tokens(w["display_name"])
                    body = _tokens(_abstract_text(w))
                    score = sum(2.0 * title.count(t) + body.count(t) for t in query)
                    if score > 0:
                        w = dict(w, relevance_score=round(score, 3))
                        scored.append(w)
                scored.sort(key=lambda w: -w["relevance_score"])
                hits = scored
            window = hits[(page - 1) * per_page : page * per_page]
            select = [s for s in params.get("select", "").split(",") if s]
            if select:
                unknown = [s for s in select if s not in SELECTABLE]
                if unknown:
                    raise ValueError(f"{unknown[0]} is not a valid select field.")
                window = [{k: w[k] for k in select if k in w} for w in window]
            return {
                "meta": {
                    "count": len(hits),
                    "db_response_time_ms": 7,
                    "page": page,
                    "per_page": per_page,
                    "groups_count": None,
                },
                "results": copy.deepcopy(window),
                "group_by": [],
            }

    server = StandInServer(Handler, hang_s=hang_s)
    state = OpenAlexStandIn(
        base_url=f"http://127.0.0.1:{server.server_port}",
        script=FaultScript(script),
        works=works if works is not None else default_works(),
    )
    with serving(server):
        yield state
