"""A study's settings, design and status change only through the study services: the admin form and the
admin API refuse what study_create refuses, and a design with generated summaries is frozen."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from annotation.models import Candidate
from annotation.services.query import query_submit
from kernel.exceptions import ApplicationError
from studies.models import Study, StudyMembership, StudySystem
from studies.services.study import study_create, study_set_status
from tests.annotation.factories import StudyFactory, join, served_study
from tests.support.openai_standin import openai_standin

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser():
    return get_user_model().objects.create_superuser("root", "root@example.org", "pw")


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


@pytest.fixture
def api(superuser):
    api = APIClient()
    api.force_authenticate(superuser)
    return api


def _form_data(study: Study, **changes) -> dict[str, str]:
    """The admin change form of a study as a browser would post it; `changes` override study fields,
    `systems` (a list of per-row overrides, `None` to delete a row) the inline rows."""
    row_changes = changes.pop("systems", None)
    data = {
        "slug": study.slug,
        "title": study.title,
        "instructions": study.instructions,
        "consent_text": study.consent_text,
        "status": study.status,
        "queries_per_annotator": str(study.queries_per_annotator),
        "min_ranked_questions": str(study.min_ranked_questions),
        "max_query_chars": str(study.max_query_chars),
        "retrieval_backend": study.retrieval_backend,
        "retrieval_k": str(study.retrieval_k),
        "retrieval_settings": json.dumps(study.retrieval_settings),
        "prompt_template": str(study.prompt_template_id or ""),
        "language": study.language,
        # The choice settings' selects (their checkboxes, like the first-round rule's, are absent when unticked).
        "comments": study.comments,
        "identical_policy": study.identical_policy,
        **{k: str(v) for k, v in changes.items()},
    }
    systems = list(study.systems.order_by("order")) if study.pk else []
    row_changes = row_changes if row_changes is not None else [{}] * len(systems)
    data |= {
        "systems-TOTAL_FORMS": str(len(row_changes)),
        "systems-INITIAL_FORMS": str(len(systems)),
        "systems-MIN_NUM_FORMS": "0",
        "systems-MAX_NUM_FORMS": "1000",
        # The members inline, left as it is (its rows are docs/permissions.md's, tested in tests/security).
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for i, change in enumerate(row_changes):
        system = systems[i] if i < len(systems) else None
        row = {
            "id": system.pk if system else "",
            "study": study.pk,
            "order": system.order if system else i,
            "label": system.label if system else "",
            "model_name": system.model_name if system else "",
            "condition": system.condition if system else "",
            "generation_backend": system.generation_backend if system else "extractive",
            "backend_settings": json.dumps(system.backend_settings if system else {}),
        }
        if change is None:
            row["DELETE"] = "on"
        else:
            row |= change
        data |= {f"systems-{i}-{k}": str(v) for k, v in row.items()}
    return data


def _change_url(study: Study) -> str:
    return f"/admin/studies/study/{study.pk}/change/"


def _asked(study: Study) -> None:
    """One annotator question, so the study has candidates."""
    query_submit(participation=join(study), text="night shifts and sleep", client_token="")


# --- the admin form -----------------------------------------------------------------------------------


def test_admin_cannot_open_a_one_system_study(admin_client):
    study = StudyFactory(status=Study.Status.DRAFT)
    data = _form_data(study, status="open", systems=[{}, None, None, None])
    response = admin_client.post(_change_url(study), data)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Please correct the error" in page
    assert "2 to 32 systems; this study has 1" in page
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT and study.systems.count() == 4  # nothing half-saved


def test_admin_opens_a_three_system_study(admin_client):
    study = StudyFactory(status=Study.Status.DRAFT)
    response = admin_client.post(_change_url(study), _form_data(study, status="open", systems=[{}, {}, {}, None]))
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.status == Study.Status.OPEN and study.systems.count() == 3


def test_admin_cannot_open_a_study_with_a_misspelt_model(admin_client):
    study = StudyFactory(status=Study.Status.DRAFT)
    data = _form_data(study, status="open", systems=[{"model_name": "extractive-centriod"}, {}, {}, {}])
    response = admin_client.post(_change_url(study), data)
    assert response.status_code == 200
    page = response.content.decode()
    assert "has no model &#x27;extractive-centriod&#x27;" in page and "extractive-centroid, extractive-mmr" in page
    assert not StudySystem.objects.filter(model_name="extractive-centriod").exists()
    assert Study.objects.get(pk=study.pk).status == Study.Status.DRAFT


def test_admin_refuses_an_out_of_range_setting_next_to_the_field(admin_client):
    study = StudyFactory(status=Study.Status.DRAFT)
    response = admin_client.post(_change_url(study), _form_data(study, retrieval_k=0, retrieval_backend="bing"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Ensure this value is greater than or equal to 1." in page
    assert "Select a valid choice. bing is not one of the available choices." in page
    assert Study.objects.get(pk=study.pk).retrieval_k == 10


def test_admin_saves_a_valid_design_and_opens_it(admin_client):
    study = StudyFactory(status=Study.Status.DRAFT)
    data = _form_data(study, status="open", title="Renamed", systems=[{}, {}, None, None])
    response = admin_client.post(_change_url(study), data)
    assert response.status_code == 302, response.content.decode()
    study.refresh_from_db()
    assert (study.status, study.title, study.systems.count()) == ("open", "Renamed", 2)


def test_admin_adds_a_study_through_the_service(admin_client):
    rows = [
        {"label": f"{m}-{c}", "model_name": m, "condition": c, "order": i}
        for i, (m, c) in enumerate([("extractive-centroid", "persona"), ("extractive-mmr", "generic")])
    ]
    template_study = Study(slug="new", title="New", status="open")
    data = _form_data(template_study, systems=rows) | {"systems-INITIAL_FORMS": "0"}
    data = {k: v for k, v in data.items() if not k.endswith("-id") and not k.endswith("-study")}
    response = admin_client.post("/admin/studies/study/add/", data)
    assert response.status_code == 302, response.content.decode()
    study = Study.objects.get(slug="new")
    assert study.status == "open" and study.systems.count() == 2 and study.prompt_template is not None


def test_admin_shows_systems_read_only_once_summaries_exist(admin_client, django_capture_on_commit_callbacks):
    study = StudyFactory()
    with django_capture_on_commit_callbacks(execute=True):
        _asked(study)
    page = admin_client.get(_change_url(study)).content.decode()
    assert 'name="systems-0-model_name"' not in page and "extractive-centroid" in page
    assert "its systems and prompt template can no longer change" in page
    assert 'name="systems-0-DELETE"' not in page and 'name="systems-MAX_NUM_FORMS" value="0"' in page
    # A forged post cannot rename a system; the study's own settings still save.
    data = _form_data(study, status="paused", systems=[{"model_name": "extractive-mmr"}, {}, {}, {}])
    assert admin_client.post(_change_url(study), data).status_code == 302
    study.refresh_from_db()
    assert study.status == "paused"
    assert list(study.systems.order_by("order").values_list("model_name", flat=True)) == [
        "extractive-centroid",
        "extractive-centroid",
        "extractive-mmr",
        "extractive-mmr",
    ]


def test_admin_action_refuses_to_open_a_broken_design(admin_client):
    study = StudyFactory(
        status=Study.Status.DRAFT, systems=[{"label": "a", "model_name": "nope", "condition": "persona"}]
    )
    response = admin_client.post(
        "/admin/studies/study/", {"action": "open_studies", "_selected_action": [study.pk]}, follow=True
    )
    assert "2 to 32 systems; this study has 1" in response.content.decode()
    assert Study.objects.get(pk=study.pk).status == Study.Status.DRAFT


# --- the admin API ------------------------------------------------------------------------------------


def test_patch_refuses_an_unknown_retrieval_backend(api):
    study = StudyFactory(slug="p1")
    response = api.patch("/api/v1/admin/studies/p1/", {"retrieval_backend": "googel"}, format="json")
    assert response.status_code == 400
    assert "Unknown retrieval backend 'googel'" in response.json()["extra"]["fields"]["retrieval_backend"][0]
    study.refresh_from_db()
    assert study.retrieval_backend == "demo"


def test_patch_refuses_limits_and_a_broken_design_of_an_open_study(api):
    StudyFactory(slug="p2")
    zero = api.patch("/api/v1/admin/studies/p2/", {"retrieval_k": 0}, format="json")
    assert zero.status_code == 400 and zero.json()["extra"]["fields"]["retrieval_k"] == [
        "Retrieval k must be from 1 to 100."
    ]
    systems = api.get("/api/v1/admin/studies/p2/").json()["systems"]
    one = api.patch("/api/v1/admin/studies/p2/", {"systems": systems[:1]}, format="json")
    assert one.status_code == 400
    assert "2 to 32 systems; this study has 1" in one.json()["extra"]["fields"]["systems"][0]
    misspelt = [{**systems[0], "model_name": "extractive-mmmr"}, *systems[1:]]
    bad_model = api.patch("/api/v1/admin/studies/p2/", {"systems": misspelt}, format="json")
    assert bad_model.status_code == 400 and "no model 'extractive-mmmr'" in bad_model.json()["message"]
    assert StudySystem.objects.filter(study__slug="p2").count() == 4
    assert not StudySystem.objects.filter(model_name="extractive-mmmr").exists()


def test_a_key_pasted_where_its_variables_name_goes_is_refused_and_never_repeated(api):
    # api_key_env is stored with every summary's settings, exported with them (export_summaries) and named in
    # failure reasons: a key pasted into it would leave the platform in all three.
    StudyFactory(slug="keyed", status=Study.Status.DRAFT)
    systems = api.get("/api/v1/admin/studies/keyed/").json()["systems"]
    key = "sk-proj-Zq8dW3vN1xYt7Lm2Pa9Rb4Kc"
    pasted = [
        {**systems[0], "generation_backend": "openai", "model_name": "m1", "backend_settings": {"api_key_env": key}},
        *systems[1:],
    ]
    refused = api.patch("/api/v1/admin/studies/keyed/", {"systems": pasted}, format="json")
    assert refused.status_code == 400
    assert "'api_key_env' must name the environment variable" in refused.json()["extra"]["fields"]["systems"][0]
    assert key not in refused.content.decode()
    assert not StudySystem.objects.filter(backend_settings__api_key_env=key).exists()
    named = [{**pasted[0], "backend_settings": {"api_key_env": "LAB_LLM_KEY"}}, *systems[1:]]
    saved = api.patch("/api/v1/admin/studies/keyed/", {"systems": named}, format="json")
    assert saved.status_code == 200, saved.json()


def test_patch_and_put_edit_a_draft_through_the_service(api):
    StudyFactory(slug="p3", status=Study.Status.DRAFT)
    systems = api.get("/api/v1/admin/studies/p3/").json()["systems"]
    renamed = [{**systems[0], "label": "centroid-p"}, *systems[1:]]
    patched = api.patch("/api/v1/admin/studies/p3/", {"title": "Edited", "systems": renamed}, format="json")
    assert patched.status_code == 200, patched.json()
    assert patched.json()["title"] == "Edited" and patched.json()["systems"][0]["label"] == "centroid-p"
    put = api.put("/api/v1/admin/studies/p3/", {"slug": "p3", "title": "Put", "retrieval_k": 5}, format="json")
    assert put.status_code == 200 and put.json()["retrieval_k"] == 5 and len(put.json()["systems"]) == 4
    StudyFactory(slug="taken")
    clash = api.patch("/api/v1/admin/studies/p3/", {"slug": "taken"}, format="json")
    assert clash.status_code == 400 and "already exists" in clash.json()["extra"]["fields"]["slug"][0]


def test_patch_cannot_change_systems_once_summaries_exist(api, django_capture_on_commit_callbacks):
    study = StudyFactory(slug="p4")
    with django_capture_on_commit_callbacks(execute=True):
        _asked(study)
    systems = api.get("/api/v1/admin/studies/p4/").json()["systems"]
    renamed = [{**systems[0], "model_name": "extractive-mmr", "condition": "persona", "label": "x"}, *systems[1:]]
    response = api.patch("/api/v1/admin/studies/p4/", {"systems": renamed}, format="json")
    assert response.status_code == 409
    assert "can no longer change" in response.json()["extra"]["fields"]["systems"][0]
    dropped = api.patch("/api/v1/admin/studies/p4/", {"systems": systems[:2]}, format="json")
    assert dropped.status_code == 409
    # Sending the systems unchanged, with other edits, is fine.
    same = api.patch("/api/v1/admin/studies/p4/", {"systems": systems, "title": "Still"}, format="json")
    assert same.status_code == 200 and same.json()["title"] == "Still"
    assert StudySystem.objects.get(pk=systems[0]["id"]).model_name == systems[0]["model_name"]


def _served_and_asked(base_url: str, django_capture_on_commit_callbacks, **fields) -> Study:
    """A study of an extractive system and one served by the model server at `base_url`, with one question's
    summaries generated (so its design is frozen)."""
    served = {"base_url": base_url, "use_cache": False, "max_tokens": 50, "temperature": 0.0}
    study = served_study(served, **fields)
    with django_capture_on_commit_callbacks(execute=True):
        _asked(study)
    assert set(Candidate.objects.filter(system__study=study).values_list("status", flat=True)) == {"done"}
    return study


def _served_settings(study: Study) -> dict:
    return StudySystem.objects.get(study=study, label="served").backend_settings


def test_patch_changes_the_operational_settings_of_a_study_with_summaries_not_its_design(
    api, django_capture_on_commit_callbacks
):
    with openai_standin() as server:
        study = _served_and_asked(server.base_url, django_capture_on_commit_callbacks, slug="ops")
    url = "/api/v1/admin/studies/ops/"

    def patch(**changes):
        systems = api.get(url).json()["systems"]
        edited = [
            {**s, "backend_settings": {**s["backend_settings"], **changes}} if s["label"] == "served" else s
            for s in systems
        ]
        return api.patch(url, {"systems": edited}, format="json")

    # A reasoning model needs more room, and its server is slow: both are how the call is made.
    raised = patch(max_tokens=400, timeout=30, max_retries=1, concurrency=2)
    assert raised.status_code == 200, raised.json()
    assert _served_settings(study) == {
        "base_url": server.base_url,
        "use_cache": False,
        "max_tokens": 400,
        "temperature": 0.0,
        "timeout": 30,
        "max_retries": 1,
        "concurrency": 2,
    }
    # What the summary is stays as it was: a temperature, a system prompt, the model.
    for changes in ({"temperature": 0.7}, {"system_prompt": "Be brief."}, {"seed": 3}):
        refused = patch(**changes)
        assert refused.status_code == 409, (changes, refused.json())
        message = refused.json()["extra"]["fields"]["systems"][0]
        assert "can no longer change" in message and "Create a new study" in message
        # ... and says what may still change, so the researcher whose model ran out of tokens is not sent away.
        assert "max_tokens" in message and "retry failed summaries" in message
    systems = api.get(url).json()["systems"]
    renamed = [{**s, "model_name": "other-model"} if s["label"] == "served" else s for s in systems]
    assert api.patch(url, {"systems": renamed}, format="json").status_code == 409
    # The new values meet the same rules as any: a number in its range, a model server on an allowed host.
    zero = patch(max_tokens=0)
    assert zero.status_code == 400
    assert "'max_tokens' must be a whole number of at least 1, not 0" in zero.json()["extra"]["fields"]["systems"][0]
    assert patch(timeout="soon").status_code == 400
    # Two calls of 200 s cannot both fit one attempt's 240 s: generation would refuse every question.
    slow = patch(timeout=200, max_retries=1)
    assert slow.status_code == 400 and "over the 240 s time limit" in slow.json()["message"]
    elsewhere = patch(base_url="http://models.example.org/v1")
    assert elsewhere.status_code == 400 and "host 'models.example.org' is not allowed" in elsewhere.json()["message"]
    assert _served_settings(study)["max_tokens"] == 400 and _served_settings(study)["temperature"] == 0.0
    assert _served_settings(study)["base_url"] == server.base_url


def test_a_studys_owner_raises_its_timeout_but_only_a_superuser_moves_its_model_server(
    django_capture_on_commit_callbacks,
):
    with openai_standin() as server:
        study = _served_and_asked(server.base_url, django_capture_on_commit_callbacks, slug="owned")
    owner = get_user_model().objects.create_user("olga", password="pw")
    owner.user_permissions.set(Permission.objects.filter(codename__in=["view_study", "change_study"]))
    StudyMembership.objects.create(study=study, user=owner, role="owner")
    api = APIClient()
    api.force_authenticate(owner)
    systems = api.get("/api/v1/admin/studies/owned/").json()["systems"]

    def with_served(**changes):
        return [
            {**s, "backend_settings": {**s["backend_settings"], **changes}} if s["label"] == "served" else s
            for s in systems
        ]

    slower = api.patch("/api/v1/admin/studies/owned/", {"systems": with_served(timeout=90)}, format="json")
    assert slower.status_code == 200, slower.json()
    assert _served_settings(study)["timeout"] == 90
    moved = with_served(timeout=90, base_url="http://localhost:8001/v1")
    refused = api.patch("/api/v1/admin/studies/owned/", {"systems": moved}, format="json")
    assert refused.status_code == 403 and "only an administrator" in refused.json()["message"]
    assert _served_settings(study)["base_url"] == server.base_url


def test_admin_edits_the_operational_settings_of_a_study_with_summaries(
    admin_client, django_capture_on_commit_callbacks
):
    with openai_standin() as server:
        study = _served_and_asked(server.base_url, django_capture_on_commit_callbacks)
    page = admin_client.get(_change_url(study)).content.decode()
    # The design is shown, not edited; the backend settings are a field, and the note says which keys may change.
    assert 'name="systems-1-model_name"' not in page and 'name="systems-1-backend_settings"' in page
    assert "may still change" in page and "max_tokens" in page and "timeout" in page
    stored = _served_settings(study)
    moved = {**stored, "max_tokens": 400, "timeout": 45}
    data = _form_data(study, systems=[{}, {"backend_settings": json.dumps(moved)}])
    assert admin_client.post(_change_url(study), data).status_code == 302
    assert _served_settings(study) == moved
    hotter = {**moved, "temperature": 0.9}
    data = _form_data(study, systems=[{}, {"backend_settings": json.dumps(hotter)}])
    refused = admin_client.post(_change_url(study), data)
    assert refused.status_code == 200 and "can no longer change" in refused.content.decode()
    assert _served_settings(study) == moved


def test_a_draft_design_can_swap_two_labels_or_a_models_two_conditions(admin_client, api):
    """Each swap passes through a moment where two rows hold one label (or one model and condition); saved
    row by row it broke the unique constraint: a 500 on the admin page and through the API."""
    study = StudyFactory(status=Study.Status.DRAFT)
    first, second, third, fourth = study.systems.order_by("order")
    assert (first.model_name, third.model_name) == (second.model_name, fourth.model_name)  # 2 models x 2 conditions
    rows = [{"label": second.label}, {"label": first.label}, {}, {}]
    saved = admin_client.post(_change_url(study), _form_data(study, systems=rows))
    assert saved.status_code == 302, saved.content.decode()[-3000:]
    labels = dict(StudySystem.objects.filter(study=study).values_list("pk", "label"))
    assert (labels[first.pk], labels[second.pk]) == (second.label, first.label)

    rows = [{}, {}, {"condition": fourth.condition}, {"condition": third.condition}]
    saved = admin_client.post(_change_url(study), _form_data(study, systems=rows))
    assert saved.status_code == 302, saved.content.decode()[-3000:]
    conditions = dict(StudySystem.objects.filter(study=study).values_list("pk", "condition"))
    assert (conditions[third.pk], conditions[fourth.pk]) == (fourth.condition, third.condition)

    systems = api.get(f"/api/v1/admin/studies/{study.slug}/").json()["systems"]
    swapped = [{**systems[0], "label": systems[1]["label"]}, {**systems[1], "label": systems[0]["label"]}, *systems[2:]]
    patched = api.patch(f"/api/v1/admin/studies/{study.slug}/", {"systems": swapped}, format="json")
    assert patched.status_code == 200, patched.json()
    assert [s["label"] for s in patched.json()["systems"][:2]] == [systems[1]["label"], systems[0]["label"]]
    assert StudySystem.objects.filter(study=study).count() == 4


# --- the services -------------------------------------------------------------------------------------


def test_opening_checks_every_model_is_served(settings):
    settings.LLM_BASE_URL = ""
    openai = {"generation_backend": "openai", "condition": "generic"}
    study = study_create(
        slug="served",
        title="Served",
        systems=[
            {"label": "a", "model_name": "extractive-centroid", "condition": "persona"},
            {"label": "b", "model_name": "llama-3", **openai},
        ],
    )
    with pytest.raises(ApplicationError) as unserved:
        study_set_status(study=study, status=Study.Status.OPEN)
    assert "no model server is configured for 'llama-3'" in unserved.value.message
    assert unserved.value.field == "systems"
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"
    assert study_set_status(study=study, status=Study.Status.OPEN).status == Study.Status.OPEN
    with pytest.raises(ApplicationError) as typo:
        study_create(
            slug="typo",
            title="Typo",
            status=Study.Status.OPEN,
            systems=[
                {"label": "a", "model_name": "extractive-centroid", "condition": "persona"},
                {"label": "b", "model_name": "gpt4", **openai, "backend_settings": {"base_ur": "http://x"}},
            ],
        )
    assert "Unknown generation setting(s) base_ur" in typo.value.message
    assert not Study.objects.filter(slug="typo").exists()


def test_create_refuses_what_update_refuses():
    with pytest.raises(ApplicationError) as backend:
        study_create(slug="r1", title="R1", retrieval_backend="bing")
    assert backend.value.field == "retrieval_backend"
    with pytest.raises(ApplicationError) as limit:
        study_create(slug="r1", title="R1", queries_per_annotator=0)
    assert limit.value.field == "queries_per_annotator"
    with pytest.raises(ApplicationError) as twice:
        study_create(
            slug="r1",
            title="R1",
            systems=[
                {"label": "a", "model_name": "extractive-mmr", "condition": "persona"},
                {"label": "a", "model_name": "extractive-centroid", "condition": "persona"},
            ],
        )
    assert "labelled 'a'" in twice.value.message
    assert not Study.objects.filter(slug="r1").exists()
