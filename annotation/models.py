"""The annotator's side of the protocol as data: participations with versioned persona profiles, queries with
frozen retrieved documents, candidate summaries, brackets, matches and judgments. The study's design (studies,
systems, invitations, members, prompt templates) is in studies/models.py. Rules live in annotation/services/."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

# Pre-written outputs' models live in their own module (annotation/models_prewritten.py); imported here so Django
# loads them.
from annotation.models_prewritten import PrewrittenAssignment as PrewrittenAssignment
from annotation.models_prewritten import PrewrittenItem as PrewrittenItem
from annotation.models_prewritten import PrewrittenOutput as PrewrittenOutput
from studies.models import Invitation, PromptTemplate, Study, StudySystem


class Participation(models.Model):
    class Source(models.TextChoices):
        INVITATION = "invitation", "Invitation"
        OPEN_LINK = "open_link", "Open study link"
        PREVIEW = "preview", "Preview by a study member (never analysed)"

    class ScreenOut(models.TextChoices):
        DECLINED_CONSENT = "declined_consent", "Declined consent"
        SCREENING = "screening", "Failed the screening question"
        CHECKS = "checks", "Failed the attention checks"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participations")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="participations")
    invitation = models.ForeignKey(Invitation, on_delete=models.SET_NULL, null=True, blank=True)
    code = models.CharField(max_length=16, unique=True, help_text="Pseudonymous annotator code used in exports.")
    # Empty only for an annotator who declined consent on an open link (screened out, never annotated).
    consented_at = models.DateTimeField(null=True, blank=True)
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.INVITATION)
    # The recruiting platform's ids, as they arrived in the URL. Raw here (the researcher pays by them);
    # exports carry only a keyed hash of `external_id` (analysis.selectors.external_pseudonym).
    external_id = models.CharField(max_length=200, blank=True, default="")
    external_study_id = models.CharField(max_length=200, blank=True, default="")
    external_session_id = models.CharField(max_length=200, blank=True, default="")
    # The personal resume link's secret (annotation:resume): restores the participation in another browser.
    resume_token = models.CharField(max_length=64, blank=True, default="", editable=False)
    screening_answer = models.CharField(max_length=200, blank=True, default="")
    # Screened out: declined consent, failed the screening question, or ended by the study's check policy (stop
    # after N failed checks; `stopped_at` is set too).
    screened_out_at = models.DateTimeField(null=True, blank=True)
    screen_out_reason = models.CharField(max_length=20, choices=ScreenOut.choices, blank=True, default="")
    completed_at = models.DateTimeField(null=True, blank=True)
    completion_code = models.CharField(max_length=16, blank=True)
    # Ended early with fewer ranked questions than the study asks: no completion code; the researcher
    # compensates by hand, looking the participation up by its `code`. `completed_at` stays empty.
    stopped_at = models.DateTimeField(null=True, blank=True)
    # A researcher's manual exclusion from the analysis (annotation.services.quality); undone by clearing it.
    excluded_at = models.DateTimeField(null=True, blank=True)
    exclusion_reason = models.TextField(blank=True, default="")
    excluded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["study", "annotator"], name="one_participation_per_study"),
            models.CheckConstraint(
                condition=Q(excluded_at__isnull=True) | ~Q(exclusion_reason=""), name="exclusion_has_reason"
            ),
            # The same PROLIFIC_PID arriving twice finds its participation, never a second one (and continues it
            # only from the browser that started it: annotation.services.participation.open_link_require_own).
            models.UniqueConstraint(
                fields=["study", "external_id"], condition=~Q(external_id=""), name="one_participation_per_external_id"
            ),
            models.UniqueConstraint(fields=["resume_token"], condition=~Q(resume_token=""), name="unique_resume_token"),
        ]

    def __str__(self) -> str:
        return f"{self.code} in {self.study.slug}"


class PersonaProfile(models.Model):
    """A version of the annotator's self-description; a new version on every edit."""

    class Expertise(models.TextChoices):
        NOVICE = "novice", _("Novice: new to this area")
        INTERMEDIATE = "intermediate", _("Intermediate: some background")
        EXPERT = "expert", _("Expert: I work in this area")

    participation = models.ForeignKey(Participation, on_delete=models.CASCADE, related_name="personas")
    version = models.PositiveIntegerField()
    role = models.CharField(max_length=120)
    domain = models.CharField(max_length=120)
    expertise = models.CharField(max_length=20, choices=Expertise.choices)
    research_area = models.CharField(max_length=200, blank=True)
    use_case = models.TextField(max_length=1000)
    created_at = models.DateTimeField(auto_now_add=True)
    # Time on the persona page: from when the form was first shown to `created_at`, when it was sent.
    form_shown_at = models.DateTimeField(null=True, blank=True, help_text="When the persona form was first shown.")

    class Meta:
        ordering = ["participation", "-version"]
        constraints = [models.UniqueConstraint(fields=["participation", "version"], name="unique_persona_version")]

    def __str__(self) -> str:
        return f"{self.participation.code} persona v{self.version}"

    def as_dict(self) -> dict[str, str]:
        return {
            "role": self.role,
            "domain": self.domain,
            "expertise": self.expertise,
            "research_area": self.research_area,
            "use_case": self.use_case,
        }


