"""Every direct call the fault suite makes into the platform's services, in one place, so that the
split of the services by entity (or any later move) is followed here and nowhere else. Everything else
in tests/faults drives the platform through HTTP, Celery task names and model reads."""

from __future__ import annotations

import re
from typing import Any

from studies.models import PromptTemplate, Study
from studies.services.invitation import invitation_create_bulk
from studies.services.study import prompt_template_default, study_create
from tests.annotation.factories import PERSONA

# Task names that look like a sweeper, besides what the beat schedule runs.
SWEEPER_NAME = re.compile(r"(sweep|stuck|requeue|reap|expire|stale|orphan|lost)", re.IGNORECASE)


def study_open(*, slug: str, systems: list[dict[str, Any]] | None = None, **fields: Any) -> Study:
    """An open study (default: the offline 2x2 design and demo retrieval)."""
    return study_create(slug=slug, title=f"Fault study {slug}", status=Study.Status.OPEN, systems=systems, **fields)


def invitation_token(*, study: Study) -> str:
    return invitation_create_bulk(study=study, count=1)[0].token


def study_break_retrieval_settings(*, study: Study, settings: Any) -> None:
    """What an admin can type into the admin's JSON field: any JSON, not only an object."""
    Study.objects.filter(pk=study.pk).update(retrieval_settings=settings)


def study_use_prompt(*, study: Study, body: str, name: str) -> None:
    default = prompt_template_default()
    template = PromptTemplate.objects.create(name=name, version=1, body=body, persona_block=default.persona_block)
    Study.objects.filter(pk=study.pk).update(prompt_template=template)


def researcher(study: Study) -> Any:
    """A researcher of the study: in the researchers group, a member with the researcher role (docs/permissions.md)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from studies.models import StudyMembership

    user, _ = get_user_model().objects.get_or_create(username="fault-researcher")
    user.groups.add(Group.objects.get_or_create(name="researchers")[0])
    StudyMembership.objects.get_or_create(study=study, user=user, defaults={"role": "researcher"})
    return user


def sweeper_task_names() -> list[str]:
    """The periodic tasks the beat schedule runs, plus any registered task named like a sweeper."""
    from django.conf import settings

    from config.celery import app

    app.loader.import_default_modules()
    names = {entry["task"] for entry in (getattr(settings, "CELERY_BEAT_SCHEDULE", None) or {}).values()}
    names |= {name for name in app.tasks if not name.startswith("celery.") and SWEEPER_NAME.search(name)}
    return sorted(names)


def sweeper_schedule() -> dict[str, float]:
    """Seconds between two runs of each sweeper (inf when the beat schedule does not run it)."""
    from django.conf import settings

    out: dict[str, float] = dict.fromkeys(sweeper_task_names(), float("inf"))
    for entry in (getattr(settings, "CELERY_BEAT_SCHEDULE", None) or {}).values():
        every = getattr(entry["schedule"], "run_every", entry["schedule"])
        seconds = every.total_seconds() if hasattr(every, "total_seconds") else float(every)
        out[entry["task"]] = min(out.get(entry["task"], float("inf")), seconds)
    return out


PERSONA_DATA = dict(PERSONA)
