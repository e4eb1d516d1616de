"""The generation's read of a candidate is one hand-written statement (annotation/services/generation.py,
`_candidate_for_generation`): it must load exactly what the ORM's select_related read loads, for every
kind of system, with and without a study prompt template, and in the same number of statements."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Candidate, Query
from annotation.services.generation import _candidate_for_generation
from annotation.services.query import query_retrieve, query_submit
from studies.models import Study
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db

# What a generation reads of each object, through the relations it follows.
USED = {
    "": ("pk", "status", "attempts", "query_id", "system_id"),
    "system": ("pk", "condition", "model_name", "generation_backend", "backend_settings"),
    "query": ("pk", "text", "participation_id", "persona_id"),
    "query.persona": ("pk", "role", "domain", "expertise", "research_area", "use_case"),
    "query.participation": ("pk", "study_id"),
    "query.participation.study": ("pk", "prompt_template_id"),
    "query.participation.study.prompt_template": ("pk", "name", "version", "body", "persona_block"),
}


def the_orm_read(candidate_id: int) -> Candidate:
    return Candidate.objects.select_related(
        "system", "query__persona", "query__participation__study__prompt_template"
    ).get(pk=candidate_id)


def loaded(candidate: Candidate) -> dict[str, Any]:
    """Every used value, reached without a statement (a deferred or uncached one would run one)."""
    out: dict[str, Any] = {}
    with CaptureQueriesContext(connection) as ctx:
        for path, names in USED.items():
            obj: Any = candidate
            for step in filter(None, path.split(".")):
                obj = getattr(obj, step)
            out[path] = None if obj is None else {name: getattr(obj, name) for name in names}
    assert not ctx.captured_queries, [q["sql"] for q in ctx.captured_queries]
    return out


@pytest.mark.parametrize("template", ["the study's", "none"])
def test_the_written_read_loads_what_the_orm_loads(template: str) -> None:
    study = StudyFactory(slug=f"read-{template[:4]}")
    if template == "none":
        Study.objects.filter(pk=study.pk).update(prompt_template=None)
    # Settings a JSON column must give back as they were saved, nested.
    study.systems.filter(order=0).update(backend_settings={"temperature": 0.3, "stop": ["\n\n"], "extra": {"a": 1}})
    query = query_submit(participation=join(study), text="What does sleep debt do to memory?", client_token="")
    query_retrieve(query_id=query.pk)  # creates the candidates (the tasks it sends wait for a commit)
    candidate_ids = list(Candidate.objects.filter(query=query).values_list("pk", flat=True))
    assert len(candidate_ids) == 4  # two persona and two generic systems

    for candidate_id in candidate_ids:
        with CaptureQueriesContext(connection) as ctx:
            written = _candidate_for_generation(candidate_id)
        assert len(ctx.captured_queries) == 1
        assert written is not None
        assert loaded(written) == loaded(the_orm_read(candidate_id))
    if template == "none":
        assert loaded(written)["query.participation.study.prompt_template"] is None
    assert {"temperature": 0.3, "stop": ["\n\n"], "extra": {"a": 1}} in [
        loaded(_candidate_for_generation(pk))["system"]["backend_settings"] for pk in candidate_ids
    ]


def test_a_missing_candidate_reads_as_none() -> None:
    assert _candidate_for_generation(2**62) is None


def test_the_background_tasks_question_read_is_the_orms(django_capture_on_commit_callbacks, django_assert_num_queries):
    """`query_with_study` (the retrieval's read and the bracket draw's locked read) loads what
    select_related("participation__study[__prompt_template]") loaded, with the sources' existence."""
    from django.db import transaction
    from django.db.models import Exists, OuterRef

    from annotation.models import RetrievedDocument
    from annotation.selectors.query import query_with_study
    from studies.models import PromptTemplate

    def columns(instance: Any) -> dict[str, Any]:
        return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}

    template = PromptTemplate.objects.create(name="bench", version=3, body="{query} {documents}", persona_block="")
    for study in (StudyFactory(slug="read-default"), StudyFactory(slug="read-template", prompt_template=template)):
        participation = join(study)
        with django_capture_on_commit_callbacks(execute=False):
            waiting = query_submit(participation=participation, text="Night shifts and sleep", client_token="")
        with django_capture_on_commit_callbacks(execute=True):
            done = query_submit(participation=join(study), text="Shift work and safety", client_token="")
        assert done.documents.exists() and not waiting.documents.exists()
        for query in (waiting, done):
            orm = (
                Query.objects.select_related("participation__study__prompt_template")
                .annotate(has_documents=Exists(RetrievedDocument.objects.filter(query_id=OuterRef("pk"))))
                .get(pk=query.pk)
            )
            with django_assert_num_queries(1):
                ours = query_with_study(query_id=query.pk, retrieval=True)
                assert ours.has_documents is orm.has_documents
                assert (ours.participation.study.prompt_template is None) is (study.prompt_template_id is None)
            assert columns(ours) == columns(orm)
            assert columns(ours.participation) == columns(orm.participation)
            assert columns(ours.participation.study) == columns(orm.participation.study)
            if orm.participation.study.prompt_template is not None:
                assert columns(ours.participation.study.prompt_template) == columns(
                    orm.participation.study.prompt_template
                )
            with transaction.atomic(), django_assert_num_queries(1) as captured:
                locked = query_with_study(query_id=query.pk, lock=True)
                assert locked.participation.study.pk == study.pk
            assert captured.captured_queries[0]["sql"].endswith("FOR UPDATE OF q")
            assert columns(locked) == columns(orm)
    with pytest.raises(Query.DoesNotExist):
        query_with_study(query_id=10**9)
