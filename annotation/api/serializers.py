"""Input and output shapes of the API. Outputs never carry system, model or condition to annotators."""

from __future__ import annotations

from typing import Any

from django.utils.text import normalize_newlines
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation.models import Candidate, Judgment, Match, Participation, PersonaProfile, Query, RetrievedDocument
from annotation.selectors.generation import generation_progress
from annotation.selectors.query import query_document_values, query_wait_state
from annotation.services.participation import (
    participation_ended,
    participation_needs_screening,
    participation_resume_url,
)
from annotation.services.prewritten import Columns
from annotation.services.tournament import COMMENT_MAX_CHARS
from studies.api.serializers import StudySystemSerializer
from studies.models import Study


class AcceptInvitationSerializer(serializers.Serializer):
    consent = serializers.BooleanField()


# The input and the schema's shape; the responses are built by `persona_body`.
class MultilineCharField(serializers.CharField):
    """Text with its line breaks as one character each (LF) before the length is checked, as on the pages
    (annotation.forms.MultilineField): a CRLF sent by a form-encoding client counts as one line break."""

    def to_internal_value(self, data: Any) -> str:
        return super().to_internal_value(normalize_newlines(data) if isinstance(data, str) else data)


class PersonaSerializer(serializers.ModelSerializer):
    use_case = MultilineCharField(max_length=PersonaProfile._meta.get_field("use_case").max_length)

    class Meta:
        model = PersonaProfile
        fields = ["version", "role", "domain", "expertise", "research_area", "use_case", "created_at"]
        read_only_fields = ["version", "created_at"]


# The schema's shape (and the list's); the other responses are built by `participation_body`.
class ParticipationSerializer(serializers.ModelSerializer):
    study: serializers.SlugRelatedField[Study] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    study_title = serializers.CharField(source="study.title", read_only=True)
    queries_per_annotator = serializers.IntegerField(source="study.queries_per_annotator", read_only=True)
    min_ranked_questions = serializers.IntegerField(source="study.min_ranked_questions", read_only=True)
    persona = serializers.SerializerMethodField()
    resume_url = serializers.SerializerMethodField(
        help_text="The participant's personal resume link (another browser or device continues where this one "
        "stopped); null in a preview or for an account that signs in with a password."
    )
    screening = serializers.SerializerMethodField(
        help_text="The study's screening question while this participation is to answer it ({question, choices}: "
        "answer it at POST .../screening/; the persona and questions are refused until then), else null."
    )

    class Meta:
        model = Participation
        fields = [
            "id",
            "study",
            "study_title",
            "code",
            "queries_per_annotator",
            "min_ranked_questions",
            "consented_at",
            "completed_at",
            "completion_code",
            "stopped_at",
            "persona",
            "resume_url",
            "screening",
            "screening_answer",
            "screened_out_at",
            "screen_out_reason",
        ]

    def get_resume_url(self, obj: Participation) -> str | None:
        return participation_resume_url(participation=obj)

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "properties": {"question": {"type": "string"}, "choices": {"type": "array", "items": {"type": "string"}}},
        }
    )
    def get_screening(self, obj: Participation) -> dict[str, Any] | None:
        due = participation_needs_screening(participation=obj) and not participation_ended(participation=obj)
        return screening_body(obj.study) if due else None

    def get_persona(self, obj: Participation) -> dict | None:
        persona = obj.personas.order_by("-version").first()
        return PersonaSerializer(persona).data if persona else None


class ScreeningAnswerSerializer(serializers.Serializer):
    answer = serializers.CharField(max_length=200, help_text="One of the study's screening choices, as written.")


class QueryCreateSerializer(serializers.Serializer):
    text = MultilineCharField(allow_blank=True, trim_whitespace=True, max_length=20000)
    client_token = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")


class NextItemSerializer(serializers.Serializer):
    client_token = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")


class OutputsImportSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["csv", "jsonl"])
    content = serializers.CharField(required=False, allow_blank=False, trim_whitespace=False, max_length=50_000_000)
    file = serializers.FileField(required=False)
    columns = serializers.DictField(child=serializers.CharField(max_length=100), required=False)

    def validate_columns(self, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(Columns.__dataclass_fields__))
        if unknown:
            raise serializers.ValidationError(
                f"Unknown column role(s) {', '.join(unknown)}; name any of {', '.join(Columns.__dataclass_fields__)}."
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if (attrs.get("content") is None) == (attrs.get("file") is None):
            raise serializers.ValidationError({"content": "Give the file's text as content, or the file as file."})
        return attrs


class OutputsImportResultSerializer(serializers.Serializer):
    items_created = serializers.IntegerField()
    items_updated = serializers.IntegerField()
    outputs_created = serializers.IntegerField()
    outputs_updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    changed = serializers.BooleanField()


class DocumentSerializer(serializers.ModelSerializer):
    class Meta:
        model = RetrievedDocument
        fields = ["rank", "external_id", "title", "abstract", "url", "year", "venue", "authors"]


class CandidateProgressSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    status = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]
    attempts = serializers.IntegerField()


# The schema's shape of a question; the responses are built by `query_body` (the same JSON for less CPU).
# The docstring is the schema's description.
class QuerySerializer(serializers.ModelSerializer):
    """A question and its progress, with `message` in plain words (the waiting page's) and `overdue` once
    it has taken longer than the waiting page's deadline: then retry, discard or finish are the ways out."""

    documents = DocumentSerializer(many=True, read_only=True)
    candidates = serializers.SerializerMethodField()
    message = serializers.SerializerMethodField()
    overdue = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField(
        help_text="As the waiting page shows it: `failed` as soon as the search or one of the summaries failed "
        "(`failure_reason` says which); then retry or discard are the ways on."
    )
    failed = serializers.SerializerMethodField()
    failure_reason = serializers.SerializerMethodField()

    class Meta:
        model = Query
        fields = [
            "id",
            "index",
            "text",
            "status",
            "created_at",
            "documents",
            "candidates",
            "message",
            "overdue",
            "failed",
            "failure_reason",
            "set_aside_reason",
        ]

    def _progress(self, obj: Query) -> list[dict[str, object]]:
        # One read of the candidates serves the progress rows, the message and the deadline.
        cached: list[dict[str, object]] | None = getattr(obj, "_progress_rows", None)
        if cached is None:
            cached = generation_progress(query=obj)
            obj._progress_rows = cached  # type: ignore[attr-defined]
        return cached

    @extend_schema_field(CandidateProgressSerializer(many=True))
    def get_candidates(self, obj: Query) -> list[dict[str, object]]:
        return list(CandidateProgressSerializer(self._progress(obj), many=True).data)

    def _state(self, obj: Query) -> Any:
        return query_wait_state(query=obj, progress=self._progress(obj))

    def get_message(self, obj: Query) -> str:
        return query_message(obj, self._state(obj))

    def get_overdue(self, obj: Query) -> bool:
        return bool(self._state(obj).overdue)

    @extend_schema_field(serializers.ChoiceField(choices=Query.Status.choices))
    def get_status(self, obj: Query) -> str:
        return str(self._state(obj).status)

    def get_failed(self, obj: Query) -> bool:
        return bool(self._state(obj).failed)

    def get_failure_reason(self, obj: Query) -> str:
        return str(self._state(obj).reason)


# What the status poll reads of a question: QuerySerializer's fields and what its message and deadline need.
QUERY_SHOWN = ("index", "text", "status", "created_at", "set_aside_reason", "retrieval_queued_at", "queue_failed_at")
# A source as DocumentSerializer shows it, in its order.
DOCUMENT_FIELDS = ("rank", "external_id", "title", "abstract", "url", "year", "venue", "authors")
# One field instance formats every timestamp as DRF's DateTimeField does (ISO 8601, UTC as "Z").
_DATETIME = serializers.DateTimeField()
SETTLED_MESSAGES = {
    Query.Status.READY: "Your summaries are ready to compare.",
    Query.Status.RANKED: "You have ranked the summaries of this question.",
    Query.Status.DISCARDED: "This question was set aside; it does not count.",
}


def _datetime(value: Any) -> str | None:
    return _DATETIME.to_representation(value) if value is not None else None


def persona_body(persona: PersonaProfile) -> dict[str, Any]:
    """PersonaSerializer's JSON for `persona`, without a serializer per request (see `query_body`)."""
    return {
        "version": persona.version,
        "role": persona.role,
        "domain": persona.domain,
        "expertise": persona.expertise,
        "research_area": persona.research_area,
        "use_case": persona.use_case,
        "created_at": _datetime(persona.created_at),
    }


