"""Studies: the default prompt template, the rules a study's settings and design must meet, creating and
updating a study, setting its status, and the open-study check. The admin and the API write through here."""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from generation.registry import (
    GENERATION_BACKENDS,
    RETRIEVAL_BACKENDS,
    generation_models,
    generation_settings_problem,
    get_generation_backend,
    operational_setting_keys,
)
from generation.settings import corpus_root, model_servers_from_settings
from generation.validation import corpus_path_problem, model_server_problem, served_problem
from kernel.backends import BackendError
from kernel.exceptions import ApplicationError
from kernel.storable import DB_INT_MAX, json_problem
from studies.models import MAX_BRACKET_SIZE, PromptTemplate, Study, StudySystem
from studies.prompts import DEFAULT_BODY, DEFAULT_PERSONA_BLOCK, DEFAULT_TEMPLATE_NAME

# The study's own settings that study_create and study_update accept (status has its own rules).
STUDY_FIELDS = (
    "slug",
    "title",
    "instructions",
    "consent_text",
    "queries_per_annotator",
    "min_ranked_questions",
    "max_query_chars",
    "retrieval_backend",
    "retrieval_k",
    "retrieval_settings",
    "prompt_template",
    "constrained_first_round",
    # the design (docs/backends.md, "Designs")
    "design",
    "adaptive_matches",
    # quality control (docs/annotators.md, "Attention checks")
    "check_share",
    "check_policy",
    "check_max_failures",
    "speed_threshold_seconds",
    "language",
    # crowd recruitment (docs/crowd.md)
    "open_link_enabled",
    "participant_cap",
    "place_timeout_minutes",
    "open_link_expires_at",
    "external_id_param",
    "trust_platform_id",
    "completion_url",
    "crowd_completion_code",
    "screen_out_url",
    "screening_question",
    "screening_choices",
    "screening_accepted",
    "allow_ties",
    "comments",
    "identical_policy",
    "practice_round",
)
# A place held past this is not a time limit anyone sets: 30 days.
PLACE_TIMEOUT_MAX_MINUTES = 30 * 24 * 60
CROWD_DEFAULTS: dict[str, Any] = {
    "open_link_enabled": False,
    "participant_cap": None,
    "place_timeout_minutes": None,
    "open_link_expires_at": None,
    "external_id_param": "",
    "trust_platform_id": False,
    "completion_url": "",
    "crowd_completion_code": "",
    "screen_out_url": "",
    "screening_question": "",
    "screening_choices": [],
    "screening_accepted": [],
}
SYSTEM_FIELDS = ("label", "model_name", "condition", "generation_backend", "backend_settings", "order")
# Inclusive bounds; beyond them a study cannot be run (a question longer than the API accepts, more
# sources than a prompt holds).
LIMITS = {"queries_per_annotator": (1, 1000), "max_query_chars": (1, 20000), "retrieval_k": (1, 100)}
# A system's `order` places it in lists and exports (ties by id); a PositiveSmallIntegerField.
ORDER_RANGE = (0, 32767)
LOCKED_MESSAGE = (
    "Summaries have already been generated for this study, so its systems and prompt template can no longer "
    "change (past comparisons would be relabelled). Create a new study for a new design."
)


def locked_note() -> str:
    """What the admin says on a study whose design is frozen: why, and what may still change."""
    return (
        f"{LOCKED_MESSAGE} A system's operational backend settings may still change (the openai backend's "
        f"{', '.join(sorted(operational_setting_keys('openai')))}): how the model is called, not what it is "
        "asked. Each summary records the settings it was generated with; retry failed summaries after a change."
    )


def limit_message(name: str) -> str:
    low, high = LIMITS[name]
    return f"{name.replace('_', ' ').capitalize()} must be from {low} to {high}."


def prompt_template_default() -> PromptTemplate:
    template, _ = PromptTemplate.objects.get_or_create(
        name=DEFAULT_TEMPLATE_NAME, version=1, defaults={"body": DEFAULT_BODY, "persona_block": DEFAULT_PERSONA_BLOCK}
    )
    return template


def study_prompt_template(*, study: Study) -> PromptTemplate:
    """The template the study's summaries are generated with (generation falls back to the default too)."""
    return study.prompt_template or prompt_template_default()