class Query(models.Model):
    class Status(models.TextChoices):
        RETRIEVING = "retrieving", "Retrieving sources"
        GENERATING = "generating", "Generating summaries"
        READY = "ready", "Ready to rank"
        FAILED = "failed", "Failed"
        RANKED = "ranked", "Ranked"
        DISCARDED = "discarded", "Discarded"

    participation = models.ForeignKey(Participation, on_delete=models.CASCADE, related_name="queries")
    index = models.PositiveSmallIntegerField(help_text="1-based position among the annotator's queries.")
    text = models.TextField()
    client_token = models.CharField(max_length=64, help_text="Deduplicates a resubmitted form.")
    persona = models.ForeignKey(PersonaProfile, on_delete=models.PROTECT, related_name="queries")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RETRIEVING)
    failure_reason = models.TextField(blank=True)
    retrieval_backend = models.CharField(max_length=40)
    retrieval_note = models.TextField(
        blank=True, default="", help_text="Why the sources may not answer the question (nothing in the corpus matched)."
    )
    feedback = models.TextField(
        blank=True,
        default="",
        help_text="The annotator's comment on the question (studies with comments per question; legacy imports).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # --- the annotator's way through the question (time on page, setting aside) ---
    shown_at = models.DateTimeField(
        null=True, blank=True, help_text="When the question form was first shown; `created_at` is when it was sent."
    )
    wait_shown_at = models.DateTimeField(
        null=True, blank=True, help_text="When the waiting page was first shown; it ends when the first match is shown."
    )
    queue_failed_at = models.DateTimeField(
        null=True, blank=True, help_text="When sending the retrieval to the background queue failed (broker down)."
    )
    set_aside_at = models.DateTimeField(null=True, blank=True)
    set_aside_reason = models.CharField(
        max_length=12,
        choices=[
            ("failed", "Generation failed"),
            ("too_slow", "Taking too long"),
            ("no_sources", "No matching sources"),
            ("stopped", "Study stopped"),
        ],
        blank=True,
        help_text="Why a discarded question was set aside: it never counts toward the limit.",
    )
    # Background work (the sweeper in annotation/services/query.py): when a retry asked for retrieval
    # again (else created_at), and when the sweeper last sent a retrieval whose message was lost.
    retrieval_queued_at = models.DateTimeField(null=True, blank=True)
    retrieval_requeued_at = models.DateTimeField(null=True, blank=True)
    # The retrieval's lease, as on candidates: renewed by a heartbeat while the search runs and pushed past
    # the backoff while a retry waits, so a retrieval whose worker died is sent again within seconds.
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["participation", "index"]
        verbose_name_plural = "queries"
        constraints = [
            models.UniqueConstraint(fields=["participation", "index"], name="unique_query_index"),
            models.UniqueConstraint(fields=["participation", "client_token"], name="unique_query_client_token"),
        ]

    def __str__(self) -> str:
        return f"{self.participation.code} #{self.index}: {self.text[:60]}"


class RetrievedDocument(models.Model):
    """A source frozen with its query so that every candidate shares one context."""

    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="documents")
    rank = models.PositiveSmallIntegerField()
    external_id = models.CharField(max_length=200)
    title = models.TextField()
    abstract = models.TextField()
    url = models.URLField(max_length=500, blank=True)
    year = models.PositiveSmallIntegerField(null=True, blank=True)
    venue = models.CharField(max_length=300, blank=True)
    authors = models.JSONField(default=list, blank=True)
    score = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["query", "rank"]
        constraints = [models.UniqueConstraint(fields=["query", "rank"], name="unique_document_rank")]

    def __str__(self) -> str:
        return f"[{self.rank}] {self.title[:80]}"