def participation_body(participation: Participation, *, with_persona: bool = True) -> dict[str, Any]:
    """ParticipationSerializer's JSON for `participation` (read with its study and annotator), without a
    serializer per request: building a ModelSerializer's fields was most of the CPU of an invitation's accept,
    the first request of a launch's burst (see `query_body`). `with_persona=False` where the participation can
    have none (just created): its latest persona is not read. tests/annotation/test_api_bodies.py holds it to
    the serializer's output."""
    persona = participation.personas.order_by("-version").first() if with_persona else None
    study = participation.study
    return {
        "id": participation.pk,
        "study": study.slug,
        "study_title": study.title,
        "code": participation.code,
        "queries_per_annotator": study.queries_per_annotator,
        "min_ranked_questions": study.min_ranked_questions,
        "consented_at": _datetime(participation.consented_at),
        "completed_at": _datetime(participation.completed_at),
        "completion_code": participation.completion_code,
        "stopped_at": _datetime(participation.stopped_at),
        "persona": persona_body(persona) if persona else None,
        "resume_url": participation_resume_url(participation=participation),
        # participation_needs_screening, from the persona read above (none: it has not passed the question).
        "screening": screening_body(study)
        if study.screening_question
        and not participation.screening_answer
        and persona is None
        and not participation_ended(participation=participation)
        else None,
        "screening_answer": participation.screening_answer,
        "screened_out_at": _datetime(participation.screened_out_at),
        "screen_out_reason": participation.screen_out_reason,
    }


def screening_body(study: Study) -> dict[str, Any]:
    return {"question": study.screening_question, "choices": list(study.screening_choices)}


def query_message(query: Query, state: Any) -> str:
    """The waiting page's words for the question's state (`message`)."""
    if query.status in SETTLED_MESSAGES:
        return SETTLED_MESSAGES[Query.Status(query.status)]
    return str(state.message)


def query_body(query: Query) -> dict[str, Any]:
    """QuerySerializer's JSON for `query` (which needs only QUERY_SHOWN), without building a serializer per
    request: the status poll is the annotator's most frequent request, and ModelSerializer's fields, built
    again for every instance, were half of its CPU. tests/annotation/test_api_bodies.py holds it to the
    serializer's output."""
    progress = generation_progress(query=query)
    # The waiting page's own reading of the question (views.wait and views.status): the two never disagree.
    state = query_wait_state(query=query, progress=progress)
    rows = query_document_values(query=query, names=DOCUMENT_FIELDS)
    return {
        "id": query.pk,
        "index": query.index,
        "text": query.text,
        "status": str(state.status),
        "created_at": _datetime(query.created_at),
        "documents": [
            {
                "rank": rank,
                "external_id": external_id,
                "title": title,
                "abstract": abstract,
                "url": url,
                "year": year,
                "venue": venue,
                "authors": authors,
            }
            for rank, external_id, title, abstract, url, year, venue, authors in rows
        ],
        "candidates": progress,
        "message": query_message(query, state),
        "overdue": state.overdue,
        "failed": state.failed,
        "failure_reason": str(state.reason),
        "set_aside_reason": str(query.set_aside_reason),
    }


# The schema's shape; the responses are built by `match_body`.
class MatchSerializer(serializers.ModelSerializer):
    left = serializers.SerializerMethodField()
    right = serializers.SerializerMethodField()
    query = serializers.IntegerField(source="bracket.query_id", read_only=True)
    choice = serializers.SerializerMethodField()

    class Meta:
        model = Match
        # `identical` ("exact", "near" or ""): the pair's likeness, which the comparison page shows as a notice.
        fields = ["id", "query", "round", "label", "status", "left", "right", "shown_at", "choice", "identical"]

    def _side(self, candidate: Candidate | None) -> dict | None:
        return {"text": candidate.text} if candidate else None

    def get_left(self, obj: Match) -> dict | None:
        return self._side(obj.left)

    def get_right(self, obj: Match) -> dict | None:
        return self._side(obj.right)

    def get_choice(self, obj: Match) -> str | None:
        return _match_choice(obj)


def _match_choice(match: Match) -> str | None:
    judgment = getattr(match, "judgment", None) if match.status == Match.Status.ANSWERED else None
    return judgment.choice if judgment else None


