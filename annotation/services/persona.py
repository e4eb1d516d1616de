"""The annotator's persona: who they say they are, versioned, and frozen once they ask a question."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from annotation.models import Participation, PersonaProfile
from annotation.selectors.participation import participation_locked
from annotation.services.participation import participation_require_active, participation_require_screened
from kernel.exceptions import ApplicationError

PERSONA_FIELDS = ("role", "domain", "expertise", "research_area", "use_case")
FIXED = gettext_lazy("Your profile is fixed once you have asked your first question.")


def persona_current(*, participation: Participation) -> PersonaProfile | None:
    return participation.personas.order_by("-version").first()


@transaction.atomic
def persona_save(
    *, participation: Participation, data: dict[str, str], shown_at: datetime | None = None
) -> PersonaProfile:
    """Store a new persona version; allowed until the first query is asked. `shown_at` is when the form
    was first shown, for the time spent on it. Refused while the study is paused or closed, once the
    participation has ended, and while the study's screening question is still to be answered (409: it comes
    first), on the page and through the API alike."""
    locked = participation_locked(participation_id=participation.pk)
    participation_require_active(participation=locked)
    participation_require_screened(participation=locked)
    if participation.queries.exists():
        raise ApplicationError(str(FIXED), status=409)
    cleaned = {name: (data.get(name) or "").strip() for name in PERSONA_FIELDS}
    for name in ("role", "domain", "expertise", "use_case"):
        if not cleaned[name]:
            raise ApplicationError(_("This field is required."), field=name)
    if cleaned["expertise"] not in PersonaProfile.Expertise.values:
        raise ApplicationError(_("Choose one of the listed levels of expertise."), field="expertise")
    current = persona_current(participation=participation)
    if current is not None and current.as_dict() == cleaned:
        return current
    return PersonaProfile.objects.create(
        participation=participation,
        version=(current.version + 1) if current else 1,
        form_shown_at=shown_at if shown_at is not None and shown_at <= timezone.now() else None,
        **cleaned,
    )