def study_has_candidates(*, study: Study) -> bool:
    """Once a candidate exists the design is frozen: its rows in exports name these systems."""
    # Through the candidates' reverse relation (annotation's Candidate.system): studies sits below annotation and
    # does not import its models.
    return study.pk is not None and StudySystem.objects.filter(study_id=study.pk, candidates__isnull=False).exists()


def system_spec(system: StudySystem) -> dict[str, Any]:
    return {"id": system.pk, **{name: getattr(system, name) for name in SYSTEM_FIELDS}}


def _design(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A system spec without its operational backend settings (registry.operational_setting_keys): what a
    study whose summaries exist must keep as it is."""
    options = spec.get("backend_settings")
    if not isinstance(options, Mapping):
        return dict(spec)
    operational = operational_setting_keys(str(spec.get("generation_backend")))
    return {**spec, "backend_settings": {k: v for k, v in options.items() if k not in operational}}


def _system_specs(systems: Iterable[Mapping[str, Any]], existing: Sequence[StudySystem]) -> list[dict[str, Any]]:
    """Complete specs: a spec naming an existing system (by id, else by label) keeps what it leaves out."""
    by_id = {s.pk: s for s in existing}
    by_label = {s.label: s for s in existing}
    specs = []
    for index, given in enumerate(systems):
        given = dict(given)
        unknown = sorted(set(given) - {"id", *SYSTEM_FIELDS})
        if unknown:
            raise ApplicationError(f"Unknown system field(s): {', '.join(unknown)}.", field="systems")
        match = by_id.get(given["id"]) if given.get("id") is not None else by_label.get(given.get("label", ""))
        if given.get("id") is not None and match is None:
            raise ApplicationError(f"System {given['id']} is not one of this study's systems.", field="systems")
        base = (
            system_spec(match)
            if match
            else {"id": None, "generation_backend": "extractive", "backend_settings": {}, "order": index}
        )
        specs.append({**base, **given, "id": match.pk if match else None})
    return specs


def _validate_systems(specs: Sequence[Mapping[str, Any]]) -> None:
    labels: set[str] = set()
    cells: set[tuple[str, str]] = set()
    for spec in specs:
        missing = [name for name in ("label", "model_name", "condition") if not spec.get(name)]
        if missing:
            raise ApplicationError(f"Every system needs a {', '.join(missing)}.", field="systems")
        label, model, condition = str(spec["label"]), str(spec["model_name"]), str(spec["condition"])
        if condition not in StudySystem.Condition.values:
            raise ApplicationError(
                f"System {label!r}: unknown condition {condition!r}; choose one of "
                f"{', '.join(StudySystem.Condition.values)}.",
                field="systems",
            )
        backend = spec.get("generation_backend")
        if backend not in GENERATION_BACKENDS:
            raise ApplicationError(
                f"System {label!r}: unknown generation backend {backend!r}; choose one of "
                f"{', '.join(GENERATION_BACKENDS)}.",
                field="systems",
            )
        if not isinstance(spec.get("backend_settings"), dict):
            raise ApplicationError(f"System {label!r}: backend settings must be a JSON object.", field="systems")
        if problem := json_problem(spec["backend_settings"], where="backend settings"):
            raise ApplicationError(f"System {label!r}: {problem}.", field="systems")
        if problem := generation_settings_problem(str(backend), spec["backend_settings"]):
            raise ApplicationError(f"System {label!r}: {problem}.", field="systems")
        order = spec.get("order")
        if not isinstance(order, int) or isinstance(order, bool) or not ORDER_RANGE[0] <= order <= ORDER_RANGE[1]:
            raise ApplicationError(
                f"System {label!r}: order must be a whole number from {ORDER_RANGE[0]} to {ORDER_RANGE[1]}.",
                field="systems",
            )
        if label in labels:
            raise ApplicationError(f"Two systems are labelled {label!r}; labels must differ.", field="systems")
        if (model, condition) in cells:
            raise ApplicationError(
                f"Two systems run {model!r} in the {condition} condition; each design cell appears once.",
                field="systems",
            )
        _validate_model_server(spec)
        labels.add(label)
        cells.add((model, condition))


def _validate_model_server(spec: Mapping[str, Any]) -> None:
    if problem := model_server_problem(spec, model_servers_from_settings()):
        raise ApplicationError(problem, field="systems")


def _validate_corpus_path(retrieval_settings: Any) -> None:
    if problem := corpus_path_problem(retrieval_settings, corpus_root()):
        raise ApplicationError(problem, field="retrieval_settings")


def _validate_served(spec: Mapping[str, Any]) -> None:
    """A system's model must be one its backend serves; a server we cannot ask must at least be configured."""
    options = spec.get("backend_settings") or {}
    try:
        get_generation_backend(spec["generation_backend"], options)
        models = generation_models(spec["generation_backend"], options)
    except BackendError as error:
        raise ApplicationError(f"System {spec['label']!r}: {error.reason}", field="systems") from error
    if problem := served_problem(spec, models, model_servers_from_settings()):
        raise ApplicationError(problem, field="systems")


BRACKET_SIZES = range(2, MAX_BRACKET_SIZE + 1)
"""Designs a single-elimination bracket can run: 2 to 32 systems (positions A to Z, then AA to AF); a count
that is not a power of two plays with first-round byes (annotation.services.tournament). The adaptive design
runs the same counts (its summaries take the same positions)."""
DESIGN_NAMES: dict[str, str] = {
    Study.Design.BRACKET: "A single-elimination bracket",
    Study.Design.ADAPTIVE: "An adaptive design",
}


def adaptive_budget(*, study: Study, systems: int) -> int:
    """Comparisons per question of an adaptive study with `systems` systems: its setting, or as many as a bracket
    plays (systems - 1) when it has none."""
    return study.adaptive_matches or max(systems - 1, 1)


def _validate_design(
    specs: Sequence[Mapping[str, Any]],
    *,
    constrained_first_round: bool = False,
    design: str = Study.Design.BRACKET,
    adaptive_matches: int | None = None,
) -> None:
    count = len(specs)
    if count not in BRACKET_SIZES:
        raise ApplicationError(
            f"{DESIGN_NAMES.get(design, DESIGN_NAMES[Study.Design.BRACKET])} needs 2 to {MAX_BRACKET_SIZE} systems; "
            f"this study has {count}.",
            field="systems",
        )
    pairs = count * (count - 1) // 2
    if design == Study.Design.ADAPTIVE and adaptive_matches is not None and adaptive_matches > pairs:
        raise ApplicationError(
            f"Comparisons per question can be at most {pairs} with {count} systems: every pair once.",
            field="adaptive_matches",
        )
    if constrained_first_round:
        persona = sum(spec["condition"] == StudySystem.Condition.PERSONA for spec in specs)
        generic = sum(spec["condition"] == StudySystem.Condition.GENERIC for spec in specs)
        if persona != generic:
            raise ApplicationError(
                "A constrained first round pairs a persona system with a generic one in every first-round "
                f"match, so it needs as many persona systems as generic ones; this design has {persona} persona "
                f"and {generic} generic.",
                field="constrained_first_round",
            )
    for spec in specs:
        _validate_served(spec)


def _validate_design_settings(fields: Mapping[str, Any]) -> None:
    """The design's own settings, whatever the status: a known design, and comparisons per question a whole
    number of at least 1 (or empty)."""
    design = fields.get("design", Study.Design.BRACKET)
    if design not in Study.Design.values:
        raise ApplicationError(
            f"Unknown design {design!r}; choose one of {', '.join(Study.Design.values)}.", field="design"
        )
    matches = fields.get("adaptive_matches")
    most = MAX_BRACKET_SIZE * (MAX_BRACKET_SIZE - 1) // 2
    if matches is not None and (not isinstance(matches, int) or isinstance(matches, bool) or not 1 <= matches <= most):
        raise ApplicationError(
            f"Comparisons per question must be a whole number from 1 to {most} (every pair of {MAX_BRACKET_SIZE} "
            "systems once), or empty: the number of systems minus one.",
            field="adaptive_matches",
        )


def study_validate(
    *, fields: Mapping[str, Any], systems: Sequence[Mapping[str, Any]], status: str, study: Study | None = None
) -> None:
    """Every rule a study must meet to be saved with these settings, systems and status; `study` is the
    stored study being edited (None when creating). Raises ApplicationError naming the field."""
    if status not in Study.Status.values:
        raise ApplicationError(f"Unknown status {status!r}.", field="status")
    slug = fields.get("slug")
    if not slug:
        raise ApplicationError("A study needs a slug.", field="slug")
    others = Study.objects.filter(slug=slug)
    if study is not None:
        others = others.exclude(pk=study.pk)
    if others.exists():
        raise ApplicationError(f"A study with the slug {slug!r} already exists.", field="slug")
    backend = fields.get("retrieval_backend")
    if backend not in RETRIEVAL_BACKENDS:
        raise ApplicationError(
            f"Unknown retrieval backend {backend!r}; choose one of {', '.join(RETRIEVAL_BACKENDS)}.",
            field="retrieval_backend",
        )
    for name, (low, high) in LIMITS.items():
        value = fields.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ApplicationError(limit_message(name), field=name)
    # Earned completion codes: at least one ranked question, and no more than the study lets one ask.
    least, most = fields.get("min_ranked_questions", 1), fields["queries_per_annotator"]
    if not isinstance(least, int) or isinstance(least, bool) or not 1 <= least <= most:
        raise ApplicationError(
            f"Questions to rank for the completion code must be from 1 to the questions per annotator ({most}).",
            field="min_ranked_questions",
        )
    retrieval_settings = fields.get("retrieval_settings")
    if not isinstance(retrieval_settings, dict):
        raise ApplicationError("Retrieval settings must be a JSON object.", field="retrieval_settings")
    if problem := json_problem(retrieval_settings, where="retrieval settings"):
        raise ApplicationError(f"{problem[0].upper()}{problem[1:]}.", field="retrieval_settings")
    constrained = fields.get("constrained_first_round", False)
    if not isinstance(constrained, bool):
        raise ApplicationError("Constrained first round must be true or false.", field="constrained_first_round")
    _validate_choice_settings(fields)
    _validate_design_settings(fields)
    _validate_corpus_path(retrieval_settings)
    _validate_quality(fields)
    _validate_crowd(fields, study)
    languages = [code for code, _name in settings.LANGUAGES]
    if fields.get("language", "en") not in languages:
        raise ApplicationError(
            f"Unknown language {fields.get('language')!r}; choose one of {', '.join(languages)}.", field="language"
        )
    if study is not None and study_has_candidates(study=study):
        # The design must stay as it is; a system's operational settings (a moved server, a longer timeout,
        # a higher max_tokens) may change, and each candidate's generation_settings record what it used.
        stored = sorted((_design(system_spec(s)) for s in study.systems.all()), key=lambda s: s["id"])
        if sorted((_design(spec) for spec in systems), key=lambda s: s["id"] or 0) != stored:
            raise ApplicationError(locked_note(), field="systems", status=409)  # and what may change
        template = fields.get("prompt_template")
        if (template.pk if template else None) != study.prompt_template_id:
            raise ApplicationError(LOCKED_MESSAGE, field="prompt_template", status=409)
        if constrained != study.constrained_first_round:
            raise ApplicationError(
                "Summaries have already been generated for this study, so its first-round rule can no longer "
                "change (its brackets were drawn under the old one). Create a new study for a new design.",
                field="constrained_first_round",
                status=409,
            )
        for name in ("design", "adaptive_matches"):
            if fields.get(name, getattr(study, name)) != getattr(study, name):
                raise ApplicationError(
                    "Summaries have already been generated for this study, so its design can no longer change "
                    "(its questions were played under the old one, and the analysis reads them by it). Create a "
                    "new study for a new design.",
                    field=name,
                    status=409,
                )
    _validate_systems(systems)
    if status == Study.Status.OPEN:
        _validate_design(
            systems,
            constrained_first_round=constrained,
            design=fields.get("design", Study.Design.BRACKET),
            adaptive_matches=fields.get("adaptive_matches"),
        )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _validate_quality(fields: Mapping[str, Any]) -> None:
    """The quality-control settings: a share of checks from 0 to 1, a known policy, at least one failure."""
    share = fields.get("check_share", 0.0)
    if not _number(share) or not 0 <= share <= 1:
        raise ApplicationError("The share of attention checks must be a number from 0 to 1.", field="check_share")
    if fields.get("check_policy", Study.CheckPolicy.WARN) not in Study.CheckPolicy.values:
        raise ApplicationError(
            f"The check policy must be one of {', '.join(Study.CheckPolicy.values)}.", field="check_policy"
        )
    failures = fields.get("check_max_failures", 1)
    if not isinstance(failures, int) or isinstance(failures, bool) or not 1 <= failures <= 1000:
        raise ApplicationError("Failed checks before stopping must be from 1 to 1000.", field="check_max_failures")
    speed = fields.get("speed_threshold_seconds")
    if speed is not None and (not _number(speed) or not 0 < speed <= 86400):
        raise ApplicationError(
            "The speed threshold must be a number of seconds above 0 (at most 86400), or empty.",
            field="speed_threshold_seconds",
        )


LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,39}$")
CODE_CHARS = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def _validate_crowd_url(name: str, value: Any) -> None:
    """A completion or screen-out address: https, or http on this machine (tests, a local stand-in)."""
    if value == "":
        return
    try:
        parts = urlsplit(value) if isinstance(value, str) else None
    except ValueError:
        parts = None
    ok = (
        parts is not None
        and bool(parts.hostname)
        and "@" not in parts.netloc
        and len(value) <= 500
        and (parts.scheme == "https" or (parts.scheme == "http" and parts.netloc.split(":")[0] in LOCAL_HOSTS))
    )
    if not ok:
        label = name.replace("_", " ").capitalize()
        raise ApplicationError(
            f"{label} must be an https:// address (http:// only for localhost), at most 500 characters.", field=name
        )


