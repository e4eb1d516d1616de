"""Someone else's change landing between the admin form's check and its save: the page shows why nothing was
saved, with the form as it was sent, never a 500; nothing of the refused save is written.

The other person's change is made on a second connection, committed, at the moment the admin request has
read what its form checks against (the statement is recognised through Django's execute_wrapper), which is
where a concurrent admin or API request lands in production."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from studies.models import PromptTemplate, Study, StudyMembership
from studies.services.membership import membership_set
from tests.annotation.factories import StudyFactory
from tests.studies.test_study_rules import _change_url, _form_data

pytestmark = pytest.mark.django_db(transaction=True)


def _elsewhere(change: Callable[[], None]) -> None:
    """Run `change` on a connection of its own and commit it, as another person's request does."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            change()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and not errors, errors


@contextmanager
def after_statement(matches: Callable[[str], bool], change: Callable[[], None]) -> Iterator[list[str]]:
    """Make `change` elsewhere right after this connection runs the first statement that `matches`."""
    seen: list[str] = []

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        result = execute(sql, params, many, context)
        if not seen and matches(sql):
            seen.append(sql)
            _elsewhere(change)
        return result

    with connection.execute_wrapper(wrapper):
        yield seen


def _owners_check(sql: str) -> bool:
    """The membership formset's check, its read of the owners (the service's own read locks them)."""
    return "annotation_studymembership" in sql and '"role" = %s' in sql and "FOR UPDATE" not in sql


def test_the_last_other_owner_stepping_down_while_the_admin_form_demotes_its_owner_is_a_form_error() -> None:
    users = get_user_model().objects
    admin = users.create_superuser("root", password="pw")
    olga, omar = (users.create_user(name, password="pw", is_staff=True) for name in ("olga", "omar"))
    study = StudyFactory(status=Study.Status.DRAFT)
    row = StudyMembership.objects.create(study=study, user=olga, role="owner")
    # The page as loaded: olga its one member. She hands over by stepping down, once Omar has been made owner
    # elsewhere (he is not on her page, as a colleague's change made after it was loaded is not).
    form = _form_data(study, title="Renamed in the same save") | {
        "memberships-TOTAL_FORMS": "1",
        "memberships-INITIAL_FORMS": "1",
        "memberships-0-id": str(row.pk),
        "memberships-0-study": str(study.pk),
        "memberships-0-user": str(olga.pk),
        "memberships-0-role": "viewer",
    }
    StudyMembership.objects.create(study=study, user=omar, role="owner")

    client = Client(raise_request_exception=False)
    client.force_login(admin)
    # Omar steps down elsewhere once the form has checked that he is an owner, so her step-down would now
    # leave the study without one.
    with after_statement(_owners_check, lambda: membership_set(study=study, user=omar, role="viewer")) as seen:
        response = client.post(_change_url(study), form)
    assert seen, "the form never read the owners"
    page = response.content.decode()
    assert response.status_code == 200, page[-3000:]
    assert "Nothing was saved: A study keeps at least one owner" in page
    assert 'value="Renamed in the same save"' in page  # the form as sent, to fix and send again
    roles = dict(StudyMembership.objects.filter(study=study).values_list("user__username", "role"))
    assert roles == {"olga": "owner", "omar": "viewer"}  # the other person's change stands; this save wrote nothing
    assert Study.objects.get(pk=study.pk).title == study.title


