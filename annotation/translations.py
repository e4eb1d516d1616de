"""The annotator pages' translations: which wrapped strings a language's catalog lacks, marks fuzzy, or no longer
uses, and whether its compiled .mo still matches its .po. Used by `manage.py check_translations` and its test
(docs/languages.md)."""

from __future__ import annotations

import ast
import contextlib
import gettext
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.test.utils import override_settings

# What makemessages reads: the whole project but these (third-party code, tests, benchmarks, run-time files).
IGNORED = (".git", ".venv", "node_modules", "tests", "bench", "var", "locale", "docs", "platform")
# The options every run uses, so that an update and the check extract the same strings. No source locations:
# they change with every edit of a template and would make each merge of the catalog conflict.
MAKEMESSAGES_OPTIONS = {"no_location": True, "no_obsolete": True, "symlinks": True}


@dataclass
class Entry:
    """One message of a .po file. `key` is the message as a compiled catalog stores it."""

    msgid: str
    msgctxt: str | None = None
    msgid_plural: str | None = None
    msgstr: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)

    @property
    def key(self) -> str:
        return f"{self.msgctxt}\x04{self.msgid}" if self.msgctxt is not None else self.msgid

    @property
    def translated(self) -> bool:
        return bool(self.msgstr) and all(self.msgstr.values())


def _unquote(text: str) -> str:
    # A .po string is a C string literal; Python reads the escapes a .po uses (\" \\ \n \t) alike.
    value = ast.literal_eval(text)
    if not isinstance(value, str):
        raise ValueError(f"not a string: {text!r}")
    return value


def po_entries(path: Path) -> list[Entry]:
    """The messages of a .po file, header (msgid "") included; obsolete (#~) entries left out."""
    entries: list[Entry] = []
    current: Entry | None = None
    has_msgid = False  # a msgctxt opens an entry whose msgid follows
    flags: set[str] = set()
    target: tuple[str, int] = ("", 0)
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or (line.startswith("#") and not line.startswith("#,")) or line.startswith("#~"):
            continue
        if line.startswith("#,"):
            flags |= {flag.strip() for flag in line[2:].split(",")}
            continue
        keyword, _space, rest = line.partition(" ")
        if line.startswith('"'):
            if current is None:
                raise ValueError(f"{path}:{number}: a continuation line before any message")
            name, index = target
            if name == "msgstr":
                current.msgstr[index] += _unquote(line)
            else:
                setattr(current, name, (getattr(current, name) or "") + _unquote(line))
            continue
        if keyword == "msgctxt" or (keyword == "msgid" and (current is None or has_msgid)):
            current, has_msgid, flags = Entry(msgid="", flags=flags), False, set()
            entries.append(current)
        if current is None:
            raise ValueError(f"{path}:{number}: {line!r} before any message")
        if keyword.startswith("msgstr"):
            index = int(keyword[7:-1]) if keyword.startswith("msgstr[") else 0
            current.msgstr[index] = _unquote(rest)
            target = ("msgstr", index)
        elif keyword in ("msgid", "msgctxt", "msgid_plural"):
            setattr(current, keyword, _unquote(rest))
            has_msgid = has_msgid or keyword == "msgid"
            target = (keyword, 0)
        else:
            raise ValueError(f"{path}:{number}: cannot read {line!r}")
    return entries


def catalog_path(language: str, *, locale_dir: Path | None = None) -> Path:
    return (locale_dir or Path(settings.LOCALE_PATHS[0])) / language / "LC_MESSAGES" / "django.po"


def extracted_entries(language: str) -> list[Entry]:
    """The strings the code and templates wrap today, as `makemessages` finds them, without touching the
    project's own catalog: it runs in a temporary folder that links to the sources."""
    root = Path(settings.BASE_DIR)
    with tempfile.TemporaryDirectory(prefix="messages-") as tmp:
        folder = Path(tmp)
        for child in root.iterdir():
            if child.name not in IGNORED and not child.name.startswith("."):
                (folder / child.name).symlink_to(child)
        (folder / "locale").mkdir()
        with override_settings(LOCALE_PATHS=[folder / "locale"]), contextlib.chdir(folder):
            call_command("makemessages", locale=[language], verbosity=0, ignore_patterns=[], **MAKEMESSAGES_OPTIONS)
        return po_entries(catalog_path(language, locale_dir=folder / "locale"))


def catalog_update(language: str) -> None:
    """Bring the project's catalog up to date with the sources (new strings untranslated, unused ones dropped)."""
    root = Path(settings.BASE_DIR)
    with contextlib.chdir(root):
        call_command(
            "makemessages",
            locale=[language],
            verbosity=1,
            ignore_patterns=[f"{name}/*" for name in IGNORED] + list(IGNORED),
            **MAKEMESSAGES_OPTIONS,
        )


def _describe(entry: Entry) -> str:
    text = entry.msgid if entry.msgctxt is None else f"{entry.msgid} (context: {entry.msgctxt})"
    return repr(text)


def catalog_problems(
    language: str, *, locale_dir: Path | None = None, extracted: list[Entry] | None = None
) -> list[str]:
    """Everything wrong with a language's catalog, one line each; empty when it is complete and compiled."""
    po = catalog_path(language, locale_dir=locale_dir)
    if not po.exists():
        return [f"{po}: no catalog (run: manage.py check_translations --update {language})"]
    entries = po_entries(po)
    problems: list[str] = []
    header = next((e for e in entries if e.msgid == "" and e.msgctxt is None), None)
    if header is None or "fuzzy" in header.flags:
        problems.append(f"{po}: the header is missing or marked fuzzy (remove the '#, fuzzy' above msgid \"\")")
    messages = [e for e in entries if e.key != ""]
    for entry in messages:
        if "fuzzy" in entry.flags:
            problems.append(f"fuzzy: {_describe(entry)}")
        elif not entry.translated:
            problems.append(f"untranslated: {_describe(entry)}")
    known = {e.key for e in messages}
    wrapped = {e.key: e for e in (extracted if extracted is not None else extracted_entries(language)) if e.key}
    problems += [f"not in the catalog: {_describe(e)}" for key, e in wrapped.items() if key not in known]
    problems += [f"no longer used: {_describe(e)}" for e in messages if e.key not in wrapped]
    problems += _compiled_problems(po, messages)
    return problems


def _compiled_problems(po: Path, messages: list[Entry]) -> list[str]:
    mo = po.with_suffix(".mo")
    if not mo.exists():
        return [f"{mo}: not compiled (run: manage.py compilemessages)"]
    with mo.open("rb") as handle:
        compiled = dict(gettext.GNUTranslations(handle)._catalog)  # type: ignore[attr-defined]
    compiled.pop("", None)
    expected: dict[object, str] = {}
    for entry in messages:
        if "fuzzy" in entry.flags or not entry.translated:
            continue  # msgfmt leaves these out
        if entry.msgid_plural is None:
            expected[entry.key] = entry.msgstr[0]
        else:
            expected.update({(entry.key, n): text for n, text in entry.msgstr.items()})
    if compiled != expected:
        return [f"{mo}: stale, it does not match {po.name} (run: manage.py compilemessages)"]
    return []


def languages_to_check() -> list[str]:
    return [code for code, _name in settings.LANGUAGES if code != settings.LANGUAGE_CODE]