def _validate_crowd(fields: Mapping[str, Any], study: Study | None) -> None:
    """The open link, cap, expiry, platform parameter, completion and screen-out addresses and screening."""
    values = {**CROWD_DEFAULTS, **{k: v for k, v in fields.items() if k in CROWD_DEFAULTS}}
    if not isinstance(values["open_link_enabled"], bool):
        raise ApplicationError("Open link enabled must be true or false.", field="open_link_enabled")
    if not isinstance(values["trust_platform_id"], bool):
        raise ApplicationError("Trust platform id must be true or false.", field="trust_platform_id")
    cap = values["participant_cap"]
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or not 1 <= cap <= DB_INT_MAX):
        raise ApplicationError(
            "The participant cap must be a whole number of at least 1 (or empty).", field="participant_cap"
        )
    timeout = values["place_timeout_minutes"]
    if timeout is not None and (
        not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= PLACE_TIMEOUT_MAX_MINUTES
    ):
        raise ApplicationError(
            f"The place timeout must be a whole number of minutes from 1 to {PLACE_TIMEOUT_MAX_MINUTES} (or empty).",
            field="place_timeout_minutes",
        )
    expires = values["open_link_expires_at"]
    if expires is not None:
        if not isinstance(expires, datetime) or timezone.is_naive(expires):
            raise ApplicationError("The expiry must be a date and time with a time zone.", field="open_link_expires_at")
        unchanged = study is not None and study.open_link_expires_at == expires
        if not unchanged and expires <= timezone.now():
            raise ApplicationError("The expiry must be in the future.", field="open_link_expires_at")
    param = values["external_id_param"]
    if not isinstance(param, str) or (param and not PARAM_NAME.match(param)):
        raise ApplicationError(
            "The external id parameter must be a URL parameter name: letters, digits, _ . - (at most 40), "
            "starting with a letter or _.",
            field="external_id_param",
        )
    for name in ("completion_url", "screen_out_url"):
        _validate_crowd_url(name, values[name])
    code = values["crowd_completion_code"]
    if not isinstance(code, str) or (code and not CODE_CHARS.match(code)):
        raise ApplicationError(
            "The completion code must be letters, digits, _ or - (at most 40).", field="crowd_completion_code"
        )
    question, choices, accepted = (
        values["screening_question"],
        values["screening_choices"],
        values["screening_accepted"],
    )
    if not isinstance(question, str):
        raise ApplicationError("The screening question must be text.", field="screening_question")
    valid_list = (
        isinstance(choices, list)
        and all(isinstance(c, str) and c.strip() and len(c) <= 200 for c in choices)
        and len(set(choices)) == len(choices)
    )
    if not valid_list:
        raise ApplicationError(
            "Screening choices must be a JSON list of different, non-empty answers of at most 200 characters.",
            field="screening_choices",
        )
    if not isinstance(accepted, list) or not all(isinstance(a, str) for a in accepted):
        raise ApplicationError("Accepted screening answers must be a JSON list of answers.", field="screening_accepted")
    for name, given in (("screening_choices", choices), ("screening_accepted", accepted)):
        if problem := json_problem(given, where=name.replace("_", " ")):
            raise ApplicationError(f"{problem[0].upper()}{problem[1:]}.", field=name)
    if not question.strip():
        if choices or accepted:
            raise ApplicationError(
                "Screening choices need a screening question (or leave both empty).", field="screening_question"
            )
        return
    if not 2 <= len(choices) <= 20:
        raise ApplicationError("A screening question needs from 2 to 20 choices.", field="screening_choices")
    outside = [a for a in accepted if a not in choices]
    if not accepted or outside:
        raise ApplicationError(
            "Accepted screening answers must be one or more of the choices"
            + (f"; not a choice: {', '.join(map(repr, outside))}." if outside else "."),
            field="screening_accepted",
        )


