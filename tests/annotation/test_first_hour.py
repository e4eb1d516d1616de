"""What a newcomer meets first: the demo study's instructions, a question the corpus does not cover, the
home page's way to the research pages, and admin record pages that cannot be edited."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotation.admin import format_latency
from annotation.models import Candidate, Match, Query
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from studies.models import Study
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db

NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 8: "eight"}
# Nothing in the demo corpus shares a word, or a long enough word beginning, with this.
UNCOVERED = "Which glorptastic wibblers frobnicate quuxes?"


def test_the_demo_study_instructions_reveal_no_manipulation_and_count_the_summaries(capsys):
    call_command("seed_demo", "--admin-password", "pw")
    study = Study.objects.get(slug="demo")
    text = study.instructions.lower()
    for word in ("profile", "persona", "personalis", "personaliz", "tailored", "one not"):
        assert word not in text, f"the instructions tell annotators about the manipulation ({word!r})"
    per_question = study.systems.count()  # one summary per system is written for every question
    assert f"{NUMBER_WORDS[per_question]} summaries" in text


def test_seed_demo_replaces_the_old_instructions_of_an_existing_demo_study(capsys):
    call_command("seed_demo", "--admin-password", "pw")
    Study.objects.filter(slug="demo").update(instructions="... one of them given your profile and one not.")
    call_command("seed_demo")
    assert "profile" not in Study.objects.get(slug="demo").instructions


def _annotator_client(participation) -> Client:
    client = Client()
    client.force_login(participation.annotator)
    return client


def test_an_uncovered_question_is_flagged_and_the_annotator_told_before_ranking(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="uncovered")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text=UNCOVERED, client_token="")
    query.refresh_from_db()
    assert query.status == Query.Status.READY
    assert "no sources closely matching" in query.retrieval_note
    client = _annotator_client(participation)
    page = client.get(reverse("annotation:compare", args=[study.slug, query.index])).content.decode()
    assert "We found no sources closely matching your question" in page
    assert "Set this question aside" in page
    # Setting it aside works from there, and the question does not count.
    response = client.post(reverse("annotation:discard", args=[study.slug, query.index]))
    assert response.status_code == 302
    query.refresh_from_db()
    assert query.status == Query.Status.DISCARDED and query.set_aside_reason == "no_sources"


def test_a_covered_question_carries_no_warning_and_later_matches_repeat_none(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="covered")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        covered = query_submit(participation=participation, text="night shift work and nurses' sleep", client_token="")
    covered.refresh_from_db()
    assert covered.retrieval_note == ""
    client = _annotator_client(participation)
    page = client.get(reverse("annotation:compare", args=[study.slug, covered.index])).content.decode()
    assert "no sources closely matching" not in page


def test_the_warning_is_on_the_first_comparison_only(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="once")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text=UNCOVERED, client_token="")
    judgment_record(match=match_current(query=query), choice="left", by=participation)
    page = _annotator_client(participation).get(reverse("annotation:compare", args=[study.slug, query.index]))
    assert "Comparison 2 of" in page.content.decode()
    assert "no sources closely matching" not in page.content.decode()
    # Once answered, it is a question like any other: setting it aside is refused as before.
    refused = _annotator_client(participation).post(reverse("annotation:discard", args=[study.slug, query.index]))
    assert refused.status_code == 409


# The issue's own example: the demo corpus has no abstract on sepsis, but BM25 still finds "early" and
# "treatment" in some, so the fallback (every score 0) never applies.
SEPSIS = "What is the best early treatment for sepsis in the emergency department?"


def test_a_question_on_a_topic_the_demo_corpus_lacks_is_flagged(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="sepsis")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text=SEPSIS, client_token="")
    query.refresh_from_db()
    assert query.status == Query.Status.READY and query.documents.exists()
    assert "no sources closely matching" in query.retrieval_note


def test_a_local_corpus_flags_a_question_it_does_not_cover_and_not_one_it_does(
    django_capture_on_commit_callbacks, tmp_path
):
    """Machine-learning abstracts (SciTLDR's format) that share "early" and "treatment" with the sepsis question."""
    rows = [
        ("p1", "Treatment effects", ["We estimate heterogeneous treatment effects with neural networks.",
                                     "Early stopping on a held-out split keeps the estimates calibrated."]),
        ("p2", "Early stopping", ["Early stopping regularises gradient descent.", "We bound its generalisation error."]),
        ("p3", "Graph networks", ["Graph neural networks generalise to larger graphs.", "We prove it for trees."]),
    ]  # fmt: skip
    path = tmp_path / "SciTLDR-A_dev.jsonl"
    path.write_text(
        "".join(
            json.dumps({"paper_id": i, "title": t, "source": src, "target": [src[0]]}) + "\n" for i, t, src in rows
        ),
        encoding="utf-8",
    )
    call_command("import_corpus", str(path), "--no-progress", stdout=StringIO(), stderr=StringIO())
    study = StudyFactory(slug="ml-corpus", retrieval_backend="corpus")
    with django_capture_on_commit_callbacks(execute=True):
        off = query_submit(participation=join(study), text=SEPSIS, client_token="")
        on = query_submit(
            participation=join(study), text="Does early stopping bias treatment effect estimates?", client_token=""
        )
    off.refresh_from_db()
    on.refresh_from_db()
    assert off.documents.exists() and "no sources closely matching" in off.retrieval_note
    assert on.documents.exists() and on.retrieval_note == ""


def test_the_home_page_sends_researchers_to_the_research_pages():
    page = Client().get(reverse("annotation:home")).content.decode()
    assert 'href="/research/"' in page
    assert 'href="/accounts/login/"' in page


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0.012041856999985612, "12 ms"), (0.4, "400 ms"), (3.44, "3.4 s"), (125, "2 min 5 s")]
)
def test_latency_reads_as_people_write_it(seconds, shown):
    assert format_latency(seconds) == shown


