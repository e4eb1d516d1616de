"""What a study's candidate is scored against: by default the reference is the concatenated titles of
the retrieved papers and the source their concatenated abstracts (SPEC section 2), configurable per run."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from annotation.models import Candidate

REFERENCE_CHOICES = ("titles", "abstracts")
SOURCE_CHOICES = ("abstracts", "titles_and_abstracts")


def persona_text(persona: dict[str, str]) -> str:
    labels = {
        "role": "Role",
        "domain": "Domain",
        "expertise": "Expertise",
        "research_area": "Research area",
        "use_case": "Use",
    }
    return "; ".join(f"{labels[k]}: {v}" for k, v in persona.items() if v and k in labels)


def candidate_rows(
    candidates: Iterable[Candidate], *, reference: str = "titles", source: str = "abstracts"
) -> list[dict[str, Any]]:
    """Rows in the metric suite's input format; candidates must prefetch query documents and persona."""
    if reference not in REFERENCE_CHOICES:
        raise ValueError(f"reference must be one of {REFERENCE_CHOICES}, not {reference!r}")
    if source not in SOURCE_CHOICES:
        raise ValueError(f"source must be one of {SOURCE_CHOICES}, not {source!r}")
    rows = []
    for candidate in candidates:
        documents = sorted(candidate.query.documents.all(), key=lambda d: d.rank)
        titles = "\n".join(d.title.rstrip(".") + "." for d in documents)
        abstracts = "\n\n".join(d.abstract for d in documents)
        rows.append(
            {
                "id": candidate.pk,
                "summary": candidate.text,
                "reference": titles if reference == "titles" else abstracts,
                "source": abstracts
                if source == "abstracts"
                else "\n\n".join(f"{d.title}. {d.abstract}" for d in documents),
                "query": candidate.query.text,
                "persona": persona_text(candidate.query.persona.as_dict()),
            }
        )
    return rows
