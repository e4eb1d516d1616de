"""The audit log (docs/permissions.md, "Audit log"): every admin and researcher action of the permission matrix,
done through its real page or API by an account allowed to, leaves a row naming that account, the event, the
study and the values before and after; the matrix itself checks that a refused request writes none
(test_permission_matrix.py). The log is read-only in the admin, scoped to member studies, and exported."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from analysis.models import ResearchJob
from annotation.models import Candidate, Participation
from annotation.selectors.tournament import match_current
from annotation.services.participation import participation_finish
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from studies.models import Study, StudyMembership
from studies.models_audit import StudyAuditLog
from tests.annotation.factories import join
from tests.studies.test_study_rules import _form_data

pytestmark = pytest.mark.django_db

STUDY = "/api/v1/admin/studies/matrix/"


def _client(world, role: str) -> Client:
    client = Client()
    client.force_login(world.users[role])
    return client


def _send(client: Client, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    if url.startswith("/api/"):
        return client.generic(method, url, json.dumps(body or {}), content_type="application/json")
    if method == "POST":
        return client.post(url, body or {})
    return client.get(url)


def _written_by(action) -> list[StudyAuditLog]:  # type: ignore[no-untyped-def]
    """The audit rows `action` wrote, oldest first."""
    mark = StudyAuditLog.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    action()
    return list(StudyAuditLog.objects.filter(pk__gt=mark).order_by("pk"))


def _queued_job(world) -> ResearchJob:  # type: ignore[no-untyped-def]
    return ResearchJob.objects.create(study=world.study, kind="export", options={"format": "csv"})


# (who, method, URL, body, the origin, then per row written: event type, object, before ⊇, after ⊇)
Expected = list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]]
API_ACTIONS: list[tuple[str, str, str, dict[str, Any] | None, Expected]] = [
    (
        "owner_member",
        "POST",
        "/api/v1/admin/studies/",
        {"slug": "new-one", "title": "New"},
        [
            ("study_created", "new-one", None, {"slug": "new-one", "title": "New", "status": "draft"}),
            ("member_added", "owner", None, {"role": "owner"}),
        ],
    ),
    (
        "owner_member",
        "PATCH",
        STUDY,
        {"title": "Renamed", "retrieval_k": 5},
        [("study_settings_changed", "matrix", {"title": "Matrix study", "retrieval_k": 10}, {"title": "Renamed"})],
    ),
    (
        "admin",
        "PUT",
        STUDY,
        {"slug": "matrix", "title": "Renamed"},
        [("study_settings_changed", "matrix", {"title": "Matrix study"}, {"title": "Renamed"})],
    ),
    (
        "owner_member",
        "POST",
        STUDY + "status/",
        {"status": "paused"},
        [("study_status_changed", "matrix", {"status": "open"}, {"status": "paused"})],
    ),
    (
        "owner_member",
        "PATCH",
        STUDY,
        {"open_link_enabled": True, "participant_cap": 40},
        [
            (
                "study_open_link_changed",
                "matrix",
                {"open_link_enabled": False, "participant_cap": None},
                {"open_link_enabled": True, "participant_cap": 40},
            )
        ],
    ),
    (
        "owner_member",
        "POST",
        STUDY + "invitations/",
        {"count": 3, "note": "ward 4"},
        [("invitations_created", "3 invitation(s)", None, {"count": 3, "max_uses": 1, "note": "ward 4"})],
    ),
    (
        "owner_member",
        "POST",
        STUDY + "members/",
        {"username": "plain", "role": "viewer"},
        [("member_added", "plain", None, {"role": "viewer"})],
    ),
    (
        "owner_member",
        "POST",
        STUDY + "members/",
        {"username": "viewer", "role": "researcher"},
        [("member_role_changed", "viewer", {"role": "viewer"}, {"role": "researcher"})],
    ),
    (
        "owner_member",
        "DELETE",
        STUDY + "members/viewer/",
        None,
        [("member_removed", "viewer", {"role": "viewer"}, None)],
    ),
    (
        "researcher_member",
        "POST",
        STUDY + "participations/{code}/exclusion/",
        {"reason": "too fast"},
        [("participation_excluded", "{code}", {"excluded_at": None}, {"exclusion_reason": "too fast"})],
    ),
    (
        "owner_member",
        "POST",
        "/api/v1/admin/failed-candidates/{candidate}/retry/",
        None,
        [
            (
                "generation_retried",
                "candidate {candidate}",
                {"status": "failed", "failure_reason": "server down"},
                {"status": "queued", "failure_reason": "", "attempts": 0},
            )
        ],
    ),
    (
        "owner_member",
        "POST",
        "/api/v1/admin/failed-candidates/retry-all/",
        None,
        [("generation_retried", "candidate {candidate}", {"status": "failed"}, {"status": "queued"})],
    ),
    (
        "researcher_member",
        "POST",
        "/api/v1/research/studies/matrix/jobs/",
        {"kind": "export", "options": {"format": "csv"}},
        [("research_job_started", "export job", None, {"kind": "export"})],
    ),
    (
        "researcher_member",
        "POST",
        "/api/v1/research/studies/matrix/scoring-runs/",
        {"metrics": ["rouge1"]},
        [("scoring_run_started", "scoring run", None, {"metrics": ["rouge1"]})],
    ),
    (
        "researcher_member",
        "POST",
        "/api/v1/research/jobs/{queued}/cancel/",
        None,
        [("research_job_cancelled", "export job {queued}", {"status": "queued"}, {"status": "failed"})],
    ),
    (
        "researcher_member",
        "GET",
        "/api/v1/research/jobs/{job}/files/comparisons.csv",
        None,
        [("job_file_downloaded", "export job {job}", None, {"file": "comparisons.csv"})],
    ),
]
PAGE_ACTIONS: list[tuple[str, str, str, dict[str, Any] | None, Expected]] = [
    (
        "researcher_member",
        "POST",
        "/research/studies/matrix/jobs/",
        {"kind": "export", "format": "csv"},
        [("research_job_started", "export job", None, {"kind": "export"})],
    ),
    (
        "owner_member",
        "POST",
        "/research/studies/matrix/jobs/",
        {"kind": "scoring", "metrics": "rouge1"},
        [("scoring_run_started", "scoring run", None, {"metrics": ["rouge1"]})],
    ),
    (
        "researcher_member",
        "POST",
        "/research/studies/matrix/participations/{code}/exclusion/",
        {"reason": "too fast"},
        [("participation_excluded", "{code}", {"exclusion_reason": ""}, {"exclusion_reason": "too fast"})],
    ),
    (
        "owner_member",
        "POST",
        "/research/jobs/{queued}/cancel/",
        None,
        [("research_job_cancelled", "export job {queued}", {"status": "queued"}, {"status": "failed"})],
    ),
    (
        "researcher_member",
        "GET",
        "/research/jobs/{job}/files/comparisons.csv",
        None,
        [("job_file_downloaded", "export job {job}", None, {"file": "comparisons.csv"})],
    ),
    (
        "researcher_member",
        "GET",
        "/research/jobs/{report}/files/report.html",
        None,
        [("job_file_downloaded", "report job {report}", None, {"file": "report.html"})],
    ),
    (
        "researcher_member",
        "POST",
        "/study/matrix/preview/",
        None,
        [("preview_started", "", None, {})],
    ),
]
ORIGINS = {"/api/v1/admin/": "admin API", "/api/v1/research/": "research API", "/research/": "research page"}


def _origin(url: str) -> str:
    return next((origin for prefix, origin in ORIGINS.items() if url.startswith(prefix)), "annotator page")


def _subset(stored: Any, expected: dict[str, Any] | None) -> bool:
    if expected is None:
        return stored is None
    return isinstance(stored, dict) and all(stored.get(key) == value for key, value in expected.items())


@pytest.mark.parametrize(
    ("role", "method", "url", "body", "expected"),
    API_ACTIONS + PAGE_ACTIONS,
    ids=[f"{method} {url}" for _, method, url, *_ in API_ACTIONS + PAGE_ACTIONS],
)
def test_an_allowed_action_leaves_a_row_naming_who_did_what(world, role, method, url, body, expected):
    values = {
        "code": world.participation.code,
        "candidate": world.failed.pk,
        "job": world.export.pk,
        "report": world.report.pk,
        "queued": _queued_job(world).pk,
    }
    url = url.format(**values)
    body = {k: v.format(**values) if isinstance(v, str) else v for k, v in (body or {}).items()}
    client = _client(world, role)
    response = None

    def act() -> None:
        nonlocal response
        response = _send(client, method, url, body)

    rows = _written_by(act)
    assert response is not None and response.status_code < 400, response.content
    user = world.users[role]
    got = [(row.event_type, row.object_repr) for row in rows]
    assert len(rows) == len(expected), got
    for row, (event, shown, before, after) in zip(rows, expected, strict=True):
        assert row.event_type == event, got
        assert shown.format(**values) in row.object_repr, got
        assert row.actor == user and row.actor_name == user.username
        assert row.origin == _origin(url)
        study_slug = "new-one" if url == "/api/v1/admin/studies/" else "matrix"
        assert row.study == Study.objects.get(slug=study_slug) and row.study_slug == study_slug
        assert _subset(row.before, before), row.before
        assert _subset(row.after, after), row.after


def test_a_repeated_idempotent_action_writes_no_second_row(world):
    owner = _client(world, "owner_member")
    body = {"username": "plain", "role": "viewer"}
    first = _written_by(lambda: owner.post(STUDY + "members/", body, content_type="application/json"))
    again = _written_by(lambda: owner.post(STUDY + "members/", body, content_type="application/json"))
    assert [r.event_type for r in first] == ["member_added"] and again == []


def test_a_rolled_back_change_leaves_no_row(world):
    """Written in the change's transaction: refused by the last-owner rule after its checks, nothing stays."""
    owner = world.users["owner_member"]
    rows = _written_by(lambda: _client(world, "owner_member").delete(STUDY + f"members/{owner.username}/"))
    assert rows == [] and StudyMembership.objects.filter(study=world.study, user=owner, role="owner").exists()


