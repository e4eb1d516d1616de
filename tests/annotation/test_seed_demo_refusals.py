"""seed_demo refuses a bad --uses or an empty --admin-password by name and leaves no half-made demo study behind."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from studies.models import Invitation, Study

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("uses", ["0", "-2"])
def test_uses_below_one_is_refused_naming_uses(uses, tmp_path):
    with pytest.raises(CommandError, match=f"--uses: must be at least 1, not {int(uses)}"):
        call_command("seed_demo", "--uses", uses, "--admin-password-file", str(tmp_path / "pw"))
    assert not Study.objects.filter(slug="demo").exists()


def test_a_refused_invitation_leaves_no_study(tmp_path):
    with pytest.raises(CommandError, match="--uses: An invitation allows at most"):
        call_command("seed_demo", "--uses", str(2**40), "--admin-password-file", str(tmp_path / "pw"))
    assert not Study.objects.filter(slug="demo").exists()
    assert not Invitation.objects.exists()
    assert not (tmp_path / "pw").exists()


@pytest.mark.parametrize("password", ["", "   "])
def test_an_empty_admin_password_is_refused_and_nothing_is_made(password, tmp_path):
    # Nobody could sign in with it, and seed_demo would print it as the way to sign in.
    with pytest.raises(CommandError, match="--admin-password: must not be empty"):
        call_command("seed_demo", "--admin-password", password, "--admin-password-file", str(tmp_path / "pw"))
    assert not Study.objects.filter(slug="demo").exists()
    assert not get_user_model().objects.filter(username="admin").exists()
