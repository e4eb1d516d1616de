"""Accessibility checks with axe-core (npm, pinned in package-lock.json; bin/setup installs it).

Playwright evaluates node_modules/axe-core/axe.min.js in the page, so nothing is downloaded while
tests run. `assert_accessible` fails on serious or critical violations, naming each rule, the
elements it found and the rule's help page; minor and moderate ones are counted (COUNTS) for the
report but do not fail. `write_summary` keeps a run's counts in var/accessibility/ (one JSON file
per test and size, and summary.md over the files of the run) for review."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

from tests.conftest import require

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
SUMMARY = Path(__file__).resolve().parents[2] / "var" / "accessibility"
FAILING = ("serious", "critical")
IMPACTS = ("critical", "serious", "moderate", "minor")
# WCAG 2.1 A and AA plus axe's best practices (landmarks, one h1, region).
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
COUNTS: dict[str, Counter[str]] = {}  # page name -> violations by impact, over the test session


def violations(page: Page) -> list[dict[str, Any]]:
    """axe's violations on the page as it is now."""
    require(AXE.exists(), f"axe-core not installed at {AXE}: run bin/setup (npm ci)")
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # Evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern: a
        # <script> tag with axe's text (add_script_tag) is an inline script the policy refuses.
        page.evaluate(AXE.read_text())
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


def write_summary(test: str, size: str, pages: Mapping[str, Counter[str]], rules: Mapping[str, Sequence[str]]) -> Path:
    """Keep one test's counts at one screen size as var/accessibility/<test>-<size>.json and rewrite
    summary.md from every such file (the files of an earlier run stay until the same test runs again)."""
    SUMMARY.mkdir(parents=True, exist_ok=True)
    path = SUMMARY / f"{test}-{size}.json"
    rows = {
        name: {**{k: counts.get(k, 0) for k in IMPACTS}, "rules": list(rules.get(name, ()))}
        for name, counts in pages.items()
    }
    path.write_text(json.dumps({"test": test, "size": size, "pages": rows}, indent=2) + "\n", encoding="utf-8")
    lines = [
        "# axe-core violations (nodes) by impact",
        "",
        "| test | size | page | " + " | ".join(IMPACTS) + " | rules |",
    ]
    lines.append("|" + " --- |" * (len(IMPACTS) + 4))
    totals: Counter[str] = Counter()
    n_pages = 0
    for one in sorted(SUMMARY.glob("*.json")):
        data = json.loads(one.read_text(encoding="utf-8"))
        for name, row in data["pages"].items():
            n_pages += 1
            totals.update({k: row[k] for k in IMPACTS})
            cells = " | ".join(str(row[k]) for k in IMPACTS)
            lines.append(f"| {data['test']} | {data['size']} | {name} | {cells} | {', '.join(row['rules'])} |")
    lines += ["", f"{n_pages} page checks; " + ", ".join(f"{k} {totals[k]}" for k in IMPACTS), ""]
    (SUMMARY / "summary.md").write_text("\n".join(lines), encoding="utf-8")
    return path