def test_study_member_command_is_audited_with_its_origin_and_no_actor(world):
    rows = _written_by(
        lambda: call_command("study_member", study="matrix", user="plain", role="researcher", stdout=io.StringIO())
    )
    [row] = rows
    assert (row.event_type, row.object_repr, row.actor, row.actor_name) == ("member_added", "plain", None, "")
    assert row.origin == "manage.py study_member" and row.study == world.study
    assert row.after == {"role": "researcher"}


def test_score_study_command_is_audited_with_its_origin(world):
    rows = _written_by(lambda: call_command("score_study", study="matrix", metrics="rouge1", stdout=io.StringIO()))
    assert [(r.event_type, r.actor, r.origin, r.study, r.after["metrics"]) for r in rows] == [
        ("scoring_run_started", None, "manage.py score_study", world.study, ["rouge1"])
    ]


def test_secrets_are_not_logged(world):
    """A system's api_key_env names a variable (kept); the open link's token, or a key in the settings, never."""
    admin = _client(world, "admin")
    open_link = _written_by(lambda: admin.patch(STUDY, {"open_link_enabled": True}, content_type="application/json"))
    token = Study.objects.get(pk=world.study.pk).open_link_token
    assert token and token not in json.dumps([[r.before, r.after] for r in open_link])

    admin.post("/api/v1/admin/studies/", {"slug": "keys", "title": "Keys"}, content_type="application/json")
    fresh = Study.objects.get(slug="keys")  # no summaries yet: its systems may change
    systems = [{"label": s.label, "model_name": s.model_name, "condition": s.condition} for s in fresh.systems.all()]
    systems[0] |= {"generation_backend": "openai", "backend_settings": {"api_key_env": "MODEL_KEY"}}
    changed = _written_by(
        lambda: admin.patch("/api/v1/admin/studies/keys/", {"systems": systems}, content_type="application/json")
    )
    assert [r.event_type for r in changed] == ["study_systems_changed"], [r.after for r in changed]
    label = systems[0]["label"]
    assert changed[0].after["systems"][label]["backend_settings"] == {"api_key_env": "MODEL_KEY"}

    from studies.services.audit import audit_value

    assert audit_value(
        {"backend_settings": {"api_key": "sk-live", "Authorization": "Bearer x", "api_key_env": "K"}}
    ) == {"backend_settings": {"api_key": "[redacted]", "Authorization": "[redacted]", "api_key_env": "K"}}


