"""Accessibility checks with axe-core (npm, pinned in package-lock.json; bin/setup installs it).

Playwright injects node_modules/axe-core/axe.min.js into the page, so nothing is downloaded while
tests run. `assert_accessible` fails on serious or critical violations, naming each rule, the
elements it found and the rule's help page; minor and moderate ones are counted (COUNTS) for the
report but do not fail."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

from tests.conftest import require

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
FAILING = ("serious", "critical")
# WCAG 2.1 A and AA plus axe's best practices (landmarks, one h1, region).
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
COUNTS: dict[str, Counter[str]] = {}  # page name -> violations by impact, over the test session


def violations(page: Page) -> list[dict[str, Any]]:
    """axe's violations on the page as it is now."""
    require(AXE.exists(), f"axe-core not installed at {AXE}: run bin/setup (npm ci)")
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    result = page.evaluate("tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", TAGS)
    return list(result["violations"])


def by_impact(found: list[dict[str, Any]]) -> Counter[str]:
    return Counter(v["impact"] or "unknown" for v in found for _node in v["nodes"])


def describe(found: list[dict[str, Any]]) -> str:
    lines = []
    for v in found:
        targets = ", ".join(" ".join(node["target"]) for node in v["nodes"][:5])
        lines.append(f"- [{v['impact']}] {v['id']}: {v['help']} ({v['helpUrl']})\n    on: {targets}")
    return "\n".join(lines)


def assert_accessible(page: Page, name: str) -> Counter[str]:
    """No serious or critical axe violation on the page; returns the counts by impact."""
    found = violations(page)
    counts = by_impact(found)
    COUNTS[name] = counts
    bad = [v for v in found if v["impact"] in FAILING]
    assert not bad, f"accessibility violations on {name} ({page.url}):\n{describe(bad)}"
    return counts
