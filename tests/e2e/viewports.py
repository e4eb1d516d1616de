"""The two screen sizes every journey runs at, and a camera that saves each page the journey shows as
<screenshots>/<journey>-<size>/NN-<page>.png (the directory is conftest.SCREENSHOTS) and, at phone size,
checks that the page does not scroll sideways."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, BrowserContext, Page

SIZES: dict[str, dict[str, Any]] = {
    "desktop": {"viewport": {"width": 1280, "height": 800}},
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "is_mobile": True,
        "has_touch": True,
        "device_scale_factor": 2,
    },
}


def new_context(browser: Browser, size: str, **kwargs: Any) -> BrowserContext:
    return browser.new_context(**SIZES[size], **kwargs)


class Camera:
    def __init__(self, screenshots: Path, journey: str, size: str) -> None:
        self.folder = screenshots / f"{journey}-{size}"
        self.folder.mkdir(parents=True, exist_ok=True)
        for old in self.folder.glob("*.png"):
            old.unlink()
        self.size = size
        self.count = 0
        self.pages: list[str] = []

    def shot(self, page: Page, name: str) -> None:
        """Save the whole page; on a phone, fail if it is wider than the screen."""
        page.wait_for_load_state("load")
        self.count += 1
        self.pages.append(name)
        page.screenshot(path=str(self.folder / f"{self.count:02d}-{name}.png"), full_page=True)
        if self.size == "phone":
            assert_fits(page, name)


# The elements that stick out of the screen, innermost first (a parent sticking out only because of its
# child is left out), as tag#id.class and width, for the failure message.
_WIDER_THAN = """width => {
  const out = [...document.body.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > width + 1);
  return out.filter(e => !out.some(o => o !== e && e.contains(o))).slice(0, 8).map(e =>
    e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.classList.length ? '.' + [...e.classList].join('.') : '')
    + ' ' + Math.round(e.getBoundingClientRect().width) + 'px');
}"""


def assert_fits(page: Page, name: str) -> None:
    """The page is no wider than the screen. Measured against the viewport set for the context, not
    window.innerWidth: a mobile browser zooms out to fit a page that is too wide, so there innerWidth grows
    with the page and a comparison with it can never fail."""
    screen = page.viewport_size["width"] if page.viewport_size else page.evaluate("window.screen.width")
    width = page.evaluate("document.documentElement.scrollWidth")
    if width > screen:
        culprits = page.evaluate(_WIDER_THAN, screen)
        raise AssertionError(
            f"{name} ({page.url}) scrolls sideways on a phone: {width}px > {screen}px; sticking out: {culprits}"
        )