# --- the Django admin ----------------------------------------------------------------------------------


def test_admin_edits_are_audited(world):
    owner = world.users["owner_member"]
    client = _client(world, "owner_member")
    study = world.study
    page = f"/admin/studies/study/{study.pk}/change/"
    data = _form_data(study, title="Edited in the admin")
    data.pop("loaded_state", None)
    # The members inline: the owner stays, the viewer becomes a researcher.
    members = list(StudyMembership.objects.filter(study=study).order_by("pk"))
    data |= {"memberships-TOTAL_FORMS": str(len(members)), "memberships-INITIAL_FORMS": str(len(members))}
    for i, m in enumerate(members):
        role = "researcher" if m.user.username == "viewer" else m.role
        data |= {
            f"memberships-{i}-id": str(m.pk),
            f"memberships-{i}-study": str(study.pk),
            f"memberships-{i}-user": str(m.user_id),
            f"memberships-{i}-role": role,
        }
    rows = _written_by(lambda: client.post(page, data))
    assert [(r.event_type, r.object_repr) for r in rows] == [
        ("study_settings_changed", "matrix"),
        ("member_role_changed", "viewer"),
    ]
    assert rows[0].before == {"title": "Matrix study"} and rows[0].after == {"title": "Edited in the admin"}
    assert all(r.actor == owner and r.origin == "admin" for r in rows)

    paused = _written_by(
        lambda: client.post("/admin/studies/study/", {"action": "pause_studies", "_selected_action": [str(study.pk)]})
    )
    assert [(r.event_type, r.before, r.after) for r in paused] == [
        ("study_status_changed", {"status": "open"}, {"status": "paused"})
    ]

    invited = _written_by(
        lambda: client.post(
            f"/admin/studies/study/{study.pk}/invitations/", {"count": "2", "max_uses": "1", "note": "wave 2"}
        )
    )
    assert [(r.event_type, r.after["count"], r.actor) for r in invited] == [("invitations_created", 2, owner)]

    invitation = world.invitation  # editing one takes the change permission, which the matrix's owner lacks
    changed = _written_by(
        lambda: _client(world, "admin").post(
            f"/admin/studies/invitation/{invitation.pk}/change/",
            {"max_uses": "5", "expires_at_0": "", "expires_at_1": "", "note": "reused"},
        )
    )
    assert [(r.event_type, r.before, r.after) for r in changed] == [
        ("invitation_changed", {"max_uses": 1, "note": ""}, {"max_uses": 5, "note": "reused"})
    ]