def match_body(match: Match) -> dict[str, Any]:
    """MatchSerializer's JSON for `match` (read with its sides' text), without a serializer per request
    (see `query_body`)."""
    left, right = match.left, match.right
    return {
        "id": match.pk,
        "query": match.bracket.query_id,
        "round": match.round,
        "label": match.label,
        "status": str(match.status),
        "left": {"text": left.text} if left else None,
        "right": {"text": right.text} if right else None,
        "shown_at": _datetime(match.shown_at),
        "choice": _match_choice(match),
        "identical": str(match.identical),
    }


class ChoiceSerializer(serializers.Serializer):
    # "tie" only where the study allows ties (else 400 on `choice`); `comment` only where it collects comments.
    choice = serializers.ChoiceField(choices=Judgment.Choice.choices)
    comment = MultilineCharField(required=False, allow_blank=True, default="", max_length=COMMENT_MAX_CHARS)
    match = serializers.IntegerField(
        required=False, help_text="The match this answer is for; when given it must be the one in the path."
    )


# The schema's shape; the responses are built by `judgment_body`.
class JudgmentSerializer(serializers.ModelSerializer):
    notice = serializers.SerializerMethodField(
        help_text="A message for the annotator about this answer (a failed attention check under the study's "
        "warn policy), shown once, by the answer that recorded it; null otherwise."
    )

    class Meta:
        model = Judgment
        fields = ["match", "choice", "shown_at", "answered_at", "seconds_on_page", "comment", "notice"]

    def get_notice(self, obj: Judgment) -> str | None:
        notice = self.context.get("notice")
        return str(notice) if notice else None


def judgment_body(judgment: Judgment, *, notice: object = None) -> dict[str, Any]:
    """JudgmentSerializer's JSON for `judgment` with `notice` (its context's), without a serializer per
    request (see `query_body`)."""
    return {
        "match": judgment.match_id,
        "choice": str(judgment.choice),
        "shown_at": _datetime(judgment.shown_at),
        "answered_at": _datetime(judgment.answered_at),
        "seconds_on_page": judgment.seconds_on_page,
        "comment": judgment.comment,
        "notice": str(notice) if notice else None,
    }


# --- admin side ------------------------------------------------------------------------------------


class AdminCandidateSerializer(serializers.ModelSerializer):
    system = StudySystemSerializer(read_only=True)

    class Meta:
        model = Candidate
        fields = [
            "id",
            "query",
            "system",
            "system_label",
            "model_name",
            "condition",
            "generation_backend",
            "generation_settings",
            "prompt_template",
            "prompt_template_version",
            "position",
            "status",
            "failure_reason",
            "attempts",
            "queued_at",
            "started_at",
            "finished_at",
            "latency_s",
            "finish_reason",
            "usage",
            "text",
        ]


class ProgressSerializer(serializers.Serializer):
    code = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # the field's name, not DRF's `source`
    consented_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    stopped_at = serializers.DateTimeField(allow_null=True)
    screened_out_at = serializers.DateTimeField(allow_null=True)
    screen_out_reason = serializers.CharField()
    outcome = serializers.SerializerMethodField()
    queries_total = serializers.IntegerField()
    queries_ranked = serializers.IntegerField()
    screened_out_at = serializers.DateTimeField(allow_null=True)
    excluded_at = serializers.DateTimeField(allow_null=True)
    exclusion_reason = serializers.CharField()

    def get_outcome(self, obj: Participation) -> str:
        """completed (earned a code), stopped (left with too few ranked questions, no code), screened_out
        (declined consent or failed the screening question; never analysed) or in_progress."""
        if obj.completed_at is not None:
            return "completed"
        if obj.screened_out_at is not None:
            return "screened_out"
        return "stopped" if obj.stopped_at is not None else "in_progress"


class ExclusionSerializer(serializers.Serializer):
    excluded = serializers.BooleanField(default=True, help_text="false undoes the exclusion.")
    reason = serializers.CharField(
        max_length=1000, required=False, allow_blank=True, help_text="Why it is left out (needed to exclude)."
    )


class QualitySerializer(serializers.Serializer):
    """A participation's attention checks, pace and exclusion (annotation.selectors.quality)."""

    code = serializers.CharField()
    checks_answered = serializers.IntegerField()
    checks_failed = serializers.IntegerField()
    pass_rate = serializers.FloatField(allow_null=True)
    median_seconds = serializers.FloatField(allow_null=True)
    speed_flagged = serializers.BooleanField()
    checks_flagged = serializers.BooleanField()
    screened_out = serializers.BooleanField()
    excluded = serializers.BooleanField()
    exclusion_reason = serializers.CharField()
