"""seed_demo refuses a bad --uses by name and leaves no half-made demo study behind."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Invitation, Study

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
