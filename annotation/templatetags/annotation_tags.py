"""Template helpers: citation markers become links to the retrieved abstracts."""

import re

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

CITATION = re.compile(r"\[(\d{1,2})\]")


@register.filter
def cite_links(text: str, prefix: str = "source") -> SafeString:
    """Escape the summary, then link every [n] to the n-th source on the page; paragraphs kept."""

    def link(match: re.Match[str]) -> str:
        number = match.group(1)
        return str(
            format_html('<a class="cite" href="#{}-{}" aria-label="source {}">[{}]</a>', prefix, number, number, number)
        )

    paragraphs = [p for p in re.split(r"\n\s*\n", str(text)) if p.strip()]
    html = "".join(f"<p>{CITATION.sub(link, escape(p))}</p>" for p in paragraphs)
    return mark_safe(html)  # noqa: S308 - built from escaped text and format_html links
