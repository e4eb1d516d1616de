"""Studies of pre-written outputs: importing a lab's items and one output per study system from a CSV or JSONL
file (checked whole, every problem named by line and field), and giving an annotator the next item as a question
whose candidates are the pre-written texts, its bracket drawn at once (docs/backends.md, "Pre-written studies")."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from annotation.models import (
    Candidate,
    Participation,
    PrewrittenAssignment,
    PrewrittenItem,
    PrewrittenOutput,
    Query,
    RetrievedDocument,
)
from annotation.selectors.participation import participation_locked
from annotation.selectors.prewritten import prewritten_item_next
from annotation.services.generation import query_advance_if_generated
from annotation.services.participation import (
    participation_ended,
    participation_needs_screening,
    screening_first,
)
from annotation.services.persona import persona_current
from annotation.services.tournament import bracket_create
from kernel.exceptions import ApplicationError
from kernel.jsonl import JsonlError, iter_jsonl
from studies.models import Study
from studies.services.study import study_require_open

# The candidates' generation backend snapshot: what exports say produced a pre-written output.
PREWRITTEN_BACKEND = "prewritten"
FORMATS = ("csv", "jsonl")
MAX_PROBLEMS = 50  # named in one answer, at most (the count says how many there were)


@dataclass(frozen=True)
class Columns:
    """The file's column (CSV) or key (JSONL) names; each is configurable on the command and the API."""

    item: str = "item_id"
    system: str = "system"
    output: str = "output"
    source: str = "source"  # one source text
    documents: str = "documents"  # or several: a JSON list of {"title", "text", "url"} objects (or of strings)
    title: str = "title"  # the single source's title
    prompt: str = "prompt"  # optional: shown as the question


@dataclass(frozen=True)
class Problem:
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "file"
        return f"{where}, field {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


@dataclass
class _Item:
    key: str
    order: int
    lines: list[int] = field(default_factory=list)
    prompt: str = ""
    sources: list[dict[str, str]] = field(default_factory=list)
    outputs: dict[str, tuple[int, str]] = field(default_factory=dict)  # system label -> (line, text)


@dataclass(frozen=True)
class ImportResult:
    items_created: int
    items_updated: int
    outputs_created: int
    outputs_updated: int
    unchanged: int

    @property
    def changed(self) -> bool:
        return bool(self.items_created or self.items_updated or self.outputs_created or self.outputs_updated)

    def summary(self) -> str:
        return (
            f"{self.items_created} item(s) created, {self.items_updated} updated; {self.outputs_created} output(s) "
            f"created, {self.outputs_updated} updated; {self.unchanged} unchanged."
        )


def _refused(problems: list[Problem]) -> ApplicationError:
    shown = problems[:MAX_PROBLEMS]
    more = len(problems) - len(shown)
    message = "The file was not imported: " + "; ".join(str(p) for p in shown) + (f"; and {more} more" if more else "")
    first = problems[0]
    return ApplicationError(
        message,
        field=first.field or None,
        extra={
            "problems": [{"line": p.line, "field": p.field, "message": p.message} for p in shown],
            "count": len(problems),
        },
    )


def prewritten_rows_read(*, data: bytes | str, format: str, name: str = "file") -> list[tuple[int, dict[str, Any]]]:
    """(line, row) for every row of a CSV (with a header line) or JSONL file; ApplicationError naming the line
    for a file that cannot be read."""
    if format not in FORMATS:
        raise ApplicationError(f"Unknown format {format!r}: use csv or jsonl.", field="format")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise _refused([Problem(None, "", f"not UTF-8 text ({error.reason} at byte {error.start})")]) from None
    if format == "jsonl":
        try:
            return list(iter_jsonl(data.splitlines(), name=name))
        except JsonlError as error:
            raise _refused([Problem(error.line, "", error.problem)]) from None
    reader = csv.DictReader(io.StringIO(data, newline=""))
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        for row in reader:
            rows.append((reader.line_num, {k: v for k, v in row.items() if k is not None}))
    except csv.Error as error:
        raise _refused([Problem(reader.line_num, "", f"not valid CSV ({error})")]) from None
    return rows


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else "" if value is None else str(value).strip()


def _sources(row: dict[str, Any], columns: Columns, line: int, problems: list[Problem]) -> list[dict[str, str]]:
    documents = row.get(columns.documents)
    if documents not in (None, ""):
        if isinstance(documents, str):
            try:
                documents = json.loads(documents)
            except json.JSONDecodeError as error:
                problems.append(Problem(line, columns.documents, f"not a JSON list ({error.msg})"))
                return []
        if not isinstance(documents, list) or not documents:
            problems.append(Problem(line, columns.documents, "must be a non-empty list of documents"))
            return []
        out = []
        for number, document in enumerate(documents, start=1):
            if isinstance(document, str):
                document = {"text": document}
            text = _text(document.get("text") or document.get("abstract")) if isinstance(document, dict) else ""
            if not text:
                problems.append(Problem(line, columns.documents, f"document {number} has no text"))
                continue
            out.append({"title": _text(document.get("title")), "text": text, "url": _text(document.get("url"))})
        return out
    source = _text(row.get(columns.source))
    return [{"title": _text(row.get(columns.title)), "text": source, "url": ""}] if source else []


