"""The last summaries of a question finishing at the same moment draw its bracket exactly once: four
generations in threads (real PostgreSQL connections) whose model calls end together, at the stand-in."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from annotation.models import Bracket, Candidate, Match, Query
from annotation.services.generation import candidate_generate
from annotation.services.query import query_submit
from studies.models import Study
from tests.annotation.factories import StudyFactory, join
from tests.support.openai_standin import openai_standin

QUERIES = 20
AT_ONCE = 5  # questions per wave: 20 threads, each with its own database connection
DELAY_S = 0.3  # every call of a wave is answered this long after it arrived, so the four finish together


def _generating_again(queries: list[Query]) -> None:
    """Back to the moment before generation: every candidate queued, no bracket (eager tasks ran it all)."""
    Bracket.objects.filter(query__in=queries).delete()
    Candidate.objects.filter(query__in=queries).update(
        status=Candidate.Status.QUEUED, text="", attempts=0, position="", started_at=None, finished_at=None
    )
    Query.objects.filter(pk__in=[q.pk for q in queries]).update(status=Query.Status.GENERATING)


@pytest.mark.timeout(180)
def test_candidates_finishing_at_once_draw_one_bracket(transactional_db: None) -> None:
    with openai_standin(delay=DELAY_S) as standin:
        backend = {"base_url": standin.base_url, "max_retries": 0, "timeout": 10, "use_cache": False}
        study = StudyFactory(
            systems=[
                {
                    "label": f"{model}-{condition}",
                    "model_name": model,
                    "condition": condition,
                    "generation_backend": "openai",
                    "backend_settings": backend,
                }
                for model in ("model-one", "model-two")
                for condition in ("persona", "generic")
            ],
        )
        queries = [
            query_submit(participation=join(study), text=f"Night shifts and sleep {n}", client_token="")
            for n in range(QUERIES)
        ]
        _generating_again(queries)
        calls_before = standin.completions

        errors: list[BaseException] = []

        def generate(candidate_id: int, barrier: threading.Barrier) -> None:
            try:
                barrier.wait()
                candidate_generate(candidate_id=candidate_id)
            except BaseException as error:  # noqa: BLE001 - reported by the main thread
                errors.append(error)
            finally:
                connection.close()

        for start in range(0, QUERIES, AT_ONCE):
            ids = list(
                Candidate.objects.filter(query__in=queries[start : start + AT_ONCE]).values_list("pk", flat=True)
            )
            barrier = threading.Barrier(len(ids))
            threads = [threading.Thread(target=generate, args=(pk, barrier)) for pk in ids]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
        assert not errors, errors

    assert standin.completions - calls_before == 4 * QUERIES
    assert Candidate.objects.filter(query__in=queries, status=Candidate.Status.DONE, attempts=1).count() == 4 * QUERIES
    # Every question ready, with one bracket and its two first-round matches: none left for the sweeper.
    assert Query.objects.filter(pk__in=[q.pk for q in queries], status=Query.Status.READY).count() == QUERIES
    assert Bracket.objects.filter(query__in=queries).count() == QUERIES
    assert Match.objects.filter(bracket__query__in=queries, round=1, check_expected="").count() == 2 * QUERIES
    assert study.identical_policy != Study.IdenticalPolicy.REGENERATE


@pytest.mark.timeout(120)
def test_settings_raised_while_a_summary_is_generated_are_not_the_ones_it_records(transactional_db: None) -> None:
    # An owner raises max_tokens (an operational setting, allowed on a running study) while a summary's model
    # call is in flight: that summary was asked with the old value, and must say so, not the new one; the
    # next generation asks with the new one.
    from studies.services.study import study_update, system_spec
    from tests.annotation.factories import served_study

    in_call, raised = threading.Event(), threading.Event()
    hold = threading.Event()

    def responder(body: dict) -> str:  # type: ignore[type-arg]
        if hold.is_set():
            in_call.set()
            assert raised.wait(30), "the settings were never raised"
        return "A summary of the abstracts [1]."

    with openai_standin(responder) as standin:
        study = served_study({"base_url": standin.base_url, "use_cache": False, "max_retries": 0, "max_tokens": 50})
        query = query_submit(participation=join(study), text="Night shifts and sleep", client_token="")
        _generating_again([query])
        served = Candidate.objects.get(query=query, system__label="served")
        errors: list[BaseException] = []

        def generate() -> None:
            try:
                candidate_generate(candidate_id=served.pk)
            except BaseException as error:  # noqa: BLE001 - reported by the main thread
                errors.append(error)
            finally:
                connection.close()

        hold.set()
        thread = threading.Thread(target=generate)
        thread.start()
        assert in_call.wait(30), "the generation never called the model"
        specs = [system_spec(s) for s in study.systems.all()]
        study_update(
            study=study,
            systems=[
                {**s, "backend_settings": {**s["backend_settings"], "max_tokens": 400}} if s["label"] == "served" else s
                for s in specs
            ],
        )
        raised.set()
        thread.join(timeout=60)
        assert not errors, errors
        served.refresh_from_db()
        assert standin.requests[-1]["max_tokens"] == 50
        assert served.status == Candidate.Status.DONE and served.generation_settings["max_tokens"] == 50
        hold.clear()
        _generating_again([query])
        candidate_generate(candidate_id=served.pk)
        assert standin.requests[-1]["max_tokens"] == 400

    served.refresh_from_db()
    assert served.status == Candidate.Status.DONE and served.generation_settings["max_tokens"] == 400
