"""A study's design as data: the study and its systems, prompt templates, invitations, and who works on it
(memberships); the audit log of changes to them is in studies/models_audit.py. The annotator's side (participations,
queries, brackets, judgments) is annotation/models.py. Rules live in studies/services/, not here.

The tables kept the names they had when these models were annotation's (`db_table`): the move changed Django's
state only (studies/migrations/0001_initial.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

# The audit log's model lives in its own module (studies/models_audit.py); imported here so Django loads it.
from studies.models_audit import StudyAuditLog as StudyAuditLog


class PromptTemplate(models.Model):
    """A versioned generation prompt. Placeholders: {query}, {documents}, {persona_block}."""

    name = models.SlugField(max_length=80)
    version = models.PositiveIntegerField(default=1)
    body = models.TextField()
    persona_block = models.TextField(
        help_text="Inserted as {persona_block} in the personalised condition only. Placeholders: "
        "{role}, {domain}, {expertise}, {research_area}, {use_case}."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "annotation_prompttemplate"  # its name from before the move to studies
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="unique_prompt_version")]
        ordering = ["name", "-version"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


def study_languages() -> list[tuple[str, str]]:
    """The languages a study can be run in: settings.LANGUAGES, read when asked (so that adding one needs
    no migration)."""
    return list(settings.LANGUAGES)


class Study(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        OPEN = "open", "Open"
        PAUSED = "paused", "Paused"
        CLOSED = "closed", "Closed"

    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200)
    instructions = models.TextField(blank=True)
    consent_text = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    queries_per_annotator = models.PositiveSmallIntegerField(default=8)
    min_ranked_questions = models.PositiveSmallIntegerField(
        default=1,
        help_text="Questions an annotator must rank to earn the completion code (1 to the questions per annotator).",
    )
    max_query_chars = models.PositiveIntegerField(default=1000)
    retrieval_backend = models.CharField(max_length=40, default="demo")
    retrieval_k = models.PositiveSmallIntegerField(default=10)
    retrieval_settings = models.JSONField(default=dict, blank=True)
    prompt_template = models.ForeignKey(PromptTemplate, on_delete=models.PROTECT, null=True, blank=True)
    constrained_first_round = models.BooleanField(
        default=False,
        help_text="Every first-round match pairs a persona system with a generic one (needs as many of each).",
    )
    # --- crowd recruitment (docs/crowd.md): the open link, its cap and expiry, the recruiting platform ---
    open_link_enabled = models.BooleanField(
        default=False, help_text="Anyone with the study's open link may join (besides single-use invitations)."
    )
    open_link_token = models.CharField(
        max_length=64, blank=True, default="", editable=False, help_text="The open link's secret; set when enabled."
    )
    participant_cap = models.PositiveIntegerField(
        null=True, blank=True, help_text="New participations are refused once this many have joined (empty: no cap)."
    )
    place_timeout_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Minutes after joining after which a participant who has not finished no longer holds one of the "
        "cap's places (the recruiting platform's maximum time allowed; empty: a place is held until the end).",
    )
    open_link_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="The open link refuses new participations after this time (empty: never)."
    )
    external_id_param = models.CharField(
        max_length=40,
        blank=True,
        default="",
        help_text="The URL parameter carrying the recruiting platform's participant id besides PROLIFIC_PID and "
        "external_id (e.g. workerId for MTurk).",
    )
    trust_platform_id = models.BooleanField(
        default=False,
        help_text="Weaker: the recruiting platform's participant id alone takes any browser back to that "
        "participant's unfinished participation (anyone with the open link and the id is that participant). "
        "Off: coming back from another browser needs the participant's resume link (docs/crowd.md).",
    )
    completion_url = models.URLField(
        max_length=500, blank=True, default="", help_text="Where a finished annotator is sent (Prolific's URL)."
    )
    crowd_completion_code = models.CharField(
        max_length=40,
        blank=True,
        default="",
        help_text="The study-level completion code shown to every finished annotator (Prolific's); empty: "
        "each participant gets their own code.",
    )
    screen_out_url = models.URLField(
        max_length=500,
        blank=True,
        default="",
        help_text="Where a screened-out annotator is sent (declined consent, failed the screening question, or stopped "
        "by the check policy): the recruiting platform's return or screen-out link.",
    )
    screening_question = models.TextField(
        blank=True, default="", help_text="Optional question asked after consent, before the persona form."
    )
    screening_choices = models.JSONField(default=list, blank=True, help_text="The answers offered (a JSON list).")
    screening_accepted = models.JSONField(
        default=list, blank=True, help_text="The answers that let the annotator continue (a JSON list)."
    )

    # --- quality control (docs/annotators.md, "Attention checks"; docs/analysis.md, "Exclusion rule") ---
    class CheckPolicy(models.TextChoices):
        WARN = "warn", "Warn: show a gentle notice after a failed check"
        STOP = "stop", "Stop: end the participation after the set number of failed checks"

    check_share = models.FloatField(
        default=0.0,
        help_text="Share of questions (0 to 1) whose comparisons include one attention check: this question's "
        "summary against one written for another question. 0: no checks.",
    )
    check_policy = models.CharField(max_length=4, choices=CheckPolicy.choices, default=CheckPolicy.WARN)
    check_max_failures = models.PositiveSmallIntegerField(
        default=1,
        help_text="Failed checks that end the participation (stop policy) and exclude it from the analysis "
        "(the 'checks' exclusion rule).",
    )
    speed_threshold_seconds = models.FloatField(
        null=True,
        blank=True,
        help_text="Flag a participation whose median time per comparison is under this many seconds. Empty: no flag.",
    )
    language = models.CharField(
        max_length=16,
        choices=study_languages,
        default="en",
        help_text="The language of the annotator pages. The study's title, instructions and consent text are "
        "shown as written, so write them in this language.",
    )
    # --- the annotator's choices (docs/annotators.md, "Ties, comments, identical summaries") ---
    allow_ties = models.BooleanField(
        default=False,
        help_text='Offer "both equally good" besides "neither meets my need"; a tie advances one side by the '
        "bracket's seeded coin (a tie in the final ends the bracket with no single winner).",
    )

    class Comments(models.TextChoices):
        OFF = "off", "No comment box"
        MATCH = "match", "An optional comment on every comparison"
        QUESTION = "question", "An optional comment on each question"

    comments = models.CharField(max_length=8, choices=Comments.choices, default=Comments.OFF)

    class IdenticalPolicy(models.TextChoices):
        NOTICE = "notice", "Show the pair with a notice that the summaries are (nearly) the same"
        TIE = "tie", "Record the pair as a tie without asking"
        REGENERATE = "regenerate", "Generate one of the two again (at most twice), then show with a notice"

    identical_policy = models.CharField(
        max_length=10,
        choices=IdenticalPolicy.choices,
        default=IdenticalPolicy.NOTICE,
        help_text="What to do with two identical or near-identical summaries; exports flag them in every case.",
    )
    practice_round = models.BooleanField(
        default=False,
        help_text="A fixed practice comparison with feedback before the first question (never stored as data).",
    )

    # --- the design (docs/backends.md, "Designs"): which pairs each question asks ---
    class Design(models.TextChoices):
        BRACKET = "bracket", "Bracket: single elimination, the winners of each round meet in the next"
        ADAPTIVE = "adaptive", "Adaptive: each next pair the one that tells most about the ranking so far"

    design = models.CharField(
        max_length=8,
        choices=Design.choices,
        default=Design.BRACKET,
        db_default=Design.BRACKET,
        help_text="How each question's pairs are chosen. Adaptive suits many systems: its analysis headline is "
        "Bradley-Terry strengths, not per-stage win rates (docs/analysis.md).",
    )
    adaptive_matches = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Adaptive design only: comparisons per question (empty: the number of systems minus one, as "
        "many as a bracket plays; at most every pair once).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "annotation_study"  # its name from before the move to studies
        verbose_name_plural = "studies"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(queries_per_annotator__gte=1), name="study_queries_at_least_one"),
            models.CheckConstraint(condition=Q(retrieval_k__gte=1), name="study_k_at_least_one"),
            models.CheckConstraint(
                condition=Q(min_ranked_questions__gte=1, min_ranked_questions__lte=models.F("queries_per_annotator")),
                name="study_min_ranked_within_queries",
            ),
            models.CheckConstraint(condition=Q(check_share__gte=0, check_share__lte=1), name="study_check_share_0_1"),
            models.CheckConstraint(condition=Q(check_max_failures__gte=1), name="study_check_failures_at_least_one"),
            models.CheckConstraint(
                condition=Q(participant_cap__isnull=True) | Q(participant_cap__gte=1), name="study_cap_at_least_one"
            ),
            models.CheckConstraint(
                condition=Q(place_timeout_minutes__isnull=True) | Q(place_timeout_minutes__gte=1),
                name="study_place_timeout_at_least_one",
            ),
            models.UniqueConstraint(
                fields=["open_link_token"], condition=~Q(open_link_token=""), name="unique_open_link_token"
            ),
            models.CheckConstraint(
                condition=Q(adaptive_matches__isnull=True) | Q(adaptive_matches__gte=1),
                name="study_adaptive_matches_at_least_one",
            ),
        ]

    def __str__(self) -> str:
        return self.title


MAX_BRACKET_SIZE = 32
"""The most systems a study may have: one single-elimination bracket's positions, A to Z, then AA to AF
(annotation/positions.py names them)."""


class StudySystem(models.Model):
    """One candidate system of a study's design: a model crossed with a prompt condition."""

    class Condition(models.TextChoices):
        PERSONA = "persona", "With persona profile"
        GENERIC = "generic", "Generic (no persona)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="systems")
    label = models.SlugField(max_length=80, help_text="Internal name, never shown to annotators.")
    model_name = models.CharField(max_length=200)
    generation_backend = models.CharField(max_length=40, default="extractive")
    backend_settings = models.JSONField(default=dict, blank=True)
    condition = models.CharField(max_length=10, choices=Condition.choices)
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        db_table = "annotation_studysystem"  # its name from before the move to studies
        ordering = ["study", "order", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "label"], name="unique_system_label"),
            models.UniqueConstraint(fields=["study", "model_name", "condition"], name="unique_system_design_cell"),
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.model_name}, {self.condition})"


class Invitation(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="invitations")
    token = models.CharField(max_length=64, unique=True)
    max_uses = models.PositiveIntegerField(default=1)
    uses = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "annotation_invitation"  # its name from before the move to studies
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(uses__lte=models.F("max_uses")), name="invitation_uses_le_max")
        ]

    def __str__(self) -> str:
        return f"{self.study.slug}: {self.token[:8]}…"


class StudyMembership(models.Model):
    """Who works on a study and how: the one source of per-study access for the admin, the admin API and the
    research pages (studies/selectors/membership.py reads it; docs/permissions.md has the table)."""

    class Role(models.TextChoices):
        OWNER = "owner", "Owner: edits the study, its systems, status, invitations and members"
        RESEARCHER = "researcher", "Researcher: runs scoring, exports, reports and stress tests; downloads outputs"
        VIEWER = "viewer", "Viewer: sees results and progress only"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "annotation_studymembership"  # its name from before the move to studies
        ordering = ["study", "user"]
        constraints = [
            models.UniqueConstraint(fields=["study", "user"], name="one_membership_per_study_and_user"),
            models.CheckConstraint(
                condition=Q(role__in=["owner", "researcher", "viewer"]), name="membership_role_known"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.study.slug}"
