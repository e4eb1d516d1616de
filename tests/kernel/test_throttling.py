"""Login throttling: wrong passwords lock one username from one client address out for the cool-off, on the
admin's sign-in and the researchers' (/accounts/login/) alike, with a plain 429 page saying when to try again;
other users, other addresses and good logins are unaffected."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client, override_settings

from analysis.permissions import RESEARCHERS_GROUP

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/?next=/admin/"


@pytest.fixture
def admins():
    users = get_user_model().objects
    return users.create_superuser("root", "r@example.org", "right-pw"), users.create_superuser(
        "other", "o@example.org", "other-pw"
    )


def _login(client: Client, username: str, password: str, **extra: str):  # type: ignore[no-untyped-def]
    return client.post(LOGIN, {"username": username, "password": password}, **extra)


def _signed_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def test_five_wrong_passwords_lock_the_account_out_even_with_the_right_one(admins):
    client = Client()
    for _ in range(4):
        wrong = _login(client, "root", "wrong")
        assert wrong.status_code == 200 and "Please enter the correct username and password" in wrong.content.decode()
    assert _login(client, "root", "wrong").status_code == 429  # the fifth failure locks
    locked = _login(client, "root", "right-pw")  # the sixth is refused, right password or not
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed sign-in attempts" in page and "try again in 15 minutes" in page
    assert locked["Retry-After"] == str(15 * 60)
    assert not _signed_in(client)
    # Another user from the same address, and the same user from another address, are not locked out.
    assert _login(Client(), "other", "other-pw").status_code == 302
    assert _login(Client(), "root", "right-pw", REMOTE_ADDR="10.0.0.2").status_code == 302


def test_a_good_login_resets_the_count(admins):
    client = Client()
    for _ in range(4):
        _login(client, "root", "wrong")
    assert _login(client, "root", "right-pw").status_code == 302
    client.logout()
    for _ in range(4):
        assert _login(client, "root", "wrong").status_code == 200
    assert _login(client, "root", "right-pw").status_code == 302


@override_settings(TRUSTED_PROXY_COUNT=1)
def test_behind_a_trusted_proxy_the_forwarded_client_is_throttled_not_the_proxy(admins):
    proxy = {"REMOTE_ADDR": "172.18.0.5"}
    attacker = {**proxy, "HTTP_X_FORWARDED_FOR": "198.51.100.7"}
    for _ in range(5):
        _login(Client(), "root", "wrong", **attacker)
    assert _login(Client(), "root", "right-pw", **attacker).status_code == 429
    # A spoofed first entry does not escape: the proxy appended the real address last.
    spoofed = {**proxy, "HTTP_X_FORWARDED_FOR": "203.0.113.9, 198.51.100.7"}
    assert _login(Client(), "root", "right-pw", **spoofed).status_code == 429
    # The real admin behind the same proxy, from another address, still gets in.
    assert _login(Client(), "root", "right-pw", **proxy, HTTP_X_FORWARDED_FOR="192.0.2.44").status_code == 302


def test_thirty_wrong_passwords_on_the_research_sign_in_get_four_tries_and_a_lockout():
    # The tracker's finding (issue 11) was 30 wrong admin passwords in 16.7 s with no lockout; the research
    # sign-in is a plain LoginView, throttled because its form goes through authenticate().
    researcher = get_user_model().objects.create_user("rita", password="right-pw")
    researcher.groups.add(Group.objects.get_or_create(name=RESEARCHERS_GROUP)[0])
    client = Client()
    statuses = [
        client.post("/accounts/login/", {"username": "rita", "password": f"guess-{i}"}).status_code for i in range(30)
    ]
    assert statuses == [200] * 4 + [429] * 26
    locked = client.post("/accounts/login/", {"username": "rita", "password": "right-pw", "next": "/research/"})
    assert locked.status_code == 429 and "Too many failed sign-in attempts" in locked.content.decode()
    assert client.get("/research/")["Location"] == "/accounts/login/?next=/research/"  # still signed out
    # The admin's sign-in shares the count: the same pair is locked there too.
    assert _login(client, "rita", "right-pw").status_code == 429
    # From another address the researcher still signs in.
    elsewhere = Client(REMOTE_ADDR="10.0.0.3")
    signed_in = elsewhere.post("/accounts/login/", {"username": "rita", "password": "right-pw", "next": "/research/"})
    assert signed_in.status_code == 302 and elsewhere.get("/research/").status_code == 200