def test_admin_actions_on_participations_and_generations_are_audited(world):
    researcher = _client(world, "owner_member")
    participation = world.participation
    excluded = _written_by(
        lambda: researcher.post(
            "/admin/annotation/participation/",
            {"action": "exclude_participations", "_selected_action": [str(participation.pk)], "reason": "bot"},
        )
    )
    assert [(r.event_type, r.object_repr, r.after["exclusion_reason"], r.origin) for r in excluded] == [
        ("participation_excluded", participation.code, "bot", "admin")
    ]
    included = _written_by(
        lambda: researcher.post(
            "/admin/annotation/participation/",
            {"action": "include_participations", "_selected_action": [str(participation.pk)]},
        )
    )
    assert [(r.event_type, r.before["exclusion_reason"], r.after) for r in included] == [
        ("participation_included", "bot", {"excluded_at": None, "exclusion_reason": ""})
    ]
    failed = world.failed
    retried = _written_by(
        lambda: researcher.post(
            "/admin/annotation/candidate/", {"action": "retry", "_selected_action": [str(failed.pk)]}
        )
    )
    assert [(r.event_type, r.object_id, r.before["status"], r.after["status"]) for r in retried] == [
        ("generation_retried", str(failed.pk), "failed", "queued")
    ]
    Candidate.objects.filter(pk=failed.pk).update(status=Candidate.Status.FAILED, failure_reason="down again")
    again = _written_by(  # the query's change permission: the matrix's owner has it not, a superuser has
        lambda: _client(world, "admin").post(
            "/admin/annotation/query/", {"action": "retry_failed", "_selected_action": [str(failed.query_id)]}
        )
    )
    assert [(r.event_type, r.object_type, r.after["queued"], r.actor_name) for r in again] == [
        ("generation_retried", "query", [failed.pk], "root")
    ]


