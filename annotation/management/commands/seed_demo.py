"""Create (or reuse) the demo study on the offline defaults and print an invitation link."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from annotation.links import invitation_link
from annotation.models import Invitation, Study
from annotation.services.participation import invitation_create_bulk
from annotation.services.study import study_create

DEMO_SLUG = "demo"
# Neutral on purpose: annotators are not told how the summaries differ (telling them would bias the rankings).
DEMO_INSTRUCTIONS = """This is a demonstration study. The sources are fictional demo abstracts bundled with the platform. \
For each question you ask, four summaries of the sources are written; you see them two at a time and pick the one \
that answers your question better, or "neither" if none does.

Ask about topics such as shift work and sleep in nursing, mRNA vaccines, evaluating language models, \
summarisation metrics, climate adaptation in farming, childhood literacy, antimicrobial resistance, \
urban heat, remote patient monitoring or robot learning."""


class Command(BaseCommand):
    help = "Create the demo study (2 models x 2 conditions, offline backends), an invitation and an admin account."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--uses", type=int, default=100, help="How many annotators the printed link admits.")
        parser.add_argument(
            "--admin-password", default=None, help="Password for the 'admin' account (random if omitted)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=DEMO_SLUG).first()
        if study is None:
            study = study_create(
                slug=DEMO_SLUG,
                title="Demo: which summary answers your question best?",
                instructions=DEMO_INSTRUCTIONS,
                consent_text="Your answers are stored under a pseudonymous code and used only to demonstrate the platform.",
                status=Study.Status.OPEN,
            )
            self.stdout.write(self.style.SUCCESS(f"Created study '{study.slug}' with {study.systems.count()} systems."))
        elif "given your profile" in study.instructions:
            # Created by an earlier release, whose instructions told annotators about the manipulation.
            study.instructions = DEMO_INSTRUCTIONS
            study.save(update_fields=["instructions"])
        invitation = (
            Invitation.objects.filter(study=study, note="demo").first()
            or invitation_create_bulk(study=study, count=1, max_uses=options["uses"], note="demo")[0]
        )
        user_model = get_user_model()
        admin = user_model.objects.filter(username="admin").first()
        password = options["admin_password"]
        if admin is None:
            password = password or secrets.token_urlsafe(9)
            user_model.objects.create_superuser("admin", "admin@example.org", password)
        elif password:
            admin.set_password(password)
            admin.save(update_fields=["password"])
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS("Invitation link for annotators:"))
        self.stdout.write(f"  {invitation_link(invitation)}")
        if password:
            self.stdout.write(self.style.SUCCESS("Admin: ") + f"/admin/  user 'admin'  password '{password}'")