def test_read_only_records_show_no_save_or_delete(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="records")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text="night shift work and sleep", client_token="")
    Candidate.objects.filter(query=query).update(latency_s=0.012041856999985612)
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    candidate = Candidate.objects.filter(query=query).first()
    match = Match.objects.filter(bracket__query=query).first()
    for url in (
        reverse("admin:annotation_candidate_change", args=[candidate.pk]),
        reverse("admin:annotation_match_change", args=[match.pk]),
        reverse("admin:annotation_query_change", args=[query.pk]),
    ):
        html = client.get(url).content.decode()
        assert 'name="_save"' not in html, url
        assert "deletelink" not in html, url
    candidate_page = client.get(reverse("admin:annotation_candidate_change", args=[candidate.pk])).content.decode()
    assert "12 ms" in candidate_page and "0.0120418" not in candidate_page
    changelist = client.get(reverse("admin:annotation_candidate_changelist")).content.decode()
    assert "12 ms" in changelist and "0.0120418" not in changelist
    # The list action that needs the change permission (retry failed generations) is still offered.
    assert 'value="retry"' in changelist


# Issue 33: a long question on the demo corpus's own topic (summarisation metrics) was told its sources did not
# match it, because most of a long question is framing that no abstract holds.
LONG_ON_TOPIC = (
    "I evaluate automatic summarisation systems and I am trying to decide which automatic metrics to report"
    " alongside a human evaluation. ROUGE is still the default in most papers, but I keep reading that it"
    " correlates poorly with human judgements of summary quality, especially for abstractive summaries written by"
    " large language models. Newer metrics such as BERTScore, question-answering based factual consistency checks"
    " and LLM judges claim better agreement with annotators, yet the studies use different datasets, different"
    " annotation protocols and different correlation statistics, so the numbers are hard to compare. Which"
    " automatic metrics agree best with human judgements of relevance, consistency, fluency and coherence, how"
    " reliable are those human judgements themselves, and how many annotators or summaries does one need before"
    " the differences between systems are meaningful? And can reference-free metrics replace reference summaries entirely?"
)
LONG_OFF_TOPIC = (
    "I am writing the background section of a project proposal and my reviewers asked me to ground every claim in"
    " recent work. My own reading so far has been patchy, and I am worried that I have missed important results "
    "or that I am relying on a few studies that later work did not confirm. My question is this: What were the "
    "causes of the French revolution? I would also like to know what the main limitations of these studies are, "
    "whether the results hold in different settings, and what questions remain open, so that we do not overstate "
    "the conclusions. If possible, please point out where the findings conflict, which methods were used to "
    "measure the outcomes, and whether more recent work has changed the picture compared with the earlier "
    "studies."
)


def test_a_long_question_on_the_corpus_topic_carries_no_warning(django_capture_on_commit_callbacks):
    assert 950 < len(LONG_ON_TOPIC) <= 1_000  # the longest question the form takes
    study = StudyFactory(slug="long-on-topic")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text=LONG_ON_TOPIC, client_token="")
    query.refresh_from_db()
    assert query.status == Query.Status.READY
    assert query.retrieval_note == ""
    page = _annotator_client(participation).get(reverse("annotation:compare", args=[study.slug, query.index]))
    assert "no sources closely matching" not in page.content.decode()


def test_a_long_question_off_the_corpus_topics_is_still_flagged(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="long-off-topic")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text=LONG_OFF_TOPIC, client_token="")
    query.refresh_from_db()
    assert query.status == Query.Status.READY and query.documents.exists()
    page = _annotator_client(participation).get(reverse("annotation:compare", args=[study.slug, query.index]))
    assert "We found no sources closely matching your question" in page.content.decode()