def _open_link_token(study: Study) -> list[str]:
    """An enabled open link gets its secret the first time (kept when disabled, so re-enabling keeps it)."""
    if study.open_link_enabled and not study.open_link_token:
        study.open_link_token = secrets.token_urlsafe(24)
        return ["open_link_token"]
    return []


def _validate_choice_settings(fields: Mapping[str, Any]) -> None:
    """The annotator's choices: ties and the practice round on or off, the comment box, the identical policy."""
    for name, label in (("allow_ties", "Allow ties"), ("practice_round", "Practice round")):
        if not isinstance(fields.get(name, False), bool):
            raise ApplicationError(f"{label} must be true or false.", field=name)
    for name, options in (("comments", Study.Comments), ("identical_policy", Study.IdenticalPolicy)):
        value = fields.get(name, options.values[0])
        if value not in options.values:
            raise ApplicationError(
                f"Unknown {name.replace('_', ' ')} {value!r}; choose one of {', '.join(options.values)}.", field=name
            )


def _save_systems(study: Study, specs: Sequence[Mapping[str, Any]]) -> None:
    keep = {spec["id"] for spec in specs if spec["id"] is not None}
    study.systems.exclude(pk__in=keep).delete()
    existing = {s.pk: s for s in study.systems.all()}
    changes = []
    for spec in specs:
        if spec["id"] is not None:
            system = existing[spec["id"]]
            values = {name: spec[name] for name in SYSTEM_FIELDS}
            changed = [name for name, value in values.items() if getattr(system, name) != value]
            if changed:
                changes.append((system, values, changed))
    # The unique constraints (a label, a model and condition per study) hold after every statement, so a swap
    # (two labels exchanged, or a model's two conditions) saved row by row collided with the row not yet
    # saved: the rows whose keys change first step aside to keys no system can have (a label is a slug).
    moving = [system.pk for system, _, changed in changes if set(changed) & {"label", "model_name", "condition"}]
    for pk in moving:
        StudySystem.objects.filter(pk=pk).update(label=f"~moving~{pk}", model_name=f"~moving~{pk}")
    for system, values, changed in changes:
        if system.pk in moving:
            changed = sorted({*changed, "label", "model_name"})
        for name in changed:
            setattr(system, name, values[name])
        system.save(update_fields=changed)
    for spec in specs:
        if spec["id"] is None:
            StudySystem.objects.create(study=study, **{name: spec[name] for name in SYSTEM_FIELDS})