def test_two_edits_of_one_prompt_template_at_once_keep_both_versions_or_say_why() -> None:
    admin = get_user_model().objects.create_superuser("root", password="pw")
    template = PromptTemplate.objects.create(
        name="brief", version=1, body="Answer {query} from {documents}.", persona_block="-"
    )
    form = {"name": "brief", "version": "1", "body": "Answer {query} briefly from {documents}.", "persona_block": "-"}
    client = Client(raise_request_exception=False)
    client.force_login(admin)

    def other_edit() -> None:  # the other tab saved its edit first, as version 2
        PromptTemplate.objects.create(
            name="brief", version=2, body="Someone else's {query} {documents}.", persona_block="-"
        )

    def latest_read(sql: str) -> bool:
        return "annotation_prompttemplate" in sql and "ORDER BY" in sql

    with after_statement(latest_read, other_edit) as seen:
        response = client.post(f"/admin/studies/prompttemplate/{template.pk}/change/", form)
    assert seen, "the admin never read the latest version"
    page = response.content.decode()
    assert response.status_code == 200, page[-3000:]
    assert "it conflicts with what is stored now, most likely a change someone else made at the same moment" in page
    assert "briefly" in page  # the edit as sent
    assert list(PromptTemplate.objects.filter(name="brief").values_list("version", "body").order_by("version")) == [
        (1, "Answer {query} from {documents}."),
        (2, "Someone else's {query} {documents}."),
    ]
    # Sent again, it is saved as the next version, after the other one.
    again = client.post(f"/admin/studies/prompttemplate/{template.pk}/change/", form)
    assert again.status_code == 302, again.content.decode()[-3000:]
    assert PromptTemplate.objects.get(name="brief", version=3).body == form["body"]


def _loaded_state(page: str) -> str:
    import re

    (token,) = re.findall(r'name="loaded_state" value="([^"]+)"', page)
    return token


def test_a_study_page_opened_before_the_study_was_closed_does_not_reopen_it() -> None:
    """A colleague closes the study (the crowd study is over) while the page is open elsewhere; saving that
    page for a typo in its title wrote back its 'open' status and every other value it had loaded."""
    admin = get_user_model().objects.create_superuser("root", password="pw")
    study = StudyFactory(status=Study.Status.OPEN)
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    opened = client.get(_change_url(study))
    form = _form_data(study, title="Typo fixed") | {"loaded_state": _loaded_state(opened.content.decode())}
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)  # the colleague's close

    refused = client.post(_change_url(study), form)
    page = refused.content.decode()
    assert refused.status_code == 200, page[-3000:]
    assert "Someone else changed this study since you opened this page: the status (now Closed)." in page
    assert Study.objects.get(pk=study.pk).status == Study.Status.CLOSED
    assert Study.objects.get(pk=study.pk).title == study.title

    # From the refusal, the page carries what is stored now: fixed and sent again, it saves.
    again = form | {"status": "closed", "loaded_state": _loaded_state(page)}
    saved = client.post(_change_url(study), again)
    assert saved.status_code == 302, saved.content.decode()[-3000:]
    assert Study.objects.filter(pk=study.pk).values_list("status", "title").get() == ("closed", "Typo fixed")


def test_a_study_page_names_members_changed_since_it_was_opened_and_saves_when_nothing_changed() -> None:
    users = get_user_model().objects
    admin = users.create_superuser("root", password="pw")
    omar = users.create_user("omar", password="pw", is_staff=True)
    study = StudyFactory(status=Study.Status.DRAFT)
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    token = _loaded_state(client.get(_change_url(study)).content.decode())
    unchanged = client.post(_change_url(study), _form_data(study, title="Renamed") | {"loaded_state": token})
    assert unchanged.status_code == 302, unchanged.content.decode()[-3000:]

    study.refresh_from_db()
    token = _loaded_state(client.get(_change_url(study)).content.decode())
    StudyMembership.objects.create(study=study, user=omar, role="owner")
    refused = client.post(_change_url(study), _form_data(study, title="Again") | {"loaded_state": token})
    assert "Someone else changed this study since you opened this page: the members." in refused.content.decode()
    assert Study.objects.get(pk=study.pk).title == "Renamed"


def test_a_study_page_whose_record_of_what_it_loaded_is_garbage_saves_nothing_then_saves_from_the_refusal() -> None:
    admin = get_user_model().objects.create_superuser("root", password="pw")
    study = StudyFactory(status=Study.Status.OPEN)
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    form = _form_data(study, title="Typo fixed") | {"loaded_state": "not-a-signed-state"}
    refused = client.post(_change_url(study), form)
    page = refused.content.decode()
    assert refused.status_code == 200, page[-3000:]
    assert "the page&#x27;s record of what it loaded is unreadable" in page
    assert Study.objects.get(pk=study.pk).title == study.title
    saved = client.post(_change_url(study), form | {"loaded_state": _loaded_state(page)})
    assert saved.status_code == 302, saved.content.decode()[-3000:]
    assert Study.objects.get(pk=study.pk).title == "Typo fixed"
