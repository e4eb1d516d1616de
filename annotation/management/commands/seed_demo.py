"""Create (or reuse) the demo study on the offline defaults and print an invitation link."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from kernel.cli import at_least_one, not_blank
from kernel.exceptions import ApplicationError
from studies.links import invitation_link
from studies.models import Invitation, Study
from studies.models_audit import command_origin
from studies.services.invitation import invitation_create_bulk
from studies.services.study import study_create, study_update

DEMO_SLUG = "demo"
# Neutral on purpose: annotators are not told how the summaries differ (telling them would bias the rankings).
DEMO_INSTRUCTIONS = """This is a demonstration study. The sources are fictional demo abstracts bundled with the platform. \
For each question you ask, four summaries of the sources are written; you see them two at a time and pick the one \
that answers your question better, or "neither" if none does.

Ask about topics such as shift work and sleep in nursing, mRNA vaccines, evaluating language models, \
summarisation metrics, climate adaptation in farming, childhood literacy, antimicrobial resistance, \
urban heat, remote patient monitoring or robot learning."""
CORPUS_INSTRUCTIONS = """This is a demonstration study. The sources are the abstracts imported into this platform's \
local corpus. For each question you ask, four summaries of the sources are written; you see them two at a time and \
pick the one that answers your question better, or "neither" if none does. Ask about the topics those abstracts \
cover (listed on the question page)."""


class Command(BaseCommand):
    help = "Create the demo study (2 models x 2 conditions, offline backends), an invitation and an admin account."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--uses", type=at_least_one, default=100, help="How many annotators the printed link admits."
        )
        parser.add_argument(
            "--admin-password",
            default=None,
            type=not_blank("leave it out to have one generated"),
            help="Set the 'admin' account's password to this (default: generate one once and keep it in the file).",
        )
        parser.add_argument(
            "--admin-password-file",
            type=Path,
            default=Path(settings.BASE_DIR) / "var" / "demo-admin-password",
            help="Where a generated admin password is kept (mode 0600) and read from on every run.",
        )
        parser.add_argument(
            "--retrieval",
            choices=("demo", "corpus"),
            default="demo",
            help="demo: the bundled demo abstracts; corpus: the local corpus filled by import_corpus.",
        )

    # One transaction: a refusal part-way (an invitation the service will not make) leaves no half-made study.
    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        instructions = CORPUS_INSTRUCTIONS if options["retrieval"] == "corpus" else DEMO_INSTRUCTIONS
        study = Study.objects.filter(slug=DEMO_SLUG).first()
        if study is None:
            study = study_create(
                slug=DEMO_SLUG,
                title="Demo: which summary answers your question best?",
                instructions=instructions,
                consent_text="Your answers are stored under a pseudonymous code and used only to demonstrate the platform.",
                status=Study.Status.OPEN,
                retrieval_backend=options["retrieval"],
            )
            self.stdout.write(self.style.SUCCESS(f"Created study '{study.slug}' with {study.systems.count()} systems."))
        if study.retrieval_backend != options["retrieval"]:
            try:
                study = study_update(study=study, retrieval_backend=options["retrieval"], instructions=instructions)
            except ApplicationError as exc:
                raise CommandError(
                    f"Cannot switch the demo study to the {options['retrieval']!r} sources: {exc}"
                ) from exc
            self.stdout.write(f"The demo study now retrieves from the {options['retrieval']!r} sources.")
        elif "given your profile" in study.instructions:
            # Created by an earlier release, whose instructions told annotators about the manipulation.
            study.instructions = instructions
            study.save(update_fields=["instructions"])
        try:
            invitation = (
                Invitation.objects.filter(study=study, note="demo").first()
                or invitation_create_bulk(
                    study=study,
                    count=1,
                    max_uses=options["uses"],
                    note="demo",
                    origin=command_origin("seed_demo"),
                )[0]
            )
        except ApplicationError as exc:
            raise CommandError(f"--uses: {exc.message}") from exc
        sign_in = self._admin(options["admin_password"], options["admin_password_file"])
        site = settings.SITE_URL.rstrip("/")
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS("Invitation link for annotators:"))
        self.stdout.write(f"  {invitation_link(invitation)}")
        self.stdout.write(self.style.SUCCESS("Sign in as the administrator:"))
        self.stdout.write(f"  {site}/admin/  user 'admin'  {sign_in}")

    def _admin(self, given: str | None, password_file: Path) -> str:
        """Make sure the 'admin' account exists; say how to sign in with it (every run)."""
        user_model = get_user_model()
        admin = user_model.objects.filter(username="admin").first()
        stored = password_file.read_text(encoding="utf-8").strip() if password_file.is_file() else None
        password = given
        if password is None and admin is None:
            password = stored or secrets.token_urlsafe(9)
        if password is None and admin is not None:
            if stored and admin.check_password(stored):
                return f"password '{stored}' (kept in {password_file})"
            return (
                "password: the one set earlier (not generated by bin/demo); "
                "to reset it run ADMIN_PASSWORD=... bin/demo or python manage.py changepassword admin"
            )
        assert password is not None
        if admin is None:
            user_model.objects.create_superuser("admin", "admin@example.org", password)
        else:
            admin.set_password(password)
            admin.save(update_fields=["password"])
        if given is not None:
            password_file.unlink(missing_ok=True)  # a stale generated password must not be shown again
            return f"password '{password}' (as given in ADMIN_PASSWORD / --admin-password)"
        password_file.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(password + "\n")
        os.chmod(password_file, 0o600)
        return f"password '{password}' (generated; kept in {password_file})"
