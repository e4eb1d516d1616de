"""The shipped German catalog holds every string the annotator pages wrap, translated and not fuzzy, and its
compiled .mo matches it; and the check behind that (manage.py check_translations) does find each kind of gap."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import override_settings

from annotation.translations import catalog_path, catalog_problems, languages_to_check, po_entries
from tests.conftest import require

GETTEXT = "gettext not installed (makemessages and compilemessages need it): apt-get install -y gettext"


@pytest.mark.parametrize("language", languages_to_check())
def test_every_wrapped_string_is_translated_and_compiled(language: str):
    require(bool(shutil.which("xgettext")), GETTEXT)
    # makemessages over the sources, in a temporary folder: a string wrapped since the catalog was updated
    # is "not in the catalog"; one left empty or fuzzy, or a .mo not compiled again, is named too.
    assert catalog_problems(language) == []


def test_the_check_names_untranslated_fuzzy_new_and_unused_strings_and_a_stale_mo(tmp_path: Path):
    shipped = catalog_path("de")
    locale = tmp_path / "locale"
    (locale / "de" / "LC_MESSAGES").mkdir(parents=True)
    po = catalog_path("de", locale_dir=locale)
    shutil.copy(shipped, po)
    shutil.copy(shipped.with_suffix(".mo"), po.with_suffix(".mo"))
    wrapped = po_entries(shipped)  # what the sources wrap (the test above holds the two equal)
    assert catalog_problems("de", locale_dir=locale, extracted=wrapped) == []

    text = po.read_text(encoding="utf-8")
    text = text.replace('msgstr "Ihre Rolle"', 'msgstr ""')
    text = text.replace('msgid "Your domain"', '#, fuzzy\nmsgid "Your domain"')
    text = text.replace('msgid "Open paper"\nmsgstr "Artikel öffnen"\n', "")
    text += '\nmsgid "A string nobody wraps any more"\nmsgstr "Ein Text, den niemand mehr verwendet"\n'
    po.write_text(text, encoding="utf-8")
    gaps = [
        "untranslated: 'Your role'",
        "fuzzy: 'Your domain'",
        "not in the catalog: 'Open paper'",
        "no longer used: 'A string nobody wraps any more'",
    ]
    stale = f"{po.with_suffix('.mo')}: stale, it does not match django.po (run: manage.py compilemessages)"
    assert catalog_problems("de", locale_dir=locale, extracted=wrapped) == [*gaps, stale]

    require(bool(shutil.which("msgfmt")), GETTEXT)
    # Compiling again makes the .mo current: only the catalog's own gaps remain.
    with override_settings(LOCALE_PATHS=[locale]), contextlib.chdir(tmp_path):
        call_command("compilemessages", locale=["de"], verbosity=0)
    assert catalog_problems("de", locale_dir=locale, extracted=wrapped) == gaps


def test_a_context_and_a_plural_are_read_as_the_compiled_catalog_keys_them():
    entries = {e.key: e for e in po_entries(catalog_path("de"))}
    assert entries["the key for Neither, as printed on the button\x04N"].msgstr == {0: "K"}
    plural = entries["Ask %(limit)s question from your own work or studies."]
    assert plural.msgid_plural == "Ask up to %(limit)s questions from your own work or studies."
    assert plural.msgstr[1] == "Stellen Sie bis zu %(limit)s Fragen aus Ihrer eigenen Arbeit oder Ihrem Studium."
