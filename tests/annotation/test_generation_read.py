"""The background tasks' read of a question (`annotation.selectors.query.query_with_study`: the retrieval's
read and the bracket draw's locked read): the question with its participation, study and template in one
statement, whether its sources are stored, and, locked, the question's row alone. The generation's read of a
candidate is held to its ORM read in tests/annotation/test_queries.py."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from annotation.models import Query
from annotation.selectors.query import query_with_study
from annotation.services.query import query_submit
from studies.models import PromptTemplate
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db


def test_the_background_tasks_question_read(django_capture_on_commit_callbacks, django_assert_num_queries):
    template = PromptTemplate.objects.create(name="bench", version=3, body="{query} {documents}", persona_block="")
    for study in (StudyFactory(slug="read-default"), StudyFactory(slug="read-template", prompt_template=template)):
        participation = join(study)
        with django_capture_on_commit_callbacks(execute=False):
            waiting = query_submit(participation=participation, text="Night shifts and sleep", client_token="")
        with django_capture_on_commit_callbacks(execute=True):
            done = query_submit(participation=join(study), text="Shift work and safety", client_token="")
        assert done.documents.exists() and not waiting.documents.exists()
        for query in (waiting, done):
            with django_assert_num_queries(1):
                ours = query_with_study(query_id=query.pk, retrieval=True)
                assert ours.has_documents is (query is done)
                assert ours.participation.study.pk == study.pk
                template_read = ours.participation.study.prompt_template
                assert (template_read is None) is (study.prompt_template_id is None)
            if study.slug == "read-template":
                assert (template_read.name, template_read.version, template_read.body) == ("bench", 3, template.body)
            assert (ours.text, ours.participation.pk) == (query.text, query.participation_id)
            with transaction.atomic(), django_assert_num_queries(1) as captured:
                locked = query_with_study(query_id=query.pk, lock=True)
                assert locked.participation.study.pk == study.pk
            # The question's row alone is locked: never its participation's or study's.
            table = connection.ops.quote_name(Query._meta.db_table)
            assert captured.captured_queries[0]["sql"].endswith(f"FOR UPDATE OF {table}")
            assert locked.text == query.text
    with pytest.raises(Query.DoesNotExist):
        query_with_study(query_id=10**9)