def _default_systems() -> list[dict[str, Any]]:
    return [
        {"label": f"{model}-{condition}", "model_name": model, "condition": condition}
        for model in ("extractive-centroid", "extractive-mmr")
        for condition in (StudySystem.Condition.PERSONA, StudySystem.Condition.GENERIC)
    ]


@transaction.atomic
def study_create(
    *,
    slug: str,
    title: str,
    instructions: str = "",
    consent_text: str = "",
    queries_per_annotator: int = 8,
    min_ranked_questions: int = 1,
    max_query_chars: int = 1000,
    retrieval_backend: str = "demo",
    retrieval_k: int = 10,
    retrieval_settings: Mapping[str, Any] | None = None,
    prompt_template: PromptTemplate | None = None,
    constrained_first_round: bool = False,
    design: str = Study.Design.BRACKET,
    adaptive_matches: int | None = None,
    check_share: float = 0.0,
    check_policy: str = Study.CheckPolicy.WARN,
    check_max_failures: int = 1,
    speed_threshold_seconds: float | None = None,
    language: str = "en",
    allow_ties: bool = False,
    comments: str = Study.Comments.OFF,
    identical_policy: str = Study.IdenticalPolicy.NOTICE,
    practice_round: bool = False,
    systems: Iterable[Mapping[str, Any]] | None = None,
    status: str = Study.Status.DRAFT,
    **crowd: Any,
) -> Study:
    """Create a study with its systems; the default design is two models crossed with two conditions."""
    fields: dict[str, Any] = {
        "slug": slug,
        "title": title,
        "instructions": instructions,
        "consent_text": consent_text,
        "queries_per_annotator": queries_per_annotator,
        "min_ranked_questions": min_ranked_questions,
        "max_query_chars": max_query_chars,
        "retrieval_backend": retrieval_backend,
        "retrieval_k": retrieval_k,
        # A mapping is copied; anything else is study_validate's to refuse with a field message.
        "retrieval_settings": dict(retrieval_settings or {})
        if isinstance(retrieval_settings or {}, Mapping)
        else retrieval_settings,
        "prompt_template": prompt_template or prompt_template_default(),
        "constrained_first_round": constrained_first_round,
        "design": design,
        "adaptive_matches": adaptive_matches,
        "check_share": check_share,
        "check_policy": check_policy,
        "check_max_failures": check_max_failures,
        "speed_threshold_seconds": speed_threshold_seconds,
        "language": language,
        "allow_ties": allow_ties,
        "comments": comments,
        "identical_policy": identical_policy,
        "practice_round": practice_round,
    }
    unknown = sorted(set(crowd) - set(CROWD_DEFAULTS))
    if unknown:
        raise ApplicationError(f"Unknown study field(s): {', '.join(unknown)}.", field=unknown[0])
    fields |= {**CROWD_DEFAULTS, **crowd}
    specs = _system_specs(_default_systems() if systems is None else systems, [])
    study_validate(fields=fields, systems=specs, status=status)
    study = Study(**fields, status=status)
    _open_link_token(study)
    study.save()
    _save_systems(study, specs)
    return study


