"""What each account sees inside the statuses of the matrix: lists hold only member studies, researchers
sign in without staff and download with a token, and settings that reach outside a study are bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client
from rest_framework.test import APIClient

from generation.registry import get_retrieval_backend
from studies.models import Study, StudyMembership, StudySystem
from tests.annotation.factories import StudyFactory
from tests.security.conftest import EXPORT_CSV
from tests.studies.test_study_rules import _change_url, _form_data

pytestmark = pytest.mark.django_db


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- lists hold only the studies one is a member of ---------------------------------------------------


def test_lists_show_only_member_studies(world):
    outsider = world.users["researcher_non_member"]
    page = _client(outsider).get("/research/").content.decode()
    assert "Another team&#x27;s study" in page and "Matrix study" not in page
    assert [s["slug"] for s in _api(outsider).get("/api/v1/admin/studies/").json()] == ["elsewhere"]
    assert _api(outsider).get("/api/v1/admin/failed-candidates/").json() == []
    member = world.users["researcher_member"]
    assert [s["slug"] for s in _api(member).get("/api/v1/admin/studies/").json()] == ["matrix"]
    assert [c["id"] for c in _api(member).get("/api/v1/admin/failed-candidates/").json()] == [world.failed.pk]
    # A viewer sees the study but not its failed generations (researchers and owners only).
    assert _api(world.users["viewer_member"]).get("/api/v1/admin/failed-candidates/").json() == []


def test_a_viewer_sees_results_without_run_buttons_or_files(world):
    page = _client(world.users["viewer_member"]).get("/research/studies/matrix/").content.decode()
    assert "Progress" in page and "Compute report" not in page and "comparisons.csv" not in page
    page = _client(world.users["researcher_member"]).get("/research/studies/matrix/").content.decode()
    assert "Compute report" in page and "comparisons.csv" in page


def test_the_admin_lists_only_member_studies_rows(world):
    owner = _client(world.users["owner_member"])
    world.other_study.invitations.create(token="elsewhere-token-0001")
    listing = owner.get("/admin/studies/invitation/").content.decode()
    assert world.invitation.token in listing and "elsewhere-token-0001" not in listing
    studies = owner.get("/admin/studies/study/").content.decode()
    assert "Matrix study" in studies and "Another team" not in studies
    everything = _client(world.users["admin"]).get("/admin/studies/invitation/").content.decode()
    assert "elsewhere-token-0001" in everything


def test_a_viewer_cannot_retry_and_a_non_owner_cannot_reopen(world):
    viewer = world.users["viewer_member"]
    viewer.user_permissions.add(*world.users["owner_member"].user_permissions.all())  # permissions, not the role
    refused = _api(viewer).post("/api/v1/admin/studies/matrix/status/", {"status": "closed"}, format="json")
    assert refused.status_code == 403 and "owners" in refused.json()["message"]
    assert Study.objects.get(slug="matrix").status == "open"


def test_creating_a_study_makes_its_creator_the_owner(world):
    owner = world.users["owner_member"]
    created = _api(owner).post("/api/v1/admin/studies/", {"slug": "mine", "title": "Mine"}, format="json")
    assert created.status_code == 201
    assert StudyMembership.objects.get(study__slug="mine", user=owner).role == "owner"
    assert _api(owner).patch("/api/v1/admin/studies/mine/", {"title": "Still mine"}, format="json").status_code == 200


# --- researchers sign in without staff and download with a token ---------------------------------------


def test_a_researcher_signs_in_on_the_research_login_page_not_the_admin(world):
    client = Client()
    assert client.get("/research/")["Location"] == "/accounts/login/?next=/research/"
    refused = client.post("/accounts/login/", {"username": "rmember", "password": "wrong"})
    assert refused.status_code == 200 and "correct username and password" in refused.content.decode()
    signed_in = client.post("/accounts/login/", {"username": "rmember", "password": "pw", "next": "/research/"})
    assert signed_in.status_code == 302 and signed_in["Location"] == "/research/"
    assert "Matrix study" in client.get("/research/").content.decode()
    # The admin's own sign-in still refuses an account that is not staff.
    admin = Client().post("/admin/login/?next=/admin/", {"username": "rmember", "password": "pw"})
    assert admin.status_code == 200 and "staff account" in admin.content.decode()


def test_a_researcher_downloads_an_export_with_a_token(world):
    browser = _client(world.users["researcher_member"])
    assert "You have no token yet" in browser.get("/research/token/").content.decode()
    browser.post("/research/token/")
    page = browser.get("/research/token/").content.decode()
    key = world.users["researcher_member"].auth_token.key
    assert key in page
    script = APIClient()
    script.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = script.get(f"/api/v1/research/jobs/{world.export.pk}/files/comparisons.csv")
    assert response.status_code == 200 and b"".join(response.streaming_content) == EXPORT_CSV
    assert 'filename="comparisons.csv"' in response["Content-Disposition"]
    as_csv = script.get(f"/api/v1/research/jobs/{world.export.pk}/files/comparisons.csv", HTTP_ACCEPT="text/csv")
    assert as_csv.status_code == 200 and b"".join(as_csv.streaming_content) == EXPORT_CSV
    missing = script.get(f"/api/v1/research/jobs/{world.export.pk}/files/nope.csv", HTTP_ACCEPT="text/csv")
    assert missing.status_code == 404 and b"no output file" in missing.content
    # Replacing the token stops the old one.
    browser.post("/research/token/")
    stale = script.get(f"/api/v1/research/jobs/{world.export.pk}/")
    assert stale.status_code == 403 and stale.json()["message"] == "Invalid token."


def test_a_missing_download_is_404_naming_what_is_missing(world, settings):
    script = _api(world.users["researcher_member"])
    unknown = script.get(f"/api/v1/research/jobs/{world.export.pk}/files/secrets.csv")
    assert unknown.status_code == 404 and "no output file 'secrets.csv'" in unknown.json()["message"]
    escape = script.get(f"/api/v1/research/jobs/{world.export.pk}/files/../../settings.py")
    assert escape.status_code == 404
    (Path(settings.MEDIA_ROOT) / "research" / f"job-{world.export.pk}" / "comparisons.csv").unlink()
    gone = script.get(f"/api/v1/research/jobs/{world.export.pk}/files/comparisons.csv")
    assert gone.status_code == 404 and "no longer on the server" in gone.json()["message"]
    assert script.get("/api/v1/research/jobs/999999/files/comparisons.csv").json()["message"] == "No such job."


# --- settings that reach outside a study ---------------------------------------------------------------


def _openai_systems(base_url: str) -> list[dict]:
    return [
        {
            "label": f"s{i}",
            "model_name": f"m{i}",
            "condition": "generic",
            "generation_backend": "openai",
            "backend_settings": {"base_url": base_url},
        }
        for i in range(2)
    ]


def test_only_a_superuser_sets_a_model_server_and_only_on_an_allowed_host(world, settings):
    settings.MODEL_SERVER_ALLOWED_HOSTS = ["127.0.0.1", ".models.example.org"]
    owner, admin = _api(world.users["owner_member"]), _api(world.users["admin"])
    body = {"slug": "llm", "title": "LLM", "systems": _openai_systems("http://127.0.0.1:8001/v1")}
    refused = owner.post("/api/v1/admin/studies/", body, format="json")
    assert refused.status_code == 403 and "only an administrator" in refused.json()["extra"]["fields"]["systems"][0]
    assert not Study.objects.filter(slug="llm").exists()
    metadata = {**body, "systems": _openai_systems("http://169.254.169.254/latest/meta-data")}
    bad_host = admin.post("/api/v1/admin/studies/", metadata, format="json")
    assert bad_host.status_code == 400
    assert "host '169.254.169.254' is not allowed" in bad_host.json()["extra"]["fields"]["systems"][0]
    bad_scheme = admin.post(
        "/api/v1/admin/studies/", {**body, "systems": _openai_systems("file:///etc/passwd")}, format="json"
    )
    assert bad_scheme.status_code == 400 and "http:// or https://" in bad_scheme.json()["message"]
    tricked = admin.post(
        "/api/v1/admin/studies/",
        {**body, "systems": _openai_systems("http://169.254.169.254@127.0.0.1/v1")},
        format="json",
    )
    assert tricked.status_code == 400 and "http:// or https://" in tricked.json()["message"]
    sub = admin.post(
        "/api/v1/admin/studies/",
        {**body, "systems": _openai_systems("https://gpu1.models.example.org/v1")},
        format="json",
    )
    assert sub.status_code == 201, sub.json()
    # The superuser's setting stays when an owner edits something else, and an owner cannot change it.
    StudyMembership.objects.create(study=Study.objects.get(slug="llm"), user=world.users["owner_member"], role="owner")
    assert owner.patch("/api/v1/admin/studies/llm/", {"title": "Renamed"}, format="json").status_code == 200
    changed = [{**s, "backend_settings": {"base_url": "http://127.0.0.1:9/v1"}} for s in _openai_systems("")]
    assert owner.patch("/api/v1/admin/studies/llm/", {"systems": changed}, format="json").status_code == 403
    assert set(StudySystem.objects.filter(study__slug="llm").values_list("backend_settings__base_url", flat=True)) == {
        "https://gpu1.models.example.org/v1"
    }


def test_a_corpus_path_must_be_a_file_under_the_corpus_root(world, settings, tmp_path, monkeypatch):
    root = tmp_path / "corpora"
    root.mkdir()
    (root / "nursing.jsonl").write_text(json.dumps({"id": "n1", "title": "T", "abstract": "A."}) + "\n")
    settings.CORPUS_ROOT = str(root)
    admin, owner = _api(world.users["admin"]), _api(world.users["owner_member"])
    outside = admin.patch(
        "/api/v1/admin/studies/matrix/", {"retrieval_settings": {"corpus_path": "/etc/passwd"}}, format="json"
    )
    assert outside.status_code == 400 and "outside the corpus folder" in outside.json()["message"]
    climbing = admin.patch(
        "/api/v1/admin/studies/matrix/", {"retrieval_settings": {"corpus_path": "../../../etc/passwd"}}, format="json"
    )
    assert climbing.status_code == 400 and "retrieval_settings" in climbing.json()["extra"]["fields"]
    missing = admin.patch(
        "/api/v1/admin/studies/matrix/", {"retrieval_settings": {"corpus_path": "none.jsonl"}}, format="json"
    )
    assert missing.status_code == 400 and "no such file" in missing.json()["message"]
    assert (
        owner.patch(
            "/api/v1/admin/studies/matrix/", {"retrieval_settings": {"corpus_path": "nursing.jsonl"}}, format="json"
        ).status_code
        == 403
    )
    assert (
        admin.patch(
            "/api/v1/admin/studies/matrix/", {"retrieval_settings": {"corpus_path": "nursing.jsonl"}}, format="json"
        ).status_code
        == 200
    )
    assert Study.objects.get(slug="matrix").retrieval_settings == {"corpus_path": "nursing.jsonl"}
    # The worker reads the file the check accepted, under CORPUS_ROOT, whatever its working directory.
    monkeypatch.chdir(tmp_path)
    found = get_retrieval_backend("demo", Study.objects.get(slug="matrix").retrieval_settings).search("T", k=1)
    assert [d.external_id for d in found] == ["n1"]


def test_the_admin_form_refuses_a_disallowed_model_server(admin_client, settings):
    settings.MODEL_SERVER_ALLOWED_HOSTS = ["127.0.0.1"]
    study = StudyFactory(status=Study.Status.DRAFT)
    rows = [
        {"generation_backend": "openai", "backend_settings": json.dumps({"base_url": "http://evil.example/v1"})},
        {},
        {},
        {},
    ]
    response = admin_client.post(_change_url(study), _form_data(study, systems=rows))
    assert response.status_code == 200
    assert "the model server host &#x27;evil.example&#x27; is not allowed" in response.content.decode()
    assert not StudySystem.objects.filter(backend_settings__base_url="http://evil.example/v1").exists()


# --- the admin's study page ------------------------------------------------------------------------------


def _member_rows(*rows: dict) -> dict[str, str]:
    data = {"memberships-TOTAL_FORMS": str(len(rows)), "memberships-INITIAL_FORMS": "0"}
    for i, row in enumerate(rows):
        data |= {f"memberships-{i}-{k}": str(v) for k, v in row.items()}
    return data


def test_an_owner_edits_the_study_and_its_members_in_the_admin(world):
    owner = _client(world.users["owner_member"])
    study = world.study
    colleague = world.users["researcher_non_member"]
    data = _form_data(study, title="Renamed by its owner") | _member_rows({"user": colleague.pk, "role": "viewer"})
    response = owner.post(_change_url(study), data)
    assert response.status_code == 302, response.content.decode()
    assert Study.objects.get(pk=study.pk).title == "Renamed by its owner"
    assert StudyMembership.objects.get(study=study, user=colleague).role == "viewer"
    # A model server address is the superuser's to set, on the admin page too.
    other = StudyFactory(slug="owned-draft", status=Study.Status.DRAFT)
    StudyMembership.objects.create(study=other, user=world.users["owner_member"], role="owner")
    rows = [
        {"generation_backend": "openai", "backend_settings": json.dumps({"base_url": "http://127.0.0.1:1/v1"})},
        {},
        {},
        {},
    ]
    refused = owner.post(_change_url(other), _form_data(other, systems=rows))
    assert refused.status_code == 200
    assert "only an administrator (superuser) may set base_url" in refused.content.decode()
    assert not StudySystem.objects.filter(study=other, generation_backend="openai").exists()


def test_a_viewer_with_the_change_permission_cannot_save_the_study(world):
    viewer = world.users["viewer_member"]
    viewer.is_staff = True
    viewer.save(update_fields=["is_staff"])
    viewer.user_permissions.add(*world.users["owner_member"].user_permissions.all())
    response = _client(viewer).post(_change_url(world.study), _form_data(world.study, title="Not mine to rename"))
    assert response.status_code == 403
    assert Study.objects.get(pk=world.study.pk).title == "Matrix study"


def test_options_follows_the_view_permission(world):
    assert _api(world.users["admin"]).options("/api/v1/admin/studies/").status_code == 200
    assert _api(world.users["researcher_member"]).options("/api/v1/admin/failed-candidates/").status_code == 200
    assert _api(world.users["staff_no_perms"]).options("/api/v1/admin/studies/").status_code == 403


def test_the_study_member_command_makes_a_researcher(world):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.core.management import CommandError, call_command

    alice = get_user_model().objects.create_user("alice", password="pw")
    Group.objects.get(name="researchers").permissions.clear()  # the command gives the group its view permissions
    call_command("study_member", study="matrix", user="alice", role="viewer")
    call_command("study_member", study="matrix", user="alice", role="researcher")  # a second run changes the role
    assert StudyMembership.objects.get(study__slug="matrix", user=alice).role == "researcher"
    alice = get_user_model().objects.get(pk=alice.pk)  # fresh permission cache
    assert alice.has_perm("studies.view_study") and not alice.has_perm("studies.change_study")
    # Both apps' view permissions: the study's design is studies', the annotators' work annotation's.
    assert alice.has_perm("studies.view_studyauditlog") and alice.has_perm("annotation.view_participation")
    assert _client(alice).get("/research/studies/matrix/").status_code == 200
    with pytest.raises(CommandError, match="No study with the slug 'nope'"):
        call_command("study_member", study="nope", user="alice", role="viewer")


def test_the_study_member_command_never_demotes_the_last_owner(world):
    from django.core.management import CommandError, call_command

    owner = world.users["owner_member"]
    assert list(StudyMembership.objects.filter(study=world.study, role="owner").values_list("user", flat=True)) == [
        owner.pk
    ]
    with pytest.raises(CommandError, match="A study keeps at least one owner"):
        call_command("study_member", study=world.study.slug, user=owner.username, role="viewer")
    assert StudyMembership.objects.get(study=world.study, user=owner).role == "owner"


def test_the_admin_page_keeps_the_last_owner_and_hands_a_study_over_in_one_save(world):
    owner = world.users["owner_member"]
    colleague = world.users["researcher_non_member"]
    membership = StudyMembership.objects.get(study=world.study, user=owner)
    existing = {"memberships-TOTAL_FORMS": "1", "memberships-INITIAL_FORMS": "1", "memberships-0-id": membership.pk}
    existing |= {"memberships-0-study": world.study.pk, "memberships-0-user": owner.pk}
    refused = _client(owner).post(
        _change_url(world.study), _form_data(world.study) | existing | {"memberships-0-role": "viewer"}
    )
    assert refused.status_code == 200
    assert "A study keeps at least one owner" in refused.content.decode()
    assert StudyMembership.objects.get(pk=membership.pk).role == "owner"
    # The colleague made owner and the owner a viewer, in one save: the study never has no owner.
    handover = existing | {"memberships-0-role": "viewer", "memberships-TOTAL_FORMS": "2"}
    handover |= {
        "memberships-1-user": colleague.pk,
        "memberships-1-role": "owner",
        "memberships-1-study": world.study.pk,
    }
    saved = _client(owner).post(_change_url(world.study), _form_data(world.study) | handover)
    assert saved.status_code == 302, saved.content.decode()[-2000:]
    roles = dict(StudyMembership.objects.filter(study=world.study).values_list("user__username", "role"))
    assert roles[colleague.username] == "owner" and roles[owner.username] == "viewer"


def test_the_last_owners_row_cannot_be_deleted_by_naming_someone_else_on_it(world):
    """The row's user changed to a colleague and the row ticked for deletion in one save: the check read the
    colleague, the stored row deleted was the owner's, and the study was left with no owner."""
    owner = world.users["owner_member"]
    colleague = world.users["researcher_non_member"]
    membership = StudyMembership.objects.get(study=world.study, user=owner)
    row = {"memberships-TOTAL_FORMS": "1", "memberships-INITIAL_FORMS": "1", "memberships-0-id": membership.pk}
    row |= {"memberships-0-study": world.study.pk, "memberships-0-user": colleague.pk, "memberships-0-role": "owner"}
    refused = _client(owner).post(
        _change_url(world.study), _form_data(world.study) | row | {"memberships-0-DELETE": "on"}
    )
    assert refused.status_code == 200
    assert "A study keeps at least one owner" in refused.content.decode()
    assert list(StudyMembership.objects.filter(study=world.study, role="owner").values_list("user", flat=True)) == [
        owner.pk
    ]
