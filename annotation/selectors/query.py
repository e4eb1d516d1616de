"""Reads of queries: the annotator's own by number, the one being worked on, and a query's frozen sources."""

from __future__ import annotations

from django.http import Http404

from annotation.models import Participation, Query
from kernel.backends import Document


def query_for(*, participation: Participation, index: int) -> Query:
    query = participation.queries.filter(index=index).first()
    if query is None:
        raise Http404
    return query


def query_current(*, participation: Participation) -> Query | None:
    """The question the annotator is working on, if any."""
    return (
        participation.queries.exclude(status__in=[Query.Status.RANKED, Query.Status.DISCARDED])
        .order_by("-index")
        .first()
    )


def query_documents(*, query: Query) -> list[Document]:
    """The sources retrieved for a query, in rank order, as the backends take them."""
    return [
        Document(
            external_id=d.external_id,
            title=d.title,
            abstract=d.abstract,
            url=d.url,
            year=d.year,
            venue=d.venue,
            authors=tuple(d.authors),
        )
        for d in query.documents.order_by("rank")
    ]