def test_the_admin_log_is_read_only_scoped_and_exported(world):
    owner, root = _client(world, "owner_member"), _client(world, "admin")
    root.patch(STUDY, {"title": "Renamed"}, content_type="application/json")
    # Another study's change: the matrix study's owner never sees it.
    elsewhere = Study.objects.get(slug="elsewhere")
    root.patch(f"/api/v1/admin/studies/{elsewhere.slug}/", {"title": "Theirs"}, content_type="application/json")
    theirs = StudyAuditLog.objects.get(study=elsewhere, event_type="study_settings_changed")
    ours = StudyAuditLog.objects.get(study=world.study, event_type="study_settings_changed")

    # The owner needs the log's view permission (the researchers group has it, as docs/permissions.md says).
    assert owner.get("/admin/studies/studyauditlog/").status_code == 200
    listed = owner.get("/admin/studies/studyauditlog/?event_type__exact=study_settings_changed")
    assert listed.status_code == 200 and "Renamed" in listed.text and "Theirs" not in listed.text
    assert owner.get(f"/admin/studies/studyauditlog/{theirs.pk}/change/").status_code == 302  # as if none
    assert owner.get(f"/admin/studies/studyauditlog/{ours.pk}/change/").status_code == 200

    # Read-only for everyone, superusers included: no change, no delete, no add.
    for client in (owner, root):
        changed = client.post(f"/admin/studies/studyauditlog/{ours.pk}/change/", {"object_repr": "x"})
        assert changed.status_code == 403
        assert client.post(f"/admin/studies/studyauditlog/{ours.pk}/delete/", {"post": "yes"}).status_code == 403
        assert client.post("/admin/studies/studyauditlog/add/", {}).status_code == 403
    assert StudyAuditLog.objects.get(pk=ours.pk).object_repr == "matrix"

    # The CSV is the list as filtered: the owner's rows of the one event type, and only theirs.
    export = owner.get("/admin/studies/studyauditlog/export/?event_type__exact=study_settings_changed")
    assert export.status_code == 200 and export["Content-Type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [(r["id"], r["study"], r["actor"], r["event_type"]) for r in table] == [
        (str(ours.pk), "matrix", "root", "study_settings_changed")
    ]
    assert json.loads(table[0]["after"]) == {"title": "Renamed"}
    everything = root.get("/admin/studies/studyauditlog/export/")
    ids = {r["id"] for r in csv.DictReader(io.StringIO(b"".join(everything.streaming_content).decode()))}
    assert {str(ours.pk), str(theirs.pk)} <= ids


