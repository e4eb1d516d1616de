"""The question page says which fields the study's sources cover."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from corpus.models import CorpusDocument
from generation.offline_retrieval import DEFAULT_CORPUS_PATH
from tests.annotation.factories import PERSONA, StudyFactory

pytestmark = pytest.mark.django_db


def _ask_page(client: Client, slug: str) -> str:
    from studies.services.invitation import invitation_create_bulk

    study = StudyFactory._meta.model.objects.get(slug=slug)
    invitation = invitation_create_bulk(study=study, count=1, max_uses=5)[0]
    assert client.post(reverse("annotation:join", args=[invitation.token]), {"consent": "on"}).status_code == 302
    assert client.post(reverse("annotation:profile", args=[slug]), PERSONA).status_code == 302
    page = client.get(reverse("annotation:ask", args=[slug]))
    assert page.status_code == 200
    return unescape(page.content.decode())


# The demo corpus's ten topics (generation/data/README.md, the seed_demo instructions), by their key words.
DEMO_TOPICS = (
    {"nurses", "night", "shift"},
    {"mrna", "vaccine", "vaccines"},
    {"language", "benchmarks", "judges"},
    {"metrics", "summarisation", "summary"},
    {"crops", "drought", "farmers", "climate"},
    {"reading", "literacy"},
    {"antibiotic", "antimicrobial", "resistance"},
    {"heat", "urban"},
    {"remote", "monitoring"},
    {"robots", "robot", "reinforcement"},
)


def test_demo_study_names_most_demo_topics(client: Client) -> None:
    StudyFactory(slug="demo-cover", retrieval_backend="demo")
    documents = sum(1 for line in DEFAULT_CORPUS_PATH.read_text(encoding="utf-8").splitlines() if line.strip())
    page = _ask_page(client, "demo-cover")
    match = re.search(rf"This study's sources \({documents} abstracts\) are mostly on: ([^<]*)\.</p>", page)
    assert match, page
    topics = match.group(1).split(", ")
    words = {word.lower() for topic in topics for word in topic.split()}
    # Venues are one per paper in the demo corpus, so the line names the topics titles share instead.
    assert sum(bool(words & topic) for topic in DEMO_TOPICS) >= 6, topics
    # As the titles write them (issue 33: "mrna, heat, monitoring" read as a list of index keys): phrases where
    # titles share them, and a word's own spelling.
    assert "mRNA vaccine" in topics, topics
    assert sum(" " in topic for topic in topics) >= 3, topics
    assert "mrna" not in topics


def test_corpus_study_names_fields_most_common_first(client: Client) -> None:
    for i in range(3):
        CorpusDocument.objects.create(external_id=f"onc{i}", title="t", abstract="a", extra={"field": "oncology"})
    for i in range(2):
        CorpusDocument.objects.create(external_id=f"sci{i}", title="t", abstract="a", extra={"dataset": "scitldr"})
    # A label of a single document is counted, not named.
    CorpusDocument.objects.create(external_id="v", title="t", abstract="a", extra={"venue": "ACL"})
    StudyFactory(slug="corpus-cover", retrieval_backend="corpus")
    page = _ask_page(client, "corpus-cover")
    assert (
        "This study's sources (6 abstracts) cover: oncology; machine learning (ICLR papers, SciTLDR); and 1 more."
        in page
    )


def test_an_empty_corpus_shows_no_coverage_line(client: Client) -> None:
    StudyFactory(slug="empty-cover", retrieval_backend="corpus")
    assert "This study's sources" not in _ask_page(client, "empty-cover")