@transaction.atomic
def study_update(
    *, study: Study, systems: Iterable[Mapping[str, Any]] | None = None, status: str | None = None, **fields: Any
) -> Study:
    """Change a study's settings, systems (the full list: left-out systems are removed) and status under
    the rules study_create applies; a design with generated summaries cannot change, but for its systems'
    operational backend settings (registry.operational_setting_keys)."""
    unknown = sorted(set(fields) - set(STUDY_FIELDS))
    if unknown:
        raise ApplicationError(f"Unknown study field(s): {', '.join(unknown)}.", field=unknown[0])
    study = Study.objects.select_for_update().get(pk=study.pk)
    stored = list(study.systems.all())
    specs = _system_specs(systems, stored) if systems is not None else [system_spec(s) for s in stored]
    merged = {name: getattr(study, name) for name in STUDY_FIELDS} | fields
    status = status or study.status
    study_validate(fields=merged, systems=specs, status=status, study=study)
    changed = [name for name in STUDY_FIELDS if getattr(study, name) != merged[name]]
    for name in changed:
        setattr(study, name, merged[name])
    if status != study.status:
        study.status = status
        changed.append("status")
    changed += _open_link_token(study)
    study.save(update_fields=[*changed, "updated_at"])
    if systems is not None:
        _save_systems(study, specs)
    return study


def study_set_status(*, study: Study, status: str) -> Study:
    updated = study_update(study=study, status=status)
    study.status = updated.status
    return updated


def study_require_open(*, study: Study) -> None:
    """Refuse annotation work (joining, asking, answering) unless the study is open."""
    if study.status == Study.Status.PAUSED:
        raise ApplicationError(
            _("This study is paused. Please come back later; your answers so far are saved."), status=403
        )
    if study.status != Study.Status.OPEN:
        raise ApplicationError(_("This study is not open for annotation."), status=403)