def test_the_api_lists_a_studys_log_filtered(world):
    owner = _client(world, "owner_member")
    owner.patch(STUDY, {"title": "Renamed"}, content_type="application/json")
    owner.post(STUDY + "status/", {"status": "paused"}, content_type="application/json")
    _client(world, "researcher_member").post(
        STUDY + f"participations/{world.participation.code}/exclusion/",
        {"reason": "x"},
        content_type="application/json",
    )
    rows = owner.get(STUDY + "audit/").json()
    assert [r["event_type"] for r in rows][:3] == [
        "participation_excluded",
        "study_status_changed",
        "study_settings_changed",
    ]
    by_owner = owner.get(STUDY + "audit/?actor=owner").json()
    assert {r["actor"] for r in by_owner} == {"owner"}
    [status] = owner.get(STUDY + "audit/?event_type=study_status_changed").json()
    assert (status["before"], status["after"], status["origin"]) == (
        {"status": "open"},
        {"status": "paused"},
        "admin API",
    )
    assert owner.get(STUDY + "audit/?limit=1").json() == rows[:1]
    assert owner.get(STUDY + f"audit/?before={rows[0]['id']}").json() == rows[1:]
    wrong = owner.get(STUDY + "audit/?event_type=study_burned")
    assert wrong.status_code == 400 and "event_type" in wrong.text
    assert owner.get(STUDY + "audit/?limit=lots").status_code == 400


def test_the_annotator_journey_writes_no_audit_rows(world, django_capture_on_commit_callbacks):
    """Annotators are not audited: their question, choices and finish leave the log as it was."""
    participation = join(world.study)

    def annotate() -> None:
        with django_capture_on_commit_callbacks(execute=True):
            query = query_submit(participation=participation, text="sleep after night shifts", client_token="")
        while (current := match_current(query=query)) is not None:
            judgment_record(match=current, choice="left", by=participation)
        participation_finish(participation=Participation.objects.get(pk=participation.pk))

    assert _written_by(annotate) == []


def test_rows_survive_their_study_and_actor(world):
    owner = _client(world, "owner_member")
    owner.post("/api/v1/admin/studies/", {"slug": "short-lived", "title": "Short"}, content_type="application/json")
    study = Study.objects.get(slug="short-lived")
    root = _client(world, "admin")  # deleting takes the delete permission: a superuser's here
    deleted = _written_by(lambda: root.post(f"/admin/studies/study/{study.pk}/delete/", {"post": "yes"}))
    assert not Study.objects.filter(slug="short-lived").exists()
    assert [(r.event_type, r.study, r.study_slug, r.before["title"], r.actor_name) for r in deleted] == [
        ("study_deleted", None, "short-lived", "Short", "root")
    ]
    world.users["owner_member"].delete()
    created = StudyAuditLog.objects.get(event_type="study_created", study_slug="short-lived")
    assert created.study is None and created.actor is None and created.actor_name == "owner"


def test_the_csv_never_hands_a_spreadsheet_a_formula(world):
    """A username is someone else's text: one a spreadsheet would run ("@SUM(...)") is written with an apostrophe."""
    get_user_model().objects.create_user("@SUM(A1)", password="pw")
    owner = _client(world, "owner_member")
    owner.post(STUDY + "members/", {"username": "@SUM(A1)", "role": "viewer"}, content_type="application/json")
    export = owner.get("/admin/studies/studyauditlog/export/?event_type__exact=member_added")
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [(r["object"], r["actor"]) for r in rows] == [("'@SUM(A1)", "owner")]


@pytest.mark.parametrize(
    ("role", "method", "url", "body"),
    [
        ("owner_member", "PATCH", STUDY, {"title": "Renamed", "retrieval_k": 0}),
        ("owner_member", "POST", STUDY + "status/", {"status": "burning"}),
        ("owner_member", "POST", STUDY + "members/", {"username": "nobody-here", "role": "viewer"}),
        ("owner_member", "POST", STUDY + "invitations/", {"count": 0}),
        ("researcher_member", "POST", STUDY + "participations/{code}/exclusion/", {"reason": "   "}),
        (
            "researcher_member",
            "POST",
            "/api/v1/research/studies/matrix/jobs/",
            {"kind": "export", "options": {"format": "xls"}},
        ),
        ("researcher_member", "POST", "/api/v1/research/studies/matrix/scoring-runs/", {"metrics": []}),
    ],
)
def test_a_request_refused_as_bad_input_writes_no_row(world, role, method, url, body):
    url = url.format(code=world.participation.code)
    response = None

    def act() -> None:
        nonlocal response
        response = _send(_client(world, role), method, url, body)

    assert _written_by(act) == []
    assert response is not None and response.status_code == 400, response.content
