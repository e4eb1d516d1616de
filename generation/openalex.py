"""Retrieval from OpenAlex's /works endpoint, as in the paper's study.

Searches works for the query, keeps the top k that have an abstract (rebuilt from OpenAlex's
`abstract_inverted_index`), applies the study's filters (years, concepts, fields, open access),
joins the polite pool with a contact e-mail, retries 429 and 5xx with backoff and jitter, and
caches answers by query and filters in the cache it is given (Django's, from generation.settings).
No Django: the configuration (`OpenAlexConfig`) and the cache are passed in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, Protocol

import httpx

from generation.config import OpenAlexConfig
from kernel.backends import BackendError, Document
from kernel.reply_deadline import reply_deadline
from kernel.response_cap import ResponseTooLarge, response_cap
from kernel.storable import storable_json
from kernel.text import content_words, fold_whitespace
from kernel.years import YearError, year_range

logger = logging.getLogger(__name__)

SELECT_FIELDS = (
    "id",
    "doi",
    "display_name",
    "title",
    "publication_year",
    "primary_location",
    "authorships",
    "open_access",
    "abstract_inverted_index",
)
_BACKOFF_CAP_S = 30.0
IDS_PER_REQUEST = 50  # OpenAlex ORs at most 100 values in one filter; 50 keeps the URL short
_FILTER_KEYS = frozenset(
    {"from_year", "to_year", "years", "concepts", "fields", "topics", "open_access_only", "types", "openalex_filter"}
)


def rebuild_abstract(inverted_index: object) -> str:
    """Turn OpenAlex's word -> positions index back into the abstract's text ("" when it is not one)."""
    if not isinstance(inverted_index, Mapping):
        return ""
    positioned: dict[int, str] = {}
    for word, positions in inverted_index.items():
        if not isinstance(word, str) or not isinstance(positions, list):
            continue
        for position in positions:
            if isinstance(position, int) and not isinstance(position, bool):
                positioned[position] = word
    return " ".join(positioned[p] for p in sorted(positioned)).strip()


# A work's fields as OpenAlex documents them; one of another type (a location sent as a string, authorships
# not a list) is read as missing, so the work keeps what is readable and the question does not fail.
def _object(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _title(work: Mapping[str, Any]) -> str:
    return _text(work.get("display_name")) or _text(work.get("title"))


def _year(work: Mapping[str, Any]) -> int | None:
    year = work.get("publication_year")
    return year if isinstance(year, int) and not isinstance(year, bool) else None


def _authors(work: Mapping[str, Any]) -> tuple[str, ...]:
    authorships = work.get("authorships")
    if not isinstance(authorships, list):
        return ()
    names = (_text(_object(_object(a).get("author")).get("display_name")) for a in authorships)
    return tuple(name for name in names if name)


def _short_id(openalex_id: str) -> str:
    return openalex_id.rstrip("/").rsplit("/", 1)[-1]


_WORK_ID = re.compile(r"W\d+", re.IGNORECASE)
_DOI = re.compile(r"(?:https?://(?:dx\.)?doi\.org/|doi:)?(10\.\d{4,9}/\S+)", re.IGNORECASE)
_DOI_MAX = 200 - len("doi:")  # RetrievedDocument.external_id holds 200 characters


def _external_id(work: Mapping[str, Any]) -> str:
    """The work's OpenAlex id (``W123``); without a readable one, ``doi:<its DOI>`` (lower case, as DOIs
    compare); without either, "". Every such work used to get "", so two of them in one answer were one
    source and the second was dropped."""
    short = _short_id(_text(work.get("id")))
    if _WORK_ID.fullmatch(short):
        return short
    doi = _doi_key(work)
    return doi if doi and len(doi) <= len("doi:") + _DOI_MAX else ""


def _doi_key(work: Mapping[str, Any]) -> str:
    """``doi:<the work's DOI>`` in lower case, as DOIs compare; "" without a readable one."""
    doi = _DOI.fullmatch(_text(work.get("doi")))
    return f"doi:{doi.group(1).lower()}" if doi else ""


def _ids(value: Any, name: str) -> list[str]:
    items = [value] if isinstance(value, str | int) else list(value or [])
    out = [_short_id(str(v)).strip() for v in items if str(v).strip()]
    for v in out:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", v):
            raise BackendError(f"OpenAlex filter {name!r} has an invalid id {v!r}.", transient=False)
    return out


