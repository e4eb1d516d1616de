"""Researcher pages: study dashboards, background jobs with progress, downloads, the report."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from io import BytesIO
from pathlib import Path
from statistics import median
from typing import Any, TypeVar, cast
from urllib.parse import urlencode

from csp.decorators import csp
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.views import redirect_to_login
from django.core.files.storage import Storage
from django.db import transaction
from django.db.models import Count, Q
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods, require_POST
from rest_framework.authtoken.models import Token

from analysis import services
from analysis.downloads import DOWNLOAD_AGAIN, stored_file_response
from analysis.models import ResearchJob
from analysis.permissions import (
    is_researcher,
    research_job,
    research_job_file,
    research_scoring_run,
    research_studies,
    research_study,
)
from analysis.selectors import SCREENED_BEFORE_ANNOTATING, analysed_participations, exclusion_default
from analysis.serializers import job_json
from annotation.models import Candidate, Judgment, Participation, Query
from annotation.selectors.quality import participation_quality
from annotation.services.quality import participation_exclude, participation_include
from kernel.exceptions import ApplicationError
from kernel.storage import StorageUnavailable, storage_reasons
from scoring.models import ScoringRun
from scoring.services import scoring_run_start
from studies.links import PROLIFIC_SUFFIX, open_link
from studies.models_audit import AuditOrigin
from studies.selectors.membership import StudyAction, study_allows

View = TypeVar("View", bound=Callable[..., HttpResponseBase])


def researcher_required(view: View) -> View:
    """Signed out: to the sign-in page. Signed in without being a researcher (an annotator, staff outside the
    researchers group): 403 with a page saying so, not the sign-in form again."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not is_researcher(request.user):
            return render(request, "analysis/not_researcher.html", status=403)
        return view(request, *args, **kwargs)

    return cast(View, wrapped)


def _offline_metrics() -> list[str]:
    # The web process loads the metric suite for the list of names only when a dashboard first asks, and never
    # torch: whether the embeddings extra is there is judged from the installed packages.
    try:
        from scoring.core.api import offline_metrics  # the metric suite: rouge-score, nltk, scikit-learn

        return list(offline_metrics(import_check=False))
    except ImportError:  # pragma: no cover - the suite ships with the project
        return []


def _stress_tests() -> list[dict[str, str]]:
    """Every stress test with why it cannot run from the dashboard ("" when it can)."""
    return [{"name": name, "blocked": reason} for name, reason in services.stress_tests_blocked().items()]


@researcher_required
def study_list(request: HttpRequest) -> HttpResponse:
    # Previews, and those screened out before annotating, are not participants (docs/crowd.md).
    counted = ~Q(participations__screen_out_reason__in=SCREENED_BEFORE_ANNOTATING) & ~Q(
        participations__source=Participation.Source.PREVIEW
    )
    studies = research_studies(user=request.user).annotate(
        n_participants=Count("participations", filter=counted, distinct=True),
        n_completed=Count(
            "participations", filter=counted & Q(participations__completed_at__isnull=False), distinct=True
        ),
    )
    return render(request, "analysis/study_list.html", {"studies": studies})


# A queued job that no worker has taken after this long is explained on the dashboard (a worker takes one in
# seconds; the sweeper sends it again after services.requeue_queued_after()).
QUEUED_NOTE_AFTER = timedelta(minutes=2)

EXCLUSION_CHOICES = (
    ("checks", "failed attention checks"),
    ("speed", "speed flag"),
    ("manual", "manual exclusions"),
)


