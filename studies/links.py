"""Absolute links for invitations, open study links and resume links, for admins to copy and for the demo
command to print."""

from django.conf import settings
from django.urls import reverse

from studies.models import Invitation, Study


def invitation_link(invitation: Invitation) -> str:
    return settings.SITE_URL.rstrip("/") + reverse("annotation:join", args=[invitation.token])


def open_link(study: Study) -> str:
    """The study's open link, to paste in Prolific with its ids appended (docs/crowd.md); "" until enabled."""
    if not study.open_link_token:
        return ""
    return settings.SITE_URL.rstrip("/") + reverse("annotation:open-join", args=[study.open_link_token])


PROLIFIC_SUFFIX = "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
"""What Prolific appends to a study URL when "URL parameters" is chosen."""


def resume_link(token: str) -> str:
    return settings.SITE_URL.rstrip("/") + reverse("annotation:resume", args=[token])