def prewritten_rows_check(
    *, rows: list[tuple[int, dict[str, Any]]], systems: list[str], columns: Columns = Columns()
) -> tuple[list[_Item], list[Problem]]:
    """The items of the rows (one row per item and system), and every problem: a missing field, an unknown
    system, an output given twice, an item whose rows disagree on its source or prompt, an item without a
    source, and an item missing a system's output (named with the item's lines)."""
    problems: list[Problem] = []
    items: dict[str, _Item] = {}
    known = set(systems)
    if not rows:
        problems.append(Problem(None, "", "no rows"))
    for line, row in rows:
        key, system, output = (_text(row.get(c)) for c in (columns.item, columns.system, columns.output))
        missing = [name for name, value in ((columns.item, key), (columns.system, system)) if not value]
        for name in missing:
            problems.append(Problem(line, name, "is missing or empty"))
        if missing:
            continue
        if system not in known:
            problems.append(
                Problem(line, columns.system, f"unknown system {system!r} (the study's: {', '.join(systems)})")
            )
            continue
        if not output:
            problems.append(Problem(line, columns.output, f"is empty (item {key}, system {system})"))
        item = items.setdefault(key, _Item(key=key, order=len(items)))
        item.lines.append(line)
        if system in item.outputs:
            first = item.outputs[system][0]
            problems.append(
                Problem(line, columns.system, f"item {key} has an output of {system} already (line {first})")
            )
            continue
        item.outputs[system] = (line, output)
        prompt = _text(row.get(columns.prompt))
        if prompt:
            if item.prompt and prompt != item.prompt:
                problems.append(Problem(line, columns.prompt, f"differs from item {key}'s prompt on an earlier line"))
            item.prompt = item.prompt or prompt
        sources = _sources(row, columns, line, problems)
        if sources:
            if item.sources and sources != item.sources:
                problems.append(Problem(line, columns.source, f"differs from item {key}'s source on an earlier line"))
            item.sources = item.sources or sources
    for item in items.values():
        lines = ", ".join(str(n) for n in item.lines)
        if not item.sources:
            problems.append(
                Problem(item.lines[0], columns.source, f"item {item.key} (lines {lines}) has no source text")
            )
        absent = [s for s in systems if s not in item.outputs]
        if absent:
            problems.append(
                Problem(
                    item.lines[0],
                    columns.system,
                    f"item {item.key} (lines {lines}) has no output of system(s) {', '.join(absent)}",
                )
            )
    return list(items.values()), problems


@transaction.atomic
def prewritten_import(
    *, study: Study, data: bytes | str, format: str, columns: Columns = Columns(), name: str = "file"
) -> ImportResult:
    """Import items and outputs into `study`, all or nothing. The same file again changes nothing; an item or
    output that changed is updated only while no annotator has been shown the item (else refused by line)."""
    study = Study.objects.select_for_update().get(pk=study.pk)  # one import of a study at a time
    systems = {s.label: s for s in study.systems.all()}
    if len(systems) < 2:
        raise ApplicationError("The study needs at least 2 systems before outputs are imported.", field="systems")
    rows = prewritten_rows_read(data=data, format=format, name=name)
    items, problems = prewritten_rows_check(rows=rows, systems=list(systems), columns=columns)
    if problems:
        raise _refused(problems)
    stored = {
        item.key: item
        for item in PrewrittenItem.objects.filter(study=study, key__in=[i.key for i in items])
        .annotate(shown=Count("assignments"))
        .prefetch_related("outputs__system")
    }
    counts = {"items_created": 0, "items_updated": 0, "outputs_created": 0, "outputs_updated": 0, "unchanged": 0}
    last = PrewrittenItem.objects.filter(study=study).aggregate(last=Max("order"))["last"]
    next_order = 0 if last is None else last + 1
    for spec in items:
        found = stored.get(spec.key)
        judged = found is not None and bool(found.shown)
        row: PrewrittenItem
        if found is None:
            row = PrewrittenItem.objects.create(
                study=study, key=spec.key, prompt=spec.prompt, sources=spec.sources, order=next_order
            )
            next_order += 1
            counts["items_created"] += 1
            outputs: dict[str, PrewrittenOutput] = {}
        else:
            row = found
            outputs = {o.system.label: o for o in row.outputs.all()}
            if (row.prompt, row.sources) != (spec.prompt, spec.sources):
                if judged:
                    problems.append(
                        Problem(
                            spec.lines[0],
                            columns.source,
                            f"item {spec.key} has been shown to annotators; its source and prompt cannot change",
                        )
                    )
                else:
                    row.prompt, row.sources = spec.prompt, spec.sources
                    row.save(update_fields=["prompt", "sources"])
                    counts["items_updated"] += 1
        for label, (line, text) in spec.outputs.items():
            output = outputs.get(label)
            if output is None:
                PrewrittenOutput.objects.create(item=row, system=systems[label], text=text)
                counts["outputs_created"] += 1
            elif output.text == text:
                counts["unchanged"] += 1
            elif judged:
                problems.append(
                    Problem(
                        line,
                        columns.output,
                        f"item {spec.key} has been shown to annotators; the output of {label} cannot change",
                    )
                )
            else:
                output.text = text
                output.save(update_fields=["text"])
                counts["outputs_updated"] += 1
    if problems:
        transaction.set_rollback(True)
        raise _refused(problems)
    return ImportResult(**counts)