class Candidate(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="candidates")
    system = models.ForeignKey(StudySystem, on_delete=models.PROTECT, related_name="candidates")
    position = models.CharField(max_length=2, blank=True, help_text="Bracket position (A, B, …) once ranked.")
    prompt = models.TextField(blank=True)
    text = models.TextField(blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    failure_reason = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    raw_response = models.JSONField(default=dict, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    latency_s = models.FloatField(null=True, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    citation_flags = models.JSONField(default=dict, blank=True)
    # What produced this candidate, copied from its system and study when it was created, so that exports
    # and analysis keep saying so whatever happens to the design later. Empty only for rows created
    # elsewhere (legacy imports), which readers then take from the system.
    system_label = models.CharField(max_length=80, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    condition = models.CharField(max_length=10, choices=StudySystem.Condition.choices, blank=True)
    generation_backend = models.CharField(max_length=40, blank=True)
    generation_settings = models.JSONField(default=dict, blank=True)
    prompt_template = models.ForeignKey(
        PromptTemplate, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    prompt_template_version = models.PositiveIntegerField(null=True, blank=True)
    # Background work: a running candidate belongs to its worker until the lease expires; a heartbeat
    # renews it while the model is called, so a dead worker's candidate is claimable within seconds.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Generated again because it was (nearly) identical to another candidate of its query (the study's
    # `identical_policy` "regenerate", bounded by annotation.services.similarity.MAX_REGENERATIONS).
    regenerations = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["query", "system__order"]
        constraints = [
            models.UniqueConstraint(fields=["query", "system"], name="unique_candidate_per_system"),
            models.UniqueConstraint(
                fields=["query", "position"], condition=~Q(position=""), name="unique_candidate_position"
            ),
            models.CheckConstraint(condition=~Q(status="done") | ~Q(text=""), name="done_candidate_has_text"),
        ]

    def __str__(self) -> str:
        return f"candidate {self.pk} ({self.status})"


class Bracket(models.Model):
    """A question's tournament: a single-elimination bracket, or under the study's adaptive design a schedule
    whose every next pair is chosen from the study's judgments so far (annotation.services.tournament)."""

    query = models.OneToOneField(Query, on_delete=models.CASCADE, related_name="bracket")
    seed = models.BigIntegerField(help_text="Seeds the position and left/right assignment.")
    size = models.PositiveSmallIntegerField(default=4, help_text="Number of candidates in the bracket.")
    # Identical or near-identical pairs among the candidates, measured when the bracket is drawn:
    # {"<id>:<id>": [kind, similarity]} (annotation.services.tournament.pair_likeness).
    pair_likeness = models.JSONField(default=dict, blank=True)
    # A bracket of a size that is not a power of two fills its first round's empty slots with byes, placed at
    # random from the seed when it is drawn: [[first-round match index, candidate id], ...], the candidate that
    # goes through to round 2 without playing that match (annotation.services.tournament.bracket_create).
    byes = models.JSONField(
        default=list, blank=True, help_text="First-round byes: [match index, candidate id] pairs, drawn from the seed."
    )
    # The study's design when the bracket was drawn (a design is frozen once summaries exist). An adaptive one asks
    # `budget` comparisons at most, one per round (index 0), each created when the one before is answered, between
    # the `entrants`: [[candidate id, system id, condition], ...] in position order, so that choosing the next
    # pair reads no candidate.
    design = models.CharField(
        max_length=8, choices=Study.Design.choices, default=Study.Design.BRACKET, db_default=Study.Design.BRACKET
    )
    budget = models.PositiveSmallIntegerField(
        default=0, db_default=0, help_text="Adaptive design: comparisons to ask at most."
    )
    # Empty (NULL) for a bracket: the previous release's inserts leave it out (an expand, docs/deploy.md).
    entrants = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"bracket of query {self.query_id}"

    @property
    def adaptive(self) -> bool:
        return self.design == Study.Design.ADAPTIVE

    @property
    def rounds(self) -> int:
        """Rounds to the final: the size rounded up to a power of two, 2**rounds slots (3 systems: 2 rounds). An
        adaptive schedule has one comparison per round: its budget."""
        if self.adaptive:
            return self.budget
        return max((self.size - 1).bit_length(), 1)

    @property
    def slots(self) -> int:
        """First-round places, byes included: the size rounded up to a power of two."""
        return 2**self.rounds

    def bye_candidates(self) -> dict[int, int]:
        """First-round match index -> the candidate that has a bye there."""
        return {int(index): int(candidate) for index, candidate in self.byes or []}


class Match(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        ANSWERED = "answered", "Answered"
        SKIPPED = "skipped", "Skipped"

    bracket = models.ForeignKey(Bracket, on_delete=models.CASCADE, related_name="matches")
    round = models.PositiveSmallIntegerField()
    index = models.PositiveSmallIntegerField(help_text="Position of the match within its round.")
    label = models.CharField(max_length=20, help_text="round1_ab, round1_cd, final, …")
    left = models.ForeignKey(Candidate, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    right = models.ForeignKey(Candidate, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    shown_at = models.DateTimeField(null=True, blank=True)
    # An attention check (not data): the side holding this question's own summary, the other side being a
    # summary written for another question. Empty for every tournament match.
    check_expected = models.CharField(
        max_length=5, blank=True, default="", choices=[("left", "Left"), ("right", "Right")]
    )
    # The two summaries' likeness, measured when the match is drawn (annotation.services.similarity):
    # "exact" (equal once case, whitespace and punctuation are folded), "near" (token similarity at or above
    # the threshold), or "" (different). `similarity` is the token-level similarity, 0 to 100.
    identical = models.CharField(
        max_length=5, blank=True, default="", choices=[("exact", "Identical"), ("near", "Near-identical")]
    )
    similarity = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["bracket", "round", "index"]
        verbose_name_plural = "matches"
        constraints = [
            models.UniqueConstraint(fields=["bracket", "round", "index"], name="unique_match_slot"),
            models.CheckConstraint(
                condition=Q(status="skipped") | (Q(left__isnull=False) & Q(right__isnull=False)),
                name="playable_match_has_both_sides",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.label} of query {self.bracket.query_id}"


class Judgment(models.Model):
    """The one answer to a match; the one-to-one key makes a second answer impossible."""

    class Choice(models.TextChoices):
        LEFT = "left", "Left"
        RIGHT = "right", "Right"
        NEITHER = "neither", "Neither"
        TIE = "tie", "Both equally good"

    match = models.OneToOneField(Match, on_delete=models.CASCADE, related_name="judgment")
    choice = models.CharField(max_length=8, choices=Choice.choices)
    winner = models.ForeignKey(Candidate, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    shown_at = models.DateTimeField(null=True, blank=True, help_text="Empty for imported legacy data.")
    answered_at = models.DateTimeField()
    seconds_on_page = models.FloatField(null=True, blank=True, help_text="Empty when the display time is unknown.")
    # A tie's `winner` is the side the bracket's seeded coin advanced (none in the final): who moved on, not
    # who was preferred. `automatic` ties were recorded without asking (identical summaries, policy "tie").
    automatic = models.BooleanField(default=False, help_text="Recorded without asking the annotator.")
    comment = models.TextField(blank=True, default="", help_text="The annotator's optional comment on this match.")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(choice="neither") & Q(winner__isnull=True))
                | (Q(choice__in=["left", "right"]) & Q(winner__isnull=False))
                | Q(choice="tie"),
                name="judgment_winner_matches_choice",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.choice} on match {self.match_id}"


class PairTally(models.Model):
    """How one pair of a study's systems fared so far, for the adaptive design's choice of the next pair
    (annotation.services.tally): written with every answer of an adaptive question, read when its next pair is
    chosen. Not data: previews never count here and the analysis reads the judgments, with its exclusion rule.
    The pair is stored once, the lower system id first."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="pair_tallies")
    first = models.ForeignKey(StudySystem, on_delete=models.CASCADE, related_name="+")
    second = models.ForeignKey(StudySystem, on_delete=models.CASCADE, related_name="+")
    first_wins = models.PositiveIntegerField(default=0)
    second_wins = models.PositiveIntegerField(default=0)
    ties = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "first", "second"], name="one_tally_per_pair"),
            models.CheckConstraint(condition=Q(first__lt=models.F("second")), name="tally_pair_in_order"),
        ]

    def __str__(self) -> str:
        return f"{self.first_id} vs {self.second_id}: {self.first_wins}-{self.second_wins} ({self.ties} ties)"


class SweeperRun(models.Model):
    """When each periodic sweeper last ran, so that a stopped scheduler is noticed (admin banner, error log)."""

    name = models.CharField(max_length=80, unique=True)
    last_run_at = models.DateTimeField()
    last_result = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.name} at {self.last_run_at:%Y-%m-%d %H:%M:%S}"
