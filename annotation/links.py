"""Absolute links for invitations, for admins to copy and for the demo command to print."""

from django.conf import settings
from django.urls import reverse

from annotation.models import Invitation


def invitation_link(invitation: Invitation) -> str:
    return settings.SITE_URL.rstrip("/") + reverse("annotation:join", args=[invitation.token])
