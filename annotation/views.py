"""The annotator journey as server-rendered pages. Each view parses input, calls one service, renders."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth import login, update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.cache import cache
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import Truncator, normalize_newlines
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods, require_POST

from annotation import practice
from annotation.forms import ChoiceForm, ConsentForm, PersonaForm, PracticeForm, QueryForm, ScreeningForm
from annotation.models import Participation, Query
from annotation.selectors.generation import generation_progress
from annotation.selectors.participation import participation_by_invitation, participation_for
from annotation.selectors.prewritten import study_has_prewritten
from annotation.selectors.query import (
    queries_ranked_count,
    query_current,
    query_document_values,
    query_for,
    query_number,
    query_wait_state,
)
from annotation.selectors.tournament import match_current_of, match_progress
from annotation.services.participation import (
    external_ids_from,
    invitation_accept,
    invitation_check,
    invitation_require_unused,
    open_link_check,
    open_link_existing,
    open_link_join,
    open_link_require_own,
    open_link_require_room,
    open_link_study,
    participation_ended,
    participation_finish,
    participation_finish_refusal,
    participation_for_resume,
    participation_needs_screening,
    participation_preview_start,
    participation_queries_used,
    participation_require_restorable,
    participation_resume_link_replace,
    participation_resume_url,
    participation_screen,
)
from annotation.services.persona import FIXED, persona_current, persona_save
from annotation.services.prewritten import prewritten_query_next
from annotation.services.quality import check_warning
from annotation.services.query import query_discard, query_mark_wait_shown, query_resend, query_submit
from annotation.services.tournament import NOTHING_TO_ANSWER, bracket_settle, judgment_record_on_page, match_mark_shown
from corpus.models import CorpusDocument
from corpus.selectors import corpus_coverage, coverage_from_labels
from generation.offline_retrieval import DEFAULT_CORPUS_PATH, load_corpus_index
from kernel.exceptions import ApplicationError
from studies.models import Study
from studies.models_audit import AuditOrigin
from studies.selectors.membership import StudyAction, study_allows


def _error_page(
    request: HttpRequest, error: ApplicationError, *, study: Study | None = None, own_studies: bool = False
) -> HttpResponse:
    """The notice; with `own_studies`, a signed-in annotator's studies are listed to go back to."""
    participations = (
        list(Participation.objects.filter(annotator=request.user).select_related("study"))
        if own_studies and request.user.is_authenticated
        else []
    )
    return render(
        request,
        "annotation/notice.html",
        {"message": error.message, "study": study, "participations": participations},
        status=error.status,
    )


def _unavailable_page(request: HttpRequest, participation: Participation, *, status: int = 403) -> HttpResponse | None:
    """The page for a joined annotator whose study is paused or closed (None while it is open): what happened,
    what of theirs is kept, their reference to give the research team, and, when they had earned the completion
    code, the way to finish and get it (docs/annotators.md). A participation that has ended goes to its own end
    page instead, which gives the completion code or the reference."""
    study_obj = participation.study
    if study_obj.status == Study.Status.OPEN:
        return None
    if participation_ended(participation=participation):
        return redirect("annotation:done", slug=study_obj.slug)
    paused = study_obj.status == Study.Status.PAUSED
    ranked = participation.queries.filter(status=Query.Status.RANKED).count()
    return render(
        request,
        "annotation/unavailable.html",
        {
            "study": study_obj,
            "participation": participation,
            "paused": paused,
            "ranked": ranked,
            # Earned before the pause or the close: the code is still theirs to take (participation_finish).
            "earned": ranked >= study_obj.min_ranked_questions,
            "current": query_current(participation=participation),
            "resume_url": participation_resume_url(participation=participation) if paused else None,
        },
        status=status,
    )


def _refusal_page(request: HttpRequest, error: ApplicationError, participation: Participation) -> HttpResponse:
    """A service's refusal on a joined annotator's page. Refused because the study was paused or closed (before
    the request, or while it ran): the page of `_unavailable_page`, never a bare notice that leads back to itself."""
    if error.status in (403, 409) and (page := _state_page(request, participation, status=error.status)):
        return page
    return _error_page(request, error, study=participation.study)