@transaction.atomic
def prewritten_query_next(
    *, participation: Participation, client_token: str = "", shown_at: datetime | None = None
) -> Query:
    """Give the annotator the next item of a pre-written study as a question: its prompt as the text, its sources
    frozen, one finished candidate per system holding the system's output, and the bracket drawn at once, as the
    last generated candidate of a live question draws it. The same client token again is the same question."""
    participation = participation_locked(participation_id=participation.pk)
    study = participation.study
    if client_token and (earlier := participation.queries.filter(client_token=client_token).first()) is not None:
        return earlier
    study_require_open(study=study)
    if participation_ended(participation=participation):
        raise ApplicationError(_("You have already finished this study. Thank you!"), status=409)
    persona = persona_current(participation=participation)
    if persona is None:
        if participation_needs_screening(participation=participation):
            raise screening_first(participation=participation)
        raise ApplicationError(_("Please describe yourself before the first item."), status=409)
    done = [Query.Status.RANKED, Query.Status.DISCARDED]
    tally = participation.queries.aggregate(
        still_open=Count("pk", filter=~Q(status__in=done)),
        used=Count("pk", filter=~Q(status=Query.Status.DISCARDED)),
        last_index=Max("index"),
    )
    if tally["still_open"]:
        raise ApplicationError(_("Please finish ranking your current item first."), status=409)
    if tally["used"] >= study.queries_per_annotator:
        raise ApplicationError(
            _("You have ranked all %(limit)d items of this study.") % {"limit": study.queries_per_annotator},
            status=409,
        )
    item = prewritten_item_next(participation=participation)
    if item is None:
        raise ApplicationError(_("There is no item left for you in this study. Thank you!"), status=409)
    outputs = list(item.outputs.select_related("system").order_by("system__order", "system_id"))
    missing = sorted(set(study.systems.values_list("label", flat=True)) - {o.system.label for o in outputs})
    if missing:
        # A system added to the design after the import: its outputs must be imported before anyone ranks.
        raise ApplicationError(
            _("This study is not ready: item %(key)s has no output of %(systems)s.")
            % {"key": item.key, "systems": ", ".join(missing)},
            status=409,
        )
    sources = item.sources or []
    now = timezone.now()
    query = Query.objects.create(
        participation=participation,
        index=(tally["last_index"] or 0) + 1,
        text=item.prompt or sources[0].get("title") or _("Item %(key)s") % {"key": item.key},
        client_token=client_token or f"item-{item.pk}-{now.timestamp()}",
        persona=persona,
        retrieval_backend=PREWRITTEN_BACKEND,
        status=Query.Status.GENERATING,
        shown_at=shown_at if shown_at is not None and shown_at <= now else None,
    )
    PrewrittenAssignment.objects.create(query=query, item=item)
    RetrievedDocument.objects.bulk_create(
        [
            RetrievedDocument(
                query=query,
                rank=rank,
                external_id=f"{item.key}:{rank}"[:200],
                title=source.get("title") or "",
                abstract=source.get("text") or "",
                url=(source.get("url") or "")[:500],
            )
            for rank, source in enumerate(sources, start=1)
        ]
    )
    Candidate.objects.bulk_create(
        [
            # The same snapshot a generated candidate carries (exports read it), with the import as its backend.
            Candidate(
                query=query,
                system=output.system,
                text=output.text,
                status=Candidate.Status.DONE,
                queued_at=now,
                started_at=now,
                finished_at=now,
                system_label=output.system.label,
                model_name=output.system.model_name,
                condition=output.system.condition,
                generation_backend=PREWRITTEN_BACKEND,
                generation_settings={"item": item.key},
            )
            for output in outputs
        ]
    )
    if study.identical_policy == Study.IdenticalPolicy.REGENERATE:
        # Nothing can be written again: identical outputs are shown with the notice.
        bracket_create(query=query, study=study)
    else:
        query_advance_if_generated(query_id=query.pk)
    query.refresh_from_db()
    return query
