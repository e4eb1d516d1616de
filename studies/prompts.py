"""The default generation prompt and its rendering: one template shared by every candidate of a query."""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence

from kernel.backends import Document

BODY_PLACEHOLDERS = ("query", "documents", "persona_block")
PERSONA_PLACEHOLDERS = ("role", "domain", "expertise", "research_area", "use_case")

DEFAULT_TEMPLATE_NAME = "grounded-summary"

DEFAULT_BODY = """You are helping a reader with an information need. Answer their question with a short summary \
(about 150 words) grounded ONLY in the numbered paper abstracts below. Cite the abstracts you use with bracketed \
in-text citations such as [1] or [2][5]; do not cite numbers that are not listed, and do not add facts that the \
abstracts do not support.
{persona_block}
Question: {query}

Abstracts:
{documents}

Summary:"""

DEFAULT_PERSONA_BLOCK = """
The reader describes themselves as follows. Tailor the summary to what this reader needs.
- Role: {role}
- Domain: {domain}
- Expertise: {expertise}
- Research area: {research_area}
- What they will use the answer for: {use_case}
"""


def format_documents(documents: Sequence[Document]) -> str:
    lines = []
    for number, doc in enumerate(documents, start=1):
        year = f" ({doc.year})" if doc.year else ""
        lines.append(f"[{number}] {doc.title}{year}\n{doc.abstract}")
    return "\n\n".join(lines)


class TemplateError(ValueError):
    """A template that names something other than its placeholders, or asks more of one than its text."""


def _fill(template: str, values: Mapping[str, str], *, where: str) -> str:
    """``template`` with each ``{name}`` replaced by ``values[name]`` and ``{{``/``}}`` by a brace.

    Not ``str.format``: a template is text an owner wrote, and ``format`` would follow ``{query.__class__}`` or
    ``{documents[0]}`` into the objects behind the names and apply format specs and conversions. Here a
    placeholder is a bare name from the closed set, or the template is refused naming it.
    """
    out: list[str] = []
    try:
        parsed: Iterable[tuple[str, str | None, str | None, str | None]] = list(string.Formatter().parse(template))
    except ValueError as error:  # a lone "{" or "}"
        raise TemplateError(f"{where}: {error}; write a literal brace as {{{{ or }}}}") from None
    for literal, name, spec, conversion in parsed:
        out.append(literal)
        if name is None:
            continue
        if name not in values or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise TemplateError(
                f"{where}: {shown} is not a placeholder; the placeholders are "
                + ", ".join("{" + n + "}" for n in values)
                + " (a bare name, nothing after it); write a literal brace as {{ or }}"
            )
        out.append(values[name])
    return "".join(out)


def check_template(*, body: str, persona_block: str) -> dict[str, str]:
    """What would stop the template being filled in, by field (``body``, ``persona_block``); empty when nothing.
    Asked when a template is saved, before any summary uses it."""
    problems: dict[str, str] = {}
    for field, where, text, names in (
        ("body", "template body", body, BODY_PLACEHOLDERS),
        ("persona_block", "persona block", persona_block, PERSONA_PLACEHOLDERS),
    ):
        try:
            _fill(text, dict.fromkeys(names, ""), where=where)
        except TemplateError as error:
            problems[field] = str(error)
    return problems


def render_prompt(
    *, body: str, persona_block: str, query: str, documents: Sequence[Document], persona: Mapping[str, str] | None
) -> str:
    """Fill the template; the persona block appears only when a persona is given (personalised condition)."""
    if persona:
        values = {name: persona.get(name) or "not given" for name in PERSONA_PLACEHOLDERS}
        block = _fill(persona_block, values, where="persona block")
    else:
        block = ""
    return _fill(
        body, {"query": query, "documents": format_documents(documents), "persona_block": block}, where="template body"
    )