def _state_page(request: HttpRequest, participation: Participation, *, status: int) -> HttpResponse | None:
    """Where a refused request goes when the refusal was the study's state or the participation's end, read
    again now (either may have changed while the request ran); None when the study is open and it goes on."""
    participation.study.refresh_from_db(fields=["status"])
    participation.refresh_from_db(fields=["completed_at", "stopped_at", "screened_out_at"])
    if participation_ended(participation=participation):
        return redirect("annotation:done", slug=participation.study.slug)
    return _unavailable_page(request, participation, status=status)


def _posted(request: HttpRequest) -> Any:
    """The submitted data on POST (even when empty, so that required fields report), else None."""
    return request.POST if request.method == "POST" else None


SHOWN_SALT = "annotation.page-shown"


def _shown_token(request: HttpRequest) -> str:
    """A signed hidden field saying when the form was first shown, for the time spent on the page. A form
    re-shown after an error keeps the first time. Signed, so a client cannot claim a longer read."""
    if request.method == "POST" and _shown_at(request) is not None:
        return str(request.POST["shown"])
    return signing.dumps(timezone.now().timestamp(), salt=SHOWN_SALT)


def _shown_at(request: HttpRequest) -> datetime | None:
    try:
        stamp = signing.loads(request.POST.get("shown", ""), salt=SHOWN_SALT, max_age=24 * 3600)
    except signing.BadSignature:
        return None
    return datetime.fromtimestamp(float(stamp), tz=UTC)


def home(request: HttpRequest) -> HttpResponse:
    participations = (
        Participation.objects.filter(annotator=request.user).select_related("study")
        if request.user.is_authenticated
        else []
    )
    return render(request, "annotation/home.html", {"participations": participations})


