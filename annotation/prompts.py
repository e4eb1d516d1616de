"""The default generation prompt and its rendering: one template shared by every candidate of a query."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kernel.backends import Document

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


def render_prompt(
    *, body: str, persona_block: str, query: str, documents: Sequence[Document], persona: Mapping[str, str] | None
) -> str:
    """Fill the template; the persona block appears only when a persona is given (personalised condition)."""
    block = persona_block.format(**{k: (v or "not given") for k, v in persona.items()}) if persona else ""
    return body.format(query=query, documents=format_documents(documents), persona_block=block)