def build_filter(filters: Mapping[str, Any] | None) -> str:
    """The study's filters as OpenAlex's `filter` parameter (comma = AND, pipe = OR).

    Keys: from_year, to_year (or years: [from, to] / "2018-2023"), concepts, fields, topics
    (OpenAlex ids, short or full), open_access_only, types (e.g. ["article", "review"]),
    openalex_filter (a raw OpenAlex filter string, appended as is). Works without an abstract
    are always excluded.
    """
    filters = dict(filters or {})
    unknown = sorted(set(filters) - _FILTER_KEYS)
    if unknown:
        raise BackendError(
            f"Unknown OpenAlex filter(s) {', '.join(unknown)}; use {', '.join(sorted(_FILTER_KEYS))}.", transient=False
        )
    parts = ["has_abstract:true"]
    try:
        lo, hi = year_range(filters)
    except YearError as exc:
        raise BackendError(f"OpenAlex filter {exc.key!r} must be a year, not {exc.value!r}.", transient=False) from None
    if lo is not None and hi is not None and lo > hi:
        raise BackendError(f"OpenAlex year range {lo}-{hi} is empty.", transient=False)
    if lo is not None or hi is not None:
        parts.append(f"publication_year:{lo if lo is not None else ''}-{hi if hi is not None else ''}")
    for key, field in (("concepts", "concepts.id"), ("fields", "primary_topic.field.id"), ("topics", "topics.id")):
        ids = _ids(filters.get(key), key)
        if ids:
            parts.append(f"{field}:{'|'.join(ids)}")
    if filters.get("open_access_only"):
        parts.append("open_access.is_oa:true")
    types = _ids(filters.get("types"), "types")
    if types:
        parts.append(f"type:{'|'.join(types)}")
    raw = str(filters.get("openalex_filter") or "").strip().strip(",")
    if raw:
        parts.append(raw)
    return ",".join(parts)


def work_to_document(work: Mapping[str, Any]) -> Document | None:
    """One OpenAlex work as a Document, or None when it has no abstract or title, or nothing that names it
    (no readable OpenAlex id or DOI: logged, since OpenAlex documents an id on every work)."""
    abstract = rebuild_abstract(work.get("abstract_inverted_index"))
    title = _title(work)
    if not abstract or not title:
        return None
    external_id = _external_id(work)
    if not external_id:
        logger.warning("OpenAlex sent a work with no readable id or DOI (%r); it is left out of the sources", title)
        return None
    location = _object(work.get("primary_location"))
    work_id = _text(work.get("id"))
    score = work.get("relevance_score")
    return Document(
        external_id=external_id,
        title=title,
        abstract=abstract,
        url=_text(location.get("landing_page_url")) or _text(work.get("doi")) or work_id,
        year=_year(work),
        venue=_text(_object(location.get("source")).get("display_name")),
        authors=_authors(work),
        score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
    )


def _title_only(work: Mapping[str, Any]) -> Document | None:
    title = _title(work)
    if not title:
        return None
    work_id = _text(work.get("id"))
    return Document(
        external_id=_external_id(work),
        title=title,
        abstract="",
        url=_text(_object(work.get("primary_location")).get("landing_page_url")) or work_id,
        year=_year(work),
    )


def _keywords(query: str) -> str:
    # Hyphenated terms stay whole ("covid-19", "state-of-the-art"): OpenAlex would otherwise OR their halves.
    words = content_words(query, min_length=2, pattern=r"[\w-]+")
    return " OR ".join(dict.fromkeys(words))


class AnswerCache(Protocol):
    """Where answers are kept between calls: Django's cache API (get, and set with a timeout in seconds)."""

    def get(self, key: str) -> Any: ...

    def set(self, key: str, value: Any, timeout: int) -> Any: ...