@require_http_methods(["GET", "POST"])
def join(request: HttpRequest, token: str) -> HttpResponse:
    """The invitation link: study information, consent, and the start of a participation."""
    try:
        invitation = invitation_check(token=token, allow_used_up=True)
    except ApplicationError as error:
        # An annotator who joined through it comes back to their study, whatever became of the link (expired,
        # its study paused or closed: the study's pages say so); a link deleted since names no study, so the
        # notice lists their studies.
        if (own := participation_by_invitation(annotator=request.user, token=token)) is not None:
            return redirect("annotation:study", slug=own.study.slug)
        return _error_page(request, error, own_studies=True)
    study = invitation.study
    if request.user.is_authenticated and Participation.objects.filter(study=study, annotator=request.user).exists():
        return redirect("annotation:study", slug=study.slug)
    try:
        # A used-up link is refused here, before the consent page, not after the annotator agreed.
        invitation_require_unused(invitation=invitation)
    except ApplicationError as error:
        return _error_page(request, error)
    if request.method == "POST" and "decline" in request.POST:
        # Nothing is recorded and the invitation stays unused; the annotator is told, or sent back to the platform.
        return _screened_out_response(request, study)
    form = ConsentForm(_posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            # One transaction with the sign-in: an accept whose session cannot be stored leaves the invitation
            # unused, so the annotator can agree again (a single-use link would otherwise be spent, the browser
            # not signed in).
            with transaction.atomic():
                participation = invitation_accept(
                    token=token, annotator=request.user if request.user.is_authenticated else None, consent=True
                )
                if not request.user.is_authenticated:
                    login(request, participation.annotator, backend="django.contrib.auth.backends.ModelBackend")
        except ApplicationError as error:
            return _error_page(request, error, study=study)
        return redirect("annotation:study", slug=study.slug)
    return render(request, "annotation/join.html", {"study": study, "form": form}, status=400 if form.errors else 200)


def _login_participant(request: HttpRequest, participation: Participation) -> None:
    """Sign this browser in as the participant's own passwordless account (never a researcher's: an
    ApplicationError, 403). Called once the resume link or the open link's rules (`open_link_require_own`)
    have let this browser continue the participation; the account rule is kept here too."""
    if request.user.is_authenticated and request.user.pk == participation.annotator_id:
        return
    participation_require_restorable(participation=participation)
    login(request, participation.annotator, backend="django.contrib.auth.backends.ModelBackend")


def _arrival_refused(request: HttpRequest, error: ApplicationError) -> HttpResponse:
    """An open-link arrival that may not continue the participation its platform id names: the page that says
    this id has already started and how to continue (the resume link, the research team), naming nothing of
    the participant's; any other refusal is the notice."""
    if error.extra.get("already_started"):
        return render(request, "annotation/already_started.html", {"message": error.message}, status=error.status)
    return _error_page(request, error)


def _screened_out_response(request: HttpRequest, study: Study) -> HttpResponse:
    """Back to the recruiting platform's screen-out address, or a page saying the session has ended."""
    if study.screen_out_url:
        return redirect(study.screen_out_url)
    return render(request, "annotation/screened_out.html", {"study": study})


@require_http_methods(["GET", "POST"])
def open_join(request: HttpRequest, token: str) -> HttpResponse:
    """The study's open link (docs/crowd.md): the recruiting platform's ids come in the query string
    (PROLIFIC_PID, STUDY_ID, SESSION_ID, or external_id / the study's own parameter) and ride along on the
    consent form, which posts to the same address. The same id arriving again resumes its participation in the
    browser that started it; another browser is told to use the resume link (`open_link_require_own`)."""
    try:
        study = open_link_study(token=token)
        external = external_ids_from(params=request.GET, study=study)
    except ApplicationError as error:
        return _error_page(request, error)
    existing = open_link_existing(study=study, external=external, annotator=request.user)
    if existing is not None:
        try:
            # Only the browser that started it continues it; another needs the resume link (docs/crowd.md).
            open_link_require_own(study=study, participation=existing, annotator=request.user)
            _login_participant(request, existing)
        except ApplicationError as error:
            return _arrival_refused(request, error)
        return redirect("annotation:study", slug=study.slug)
    try:
        open_link_check(study=study)  # expired, or not open: said before the consent page
        open_link_require_room(study=study)  # and so is a full study
    except ApplicationError as error:
        return _error_page(request, error)
    form = ConsentForm(_posted(request))
    declined = request.method == "POST" and "decline" in request.POST
    if declined or (request.method == "POST" and form.is_valid()):
        try:
            # One transaction with the sign-in, as an invitation's: an arrival whose session cannot be stored
            # takes no place in a capped study and leaves no participation behind that no browser can reach.
            with transaction.atomic():
                participation, created = open_link_join(
                    token=token, annotator=request.user, consent=not declined, external=external
                )
                if not created:  # the same id joined meanwhile, from another browser: the same rule as above
                    open_link_require_own(study=study, participation=participation, annotator=request.user)
                _login_participant(request, participation)
        except ApplicationError as error:
            return _arrival_refused(request, error)
        if declined:
            return _screened_out_response(request, study)
        return redirect("annotation:study", slug=study.slug)
    return render(
        request,
        "annotation/join.html",
        {"study": study, "form": form, "crowd": True},
        status=400 if form.errors else 200,
    )


def resume(request: HttpRequest, token: str) -> HttpResponse:
    """A personal resume link: this browser continues the participation where it stands, while it goes on
    (a link replaced since, or of a participation that has ended, gets a notice naming nothing of it)."""
    try:
        participation = participation_for_resume(token=token, annotator=request.user)
        _login_participant(request, participation)
    except ApplicationError as error:
        return _error_page(request, error)
    return redirect("annotation:study", slug=participation.study.slug)


@login_required(login_url="annotation:home")
@require_POST
def resume_link_replace(request: HttpRequest, slug: str) -> HttpResponse:
    """ "Replace my resume link": a new link, the old one stops working and other browsers are signed out;
    this one stays signed in, and the study's page shows the new link."""
    participation = participation_for(annotator=request.user, study_slug=slug)
    try:
        participation = participation_resume_link_replace(participation=participation)
    except ApplicationError as error:
        return _refusal_page(request, error, participation)
    update_session_auth_hash(request, participation.annotator)
    messages.success(
        request, _("Your resume link has been replaced. The old one no longer works: keep the new one below.")
    )
    return redirect("annotation:study", slug=slug)


@login_required(login_url="annotation:home")
@require_http_methods(["GET", "POST"])
def screening(request: HttpRequest, slug: str) -> HttpResponse:
    """The study's screening question, after consent and before the persona form."""
    participation = participation_for(annotator=request.user, study_slug=slug)
    if not participation_needs_screening(participation=participation) or participation_ended(
        participation=participation
    ):
        return redirect("annotation:study", slug=slug)
    if page := _unavailable_page(request, participation):
        return page
    study_obj = participation.study
    form = ScreeningForm(_posted(request), question=study_obj.screening_question, choices=study_obj.screening_choices)
    if request.method == "POST" and form.is_valid():
        try:
            participation = participation_screen(participation=participation, answer=form.cleaned_data["answer"])
        except ApplicationError as error:
            if error.status == 409:  # answered in another tab meanwhile, or no longer asked: carry on
                return redirect("annotation:study", slug=slug)
            form.add_error("answer", error.message)
        else:
            if participation.screened_out_at is not None:
                return _screened_out_response(request, study_obj)
            return redirect("annotation:study", slug=slug)
    return render(
        request, "annotation/screening.html", {"study": study_obj, "form": form}, status=400 if form.errors else 200
    )


@login_required(login_url="annotation:home")
@require_http_methods(["GET", "POST"])
def preview(request: HttpRequest, slug: str) -> HttpResponse:
    """ "Preview as annotator" for the study's owners and researchers: a page that says what a preview is,
    and its button, which starts (or resumes) a participation flagged as a preview."""
    study_obj = get_object_or_404(Study, slug=slug)
    if not study_allows(user=request.user, study=study_obj, action=StudyAction.ANALYSE):
        raise Http404
    if request.method == "POST":
        try:
            participation_preview_start(study=study_obj, by=request.user, origin=AuditOrigin.ANNOTATOR_PAGE)
        except ApplicationError as error:
            return _error_page(request, error)
        return redirect("annotation:study", slug=slug)
    return render(request, "annotation/preview.html", {"study": study_obj})


def _next_url(participation: Participation) -> str:
    slug = participation.study.slug
    if participation_ended(participation=participation):
        return reverse("annotation:done", args=[slug])
    if participation_needs_screening(participation=participation):
        return reverse("annotation:screening", args=[slug])
    if persona_current(participation=participation) is None:
        return reverse("annotation:profile", args=[slug])
    current = query_current(participation=participation)
    if current is not None:
        if current.status == Query.Status.READY:
            return reverse("annotation:compare", args=[slug, current.index])
        return reverse("annotation:wait", args=[slug, current.index])
    return reverse("annotation:ask", args=[slug])


@login_required(login_url="annotation:home")
def study(request: HttpRequest, slug: str) -> HttpResponse:
    """Send the annotator to wherever they are in the protocol; reloading is always safe."""
    participation = participation_for(annotator=request.user, study_slug=slug)
    ended = participation_ended(participation=participation)
    if not ended and (page := _unavailable_page(request, participation)):
        return page
    if (
        not ended
        and query_current(participation=participation) is None
        and persona_current(participation=participation) is not None
        and participation_queries_used(participation=participation) >= participation.study.queries_per_annotator
    ):
        participation_finish(participation=participation)
        participation.refresh_from_db()
    if not ended and _practice_due(request, participation):
        return redirect("annotation:practice", slug=slug)
    return redirect(_next_url(participation))


def _practice_key(participation: Participation) -> str:
    return f"practice-done:{participation.pk}"


def _practice_due(request: HttpRequest, participation: Participation) -> bool:
    """The practice round comes before the first question, once per browser session (it stores nothing, so
    an annotator resuming elsewhere before asking anything may see it again)."""
    return (
        participation.study.practice_round
        and not request.session.get(_practice_key(participation))
        and persona_current(participation=participation) is not None
        and not participation.queries.exists()
    )


@login_required(login_url="annotation:home")
@require_http_methods(["GET", "POST"])
def practice_round(request: HttpRequest, slug: str) -> HttpResponse:
    """The practice comparison: a fixed example, then feedback on what a good choice looks like. The choice
    is kept nowhere (only that the round was seen, in the session), so it never reaches the analysis."""
    participation = participation_for(annotator=request.user, study_slug=slug)
    if not _practice_due(request, participation):
        return redirect("annotation:study", slug=slug)
    if page := _unavailable_page(request, participation):
        return page
    form = PracticeForm(_posted(request))
    chosen = form.cleaned_data["choice"] if request.method == "POST" and form.is_valid() else None
    if chosen is not None:
        request.session[_practice_key(participation)] = True
    return render(
        request,
        "annotation/practice.html",
        {
            "study": participation.study,
            "example": practice,
            "chosen": chosen,
            "chose_better": chosen == practice.BETTER_CHOICE,
        },
    )


@login_required(login_url="annotation:home")
@require_http_methods(["GET", "POST"])
def profile(request: HttpRequest, slug: str) -> HttpResponse:
    participation = participation_for(annotator=request.user, study_slug=slug)
    if participation_ended(participation=participation):
        return redirect("annotation:done", slug=slug)
    if participation_needs_screening(participation=participation):
        return redirect("annotation:screening", slug=slug)
    if page := _unavailable_page(request, participation):
        return page
    current = persona_current(participation=participation)
    locked = participation.queries.exists()
    form = PersonaForm(_posted(request), initial=current.as_dict() if current else None)
    # An edit sent from a tab opened before the first question was asked (here or in another tab): not saved,
    # and the page says so and why, then shows what is stored, never the values that were not saved.
    not_saved = str(FIXED) if request.method == "POST" and locked else ""
    if request.method == "POST" and not locked and form.is_valid():
        try:
            persona_save(participation=participation, data=form.cleaned_data, shown_at=_shown_at(request))
        except ApplicationError as error:
            if "screening" in error.extra:  # a screening question added since this page was read comes first
                return redirect("annotation:screening", slug=slug)
            if error.field:
                form.add_error(error.field, error.message)
            elif page := _state_page(request, participation, status=error.status):
                return page
            else:  # a question asked in another tab while this edit was on its way
                locked, not_saved = True, error.message
        else:
            return redirect("annotation:study", slug=slug)
    if locked:
        stored = persona_current(participation=participation)
        form = PersonaForm(initial=stored.as_dict() if stored else None)
    return render(
        request,
        "annotation/profile.html",
        {
            "study": participation.study,
            "form": form,
            "locked": locked,
            "not_saved": not_saved,
            "participation": participation,
            "shown": _shown_token(request),
        },
        status=409 if not_saved else 400 if form.errors else 200,
    )


@login_required(login_url="annotation:home")
@require_http_methods(["GET", "POST"])
def ask(request: HttpRequest, slug: str) -> HttpResponse:
    participation = participation_for(annotator=request.user, study_slug=slug)
    if page := _unavailable_page(request, participation):
        return page
    if participation_needs_screening(participation=participation):  # it comes first, on GET and POST alike
        return redirect("annotation:screening", slug=slug)
    study_obj = participation.study
    used = participation_queries_used(participation=participation)
    if request.method == "GET":
        if participation_ended(participation=participation) or query_current(participation=participation):
            return redirect("annotation:study", slug=slug)
        if persona_current(participation=participation) is None:
            return redirect("annotation:profile", slug=slug)
        if _practice_due(request, participation):
            return redirect("annotation:practice", slug=slug)
    if study_has_prewritten(study=study_obj):
        return _next_item(request, participation, used)
    form = QueryForm(
        _posted(request), initial={"client_token": secrets.token_hex(16)}, max_chars=study_obj.max_query_chars
    )
    if request.method == "POST" and form.is_valid():
        try:
            query = query_submit(
                participation=participation,
                text=form.cleaned_data["text"],
                client_token=form.cleaned_data["client_token"],
                shown_at=_shown_at(request),
            )
        except ApplicationError as error:
            if "screening" in error.extra:
                return redirect("annotation:screening", slug=slug)
            if not error.field and (page := _state_page(request, participation, status=error.status)):
                return page
            # Anything else (a question still open in another tab, the limit, the text itself) is said on the
            # form, which keeps the question typed.
            form.add_error(error.field, error.message)
        else:
            return redirect("annotation:wait", slug=slug, index=query.index)
    return render(
        request,
        "annotation/ask.html",
        {
            "study": study_obj,
            "form": form,
            "number": used + 1,
            "limit": study_obj.queries_per_annotator,
            # No question is open on this page, so every one counted in `used` is ranked: with enough, the
            # finish button gives the code at once; with too few it leads to the stop page, which says why
            # there will be no code before the annotator confirms.
            "earns_code": used >= study_obj.min_ranked_questions,
            "shown": _shown_token(request),
            "persona_editable": used == 0 and not participation.queries.exists(),
            "coverage": _sources_coverage(study_obj),
            "participation": participation,
            "resume_url": participation_resume_url(participation=participation),
        },
        status=400 if form.errors else 200,
    )


def _next_item(request: HttpRequest, participation: Participation, used: int) -> HttpResponse:
    """The ask page of a study of pre-written outputs: no question box, a button for the next item (its
    summaries are written already, so the comparisons follow at once)."""
    study_obj = participation.study
    error = ""
    if request.method == "POST":
        try:
            query = prewritten_query_next(
                participation=participation,
                client_token=str(request.POST.get("client_token", ""))[:64],
                shown_at=_shown_at(request),
            )
        except ApplicationError as refusal:
            if "screening" in refusal.extra:
                return redirect("annotation:screening", slug=study_obj.slug)
            if page := _state_page(request, participation, status=refusal.status):
                return page
            error = refusal.message
        else:
            return redirect("annotation:compare", slug=study_obj.slug, index=query.index)
    return render(
        request,
        "annotation/next_item.html",
        {
            "study": study_obj,
            "error": error,
            "client_token": secrets.token_hex(16),
            "number": used + 1,
            "limit": study_obj.queries_per_annotator,
            "earns_code": used >= study_obj.min_ranked_questions,
            "shown": _shown_token(request),
            "participation": participation,
            "resume_url": participation_resume_url(participation=participation),
        },
        status=409 if error else 200,
    )


def _sources_coverage(study_obj: Study) -> dict[str, Any] | None:
    """Which fields the study's sources cover (the local corpus's or the demo file's), computed once per
    corpus and kept in the cache for an hour; None for a remote search (OpenAlex covers everything)."""
    backend = study_obj.retrieval_backend
    settings_ = study_obj.retrieval_settings if isinstance(study_obj.retrieval_settings, dict) else {}
    if backend == "corpus":
        latest = CorpusDocument.objects.order_by("-updated_at").values_list("updated_at", flat=True).first()
        # A timestamp, not the datetime's text (its space is not allowed in a memcached key).
        key = f"sources-coverage:corpus:{CorpusDocument.objects.count()}:{latest.timestamp() if latest else 0}"
        return cache.get_or_set(key, corpus_coverage, 3600)
    if backend == "demo":
        path = str(settings_.get("corpus_path") or DEFAULT_CORPUS_PATH)

        def compute() -> dict[str, Any] | None:
            try:
                documents = load_corpus_index(path).documents
            except Exception:  # noqa: BLE001 - the retrieval reports a broken corpus; this line is optional
                return None
            return coverage_from_labels((d.venue for d in documents), titles=(d.title for d in documents))

        return cache.get_or_set(f"sources-coverage:demo:{path}", compute, 3600)
    return None


@login_required(login_url="annotation:home")
def wait(request: HttpRequest, slug: str, index: int) -> HttpResponse:
    """While the summaries are prepared. Past the deadline it says what is happening, in plain words, and
    offers a way out: try again, set the question aside, or stop the study."""
    participation = participation_for(annotator=request.user, study_slug=slug)
    query = query_for(participation=participation, index=index)
    if participation_ended(participation=participation) or query.status in (
        Query.Status.READY,
        Query.Status.RANKED,
        Query.Status.DISCARDED,
    ):
        return redirect("annotation:study", slug=slug)
    if page := _unavailable_page(request, participation):  # try again and set aside are refused while paused
        return page
    query_mark_wait_shown(query=query)
    progress = generation_progress(query=query)
    state = query_wait_state(query=query, progress=progress)
    return render(
        request,
        "annotation/wait.html",
        {
            "study": participation.study,
            "query": query,
            "progress": progress,
            "status_url": reverse("annotation:status", args=[slug, index]),
            "state": state,
            "number": query_number(query=query),
            "limit": participation.study.queries_per_annotator,
        },
    )


@login_required(login_url="annotation:home")
def status(request: HttpRequest, slug: str, index: int) -> JsonResponse:
    """Polled by the waiting page; says nothing about which system is which."""
    participation = participation_for(annotator=request.user, study_slug=slug)
    query = query_for(participation=participation, index=index)
    progress = generation_progress(query=query)
    state = query_wait_state(query=query, progress=progress)
    return JsonResponse(
        {
            "status": state.status,
            "failed": state.failed,
            "failure_reason": state.reason,
            "overdue": state.overdue,
            "message": state.message,
            "candidates": progress,
            "next": reverse("annotation:study", args=[slug]),
        }
    )


@login_required(login_url="annotation:home")
@require_POST
def retry(request: HttpRequest, slug: str, index: int) -> HttpResponse:
    participation = participation_for(annotator=request.user, study_slug=slug)
    query = query_for(participation=participation, index=index)
    try:
        query_resend(query=query)
    except ApplicationError as error:
        return _refusal_page(request, error, participation)
    return redirect("annotation:wait", slug=slug, index=index)


@login_required(login_url="annotation:home")
@require_POST
def discard(request: HttpRequest, slug: str, index: int) -> HttpResponse:
    participation = participation_for(annotator=request.user, study_slug=slug)
    query = query_for(participation=participation, index=index)
    try:
        query_discard(query=query)
    except ApplicationError as error:
        return _refusal_page(request, error, participation)
    return redirect("annotation:study", slug=slug)


# A source as the comparison page lists it.
PAGE_DOCUMENT_FIELDS = ("rank", "title", "abstract", "url", "year")


@login_required(login_url="annotation:home")
@require_http_methods(["GET", "POST"])
def compare(request: HttpRequest, slug: str, index: int) -> HttpResponse:
    """One match: two summaries side by side, left / right / neither."""
    participation = participation_for(annotator=request.user, study_slug=slug)
    # A comment refused (too long) is said on the comparison shown again, the typed comment still in its box:
    # the choice was not recorded, and the annotator shortens it and chooses again.
    refused_comment: tuple[str, str] | None = None
    if request.method == "POST":
        form = ChoiceForm(request.POST)
        valid = form.is_valid()
        if not valid and set(form.errors) != {"comment"}:
            return _error_page(
                request, ApplicationError(_("Choose left, right or neither.")), study=participation.study
            )
        if valid or participation.study.comments == Study.Comments.OFF:  # no box shown: no comment kept
            answered_or_refused = _compare_answer(request, participation, index, form)
            if isinstance(answered_or_refused, HttpResponse):
                return answered_or_refused
            refused_comment = answered_or_refused
        else:
            refused_comment = (normalize_newlines(request.POST.get("comment", "")), str(form.errors["comment"][0]))
    # The current match with its question in one read; the question alone only when there is none.
    match = match_current_of(participation=participation, index=index)
    query = match.bracket.query if match is not None else query_for(participation=participation, index=index)
    if page := _unavailable_page(request, participation):
        return page
    if participation_ended(participation=participation) or query.status != Query.Status.READY:
        return redirect("annotation:study", slug=slug)  # a question set aside or stopped shows no more matches
    if match is None:
        # Ready with nothing to answer: settled (its next match made, or ranked), the study's page goes on from
        # there; without that, each page sent the annotator to the other for ever.
        if not bracket_settle(query_id=query.pk):
            return _error_page(request, ApplicationError(str(NOTHING_TO_ANSWER), status=409), study=participation.study)
        return redirect("annotation:study", slug=slug)
    try:
        match_mark_shown(match=match, participation=participation)
    except ApplicationError as error:  # paused or ended since the checks above
        return _refusal_page(request, error, participation)
    answered, total = match_progress(match=match)
    study_obj = participation.study
    return render(
        request,
        "annotation/compare.html",
        {
            "study": study_obj,
            "query": query,
            "match": match,
            # What the sources list shows (not the authors, venue or score), read in one written statement.
            "documents": [
                dict(zip(PAGE_DOCUMENT_FIELDS, row, strict=True))
                for row in query_document_values(query=query, names=PAGE_DOCUMENT_FIELDS)
            ],
            "comparison_number": answered + 1,
            "comparison_total": total,
            "number": query.number,  # type: ignore[attr-defined]  # read with the match (match_current_of)
            "limit": study_obj.queries_per_annotator,
            "is_final": match.label == "final" and not match.check_expected,  # a check never poses as the final
            "allow_ties": study_obj.allow_ties,
            "comments": study_obj.comments,
            # The comment refused, as typed; else the question's comment so far, to edit (comments per question).
            "comment_text": refused_comment[0]
            if refused_comment
            else query.feedback
            if study_obj.comments == Study.Comments.QUESTION
            else "",
            "comment_error": refused_comment[1] if refused_comment else "",
        },
        status=400 if refused_comment else 200,
    )


def _compare_answer(
    request: HttpRequest, participation: Participation, index: int, form: ChoiceForm
) -> HttpResponse | tuple[str, str]:
    """Record the answer of a valid form: the response, or (the comment, why it was refused) to show again."""
    slug = participation.study.slug
    # Every answer names its match; only the one on screen now takes it (checked in the service's locked
    # read, which also finds the question). The same answer sent again (a double click) is harmless;
    # anything else is explained, never applied to the current match.
    # The box is shown only where the study collects comments; anything else posted is not kept.
    comment = form.cleaned_data["comment"] if participation.study.comments != Study.Comments.OFF else ""
    started = timezone.now()
    try:
        judgment = judgment_record_on_page(
            participation=participation,
            index=index,
            match_id=form.cleaned_data["match_id"],
            choice=form.cleaned_data["choice"],
            comment=comment,
        )
    except ApplicationError as error:
        if error.field == "comment":
            return comment, error.message
        if error.status != 409 or "match" not in error.extra:
            return _refusal_page(request, error, participation)
        query_for(participation=participation, index=index)  # an unknown question is a 404, as on GET
        return render(
            request,
            "annotation/notice.html",
            {"message": error.message, "study": participation.study, "title": _("Your answer was not recorded")},
            status=409,
        )
    # Warned once, by the answer that recorded the failed check (not by an earlier one sent again).
    if warning := check_warning(judgment=judgment, since=started):
        messages.info(request, warning)
    _say_if_ranked(request, judgment=judgment, since=started)
    # Post/redirect/get: a reload or the back button never re-sends an answer.
    return redirect("annotation:study", slug=slug)


def _say_if_ranked(request: HttpRequest, *, judgment: Any, since: datetime) -> None:
    """The answer that finished a question says so before the next page, and when it earned the completion
    code, that too: otherwise the page simply moves on to the next question, as if nothing had happened."""
    query = judgment.match.bracket.query
    if judgment.answered_at < since or query.status != Query.Status.RANKED:
        return  # not this answer's doing (the same answer sent again), or the question goes on
    messages.success(
        request,
        _("Thank you: your comparisons for the question “%(text)s” are complete and saved.")
        % {"text": Truncator(query.text).chars(80)},
    )
    least = query.participation.study.min_ranked_questions
    if least and queries_ranked_count(participation_id=query.participation_id) == least:
        messages.success(
            request,
            ngettext(
                "You have compared the summaries of %(least)d question: you have earned your completion code. "
                "Ask another question, or stop and finish the study to receive it.",
                "You have compared the summaries of %(least)d questions: you have earned your completion code. "
                "Ask another question, or stop and finish the study to receive it.",
                least,
            )
            % {"least": least},
        )


@login_required(login_url="annotation:home")
def stop(request: HttpRequest, slug: str) -> HttpResponse:
    """The confirmation step before stopping the study early (works without JavaScript): it says what
    stopping records (with too few questions ranked: no completion code, and the reference to give the
    research team), then posts to `finish`. A paused or closed study says why it cannot be finished now, unless
    the code was earned before: that can always be taken."""
    participation = participation_for(annotator=request.user, study_slug=slug)
    if participation_ended(participation=participation):
        return redirect("annotation:done", slug=slug)
    if refusal := participation_finish_refusal(participation=participation):
        return _refusal_page(request, refusal, participation)
    current = query_current(participation=participation)
    ranked = participation.queries.filter(status=Query.Status.RANKED).count()
    return render(
        request,
        "annotation/stop.html",
        {
            "study": participation.study,
            "participation": participation,
            "current": current,
            "ranked": ranked,
            "earns_code": ranked >= participation.study.min_ranked_questions,
        },
    )


@login_required(login_url="annotation:home")
@require_POST
def finish(request: HttpRequest, slug: str) -> HttpResponse:
    participation = participation_for(annotator=request.user, study_slug=slug)
    try:
        participation = participation_finish(participation=participation)
    except ApplicationError as error:
        return _refusal_page(request, error, participation)
    # A crowd study sends the finished annotator straight back to the platform (they just pressed Finish);
    # the done page keeps the code and a button to the same address for a reload or a later visit.
    if participation.completed_at is not None and participation.study.completion_url:
        return redirect(participation.study.completion_url)
    return redirect("annotation:done", slug=slug)


@login_required(login_url="annotation:home")
def done(request: HttpRequest, slug: str) -> HttpResponse:
    participation = participation_for(annotator=request.user, study_slug=slug)
    if not participation_ended(participation=participation):
        return redirect("annotation:study", slug=slug)
    if participation.screened_out_at is not None and participation.screen_out_reason != Participation.ScreenOut.CHECKS:
        return render(request, "annotation/screened_out.html", {"study": participation.study})
    ranked = participation.queries.filter(status=Query.Status.RANKED).count()
    return render(
        request,
        "annotation/done.html",
        {"study": participation.study, "participation": participation, "ranked": ranked},
    )
