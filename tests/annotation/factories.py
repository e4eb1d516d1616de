"""factory_boy factories and small helpers for annotation tests."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from annotation.models import Participation, Study
from annotation.services.participation import invitation_accept, invitation_create_bulk, participation_screen
from annotation.services.persona import persona_save
from annotation.services.study import study_create

PERSONA = {
    "role": "practising nurse",
    "domain": "intensive care",
    "expertise": "intermediate",
    "research_area": "patient safety",
    "use_case": "deciding how to organise night shifts on my ward",
}


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user{n}")


class StudyFactory(factory.django.DjangoModelFactory):
    """A study built through the service, so it has the default 2x2 design and prompt."""

    class Meta:
        model = Study

    slug = factory.Sequence(lambda n: f"study-{n}")
    title = factory.Sequence(lambda n: f"Study {n}")

    @classmethod
    def _create(cls, model_class, *args, **kwargs):  # type: ignore[no-untyped-def]
        status = kwargs.pop("status", Study.Status.OPEN)
        return study_create(status=status, **kwargs)


def join(study: Study, *, user=None, persona: dict | None = None) -> Participation:  # type: ignore[no-untyped-def]
    invitation = invitation_create_bulk(study=study, count=1)[0]
    participation = invitation_accept(token=invitation.token, annotator=user, consent=True)
    if persona is not False:
        if study.screening_question:  # it comes before the persona: an accepted answer
            participation_screen(participation=participation, answer=study.screening_accepted[0])
            participation.refresh_from_db(fields=["screening_answer"])
        persona_save(participation=participation, data=persona or PERSONA)
    return participation


# The variable the `openai` system below reads its API key from; unset it to make that system fail.
MISSING_KEY_ENV = "SATISFY_TEST_LLM_KEY"


def study_with_a_failing_system(base_url: str, *, good: str = "good", bad: str = "bad") -> Study:
    """A 2-system study whose second system calls the model server at `base_url` with an API key taken
    from MISSING_KEY_ENV: while that variable is unset it fails, and an operator fixes it outside the
    study (a design is frozen once summaries exist) by setting the variable."""
    return StudyFactory(
        systems=[
            {"label": good, "model_name": "extractive-centroid", "condition": "persona"},
            {
                "label": bad,
                "model_name": "standin-model",
                "condition": "generic",
                "generation_backend": "openai",
                "backend_settings": {"base_url": base_url, "api_key_env": MISSING_KEY_ENV, "use_cache": False},
            },
        ]
    )