class OpenAlexRetrieval:
    """RetrievalBackend over OpenAlex works, configured by `config`, answers kept in `cache`."""

    def __init__(
        self, config: OpenAlexConfig, *, cache: AnswerCache, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.config = config
        self.base_url = config.base_url.rstrip("/")
        self.mailto = config.mailto
        self.api_key = config.api_key
        self.timeout = config.timeout
        self.max_retries = config.max_retries
        self.backoff_s = config.backoff_s
        self.cache_ttl = config.cache_ttl
        self.max_response_bytes = config.max_response_bytes
        self._cache = cache
        self._sleep = sleep

    # -- RetrievalBackend ---------------------------------------------------------------

    def search(self, query: str, *, k: int, filters: Mapping[str, Any] | None = None) -> list[Document]:
        query = fold_whitespace(query)
        if not query:
            raise BackendError("The question is empty.", transient=False)
        if k < 1:
            return []
        filter_param = build_filter(filters)
        key = self._cache_key(query, filter_param, k)
        cache = self._cache
        cached = cache.get(key) if self.cache_ttl > 0 else None
        if cached is not None:
            return [Document(**{**d, "authors": tuple(d["authors"])}) for d in cached]

        documents = self._search_works(query, filter_param, k)
        if not documents:
            # OpenAlex matches most words of a long question; retry as any-of the content words.
            keywords = _keywords(query)
            if keywords and keywords != query.lower():
                documents = self._search_works(keywords, filter_param, k)
        if documents and self.cache_ttl > 0:
            cache.set(key, [asdict(d) for d in documents], self.cache_ttl)
        return documents

    def works(self, ids: Sequence[str]) -> dict[str, Document]:
        """Works by OpenAlex id (short ``W123`` or full URL), keyed by short id; ids OpenAlex does not know
        are absent. Asked ``IDS_PER_REQUEST`` at a time through the list endpoint's ``openalex`` filter,
        each work cached under its id. A work without an abstract keeps its title (abstract empty)."""
        wanted = list(dict.fromkeys(_ids(list(ids), "ids")))
        cache = self._cache
        found: dict[str, Document] = {}
        missing = []
        for work_id in wanted:
            cached = cache.get(self._work_key(work_id)) if self.cache_ttl > 0 else None
            if cached is not None:
                found[work_id] = Document(**{**cached, "authors": tuple(cached["authors"])})
            else:
                missing.append(work_id)
        for start in range(0, len(missing), IDS_PER_REQUEST):
            batch = missing[start : start + IDS_PER_REQUEST]
            params: dict[str, str | int] = {
                "filter": f"openalex:{'|'.join(batch)}",
                "per-page": len(batch),
                "select": ",".join(SELECT_FIELDS),
            }
            if self.mailto:
                params["mailto"] = self.mailto
            if self.api_key:
                params["api_key"] = self.api_key
            results = self._get_json("/works", params).get("results")
            if not isinstance(results, list):
                raise BackendError(
                    f"OpenAlex answered without a results list ({self.base_url}/works).", transient=False
                )
            asked = {w.lower(): w for w in batch}
            for work in results:
                if not isinstance(work, dict):
                    continue
                doc = work_to_document(work) or _title_only(work)
                key = asked.get(doc.external_id.lower()) if doc is not None else None
                if doc is None or key is None:
                    continue
                found[key] = doc
                if self.cache_ttl > 0:
                    cache.set(self._work_key(key), asdict(doc), self.cache_ttl)
        return found

    # -- internals ----------------------------------------------------------------------

    def _work_key(self, work_id: str) -> str:
        blob = json.dumps([self.base_url, work_id.lower()], ensure_ascii=False)
        return "openalex:work:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _cache_key(self, query: str, filter_param: str, k: int) -> str:
        blob = json.dumps([self.base_url, query, filter_param, k], ensure_ascii=False)
        return "openalex:works:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _search_works(self, search: str, filter_param: str, k: int) -> list[Document]:
        # Ask for more than k: some works with an abstract flag still come back without one.
        params: dict[str, str | int] = {
            "search": search,
            "filter": filter_param,
            "per-page": min(200, max(25, 2 * k)),
            "select": ",".join(SELECT_FIELDS),
        }
        if self.mailto:
            params["mailto"] = self.mailto
        if self.api_key:
            params["api_key"] = self.api_key
        payload = self._get_json("/works", params)
        results = payload.get("results")
        if not isinstance(results, list):
            raise BackendError(f"OpenAlex answered without a results list ({self.base_url}/works).", transient=False)
        documents: list[Document] = []
        seen: set[str] = set()
        for work in results:
            if not isinstance(work, dict):
                continue
            doc = work_to_document(work)
            if doc is None:
                continue
            # One paper is one source: OpenAlex sometimes lists it twice, as two works (a preprint and its
            # journal version merged late) with different ids and the same DOI.
            keys = {doc.external_id, _doi_key(work)} - {""}
            if keys & seen:
                continue
            seen |= keys
            documents.append(doc)
            if len(documents) == k:
                break
        return documents

    def _get_json(self, path: str, params: Mapping[str, str | int]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        attempts = max(0, self.max_retries) + 1
        headers = {"User-Agent": f"satisfy-eval (mailto:{self.mailto})" if self.mailto else "satisfy-eval"}
        last_reason = ""
        # The body is read through the cap (kernel/response_cap.py): a reply past it is never held whole; and
        # within the time-out (kernel/reply_deadline.py), which also bounds a reply trickled byte by byte, where
        # no soft time limit would (a threads-pool worker).
        stamp, check = reply_deadline(httpx)
        hooks = {"request": [stamp], "response": [response_cap(httpx, self.max_response_bytes), check]}
        with httpx.Client(timeout=self.timeout, headers=headers, event_hooks=hooks) as client:
            for attempt in range(attempts):
                retry_after: float | None = None
                try:
                    response = client.get(url, params=params)
                except httpx.TimeoutException:
                    last_reason = f"OpenAlex did not answer within {self.timeout:g}s ({url})"
                except httpx.TransportError as exc:
                    last_reason = f"could not reach OpenAlex at {url} ({type(exc).__name__}: {exc})"
                except httpx.DecodingError as exc:
                    # A body its Content-Encoding does not describe (a proxy's mangled gzip): like a malformed
                    # page, asked again it may come back whole.
                    last_reason = f"OpenAlex sent a reply that could not be decoded ({url}: {exc})"
                except ResponseTooLarge as exc:
                    # Asked again, OpenAlex sends the same page: permanent, naming the setting to raise.
                    raise BackendError(
                        f"OpenAlex's reply was {exc.larger_than} ({url}): raise "
                        "OPENALEX_MAX_RESPONSE_BYTES if such replies are expected",
                        transient=False,
                    ) from exc
                else:
                    status = response.status_code
                    if status == 200:
                        try:
                            payload = response.json()
                        except ValueError:
                            last_reason = f"OpenAlex sent malformed JSON ({url})"
                        else:
                            if isinstance(payload, dict):
                                # A scraped title or abstract may carry \u0000 or a lone surrogate, which the
                                # question's stored sources cannot hold (as in the model server's replies).
                                return storable_json(payload) if "\\u" in response.text else payload
                            raise BackendError(f"OpenAlex sent an unexpected answer ({url})", transient=False)
                    elif status == 429 or status >= 500:
                        last_reason = f"OpenAlex answered {status} ({url})"
                        header = response.headers.get("retry-after")
                        if header:
                            try:
                                retry_after = float(header)
                            except ValueError:
                                retry_after = None
                    else:
                        raise BackendError(self._permanent_reason(response, url), transient=False)
                if attempt + 1 < attempts:
                    delay = self._backoff(attempt, retry_after)
                    logger.warning("%s; retry %d/%d in %.2fs", last_reason, attempt + 1, attempts - 1, delay)
                    self._sleep(delay)
        # The last 429's Retry-After goes to the retrieval task, whose next attempt waits for it.
        raise BackendError(
            f"{last_reason} (asked {attempts} times)" if attempts > 1 else last_reason,
            transient=True,
            retry_after=retry_after,
        )

    def _permanent_reason(self, response: httpx.Response, url: str) -> str:
        message = ""
        try:
            body = response.json()
            if isinstance(body, dict):
                message = str(body.get("message") or body.get("error") or "")
        except ValueError:
            message = response.text[:200]
        status = response.status_code
        hint = {
            400: "check the study's OpenAlex filters",
            401: "check OPENALEX_API_KEY",
            403: "check OPENALEX_API_KEY",
            404: "check OPENALEX_BASE_URL",
        }.get(status, "")
        reason = f"OpenAlex answered {status} ({url})"
        if hint:
            reason += f": {hint}"
        if message:
            reason += f" (OpenAlex said: {message[:300]})"
        return reason

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(_BACKOFF_CAP_S, self.backoff_s * (2.0**attempt))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None and 0 <= retry_after <= _BACKOFF_CAP_S:
            delay = max(delay, retry_after)
        return delay