@researcher_required
def study_dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    study = research_study(user=request.user, slug=slug)
    participations = analysed_participations(study=study)
    # Attention checks are not data: the counts leave them out (their pass rates are under "Quality").
    judgments = Judgment.objects.filter(
        match__bracket__query__participation__in=participations, match__check_expected=""
    )
    seconds = [s for s in judgments.values_list("seconds_on_page", flat=True) if s is not None]
    preview_ids = set(study.participations.filter(source=Participation.Source.PREVIEW).values_list("pk", flat=True))

    context = {
        "study": study,
        "n_participants": participations.count(),
        "n_completed": participations.filter(completed_at__isnull=False).count(),
        "n_screened_out": study.participations.exclude(source=Participation.Source.PREVIEW)
        .filter(screened_out_at__isnull=False)
        .count(),
        "n_queries_ranked": Query.objects.filter(participation__in=participations, status=Query.Status.RANKED).count(),
        "n_comparisons": judgments.count(),
        "n_neither": judgments.filter(choice="neither").count(),
        "median_seconds": _seconds(median(seconds)) if seconds else None,
        # A preview's summaries are not the study's: "A preview never reaches ... the counts above".
        "n_candidates": Candidate.objects.filter(
            query__participation__in=participations, status=Candidate.Status.DONE
        ).count(),
        "n_failed": Candidate.objects.filter(
            query__participation__in=participations, status=Candidate.Status.FAILED
        ).count(),
        # Accepted, but cut off at max_tokens: what the annotators compared was not the model's whole answer.
        "n_truncated": Candidate.objects.filter(
            query__participation__in=participations, status=Candidate.Status.DONE, finish_reason="length"
        ).count(),
        "jobs": study.research_jobs.all()[:20],
        # A job queued longer than a worker takes to pick one up says why it waits and how to stop it.
        "waiting_since": timezone.now() - QUEUED_NOTE_AFTER,
        "requeue_minutes": int(services.requeue_queued_after().total_seconds() // 60),
        "scoring_runs": ScoringRun.objects.filter(study=study)[:10],
        "offline_metrics": _offline_metrics(),
        "stress_tests": _stress_tests(),
        "latest_report": study.research_jobs.filter(
            kind=ResearchJob.Kind.REPORT, status=ResearchJob.Status.DONE
        ).first(),
        "error": request.GET.get("error", ""),
        "can_analyse": study_allows(user=request.user, study=study, action=StudyAction.ANALYSE),
        "quality": [q for q in participation_quality(study=study) if q.participation_id not in preview_ids],
        "exclusion_default": exclusion_default(study=study),
        "exclusion_choices": EXCLUSION_CHOICES,
        "open_link": open_link(study),
        "open_link_prolific": open_link(study) + PROLIFIC_SUFFIX if study.open_link_token else "",
    }
    return render(request, "analysis/study_dashboard.html", context)


@researcher_required
@require_POST
def participation_exclusion(request: HttpRequest, slug: str, code: str) -> HttpResponse:
    """Exclude a participation from the analysis with a reason (``reason``), or undo it (``undo=1``)."""
    study = research_study(user=request.user, slug=slug, action=StudyAction.ANALYSE)
    participation = Participation.objects.select_related("study").filter(study=study, code=code).first()
    if participation is None:
        raise Http404("No such participation in this study.")
    try:
        if request.POST.get("undo") == "1":
            participation_include(participation=participation, by=request.user, origin=AuditOrigin.RESEARCH_PAGE)
        else:
            participation_exclude(
                participation=participation,
                reason=request.POST.get("reason", ""),
                by=request.user,
                origin=AuditOrigin.RESEARCH_PAGE,
            )
    except ApplicationError as error:
        return redirect(f"{reverse('analysis:study', args=[slug])}?{urlencode({'error': error.message})}#quality")
    return redirect(f"{reverse('analysis:study', args=[slug])}#quality")


def _seconds(value: float) -> str:
    """Whole seconds from ten on, tenths below (a sub-second median is not "0 s")."""
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


@researcher_required
@require_POST
def job_start(request: HttpRequest, slug: str) -> HttpResponse:
    study = research_study(user=request.user, slug=slug, action=StudyAction.ANALYSE)
    kind = request.POST.get("kind", "")
    options: dict[str, Any] = {}
    try:
        if "seed" in request.POST:
            options["seed"] = _int(request.POST["seed"], "seed")
        if kind == ResearchJob.Kind.EXPORT:
            options["format"] = request.POST.get("format", "csv")
            options["include_texts"] = request.POST.get("include_texts") == "1"
            options["table"] = request.POST.get("table", "comparisons")
        elif kind == ResearchJob.Kind.REPORT:
            options["n_resamples"] = _int(request.POST.get("n_resamples", "2000"), "n_resamples")
        elif kind == ResearchJob.Kind.STRESS:
            options["tests"] = request.POST.getlist("tests")
            options["metrics"] = request.POST.getlist("metrics")
            options["limit"] = _int(request.POST.get("limit") or "200", "limit")
        elif kind == ResearchJob.Kind.PLAN:
            options["effect"] = _float(request.POST.get("effect", ""), "effect")
            options["taste_sd"] = _float(request.POST.get("taste_sd", "0.5"), "taste_sd")
            options["target"] = _float(request.POST.get("target", "0.8"), "target")
            options["questions"] = _int(request.POST.get("questions", "8"), "questions")
            options["reps"] = _int(request.POST.get("reps", "200"), "reps")
            options["sizes"] = [_int(size, "sizes") for size in request.POST.get("sizes", "").replace(",", " ").split()]
        elif kind == "scoring":
            scoring_run_start(
                study=study, metrics=request.POST.getlist("metrics"), by=request.user, origin=AuditOrigin.RESEARCH_PAGE
            )
            return redirect("analysis:study", slug=slug)
        if kind in (ResearchJob.Kind.EXPORT, ResearchJob.Kind.REPORT) and request.POST.get("exclusion_form") == "1":
            # The form's boxes: none ticked is the rule "none", not the study's default.
            options["exclude"] = request.POST.getlist("exclude") or "none"
        services.research_job_start(
            study=study, kind=kind, options=options, by=request.user, origin=AuditOrigin.RESEARCH_PAGE
        )
    except ApplicationError as error:
        return redirect(f"{reverse('analysis:study', args=[slug])}?{urlencode({'error': error.message})}")
    return redirect("analysis:study", slug=slug)


def _float(value: str, field: str) -> float:
    try:
        number = float(value.strip().replace("\u2212", "-"))  # a minus sign typed or pasted as the real one
    except (TypeError, ValueError, AttributeError):
        raise ApplicationError(f"{field.replace('_', ' ').capitalize()} must be a number.", field=field) from None
    if not math.isfinite(number):
        raise ApplicationError(f"{field.replace('_', ' ').capitalize()} must be a finite number.", field=field)
    return number


def _int(value: str, field: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApplicationError(f"{field.replace('_', ' ').capitalize()} must be a whole number.", field=field) from None


@researcher_required
@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    """The dashboard's Cancel on a queued or running job (services.research_job_cancel)."""
    job = research_job(user=request.user, job_id=job_id, action=StudyAction.ANALYSE)
    services.research_job_cancel(job=job, by=request.user, origin=AuditOrigin.RESEARCH_PAGE)
    return redirect("analysis:study", slug=job.study.slug)


@researcher_required
def job_status(request: HttpRequest, job_id: int) -> JsonResponse:
    return JsonResponse(job_json(research_job(user=request.user, job_id=job_id)))


@researcher_required
def scoring_status(request: HttpRequest, run_id: int) -> JsonResponse:
    run = research_scoring_run(user=request.user, run_id=run_id)
    return JsonResponse(
        {
            "id": run.pk,
            "status": run.status,
            "progress": run.percent,
            "done": run.done,
            "total": run.total,
            "error": run.error,
        }
    )


@researcher_required
def job_file(request: HttpRequest, job_id: int, name: str) -> HttpResponseBase:
    """One output file of a job, from the research storage; what is missing is said on a 404 page."""
    inline = Path(name).suffix in (".html", ".svg") and request.GET.get("download") != "1"
    try:
        storage, key = research_job_file(user=request.user, job_id=job_id, name=name)
        if inline:
            response: HttpResponseBase = _shown_in_the_browser(request, job_id, name, storage, key)
        else:
            response = stored_file_response(storage, key, name, as_attachment=True)
    except Http404 as missing:
        return render(request, "analysis/no_file.html", {"message": str(missing)}, status=404)
    except StorageUnavailable as fault:
        return render(request, "analysis/no_file.html", {"message": fault.message}, status=503)
    services.research_job_file_downloaded(job_id=job_id, name=name, by=request.user, origin=AuditOrigin.RESEARCH_PAGE)
    return response


# django-csp's decorator, typed for a view of one argument; it sets the policy on whatever response it wraps.
_research_file_policy: Any = csp(settings.RESEARCH_FILE_CSP)


@_research_file_policy
def _shown_in_the_browser(request: HttpRequest, job_id: int, name: str, storage: Storage, key: str) -> HttpResponseBase:
    """A report or figure opened in the browser, under the research files' policy (config/settings/base.py,
    RESEARCH_FILE_CSP): a document of its own making with its styles inline, which runs no script."""
    if name == "report.html":
        return _report_with_way_back(request, job_id, storage, key)
    return stored_file_response(storage, key, name, as_attachment=False)


def _report_with_way_back(request: HttpRequest, job_id: int, storage: Storage, key: str) -> FileResponse:
    """The report as the browser shows it: the file (self-contained, downloaded as is with ?download=1)
    with a link back to its study's dashboard at the top."""
    job = research_job(user=request.user, job_id=job_id)
    back = format_html(
        '<nav><p><a href="{}">← Back to {}</a></p></nav>',
        reverse("analysis:study", args=[job.study.slug]),
        job.study.title,
    )
    try:
        with storage_reasons(storage, then=DOWNLOAD_AGAIN), storage.open(key, "rb") as handle:
            html = handle.read().decode("utf-8")
    except (FileNotFoundError, OSError) as error:
        raise Http404(
            "The report is no longer on the server (not in the research storage); run the job again."
        ) from error
    page = html.replace("<body>", f"<body>{back}", 1).encode("utf-8")
    return FileResponse(BytesIO(page), content_type="text/html; charset=utf-8", filename="report.html")


@researcher_required
def latest_report(request: HttpRequest, slug: str) -> HttpResponse:
    study = research_study(user=request.user, slug=slug, action=StudyAction.ANALYSE)
    job = study.research_jobs.filter(kind=ResearchJob.Kind.REPORT, status=ResearchJob.Status.DONE).first()
    if job is None or "report.html" not in job.files:
        return render(request, "analysis/no_report.html", {"study": study}, status=404)
    return redirect("analysis:job-file", job_id=job.pk, name="report.html")


@researcher_required
@require_http_methods(["GET", "POST"])
def api_token(request: HttpRequest) -> HttpResponse:
    """The researcher's API token: shown, created on request, replaced (the old one stops working)."""
    user = cast(Any, request.user)  # signed in: researcher_required let only researchers through
    token = Token.objects.filter(user=user).first()
    if request.method == "POST":
        with transaction.atomic():  # two presses at once: the user's row lock makes them one after the other
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            Token.objects.filter(user=user).delete()
            Token.objects.create(user=user)
        return redirect("analysis:token")
    return render(request, "analysis/token.html", {"token": token})
