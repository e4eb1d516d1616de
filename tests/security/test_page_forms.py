"""Hostile input on the HTML pages: every form a page shows, posted with each field made hostile in turn (a NUL
character, a number past any integer column, 5,000 characters, left out), gets a page, a redirect or a 4xx,
never a 500 (issue 11: "no request gets a 500"; the API is fuzzed by tests/fuzz, the pages are not in its
schema). The forms are read from the pages themselves, so a new field or form is covered without a row here.

Each post runs in its own rolled-back transaction, so no post changes what the next one sees."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

import pytest
from django.db import transaction
from django.test import Client

from annotation.services.query import query_submit
from studies.models import Study
from tests.annotation.factories import join

pytestmark = pytest.mark.django_db

HOSTILE: list[tuple[str, Any]] = [
    ("NUL", lambda value: f"{value}\x00x"),
    ("past 2**63", lambda value: str(2**63)),
    ("5,000 characters", lambda value: "x" * 5000),
    ("left out", None),
]


@dataclass
class Form:
    page: str
    action: str
    fields: dict[str, list[str]] = field(default_factory=dict)


class _Forms(HTMLParser):
    """The POST forms of a page with the value each field would send (the first option of a select or a radio
    group, a textarea's text, a named button's value)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.page = page
        self.forms: list[Form] = []
        self._form: Form | None = None
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("method", "get").lower() == "post":
            self._form = Form(self.page, urljoin(self.page, a.get("action") or self.page))
            self.forms.append(self._form)
        if self._form is None or "form" == tag:
            return
        name = a.get("name")
        if tag in ("input", "button") and name:
            kind = a.get("type", "text" if tag == "input" else "submit").lower()
            if kind in ("checkbox", "radio") and name in self._form.fields and kind == "radio":
                return
            self._form.fields.setdefault(name, []).append(a.get("value", "on" if kind == "checkbox" else ""))
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and self._select not in self._form.fields:
            self._form.fields[self._select] = [a.get("value", "")]
        elif tag == "textarea" and name:
            self._textarea = name
            self._form.fields[name] = [""]

    def handle_data(self, data: str) -> None:
        if self._form is not None and self._textarea:
            self._form.fields[self._textarea] = [self._form.fields[self._textarea][0] + data]

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def _forms(client: Client, url: str) -> list[Form]:
    response = client.get(url)
    assert response.status_code == 200, f"{url}: {response.status_code}"  # shown, not sent to a sign-in
    parser = _Forms(url)
    parser.feed(response.content.decode())
    # Signing out would end the session the other posts need; its form has no field to make hostile.
    return [form for form in parser.forms if not form.action.endswith("/logout/")]


def _hostile_posts(client: Client, form: Form, hostile: list[tuple[str, Any]]) -> list[str]:
    """Post the form once as shown and once per field and hostile value; the 5xx found."""
    posts: list[tuple[str, dict[str, list[str]]]] = [("as shown", form.fields)]
    for name in form.fields:
        if name == "csrfmiddlewaretoken":
            continue
        for label, change in hostile:
            data = dict(form.fields)
            if change is None:
                del data[name]
            else:
                data[name] = [change(value) for value in form.fields[name]]
            posts.append((f"{name}: {label}", data))
    errors = []
    cookies = copy.deepcopy(client.cookies)
    for label, data in posts:
        client.cookies = copy.deepcopy(cookies)  # a post that signs in or out changes nothing for the next
        with transaction.atomic():
            status = client.post(form.action, data).status_code
            transaction.set_rollback(True)
        if status >= 500:
            errors.append(f"POST {form.action} ({form.page}) {label}: {status}")
    return errors


def _signed_in(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def pages(world, django_capture_on_commit_callbacks) -> list[tuple[str, Client, str]]:
    """(who, their client, a page with forms) for every kind of form the site shows. The admin's study page
    stands for its add page (the same form without the inlines); the admin's other model pages are Django's."""
    study = world.study
    # Every choice setting on, so the comparison page shows ties and the comment box.
    Study.objects.filter(pk=study.pk).update(allow_ties=True, comments="match")
    fresh = join(study, persona=False)  # the persona form
    comparing = join(study)  # a question with a pending comparison
    with django_capture_on_commit_callbacks(execute=True):
        query_submit(participation=comparing, text="shift work and sleep", client_token="")
    users = world.users
    slug, pk = study.slug, study.pk
    return [
        ("anonymous", _signed_in(None), f"/join/{world.invitation.token}/"),
        ("anonymous", _signed_in(None), "/accounts/login/"),
        ("annotator", _signed_in(fresh.annotator), f"/study/{slug}/profile/"),
        ("annotator", _signed_in(users["annotator"]), f"/study/{slug}/ask/"),
        ("annotator", _signed_in(users["annotator"]), f"/study/{slug}/stop/"),
        ("annotator", _signed_in(comparing.annotator), f"/study/{slug}/q/1/compare/"),
        ("owner", _signed_in(users["owner_member"]), f"/research/studies/{slug}/"),
        ("owner", _signed_in(users["owner_member"]), "/research/token/"),
        ("admin", _signed_in(users["admin"]), f"/admin/studies/study/{pk}/change/"),
        ("admin", _signed_in(users["admin"]), f"/admin/studies/study/{pk}/invitations/"),
        ("admin", _signed_in(users["admin"]), "/admin/annotation/participation/"),
    ]


def test_every_form_field_made_hostile_gets_no_server_error(pages):
    errors: list[str] = []
    posted = 0
    for who, client, url in pages:
        forms = _forms(client, url)
        assert forms, f"{url} as {who} shows no form to post"
        # The admin's study page has 70-odd fields, each a Django form field that refuses long or missing
        # values alike; it gets the two values that reach the database (about half of the run's time).
        hostile = HOSTILE[:2] if url.endswith("/change/") else HOSTILE
        for form in forms:
            found = _hostile_posts(client, form, hostile)
            posted += 1 + len(hostile) * (len(form.fields) - ("csrfmiddlewaretoken" in form.fields))
            errors += [f"as {who}: {e}" for e in found]
    assert posted > 300, posted  # the pages still show their forms (about 350 posts)
    assert not errors, f"{len(errors)} of {posted} posts got a 5xx:\n" + "\n".join(errors)
